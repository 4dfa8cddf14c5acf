package sqltest

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Collect reads rows into a Result: column names, PostgreSQL's type
// names for their OIDs, and the values pgx decodes. It closes rows. Use
// it on a PostgreSQL connection (a second oracle) or on Strand's SQL
// endpoint (the engine under test).
func Collect(rows pgx.Rows) (Result, error) {
	defer rows.Close()
	var r Result
	m := pgtype.NewMap()
	for _, fd := range rows.FieldDescriptions() {
		typ := fmt.Sprintf("oid%d", fd.DataTypeOID)
		if t, ok := m.TypeForOID(fd.DataTypeOID); ok {
			typ = t.Name
		}
		r.Columns = append(r.Columns, Column{Name: fd.Name, Type: typ})
	}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return r, err
		}
		r.Rows = append(r.Rows, vals)
	}
	return r, rows.Err()
}

// CreateTables creates tables in a PostgreSQL database (dropping any of
// the same name) and copies their rows in, so PostgreSQL can answer the
// same queries as the Oracle.
func CreateTables(ctx context.Context, conn *pgx.Conn, tables []Table) error {
	for _, t := range tables {
		cols := make([]string, len(t.Columns))
		names := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			cols[i] = pgx.Identifier{c.Name}.Sanitize() + " " + c.Type
			names[i] = c.Name
		}
		name := pgx.Identifier{t.Name}.Sanitize()
		if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+name); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "CREATE TABLE "+name+" ("+strings.Join(cols, ", ")+")"); err != nil {
			return fmt.Errorf("sqltest: create %s: %w", t.Name, err)
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{t.Name}, names, pgx.CopyFromRows(t.Rows)); err != nil {
			return fmt.Errorf("sqltest: copy into %s: %w", t.Name, err)
		}
	}
	return nil
}
