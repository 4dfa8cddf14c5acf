package schemareg_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/schemareg"
	"github.com/strandkafka/strand/internal/schemareg/avroschema"
	"github.com/strandkafka/strand/internal/schemareg/jsonschema"
	"github.com/strandkafka/strand/internal/schemareg/protoschema"
)

// TestClientLibrary drives the API with franz-go's schema registry
// client (pkg/sr), written against Confluent's registry, not ours: what
// it sends and decodes, in each of the three formats, is what the API
// must serve.
func TestClientLibrary(t *testing.T) {
	ctx := context.Background()
	db := metatest.New(nil)
	db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel6}}})
	reg := schemareg.New(db, avroschema.Format{}, protoschema.Format{}, jsonschema.Format{})
	srv := httptest.NewServer(schemareg.Handler(reg, func(*http.Request, schemareg.Op, string) error { return nil }))
	defer srv.Close()
	cl, err := sr.NewClient(sr.URLs(srv.URL))
	if err != nil {
		t.Fatal(err)
	}

	avro1 := sr.Schema{Schema: `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`}
	avro2 := sr.Schema{Schema: `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"note","type":"string","default":""}]}`}
	proto := sr.Schema{Type: sr.TypeProtobuf, Schema: "syntax = \"proto3\";\npackage shop;\nmessage Order { int64 id = 1; }\n"}
	jsonS := sr.Schema{Type: sr.TypeJSON, Schema: `{"type":"object","properties":{"id":{"type":"integer"}}}`}

	s1, err := cl.CreateSchema(ctx, "orders-value", avro1)
	if err != nil || s1.ID != 1 || s1.Version != 1 || s1.Subject != "orders-value" {
		t.Fatalf("CreateSchema avro v1 = %+v, %v", s1, err)
	}
	s2, err := cl.CreateSchema(ctx, "orders-value", avro2)
	if err != nil || s2.Version != 2 {
		t.Fatalf("CreateSchema avro v2 = %+v, %v", s2, err)
	}
	for subject, s := range map[string]sr.Schema{"orders-proto": proto, "orders-json": jsonS} {
		got, err := cl.CreateSchema(ctx, subject, s)
		if err != nil || got.Type != s.Type || got.Version != 1 {
			t.Fatalf("CreateSchema %s = %+v, %v", subject, got, err)
		}
		byID, err := cl.SchemaByID(ctx, got.ID)
		if err != nil || byID.Type != s.Type {
			t.Fatalf("SchemaByID(%d) = %+v, %v", got.ID, byID, err)
		}
	}
	got, err := cl.SchemaByID(ctx, s1.ID)
	if err != nil || got.Schema == "" || got.Type != sr.TypeAvro {
		t.Fatalf("SchemaByID(%d) = %+v, %v", s1.ID, got, err)
	}
	look, err := cl.LookupSchema(ctx, "orders-value", avro1)
	if err != nil || look.Version != 1 || look.ID != s1.ID {
		t.Fatalf("LookupSchema = %+v, %v", look, err)
	}
	vs, err := cl.SubjectVersions(ctx, "orders-value")
	if err != nil || !slices.Equal(vs, []int{1, 2}) {
		t.Fatalf("SubjectVersions = %v, %v", vs, err)
	}
	subjects, err := cl.Subjects(ctx)
	if err != nil || !slices.Equal(subjects, []string{"orders-json", "orders-proto", "orders-value"}) {
		t.Fatalf("Subjects = %v, %v", subjects, err)
	}

	// A field added without a default: not backward compatible.
	bad := sr.Schema{Schema: `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"qty","type":"int"}]}`}
	res, err := cl.CheckCompatibility(ctx, "orders-value", -1, bad)
	if err != nil || res.Is {
		t.Fatalf("CheckCompatibility(bad) = %+v, %v", res, err)
	}
	_, err = cl.CreateSchema(ctx, "orders-value", bad)
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.ErrorCode != 409 {
		t.Fatalf("CreateSchema(bad) = %v, want a 409 ResponseError", err)
	}
	for _, r := range cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "orders-value") {
		if r.Err != nil || r.Level != sr.CompatNone {
			t.Fatalf("SetCompatibility = %+v", r)
		}
	}
	if _, err := cl.CreateSchema(ctx, "orders-value", bad); err != nil {
		t.Fatalf("CreateSchema(bad) at NONE: %v", err)
	}

	deleted, err := cl.DeleteSubject(ctx, "orders-json", sr.SoftDelete)
	if err != nil || !slices.Equal(deleted, []int{1}) {
		t.Fatalf("DeleteSubject soft = %v, %v", deleted, err)
	}
	if deleted, err = cl.DeleteSubject(ctx, "orders-json", sr.HardDelete); err != nil || !slices.Equal(deleted, []int{1}) {
		t.Fatalf("DeleteSubject hard = %v, %v", deleted, err)
	}
	if _, err := cl.SchemaByVersion(ctx, "orders-json", -1); !errors.As(err, &re) || re.ErrorCode != 40401 {
		t.Fatalf("SchemaByVersion of a deleted subject = %v, want 40401", err)
	}
}
