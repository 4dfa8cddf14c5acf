package schemareg_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/schemareg"
	"github.com/strandkafka/strand/internal/schemareg/avroschema"
)

// Subjects and Versions list what the API's GET /subjects and
// /subjects/{s}/versions list, with and without the soft-deleted.
func TestSubjectsAndVersions(t *testing.T) {
	ctx := context.Background()
	db := metatest.New(nil)
	db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel6}}})
	reg := schemareg.New(db, avroschema.Format{})
	for _, c := range []struct{ subject, schema string }{
		{"b", `"int"`}, {"a", `"int"`}, {"a", `"long"`}, {"gone", `"string"`},
	} {
		if _, err := reg.Register(ctx, c.subject, schemareg.RegisterRequest{Schema: c.schema}, false); err != nil {
			t.Fatalf("register %s: %v", c.subject, err)
		}
	}
	if _, err := reg.Delete(ctx, "gone", 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Delete(ctx, "a", 1, false); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		deleted bool
		want    []string
	}{{false, []string{"a", "b"}}, {true, []string{"a", "b", "gone"}}} {
		if got, err := reg.Subjects(tc.deleted); err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Subjects(%v) = %v, %v; want %v", tc.deleted, got, err, tc.want)
		}
	}
	versions := func(deleted bool) []int32 {
		vs, err := reg.Versions("a", deleted)
		if err != nil {
			t.Fatal(err)
		}
		var out []int32
		for _, v := range vs {
			out = append(out, v.Version)
		}
		return out
	}
	if got := versions(false); !slices.Equal(got, []int32{2}) {
		t.Errorf("live versions of a: %v, want [2]", got)
	}
	if got := versions(true); !slices.Equal(got, []int32{1, 2}) {
		t.Errorf("all versions of a: %v, want [1 2]", got)
	}
	if vs, err := reg.Versions("nope", true); err != nil || len(vs) != 0 {
		t.Errorf("versions of an unknown subject: %v, %v", vs, err)
	}
}

func TestIndent(t *testing.T) {
	compact := `{"type":"record","name":"R","doc":"a \"quoted\" {brace}, [x]: y","fields":[{"name":"a","type":"int"}]}`
	want := `{
  "type": "record",
  "name": "R",
  "doc": "a \"quoted\" {brace}, [x]: y",
  "fields": [
    {
      "name": "a",
      "type": "int"
    }
  ]
}`
	if got := schemareg.Indent(compact); got != want {
		t.Errorf("Indent:\n%s\nwant:\n%s", got, want)
	}
	proto := "syntax = \"proto3\";\nmessage M { int32 a = 1; }\n"
	if got := schemareg.Indent(proto); got != proto {
		t.Errorf("Indent changed Protobuf text: %q", got)
	}
	// Deep nesting over many lines would indent past the bound: it is
	// left as it is.
	deep := strings.Repeat("[", 5000) + strings.Repeat("1,", 2000) + "1" + strings.Repeat("]", 5000)
	if got := schemareg.Indent(deep); got != deep {
		t.Errorf("Indent of deeply nested JSON: %d bytes, want it unchanged", len(got))
	}
	// A modest nesting is indented.
	mid := strings.Repeat("[", 50) + strings.Repeat("1,", 100) + "1" + strings.Repeat("]", 50)
	if got := schemareg.Indent(mid); got == mid || !strings.Contains(got, "\n") {
		t.Error("Indent left a modest nesting on one line")
	}
}
