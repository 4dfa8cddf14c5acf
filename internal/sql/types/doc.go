// Package types owns the SQL engine's types and values: which
// PostgreSQL types Strand computes with, how a value of each is held in
// Go, and the orders, hashes, text forms and byte encodings every later
// stage (expressions, the batch executor, sources, the incremental
// dataflow, view state in Pebble, changelogs) must agree on.
//
// # Types
//
// A Type is PostgreSQL's type OID plus a type modifier (varchar(n),
// numeric(p,s)). The set is bool, int2, int4, int8, float4, float8,
// numeric, text, varchar, bytea, date, timestamp, timestamptz, interval
// and jsonb (json is served as jsonb), plus unknown (an untyped literal)
// and void.
//
// # Values
//
// A value is a Go value from a closed set, chosen so the wire layer's
// pgtype can encode most of them directly (ToWire converts the rest):
//
//	NULL                     nil
//	bool                     bool
//	int2, int4, int8         int16, int32, int64
//	float4, float8           float32, float64
//	numeric                  *apd.Decimal (github.com/cockroachdb/apd/v3), never mutated once made
//	text, varchar, unknown   string
//	bytea                    []byte, never mutated once made
//	date                     time.Time, UTC midnight
//	timestamp                time.Time, UTC, the wall clock as written
//	timestamptz              time.Time, UTC, the instant
//	interval                 IntervalValue
//	jsonb                    JSON
//
// Values are immutable: an operator makes a new value, never changes an
// argument, so rows can be shared between operators and states. A Row is
// []any, one value per column; a Change is a row with a multiplicity
// (Z-set style: +1 inserts a copy, -1 deletes one) for the dataflow.
//
// # Order, equality, hashing: who casts
//
// Compare is PostgreSQL's ordering of two values of the same type: NULL
// sorts after every value (ASC's default, NULLS LAST), float NaN after
// every number and equal to itself, -0 equal to 0, numeric NaN after
// +Infinity, text in byte order (the C collation: Strand has no other),
// intervals by their span with a month as 30 days (so '1 mon' = '30
// days'), jsonb in PostgreSQL's jsonb order. Equal is Compare == 0, and
// Hash is consistent with it (equal values hash equal).
//
// Values of different types are not compared: the planner casts both
// sides of a comparison, a join key or a UNION column to one common type
// first (PostgreSQL's rules, in package expr). As a safety net the
// integer types compare and hash by value across widths, and float4
// with float8, so 1::int4 and 1::int8 land in one group even if a caller
// forgot; other mixes order by a fixed rank of the Go kinds.
//
// Hash is xxhash over the key encoding: stable across processes and
// versions, so it may decide partitions.
//
// # Encodings
//
// AppendKey encodes a value so that bytes.Compare of two encodings is
// Compare of the values (memcmp order is SQL order; NULL last), for
// Pebble keys that a range scan by a view's key reads in order. Several
// values appended in sequence order as the tuple. Equal values encode
// equal, which loses what equality ignores: a numeric's trailing zeros
// (1.50 decodes as 1.5), float -0, an interval's split into months,
// days and time (it decodes as days and time), the integer width
// (DecodeKey is told the type). Store the value with AppendValue where
// those matter.
//
// AppendValue is a compact, self-describing, lossless encoding for
// state and changelogs: DecodeValue(AppendValue(v)) is v, with its type.
// Both are described byte by byte in key.go and valenc.go.
package types
