package views

import (
	"slices"
	"testing"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
)

// TestCompileViewsOverViews: a view over views compiles to a dataflow
// reading only the sources under them, however deep; the views it
// reads cannot be shadowed by its own WITH queries.
func TestCompileViewsOverViews(t *testing.T) {
	int4 := []meta.RelationColumn{{Name: "k", Type: 23, TypeMod: -1}, {Name: "v", Type: 23, TypeMod: -1}}
	rels := []meta.Relation{
		{ID: 1, Kind: meta.RelationSource, Name: "s", Columns: int4, Topic: "s", Format: "json"},
		{ID: 2, Kind: meta.RelationSource, Name: "u", Columns: int4, Topic: "u", Format: "json"},
		{ID: 3, Kind: meta.RelationView, Name: "sums", Query: "SELECT k, sum(v) AS total FROM s GROUP BY k", DependsOn: []uint64{1}},
		{ID: 4, Kind: meta.RelationView, Name: "big", Query: "SELECT k, total FROM sums WHERE total > 10", DependsOn: []uint64{3}},
		{ID: 5, Kind: meta.RelationView, Name: "joined", Query: "SELECT b.k, b.total, u.v FROM big b JOIN u ON u.k = b.k", DependsOn: []uint64{2, 4}},
		{ID: 6, Kind: meta.RelationView, Name: "shadow", Query: "WITH sums AS (SELECT k FROM s) SELECT * FROM sums", DependsOn: []uint64{1, 3}},
	}
	for _, c := range []struct {
		view   int
		inputs []string
		code   string
	}{
		{2, []string{"s"}, ""},
		{3, []string{"s"}, ""},
		{4, []string{"s", "u"}, ""},
		{5, nil, sqlerr.FeatureNotSupported},
	} {
		rel := rels[c.view]
		tk := &task{rel: rel, rels: rels}
		vw, defs, err := tk.compile()
		if c.code != "" {
			if sqlerr.Code(err) != c.code {
				t.Errorf("%s: error %v, want %s", rel.Name, err, c.code)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", rel.Name, err)
		}
		var names []string
		for _, d := range defs {
			names = append(names, d.Name)
		}
		if !slices.Equal(vw.Inputs, c.inputs) || !slices.Equal(names, c.inputs) {
			t.Errorf("%s: inputs %v (defs %v), want %v", rel.Name, vw.Inputs, names, c.inputs)
		}
	}
}
