// Package schemareg owns Strand's schema registry: Confluent Schema
// Registry's model (subjects, versions, global ids, compatibility
// levels, modes) and the formats it registers. The formats live in
// subpackages, one each (avroschema, protoschema, jsonschema), behind
// Format; this package holds what they share.
//
// The registry's state is metadata (internal/meta/schemas.go): every
// agent answers reads from its own copy, registrations are proposed
// through the log (registry.go), the REST API is api.go, served by the
// agent (internal/agent/registry.go), and validation on produce is
// subpackage validate.
package schemareg

import "errors"

// Type is a schema's format, as Confluent's API names it in schemaType
// ("" in a request means AVRO).
type Type string

const (
	TypeAvro     Type = "AVRO"
	TypeProtobuf Type = "PROTOBUF"
	TypeJSON     Type = "JSON"
)

// Reference is a schema reference: the name the referring schema uses
// for it (an Avro full name, a .proto import path, a JSON Schema $ref
// URL), and the subject and version it is registered under.
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// Resolved is a referenced schema's text, found by the registry for a
// Reference (transitively: a referenced schema's own references come
// in the same map, keyed by Name).
type Resolved map[string]string

// Schema is a parsed schema of one format.
type Schema interface {
	// Type is the schema's format.
	Type() Type
	// Canonical is the schema's canonical text: what the registry
	// stores, compares for "the same schema" (lookups, and one global
	// id for one schema under any subject) and returns. With normalize
	// it is also normalized as Confluent's normalize=true does.
	Canonical(normalize bool) string
}

// Format parses and compares schemas of one type.
type Format interface {
	Type() Type
	// Parse parses text, whose references are in refs. A schema that
	// does not parse is ErrInvalidSchema (wrapped, with the reason).
	Parse(text string, refs Resolved) (Schema, error)
	// Compatible reports why data written with writer cannot be read
	// with reader under the format's rules, as messages in Confluent's
	// style (nil: compatible). Backward compatibility of a new schema N
	// against an old one O is Compatible(N, O); forward is
	// Compatible(O, N); full is both.
	Compatible(reader, writer Schema) []string
}

// ErrInvalidSchema: a schema that does not parse (Confluent's 42201).
var ErrInvalidSchema = errors.New("schemareg: invalid schema")
