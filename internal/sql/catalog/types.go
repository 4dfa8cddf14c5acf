package catalog

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/pgwire"
)

// columnTypes are the types a source's column may have: PostgreSQL's
// scalar types a record's payload decodes into, by their pg_type names
// (the grammar turns int, integer, boolean, double precision, decimal
// and the like into these). OIDs are pgx's, the wire layer's.
var columnTypes = map[string]uint32{
	"bool":        pgtype.BoolOID,
	"bytea":       pgtype.ByteaOID,
	"int2":        pgtype.Int2OID,
	"int4":        pgtype.Int4OID,
	"int8":        pgtype.Int8OID,
	"float4":      pgtype.Float4OID,
	"float8":      pgtype.Float8OID,
	"numeric":     pgtype.NumericOID,
	"text":        pgtype.TextOID,
	"varchar":     pgtype.VarcharOID,
	"bpchar":      pgtype.BPCharOID,
	"date":        pgtype.DateOID,
	"time":        pgtype.TimeOID,
	"timestamp":   pgtype.TimestampOID,
	"timestamptz": pgtype.TimestamptzOID,
	"interval":    pgtype.IntervalOID,
	"uuid":        pgtype.UUIDOID,
	"json":        pgtype.JSONOID,
	"jsonb":       pgtype.JSONBOID,
}

// typeNames names an OID as messages do.
var typeNames = func() map[uint32]string {
	m := make(map[uint32]string, len(columnTypes))
	for n, oid := range columnTypes {
		m[oid] = n
	}
	return m
}()

// metadataColumns are the reserved names a source declares to get a
// record's metadata as columns, and the types each may take.
var metadataColumns = map[string][]uint32{
	"_key":       {pgtype.ByteaOID, pgtype.TextOID},
	"_partition": {pgtype.Int4OID},
	"_offset":    {pgtype.Int8OID},
	"_timestamp": {pgtype.TimestamptzOID},
	"_headers":   {pgtype.JSONBOID},
}

// columnType resolves a column's declared type to its OID and type
// modifier, as PostgreSQL computes them, or PostgreSQL's error.
func columnType(tn *pg.TypeName) (uint32, int32, error) {
	var parts []string
	for _, n := range tn.Names {
		parts = append(parts, n.GetString_().GetSval())
	}
	name := strings.Join(parts, ".")
	short := strings.TrimPrefix(name, "pg_catalog.")
	pos := tn.Location + 1
	oid, ok := columnTypes[short]
	switch {
	case !ok || strings.Contains(short, "."):
		return 0, 0, &pgwire.Error{Code: pgwire.CodeUndefinedObject, Message: fmt.Sprintf("type %q does not exist", name), Position: pos,
			Hint: "a source's columns take bool, bytea, int2, int4, int8, float4, float8, numeric, text, varchar, bpchar, date, time, timestamp, timestamptz, interval, uuid, json or jsonb"}
	case len(tn.ArrayBounds) > 0 || tn.Setof || tn.PctType:
		return 0, 0, &pgwire.Error{Code: pgwire.CodeFeatureNotSupported, Message: "array, SETOF and %TYPE columns are not supported on a source yet", Position: pos}
	}
	mods := make([]int32, 0, len(tn.Typmods))
	for _, m := range tn.Typmods {
		c := m.GetAConst()
		if c == nil || c.GetIval() == nil {
			return 0, 0, &pgwire.Error{Code: pgwire.CodeSyntaxError, Message: "type modifiers must be simple constants or identifiers", Position: pos}
		}
		mods = append(mods, c.GetIval().Ival)
	}
	mod, err := typeMod(oid, short, mods)
	if err != nil {
		err.Position = pos
		return 0, 0, err
	}
	return oid, mod, nil
}

// typeMod is the type modifier PostgreSQL stores for mods on a type:
// varchar(n) and bpchar(n) n+4 (VARHDRSZ), numeric(p, s)
// ((p << 16) | s) + 4, timestamp(p) and the like p; -1 for none.
func typeMod(oid uint32, name string, mods []int32) (int32, *pgwire.Error) {
	if len(mods) == 0 {
		if oid == pgtype.BPCharOID {
			return 1 + 4, nil // char is char(1)
		}
		return -1, nil
	}
	bad := func(format string, args ...any) (int32, *pgwire.Error) {
		return 0, &pgwire.Error{Code: pgwire.CodeInvalidParameterValue, Message: fmt.Sprintf(format, args...)}
	}
	switch oid {
	case pgtype.VarcharOID, pgtype.BPCharOID:
		if len(mods) != 1 || mods[0] < 1 || mods[0] > 10485760 {
			return bad("length for type %s must be between 1 and 10485760", name)
		}
		return mods[0] + 4, nil
	case pgtype.NumericOID:
		if len(mods) > 2 || mods[0] < 1 || mods[0] > 1000 {
			return bad("NUMERIC precision %d must be between 1 and 1000", mods[0])
		}
		scale := int32(0)
		if len(mods) == 2 {
			scale = mods[1]
		}
		if scale < -1000 || scale > 1000 {
			return bad("NUMERIC scale %d must be between -1000 and 1000", scale)
		}
		return (mods[0]<<16 | scale&0xffff) + 4, nil
	case pgtype.TimestampOID, pgtype.TimestamptzOID, pgtype.TimeOID:
		if len(mods) != 1 || mods[0] < 0 {
			return bad("%s(%d) precision must not be negative", name, mods[0])
		}
		return min(mods[0], 6), nil
	}
	return 0, &pgwire.Error{Code: pgwire.CodeSyntaxError, Message: fmt.Sprintf("type modifier is not allowed for type %q", name)}
}

// sourceColumns types a CREATE SOURCE's column list, checking the
// reserved metadata columns' types.
func sourceColumns(elts []*pg.Node) ([]meta.RelationColumn, error) {
	cols := make([]meta.RelationColumn, 0, len(elts))
	for _, e := range elts {
		cd := e.GetColumnDef()
		if cd == nil {
			return nil, pgwire.NotSupported("a source takes columns only: no table constraints or LIKE")
		}
		if len(cd.Constraints) > 0 || cd.CollClause != nil || cd.RawDefault != nil || cd.Compression != "" {
			return nil, &pgwire.Error{Code: pgwire.CodeFeatureNotSupported, Message: fmt.Sprintf("column %q: a source's columns take a type only, no constraints, defaults or collations", cd.Colname),
				Position: cd.Location + 1}
		}
		oid, mod, err := columnType(cd.TypeName)
		if err != nil {
			return nil, err
		}
		if want, reserved := metadataColumns[cd.Colname]; reserved && !containsOID(want, oid) {
			names := make([]string, len(want))
			for i, w := range want {
				names[i] = typeNames[w]
			}
			return nil, &pgwire.Error{Code: pgwire.CodeDatatypeMismatch, Position: cd.Location + 1,
				Message: fmt.Sprintf("column %q is the record's %s: declare it %s, not %s", cd.Colname, strings.TrimPrefix(cd.Colname, "_"),
					strings.Join(names, " or "), typeNames[oid])}
		}
		cols = append(cols, meta.RelationColumn{Name: cd.Colname, Type: oid, TypeMod: mod})
	}
	return cols, nil
}

func containsOID(l []uint32, oid uint32) bool {
	for _, o := range l {
		if o == oid {
			return true
		}
	}
	return false
}
