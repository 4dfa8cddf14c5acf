package viewplan

import (
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// TestScalarSubqueryRows: a scalar subquery's value follows its one
// row (NULL without one); an epoch leaving it two rows fails with
// PostgreSQL's 21000, as the SELECT would, and its changes are not
// committed.
func TestScalarSubqueryRows(t *testing.T) {
	v, err := Compile("SELECT id, (SELECT tier FROM customers WHERE city = 'Oslo') AS oslo FROM customers WHERE city <> 'Oslo'", smallCatalog(t))
	if err != nil {
		t.Fatal(err)
	}
	d, err := flow.NewDriver(v.Graph(), flow.NewMemStore(), flow.Options{Index: &v.Index})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	cust := func(id int64, city string, tier int32, diff int64) types.Change {
		return types.Change{Row: types.Row{id, "c", city, tier, at}, Diff: diff}
	}
	step := func(want string, cs ...types.Change) error {
		t.Helper()
		if _, err := d.Step(flow.Epoch{Inputs: [][]types.Change{cs}}); err != nil {
			return err
		}
		rows, err := d.View().Rows()
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, r := range rows {
			got += formatRow(r) + ";"
		}
		if got != want {
			t.Errorf("view %q, want %q", got, want)
		}
		return nil
	}
	for _, s := range []struct {
		want string
		cs   []types.Change
	}{
		{"(1,);", []types.Change{cust(1, "Lyon", 1, 1)}},
		{"(1,2);", []types.Change{cust(2, "Oslo", 2, 1)}},
		{"(1,3);(3,3);", []types.Change{cust(2, "Oslo", 2, -1), cust(2, "Oslo", 3, 1), cust(3, "Kyoto", 1, 1)}},
	} {
		if err := step(s.want, s.cs...); err != nil {
			t.Fatal(err)
		}
	}
	err = step("", cust(4, "Oslo", 1, 1))
	if sqlerr.Code(err) != sqlerr.CardinalityViolation {
		t.Fatalf("a second row: %v, want 21000", err)
	}
}
