package avroschema

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"

	"github.com/strandkafka/strand/internal/schemareg"
)

// Compatible checks that data written with writer can be read with
// reader, by the Avro specification's schema resolution rules as Avro
// Java's SchemaCompatibility applies them (Confluent's
// AvroCompatibilityChecker is that class): the same incompatibilities,
// found in the same order, at the same JSON-pointer locations, with its
// quirks (a writer union against a reader that is not one reports each
// branch's problems from a fresh root "/"; a pair of types already
// checked reports what it found the first time, at the first location).
//
// Each message is Confluent's Difference text. Where Confluent says
// "new" or "old" (it knows which schema is being registered), this says
// "reader" or "writer".
func (Format) Compatible(reader, writer schemareg.Schema) []string {
	r, ok1 := reader.(*Schema)
	w, ok2 := writer.(*Schema)
	if !ok1 || !ok2 {
		return []string{"Incompatible because of different schema type"}
	}
	c := checker{memo: make(map[schemaPair]memoEntry)}
	found := c.check("", r.parsed, w.parsed, nil)
	if c.failure != "" {
		return []string{"Unexpected exception during compatibility check: " + c.failure}
	}
	if len(found) == 0 {
		return nil
	}
	msgs := make([]string, len(found))
	for i, in := range found {
		msgs[i] = in.String()
	}
	return msgs
}

// Incompatibility kinds, Avro Java's SchemaIncompatibilityType.
const (
	nameMismatch         = "NAME_MISMATCH"
	fixedSizeMismatch    = "FIXED_SIZE_MISMATCH"
	missingEnumSymbols   = "MISSING_ENUM_SYMBOLS"
	readerFieldNoDefault = "READER_FIELD_MISSING_DEFAULT_VALUE"
	typeMismatch         = "TYPE_MISMATCH"
	missingUnionBranch   = "MISSING_UNION_BRANCH"
)

// incompatibility is one reason a reader cannot read a writer's data.
type incompatibility struct {
	kind string
	// info is Avro's message: a field name, the missing symbols, ...
	info string
	// location is a JSON pointer into the reader schema.
	location string
}

// String is the incompatibility as Confluent's Difference prints it.
func (in incompatibility) String() string {
	const reader, writer = "reader", "writer"
	var desc string
	switch in.kind {
	case fixedSizeMismatch:
		desc = "The size of FIXED type field at path '" + in.location + "' in the " + reader +
			" schema does not match with the " + writer + " schema"
	case typeMismatch:
		desc = "The type (path '" + in.location + "') of a field in the " + reader +
			" schema does not match with the " + writer + " schema"
	case nameMismatch:
		desc = "The name of the schema has changed (path '" + in.location + "')"
	case missingEnumSymbols:
		desc = "The " + reader + " schema is missing enum symbols '" + in.info + "' at path '" +
			in.location + "' in the " + writer + " schema"
	case missingUnionBranch:
		desc = "The " + reader + " schema is missing a type inside a union field at path '" +
			in.location + "' in the " + writer + " schema"
	case readerFieldNoDefault:
		desc = "The field '" + in.info + "' at path '" + in.location + "' in the " + reader +
			" schema has no default value and is missing in the " + writer + " schema"
	}
	return "{errorType:'" + in.kind + "', description:'" + desc + "', additionalInfo:'" + in.info + "'}"
}

// schemaPair keys the memo by identity: a named type is one object
// wherever it is used (hamba's references are resolved through deref),
// so a recursive type meets the same pair again and stops there.
type schemaPair struct{ reader, writer avro.Schema }

type memoEntry struct {
	done  bool
	found []incompatibility
}

// checker is one compatibility check; it is not safe for concurrent
// use.
type checker struct {
	memo map[schemaPair]memoEntry
	// failure is set when Avro Java would throw: a reader field whose
	// name and aliases match several writer fields.
	failure string
}

// check is getCompatibility: location is the path to here, token the
// step into this pair ("" at a root).
func (c *checker) check(token string, reader, writer avro.Schema, location []string) []incompatibility {
	location = append(location[:len(location):len(location)], token)
	reader, writer = Deref(reader), Deref(writer)
	key := schemaPair{reader, writer}
	if e, ok := c.memo[key]; ok {
		// In progress: a recursive type is compatible with itself
		// unless something else proves otherwise.
		return e.found
	}
	c.memo[key] = memoEntry{}
	found := c.calculate(reader, writer, location)
	c.memo[key] = memoEntry{done: true, found: found}
	return found
}

func (c *checker) calculate(reader, writer avro.Schema, location []string) []incompatibility {
	rt, wt := reader.Type(), writer.Type()
	if rt == wt {
		switch r := reader.(type) {
		case *avro.ArraySchema:
			return c.check("items", r.Items(), writer.(*avro.ArraySchema).Items(), location)
		case *avro.MapSchema:
			return c.check("values", r.Values(), writer.(*avro.MapSchema).Values(), location)
		case *avro.FixedSchema:
			w := writer.(*avro.FixedSchema)
			found := checkNames(r, w, location)
			if r.Size() != w.Size() {
				found = append(found, incompatibility{
					kind:     fixedSizeMismatch,
					info:     fmt.Sprintf("expected: %d, found: %d", w.Size(), r.Size()),
					location: pointer(location, "size"),
				})
			}
			return found
		case *avro.EnumSchema:
			w := writer.(*avro.EnumSchema)
			return append(checkNames(r, w, location), checkSymbols(r, w, location)...)
		case *avro.RecordSchema:
			w := writer.(*avro.RecordSchema)
			return append(checkNames(r, w, location), c.checkFields(r, w, location)...)
		case *avro.UnionSchema:
			// Every branch the writer may have written must be readable.
			var found []incompatibility
			for i, wb := range writer.(*avro.UnionSchema).Types() {
				if len(c.check("", reader, wb, nil)) > 0 {
					found = append(found, incompatibility{
						kind:     missingUnionBranch,
						info:     "reader union lacking writer type: " + typeName(wb),
						location: pointer(location, strconv.Itoa(i)),
					})
				}
			}
			return found
		}
		// Primitives of one type.
		return nil
	}

	if w, ok := writer.(*avro.UnionSchema); ok {
		var found []incompatibility
		for _, wb := range w.Types() {
			found = append(found, c.check("", reader, wb, nil)...)
		}
		return found
	}
	if r, ok := reader.(*avro.UnionSchema); ok {
		for _, rb := range r.Types() {
			if len(c.check("", rb, writer, nil)) == 0 {
				return nil
			}
		}
		return []incompatibility{{
			kind:     missingUnionBranch,
			info:     "reader union lacking writer type: " + typeName(writer),
			location: pointer(location),
		}}
	}
	if promotes(wt, rt) {
		return nil
	}
	return []incompatibility{{
		kind:     typeMismatch,
		info:     "reader type: " + typeName(reader) + " not compatible with writer type: " + typeName(writer),
		location: pointer(location),
	}}
}

// promotes reports whether a writer's value of type from is read as
// type to: the spec's promotions.
func promotes(from, to avro.Type) bool {
	switch from {
	case avro.Int:
		return to == avro.Long || to == avro.Float || to == avro.Double
	case avro.Long:
		return to == avro.Float || to == avro.Double
	case avro.Float:
		return to == avro.Double
	case avro.String:
		return to == avro.Bytes
	case avro.Bytes:
		return to == avro.String
	}
	return false
}

// checkNames: named types match by full name, or by one of the
// reader's aliases.
func checkNames(reader, writer avro.NamedSchema, location []string) []incompatibility {
	if reader.FullName() == writer.FullName() || slices.Contains(reader.Aliases(), writer.FullName()) {
		return nil
	}
	return []incompatibility{{
		kind:     nameMismatch,
		info:     "expected: " + writer.FullName(),
		location: pointer(location, "name"),
	}}
}

// checkSymbols: every symbol the writer may write must be the reader's,
// unless the reader has a default symbol to read unknown ones as.
func checkSymbols(reader, writer *avro.EnumSchema, location []string) []incompatibility {
	var missing []string
	for _, s := range writer.Symbols() {
		if !slices.Contains(reader.Symbols(), s) && !slices.Contains(missing, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 || reader.HasDefault() {
		return nil
	}
	sort.Strings(missing)
	return []incompatibility{{
		kind: missingEnumSymbols,
		// Java's TreeSet.toString.
		info:     "[" + strings.Join(missing, ", ") + "]",
		location: pointer(location, "symbols"),
	}}
}

// checkFields: every reader field must be filled, from the writer's
// field of its name or one of its aliases, or from its default. Writer
// fields the reader lacks are skipped.
func (c *checker) checkFields(reader, writer *avro.RecordSchema, location []string) []incompatibility {
	location = append(location[:len(location):len(location)], "fields")
	var found []incompatibility
	for i, rf := range reader.Fields() {
		here := append(location[:len(location):len(location)], strconv.Itoa(i))
		wf, ok := c.writerField(writer, rf)
		switch {
		case ok:
			found = append(found, c.check("type", rf.Type(), wf.Type(), here)...)
		case rf.HasDefault():
		case isEnumWithDefault(rf.Type()):
			// Avro Java's branch for this compares the field's enum with
			// the writer record itself, a type mismatch; kept, as it is
			// what Confluent reports.
			found = append(found, c.check("type", rf.Type(), writer, here)...)
		default:
			found = append(found, incompatibility{
				kind:     readerFieldNoDefault,
				info:     rf.Name(),
				location: pointer(here),
			})
		}
	}
	return found
}

func (c *checker) writerField(writer *avro.RecordSchema, rf *avro.Field) (*avro.Field, bool) {
	var matches []*avro.Field
	for _, name := range append([]string{rf.Name()}, rf.Aliases()...) {
		for _, wf := range writer.Fields() {
			if wf.Name() == name {
				matches = append(matches, wf)
			}
		}
	}
	switch len(matches) {
	case 0:
		return nil, false
	case 1:
		return matches[0], true
	}
	if c.failure == "" {
		c.failure = fmt.Sprintf("Reader record field %s matches multiple fields in writer record schema %s",
			rf.Name(), writer.FullName())
	}
	return matches[0], true
}

func isEnumWithDefault(s avro.Schema) bool {
	e, ok := Deref(s).(*avro.EnumSchema)
	return ok && e.HasDefault()
}

// typeName is the type as Avro Java's Schema.Type prints it.
func typeName(s avro.Schema) string {
	return strings.ToUpper(string(Deref(s).Type()))
}

// pointer is location, and then more, as a JSON pointer; the first
// element, the root's empty token, is not part of it.
func pointer(location []string, more ...string) string {
	parts := append(location[1:len(location):len(location)], more...)
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~", "~0"), "/", "~1")
	}
	return "/" + strings.Join(parts, "/")
}
