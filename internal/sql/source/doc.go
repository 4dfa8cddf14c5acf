// Package source owns Strand's SQL sources as the engine reads them: a
// source's definition taken from the catalog (Def), the decoding of one
// Kafka record into a row of the source's declared columns (Decoder:
// JSON, text, bytes, and Avro and Protobuf through the schema registry),
// what happens to a record that does not decode (bad records: counted,
// dropped or produced to a dead-letter topic, never stopping the
// source), the following of a source's topic as a stream of changes
// (Reader: per partition in offset order, read_committed, append or
// upsert semantics, event-time watermarks, the consumed offsets beside
// the changes) and the bounded scan of a source's current contents that
// ad-hoc queries read (Scan).
//
// # Columns
//
// A column is filled from the record's payload by its name, as
// PostgreSQL's jsonb_to_record fills a row: the name as the catalog
// stores it (an unquoted identifier folded to lower case, a quoted one
// as written) is looked up exactly among the payload's fields; a field
// that is missing or null is NULL. A scalar is converted by the
// column type's input function from its text (a JSON string's contents,
// a number as written, true/false), so "42" and 42 both fill an integer
// column, 1.5 does not (22P02) and 70000 does not fill a smallint
// (22003), exactly as PostgreSQL answers; an object or array fills a
// jsonb column as itself and a text column as its JSON text. Avro and
// Protobuf values go the same way from their native values (an Avro
// timestamp or date logical type fills a timestamp or date column
// directly; a Protobuf unset field with presence is NULL, a proto3
// scalar without presence its default).
//
// The reserved columns, when declared, hold the record's metadata: _key
// (bytea, or text when the key is UTF-8), _partition (int4), _offset
// (int8), _timestamp (timestamptz, the record's timestamp) and _headers
// (jsonb: an object of each header's key to its value as a string,
// null for a null value; a repeated key keeps its last value, as jsonb
// keeps the last duplicate).
//
// A record whose value is null is, in an append source, a row whose
// payload columns are NULL; in an upsert source it is a tombstone.
//
// # Cost
//
// JSON is decoded in one pass over the value's bytes (jsonfast.go): the
// declared columns' fields are found and converted, every other field
// only checked for syntax. Whatever that pass could decide differently
// from the rules above (an escaped key, a number in exponent form, a
// nested value or a jsonb column, a syntax error) goes to the general
// parse (types.ParseJSON then the conversions above), which also gives
// every error: the fast path is a cost, not a dialect.
// BenchmarkDecodeNexmark measures it on the Nexmark records.
//
// # Determinism
//
// What the Reader emits for a partition is a function of the
// partition's records alone (and, for upsert, of the keys' previous
// values, which it keeps): a record's row, its lateness against its
// partition's watermark, the partition's watermark. So a view that
// restarts from offsets it committed sees the same changes again. The
// source's watermark, the minimum over its partitions, depends on how
// far each partition has been read, which is not replayed exactly.
package source
