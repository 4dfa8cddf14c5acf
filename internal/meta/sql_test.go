package meta

import (
	"slices"
	"testing"
)

// TestRelationView: what the catalog commands wrote, read back through
// a View on another copy: the same relations, ids, options and
// dependents.
func TestRelationView(t *testing.T) {
	log := newTestLog()
	a, b := openReplica(t, log, nil, "a"), openReplica(t, log, nil, "b")
	mustOK(t, a, FinalizeFeatures{Bootstrap: true, Features: []FeatureLevel{{Name: FeatureMetadata, Level: MetadataLevel7}}})
	mustOK(t, a, CreateTopic{Name: "orders", Partitions: 1})
	src := mustOK(t, a, CreateRelation{Kind: RelationSource, Name: "orders", SQL: "CREATE SOURCE ...", Topic: "orders", Format: "json",
		Columns: []RelationColumn{{Name: "id", Type: 20, TypeMod: -1}},
		Options: []RelationOption{{Key: "format", Value: "json"}, {Key: "topic", Value: "orders"}}, Owner: "User:alice"})
	view := mustOK(t, a, CreateRelation{Kind: RelationView, Name: "n", SQL: "CREATE MATERIALIZED VIEW ...", Query: "SELECT count(*) FROM orders",
		DependsOn: []uint64{src.RelationID}})
	sink := mustOK(t, a, CreateRelation{Kind: RelationSink, Name: "k", SQL: "CREATE SINK ...", Query: "SELECT * FROM orders",
		Topic: "orders", Format: "json", DependsOn: []uint64{src.RelationID}})

	mustSync(t, b)
	v := viewOf(t, b)
	rels, err := v.Relations()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rels {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"k", "n", "orders"}) {
		t.Fatalf("Relations = %v, want k, n, orders", names)
	}
	got, ok, err := v.Relation("orders")
	if err != nil || !ok || got.ID != src.RelationID || got.Kind != RelationSource || got.Owner != "User:alice" || len(got.Columns) != 1 {
		t.Fatalf("Relation(orders) = %+v, %v, %v", got, ok, err)
	}
	if f, ok := got.Option("format"); !ok || f != "json" {
		t.Fatalf("Option(format) = %q, %v", f, ok)
	}
	if _, ok := got.Option("nope"); ok {
		t.Fatal("Option found an option never set")
	}
	if byID, ok, err := v.RelationByID(view.RelationID); err != nil || !ok || byID.Name != "n" || !slices.Equal(byID.DependsOn, []uint64{src.RelationID}) {
		t.Fatalf("RelationByID(%d) = %+v, %v, %v", view.RelationID, byID, ok, err)
	}
	deps, err := v.RelationDependents(src.RelationID)
	if err != nil || !slices.Equal(deps, []uint64{view.RelationID, sink.RelationID}) {
		t.Fatalf("RelationDependents = %v, %v", deps, err)
	}
	if _, ok, _ := v.Relation("missing"); ok {
		t.Fatal("Relation found a name never created")
	}
	if mustDigest(t, a) != mustDigest(t, b) {
		t.Fatal("copies diverged")
	}
}
