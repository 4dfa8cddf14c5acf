package schemareg_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/schemareg"
)

// avroSet is the toy format registered as AVRO, the default type,
// so requests need not name it.
type avroSet struct{ setFormat }

func (avroSet) Type() schemareg.Type { return schemareg.TypeAvro }

func newRegistry(t *testing.T) (*schemareg.Registry, *metatest.DB) {
	t.Helper()
	db := metatest.New(nil)
	db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel6}}})
	return schemareg.New(db, avroSet{}), db
}

func wantCode(t *testing.T, err error, status int, code int32) {
	t.Helper()
	e, ok := schemareg.IsRegistryError(err)
	if !ok || e.Status != status || e.Code != code {
		t.Fatalf("error %v, want %d/%d", err, status, code)
	}
}

// TestRegister: ids shared across subjects and stable on re-registration,
// versions counted per subject, an incompatible schema refused with 409
// at the subject's level, and NONE letting it in.
func TestRegister(t *testing.T) {
	ctx := context.Background()
	r, db := newRegistry(t)
	reg := func(subject, schema string) (int32, error) {
		return r.Register(ctx, subject, schemareg.RegisterRequest{Schema: schema}, false)
	}
	id1, err := reg("orders-value", "a")
	if err != nil || id1 != 1 {
		t.Fatalf("first registration: id %d, %v", id1, err)
	}
	if id, err := reg("orders-value", "a"); err != nil || id != id1 {
		t.Fatalf("again: id %d, %v; want %d", id, err, id1)
	}
	if id, err := reg("other-value", "a"); err != nil || id != id1 {
		t.Fatalf("under another subject: id %d, %v; want %d", id, err, id1)
	}
	id2, err := reg("orders-value", "a,b?")
	if err != nil || id2 == id1 {
		t.Fatalf("a compatible change: id %d, %v", id2, err)
	}
	// BACKWARD by default: a reader requiring c cannot read v2's data.
	_, err = reg("orders-value", "a,c")
	wantCode(t, err, http.StatusConflict, meta.SchemaErrIncompatible)
	db.MustPropose(t, meta.SchemaConfig{Subject: "orders-value", Compatibility: "NONE"})
	if _, err := reg("orders-value", "a,c"); err != nil {
		t.Fatalf("at NONE: %v", err)
	}
	got, err := r.Version("orders-value", -1, false)
	if err != nil || got.Version != 3 || got.Schema != "a,c" || got.SchemaType != "" {
		t.Fatalf("latest = %+v, %v", got, err)
	}
	if _, err := r.Version("orders-value", 9, false); err == nil {
		t.Fatal("version 9 found")
	} else {
		wantCode(t, err, http.StatusNotFound, meta.SchemaErrVersionNotFound)
	}
	_, err = r.Version("nobody", -1, false)
	wantCode(t, err, http.StatusNotFound, meta.SchemaErrSubjectNotFound)
	if st, err := r.ByID(id2); err != nil || st.Schema != "a,b?" {
		t.Fatalf("ByID(%d) = %+v, %v", id2, st, err)
	}
	_, err = r.ByID(99)
	wantCode(t, err, http.StatusNotFound, 40403)
	_, err = r.Register(ctx, "x", schemareg.RegisterRequest{Schema: "a", SchemaType: schemareg.TypeProtobuf}, false)
	wantCode(t, err, http.StatusUnprocessableEntity, meta.SchemaErrInvalidSchema)
}

// TestRegisterReferences: a reference resolves to the referenced
// version's schema, and one to a version that does not exist is 42201.
func TestRegisterReferences(t *testing.T) {
	ctx := context.Background()
	r, _ := newRegistry(t)
	if _, err := r.Register(ctx, "ids", schemareg.RegisterRequest{Schema: "id"}, false); err != nil {
		t.Fatal(err)
	}
	ref := []schemareg.Reference{{Name: "Id", Subject: "ids", Version: 1}}
	if _, err := r.Register(ctx, "orders", schemareg.RegisterRequest{Schema: "a", References: ref}, false); err != nil {
		t.Fatalf("with a reference: %v", err)
	}
	bad := []schemareg.Reference{{Name: "Id", Subject: "ids", Version: 7}}
	_, err := r.Register(ctx, "orders2", schemareg.RegisterRequest{Schema: "a", References: bad}, false)
	wantCode(t, err, http.StatusUnprocessableEntity, meta.SchemaErrInvalidSchema)
}
