package meta

import (
	"slices"
	"testing"
)

// TestSchemaView: what registrations wrote, read back through a View on
// another copy: the same ids, versions, subjects and configs.
func TestSchemaView(t *testing.T) {
	log := newTestLog()
	a, b := openReplica(t, log, nil, "a"), openReplica(t, log, nil, "b")
	mustOK(t, a, FinalizeFeatures{Bootstrap: true, Features: []FeatureLevel{{Name: FeatureMetadata, Level: MetadataLevel6}}})
	reg := func(subject, schema string, expect int32, refs ...SchemaReference) Result {
		t.Helper()
		res := mustOK(t, a, RegisterSchema{Subject: subject, SchemaType: "AVRO", Schema: schema, References: refs, Expect: expect})
		if res.SchemaID <= 0 || res.SchemaVersion <= 0 {
			t.Fatalf("register %s %s: %+v", subject, schema, res)
		}
		return res
	}
	s1 := reg("s", `"string"`, 0)
	s2 := reg("s", `"long"`, 1)
	t1 := reg("t", `"string"`, 0)
	if s1.SchemaID != t1.SchemaID || s1.SchemaID == s2.SchemaID || s2.SchemaVersion != 2 {
		t.Fatalf("ids and versions: %+v %+v %+v", s1, s2, t1)
	}
	if res := mustPropose(t, a, RegisterSchema{Subject: "s", SchemaType: "AVRO", Schema: `"int"`, Expect: 1}); res.SchemaError != SchemaErrSubjectMovedSinceCheck {
		t.Fatalf("registration against a moved subject: %+v", res)
	}
	mustOK(t, a, DeleteSchemas{Subject: "t"})
	mustOK(t, a, SchemaConfig{Subject: "s", Compatibility: "FULL"})
	if res := mustPropose(t, a, DeleteSchemas{Subject: "t"}); res.SchemaError != SchemaErrSubjectSoftDeleted {
		t.Fatalf("soft-deleting a soft-deleted subject: %+v", res)
	}

	mustSync(t, b)
	v := viewOf(t, b)
	got, ok, err := v.SchemaByID(s2.SchemaID)
	if err != nil || !ok || got.Schema != `"long"` || got.SchemaType != "AVRO" {
		t.Fatalf("SchemaByID(%d) = %+v, %v, %v", s2.SchemaID, got, ok, err)
	}
	if id, ok, err := v.SchemaIDOf("AVRO", `"string"`, nil); err != nil || !ok || id != s1.SchemaID {
		t.Fatalf("SchemaIDOf = %d, %v, %v; want %d", id, ok, err, s1.SchemaID)
	}
	if _, ok, _ := v.SchemaIDOf("JSON", `"string"`, nil); ok {
		t.Fatal("SchemaIDOf found a schema under another type")
	}
	vs, err := v.SchemaVersions("s")
	if err != nil || !slices.Equal(vs, []SchemaVersion{{1, s1.SchemaID, false}, {2, s2.SchemaID, false}}) {
		t.Fatalf("SchemaVersions(s) = %+v, %v", vs, err)
	}
	subjects, live, err := v.SchemaSubjects()
	if err != nil || !slices.Equal(subjects, []string{"s", "t"}) || !slices.Equal(live, []bool{true, false}) {
		t.Fatalf("SchemaSubjects = %v %v, %v", subjects, live, err)
	}
	if c, err := v.SchemaConfigOf("s", false); err != nil || c.Compatibility != "FULL" {
		t.Fatalf("SchemaConfigOf(s) = %+v, %v", c, err)
	}
	if c, err := v.SchemaConfigOf("", true); err != nil || c != (SchemaConfigRecord{}) {
		t.Fatalf("global config = %+v, %v; want none", c, err)
	}
	if mustDigest(t, a) != mustDigest(t, b) {
		t.Fatal("copies diverged")
	}
}
