package types

import (
	"fmt"
	"strings"
)

// PostgreSQL's type OIDs (pg_type.oid) for the types Strand computes
// with. They are what the wire protocol sends, so they are the identity.
const (
	OIDBool        uint32 = 16
	OIDBytea       uint32 = 17
	OIDInt8        uint32 = 20
	OIDInt2        uint32 = 21
	OIDInt4        uint32 = 23
	OIDText        uint32 = 25
	OIDFloat4      uint32 = 700
	OIDFloat8      uint32 = 701
	OIDUnknown     uint32 = 705
	OIDVarchar     uint32 = 1043
	OIDDate        uint32 = 1082
	OIDTimestamp   uint32 = 1114
	OIDTimestampTZ uint32 = 1184
	OIDInterval    uint32 = 1186
	OIDNumeric     uint32 = 1700
	OIDVoid        uint32 = 2278
	OIDJSONB       uint32 = 3802
)

// Type is a SQL type: PostgreSQL's OID, and a type modifier (pg_attribute.
// atttypmod) for the types that take one: varchar(n) is n+4, numeric(p,s)
// is (p<<16 | s)+4, as PostgreSQL stores them; -1 is none. Type is a
// small comparable value; use the variables below rather than a literal,
// whose zero Mod would mean a modifier of 0.
type Type struct {
	OID uint32
	Mod int32
}

// The types, without modifiers.
var (
	Bool        = Type{OIDBool, -1}
	Bytea       = Type{OIDBytea, -1}
	Int2        = Type{OIDInt2, -1}
	Int4        = Type{OIDInt4, -1}
	Int8        = Type{OIDInt8, -1}
	Float4      = Type{OIDFloat4, -1}
	Float8      = Type{OIDFloat8, -1}
	Numeric     = Type{OIDNumeric, -1}
	Text        = Type{OIDText, -1}
	Varchar     = Type{OIDVarchar, -1}
	Date        = Type{OIDDate, -1}
	Timestamp   = Type{OIDTimestamp, -1}
	TimestampTZ = Type{OIDTimestampTZ, -1}
	Interval    = Type{OIDInterval, -1}
	JSONB       = Type{OIDJSONB, -1}
	// Unknown is an untyped literal ('abc', NULL) before its context
	// gives it a type, as in PostgreSQL; its values are strings or nil.
	Unknown = Type{OIDUnknown, -1}
	// Void is what a function returning nothing (pg_sleep) returns.
	Void = Type{OIDVoid, -1}
)

// VarcharN is varchar(n).
func VarcharN(n int32) Type { return Type{OIDVarchar, n + 4} }

// NumericPS is numeric(p, s).
func NumericPS(p, s int32) Type { return Type{OIDNumeric, (p<<16 | s&0xffff) + 4} }

// Precision and Scale are numeric(p,s)'s modifier; ok false without one.
func (t Type) PrecisionScale() (p, s int32, ok bool) {
	if t.OID != OIDNumeric || t.Mod < 4 {
		return 0, 0, false
	}
	m := t.Mod - 4
	return m >> 16, m & 0xffff, true
}

// Length is varchar(n)'s n; ok false without one.
func (t Type) Length() (int32, bool) {
	if t.OID != OIDVarchar || t.Mod < 4 {
		return 0, false
	}
	return t.Mod - 4, true
}

// Base is t without its modifier.
func (t Type) Base() Type { return Type{t.OID, -1} }

// Size is pg_type.typlen: the fixed width in bytes, or -1 for variable.
func (t Type) Size() int16 {
	switch t.OID {
	case OIDBool:
		return 1
	case OIDInt2:
		return 2
	case OIDInt4, OIDFloat4, OIDDate, OIDVoid:
		return 4
	case OIDInt8, OIDFloat8, OIDTimestamp, OIDTimestampTZ:
		return 8
	case OIDInterval:
		return 16
	case OIDUnknown:
		return -2
	}
	return -1
}

// Name is the type as PostgreSQL's format_type writes it in messages
// and in \d: "integer", "character varying(10)", "numeric(10,2)".
func (t Type) Name() string {
	switch t.OID {
	case OIDBool:
		return "boolean"
	case OIDBytea:
		return "bytea"
	case OIDInt2:
		return "smallint"
	case OIDInt4:
		return "integer"
	case OIDInt8:
		return "bigint"
	case OIDFloat4:
		return "real"
	case OIDFloat8:
		return "double precision"
	case OIDNumeric:
		if p, s, ok := t.PrecisionScale(); ok {
			return fmt.Sprintf("numeric(%d,%d)", p, s)
		}
		return "numeric"
	case OIDText:
		return "text"
	case OIDVarchar:
		if n, ok := t.Length(); ok {
			return fmt.Sprintf("character varying(%d)", n)
		}
		return "character varying"
	case OIDDate:
		return "date"
	case OIDTimestamp:
		return "timestamp without time zone"
	case OIDTimestampTZ:
		return "timestamp with time zone"
	case OIDInterval:
		return "interval"
	case OIDJSONB:
		return "jsonb"
	case OIDUnknown:
		return "unknown"
	case OIDVoid:
		return "void"
	}
	return fmt.Sprintf("type %d", t.OID)
}

func (t Type) String() string { return t.Name() }

// Category is PostgreSQL's pg_type.typcategory, which its rules for
// implicit casts and operator resolution go by.
type Category byte

// The categories of the types here.
const (
	CatBool     Category = 'B'
	CatNumeric  Category = 'N'
	CatString   Category = 'S'
	CatDatetime Category = 'D'
	CatTimespan Category = 'T'
	CatUser     Category = 'U' // bytea, jsonb
	CatUnknown  Category = 'X'
	CatPseudo   Category = 'P'
)

// Category is t's typcategory.
func (t Type) Category() Category {
	switch t.OID {
	case OIDBool:
		return CatBool
	case OIDInt2, OIDInt4, OIDInt8, OIDFloat4, OIDFloat8, OIDNumeric:
		return CatNumeric
	case OIDText, OIDVarchar:
		return CatString
	case OIDDate, OIDTimestamp, OIDTimestampTZ:
		return CatDatetime
	case OIDInterval:
		return CatTimespan
	case OIDUnknown:
		return CatUnknown
	case OIDVoid:
		return CatPseudo
	}
	return CatUser
}

// Preferred is pg_type.typispreferred: the type an ambiguous operator
// call resolves to within a category.
func (t Type) Preferred() bool {
	switch t.OID {
	case OIDBool, OIDFloat8, OIDText, OIDTimestampTZ, OIDInterval:
		return true
	}
	return false
}

// names maps the names a type may be written with (after PostgreSQL's
// grammar has turned INTEGER into pg_catalog.int4 and so on) to types.
var names = map[string]Type{
	"bool": Bool, "boolean": Bool,
	"bytea": Bytea,
	"int2":  Int2, "smallint": Int2,
	"int4": Int4, "int": Int4, "integer": Int4,
	"int8": Int8, "bigint": Int8,
	"float4": Float4, "real": Float4,
	"float8": Float8, "double precision": Float8, "float": Float8,
	"numeric": Numeric, "decimal": Numeric,
	"text":    Text,
	"varchar": Varchar, "character varying": Varchar,
	"date":      Date,
	"timestamp": Timestamp, "timestamp without time zone": Timestamp,
	"timestamptz": TimestampTZ, "timestamp with time zone": TimestampTZ,
	"interval": Interval,
	"jsonb":    JSONB,
	// json is served as jsonb: Strand keeps one JSON representation.
	"json": JSONB,
}

// ByName finds a type by one of its SQL names, case-insensitively.
func ByName(name string) (Type, bool) {
	t, ok := names[strings.ToLower(name)]
	return t, ok
}

// ByOID finds a type by OID, without a modifier.
func ByOID(oid uint32) (Type, bool) {
	t := Type{oid, -1}
	if t.Category() == CatUser && oid != OIDBytea && oid != OIDJSONB {
		return Type{}, false
	}
	return t, true
}
