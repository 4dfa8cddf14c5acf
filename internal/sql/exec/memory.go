package exec

import (
	"context"

	"github.com/strandkafka/strand/internal/sql/types"
)

// MemRelation is a relation held in memory: for tests, and for small
// fixed tables (pg_catalog's) later.
type MemRelation struct {
	Cols []Column
	Rows []types.Row
}

// Columns implements Relation.
func (m *MemRelation) Columns() []Column { return m.Cols }

// Scan implements Relation.
func (m *MemRelation) Scan(context.Context) (RowIter, error) { return &memIter{rows: m.Rows}, nil }

type memIter struct {
	rows []types.Row
	i    int
}

func (it *memIter) Next(context.Context) (types.Row, bool, error) {
	if it.i >= len(it.rows) {
		return nil, false, nil
	}
	it.i++
	return append(types.Row(nil), it.rows[it.i-1]...), true, nil
}

func (it *memIter) Close() {}

// MemCatalog is a catalog of relations by name (schema ignored but for
// pg_catalog and information_schema, which it does not have).
type MemCatalog map[string]Relation

// Relation implements Catalog.
func (c MemCatalog) Relation(schema, name string) (Relation, bool, error) {
	if schema != "" && schema != "public" {
		return nil, false, nil
	}
	r, ok := c[name]
	return r, ok, nil
}
