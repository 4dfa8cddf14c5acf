// Package avroschema owns the Avro format of the schema registry:
// parsing a schema and its references, the text the registry stores
// and compares for a schema (with and without normalize), and the
// reader/writer compatibility check that the registry's levels are made
// of. Parsing is hamba/avro's; the canonical texts and the
// compatibility rules follow Confluent Schema Registry, which takes them
// from Apache Avro's Java library (Schema.toString,
// AvroSchemaUtils.toNormalizedString, SchemaCompatibility).
package avroschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/hamba/avro/v2"

	"github.com/strandkafka/strand/internal/schemareg"
)

// Format is the Avro format. The zero value is ready to use and safe
// for concurrent use.
type Format struct{}

var _ schemareg.Format = Format{}

func (Format) Type() schemareg.Type { return schemareg.TypeAvro }

// Schema is a parsed Avro schema. It is immutable once Parse returns
// it, and safe for concurrent use.
type Schema struct {
	// compact is the text as given, with insignificant whitespace
	// removed.
	compact string
	// normalized is Confluent's normalized form (see normalize.go).
	normalized string
	parsed     avro.Schema
}

var _ schemareg.Schema = (*Schema)(nil)

func (*Schema) Type() schemareg.Type { return schemareg.TypeAvro }

// Avro is the parsed schema. Named types from references appear in it
// as the types themselves; the caller must not modify it.
func (s *Schema) Avro() avro.Schema { return s.parsed }

// Canonical without normalize is the schema text as given, compacted:
// two texts that differ only in whitespace are the same schema, and
// references stay references (a referenced type's name, as written).
// Confluent instead stores Avro Java's re-serialization of the parsed
// schema (Schema.toString(refs, false)), so for it a reordering of JSON
// keys or a namespace spelled differently is also the same schema;
// matching that byte for byte means re-implementing Avro Java's writer
// (key order, relative namespaces, Jackson's number formats), which we
// leave out. A client that needs such texts to meet sends
// normalize=true, as it would to Confluent for anything beyond that.
//
// With normalize it is Confluent's normalized form
// (AvroSchemaUtils.toNormalizedString): full names, a fixed key order,
// sorted aliases and custom properties, referenced types by name. It
// keeps what the Avro Parsing Canonical Form drops (defaults, aliases,
// doc, order, logical types, custom properties): those change how data
// is resolved, so two schemas that differ in them must not share an id.
func (s *Schema) Canonical(normalize bool) string {
	if normalize {
		return s.normalized
	}
	return s.compact
}

// Parse parses text as an Avro schema. The values of refs are the
// schemas of its references (transitively), each defining a named type
// that text, or another reference, may use by its full name; as in
// Confluent the keys are not consulted, the names come from the
// schemas. References may use one another in any order.
func (Format) Parse(text string, refs schemareg.Resolved) (schemareg.Schema, error) {
	compact, err := compactJSON(text)
	if err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", schemareg.ErrInvalidSchema, err)
	}

	// A fresh cache per parse: hamba's default cache is global, and a
	// name registered there by one subject would resolve in another's
	// schema.
	cache := &avro.SchemaCache{}
	refNames, err := parseRefs(refs, cache)
	if err != nil {
		return nil, err
	}
	parsed, err := avro.ParseWithCache(text, "", cache)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", schemareg.ErrInvalidSchema, err)
	}
	if err := checkNoRedefinition(parsed, refNames); err != nil {
		return nil, err
	}
	return &Schema{
		compact:    compact,
		normalized: normalizedString(parsed, refNames),
		parsed:     parsed,
	}, nil
}

// parseRefs parses the references into cache and returns the named
// types they define at top level, by full name. A reference may use a
// type another one defines, and a map has no order, so it parses in
// rounds, retrying what failed until a round makes no progress; that
// is at most len(refs) rounds.
func parseRefs(refs schemareg.Resolved, cache *avro.SchemaCache) (map[string]avro.NamedSchema, error) {
	names := make(map[string]avro.NamedSchema, len(refs))
	pending := make([]string, 0, len(refs))
	for name := range refs {
		pending = append(pending, name)
	}
	// Sorted so that the error reported for a bad reference is stable.
	sort.Strings(pending)
	for len(pending) > 0 {
		var failed []string
		var lastErr error
		for _, name := range pending {
			text := refs[name]
			if !json.Valid([]byte(text)) {
				return nil, fmt.Errorf("%w: reference %q: not JSON", schemareg.ErrInvalidSchema, name)
			}
			s, err := avro.ParseWithCache(text, "", cache)
			if err != nil {
				failed = append(failed, name)
				lastErr = fmt.Errorf("%w: reference %q: %v", schemareg.ErrInvalidSchema, name, err)
				continue
			}
			if n, ok := s.(avro.NamedSchema); ok {
				names[n.FullName()] = n
			}
		}
		if len(failed) == len(pending) {
			return nil, lastErr
		}
		pending = failed
	}
	return names, nil
}

// checkNoRedefinition rejects a schema that defines again a type a
// reference defines: Avro Java refuses it ("Can't redefine"), while
// hamba's cache would let the later definition win silently.
func checkNoRedefinition(s avro.Schema, refNames map[string]avro.NamedSchema) error {
	var err error
	walk(s, func(n avro.NamedSchema) {
		if ref, ok := refNames[n.FullName()]; ok && ref != n && err == nil {
			err = fmt.Errorf("%w: can't redefine %s, a reference defines it", schemareg.ErrInvalidSchema, n.FullName())
		}
	})
	return err
}

// walk calls fn once for each named type s defines or uses.
func walk(s avro.Schema, fn func(avro.NamedSchema)) {
	seen := make(map[avro.NamedSchema]bool)
	var visit func(avro.Schema)
	visit = func(s avro.Schema) {
		s = Deref(s)
		if n, ok := s.(avro.NamedSchema); ok {
			if seen[n] {
				return
			}
			seen[n] = true
			fn(n)
		}
		switch s := s.(type) {
		case *avro.RecordSchema:
			for _, f := range s.Fields() {
				visit(f.Type())
			}
		case *avro.ArraySchema:
			visit(s.Items())
		case *avro.MapSchema:
			visit(s.Values())
		case *avro.UnionSchema:
			for _, t := range s.Types() {
				visit(t)
			}
		}
	}
	visit(s)
}

// Deref is the named type a reference to one stands for (s itself when
// it is no reference): what a decoder of a schema's values looks at.
func Deref(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

// compactJSON is text without insignificant whitespace, after
// checking that it is one JSON value.
func compactJSON(text string) (string, error) {
	var v json.RawMessage
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		return "", err
	}
	return buf.String(), nil
}
