package exec

import (
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/sql/types"
)

// shape prints a Logical tree as nested operator names: filter(join(
// scan, filter(scan))).
func shape(l *Logical) string {
	name := map[LogicalOp]string{OpScan: "scan", OpValues: "values", OpFilter: "filter", OpProject: "project",
		OpAggregate: "agg", OpJoin: "join", OpDistinct: "distinct", OpSort: "sort", OpLimit: "limit",
		OpConcat: "concat", OpSetOp: "setop"}[l.Op]
	if len(l.In) == 0 {
		return name
	}
	var ins []string
	for _, in := range l.In {
		ins = append(ins, shape(in))
	}
	return name + "(" + strings.Join(ins, ", ") + ")"
}

// TestWherePushdown: WHERE's conjuncts reading one side of an inner
// join filter that side, nested joins included; a conjunct over both
// sides or none, over an outer join, or with a subquery stays above. TestAgainstPostgres checks the answers.
func TestWherePushdown(t *testing.T) {
	rel := func(cols ...string) *MemRelation {
		r := &MemRelation{}
		for _, c := range cols {
			r.Cols = append(r.Cols, Column{Name: c, Type: types.Int8})
		}
		return r
	}
	cat := MemCatalog{"a": rel("id", "x"), "b": rel("id", "a_id", "y"), "c": rel("id", "b_id", "z")}
	for _, c := range []struct{ sql, want string }{
		{"SELECT a.id FROM a JOIN b ON a.id = b.a_id WHERE a.x = 1 AND b.y > 2",
			"project(join(filter(scan), filter(scan)))"},
		{"SELECT a.id FROM a JOIN b ON a.id = b.a_id WHERE a.x = 1 AND b.y > a.x",
			"project(filter(join(filter(scan), scan)))"},
		{"SELECT a.id FROM a JOIN b ON a.id = b.a_id WHERE x + 1 = 2 OR x IS NULL",
			"project(join(filter(scan), scan))"},
		{"SELECT a.id FROM a JOIN b ON a.id = b.a_id JOIN c ON c.b_id = b.id WHERE c.z = 1 AND b.y = 2 AND a.x = 3",
			"project(join(join(filter(scan), filter(scan)), filter(scan)))"},
		{"SELECT a.id FROM a LEFT JOIN b ON a.id = b.a_id WHERE a.x = 1",
			"project(filter(join(scan, scan)))"},
		{"SELECT a.id FROM a JOIN b ON a.id = b.a_id WHERE a.x = 1 AND b.y IN (SELECT z FROM c)",
			"project(filter(join(scan, scan)))"},
		{"SELECT a.id FROM a JOIN b ON a.id = b.a_id WHERE 1 = 1",
			"project(filter(join(scan, scan)))"},
	} {
		q, err := plan(t, cat, c.sql, Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if got := shape(q.Logical()); got != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.sql, got, c.want)
		}
	}
}
