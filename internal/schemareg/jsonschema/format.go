// Package jsonschema owns the registry's JSON Schema format: parsing a
// schema and the schemas it references into a compiled validator
// (github.com/santhosh-tekuri/jsonschema/v6; drafts 4, 6, 7, 2019-09
// and 2020-12 chosen by $schema, draft 7 without one, as Confluent
// does), its canonical and normalized texts, validation of documents
// against it, and Confluent's JSON Schema compatibility rules
// (compat.go).
//
// Nothing here fetches a URL or reads a file: a $ref resolves only to
// the schema itself, to its references (registered as resources under
// their names) or to the drafts' meta-schemas, which the library
// embeds.
package jsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	js "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/strandkafka/strand/internal/schemareg"
)

// baseURL is where a schema without $id is compiled, so that a relative
// $ref such as "customer.json" resolves to baseURL's sibling; it is
// Confluent's base for draft 2019-09 and 2020-12 ("mem://input").
const baseURL = "mem://input/"

// rootURL is the schema's own location under baseURL.
const rootURL = baseURL + "root.json"

// maxSchemaObjects bounds the JSON objects in a schema and its
// references together. The library's compile time grows with the
// square of the subschemas (30,000 objects: 2.6 s; 5,000: 0.1 s), and
// a registry compiles whatever a client sends.
const maxSchemaObjects = 20_000

// Format is the JSON Schema format. The zero value is ready to use.
type Format struct{}

var _ schemareg.Format = Format{}

// Type is schemareg.TypeJSON.
func (Format) Type() schemareg.Type { return schemareg.TypeJSON }

// Schema is a parsed, compiled JSON Schema. It is immutable and safe
// for concurrent use.
type Schema struct {
	canonical  string // compact, keys in the order written
	normalized string // compact, keys sorted
	compiled   *js.Schema
}

var _ schemareg.Schema = (*Schema)(nil)

// Type is schemareg.TypeJSON.
func (*Schema) Type() schemareg.Type { return schemareg.TypeJSON }

// Canonical is the schema without insignificant whitespace, object keys
// in the order written: Confluent's canonicalString, under which two
// schemas differing only in key order are different schemas. With
// normalize, object keys are sorted at every level, as Confluent's
// normalize() does (a TreeMap node factory); it changes nothing else.
// (Confluent's normalize also sorts and dedupes the reference list,
// which is not part of the text and is the registry's to do.) Numbers
// and string escapes are kept as written, where Confluent re-prints
// them through Jackson.
func (s *Schema) Canonical(normalize bool) string {
	if normalize {
		return s.normalized
	}
	return s.canonical
}

// Parse compiles text, whose $refs may name the schemas in refs.
func (Format) Parse(text string, refs schemareg.Resolved) (schemareg.Schema, error) {
	doc, err := decode(text)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", schemareg.ErrInvalidSchema, err)
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, fmt.Errorf("%w: a JSON Schema is an object or a boolean, not %s",
			schemareg.ErrInvalidSchema, jsonKind(doc))
	}
	objects := countObjects(doc)
	for _, text := range refs {
		if ref, err := decode(text); err == nil {
			objects += countObjects(ref)
		}
	}
	if objects > maxSchemaObjects {
		return nil, fmt.Errorf("%w: %d objects with its references, more than the %d allowed",
			schemareg.ErrInvalidSchema, objects, maxSchemaObjects)
	}
	compiled, err := compile(doc, refs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", schemareg.ErrInvalidSchema, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(text)); err != nil {
		// decode accepted it, so Compact cannot refuse it.
		return nil, fmt.Errorf("%w: %v", schemareg.ErrInvalidSchema, err)
	}
	normalized, err := marshalSorted(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", schemareg.ErrInvalidSchema, err)
	}
	return &Schema{canonical: compact.String(), normalized: normalized, compiled: compiled}, nil
}

// ErrInvalidDocument: a document the schema refuses.
var ErrInvalidDocument = errors.New("jsonschema: document does not match the schema")

// Validate checks doc, a decoded JSON value (maps, slices, strings,
// json.Number or float64, bools, nil, as encoding/json decodes into
// an any; Decode gives json.Number), against schema, which must come
// from Format.Parse. A refused document is ErrInvalidDocument, wrapped
// with the library's account of every failing keyword.
func Validate(schema schemareg.Schema, doc any) error {
	s, ok := schema.(*Schema)
	if !ok {
		return fmt.Errorf("jsonschema: Validate needs a JSON schema, got %T", schema)
	}
	if err := s.compiled.Validate(doc); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidDocument, err)
	}
	return nil
}

// Decode decodes one JSON document for Validate, keeping numbers exact
// (as json.Number) so that a large integer is not judged as a float.
func Decode(data []byte) (any, error) {
	return js.UnmarshalJSON(bytes.NewReader(data))
}

func decode(text string) (any, error) {
	return js.UnmarshalJSON(strings.NewReader(text))
}

// compile compiles doc at rootURL with refs registered as resources.
// A reference is registered under its name as written when that is an
// absolute URL, else resolved against baseURL (where json-sKema looks
// for it) and against the schema's $id when it has one (where Everit,
// Confluent's loader for drafts 4 to 7, looks).
func compile(doc any, refs schemareg.Resolved) (*js.Schema, error) {
	c := js.NewCompiler()
	c.DefaultDraft(js.Draft7)
	c.UseLoader(noLoader{})

	var id *url.URL
	if obj, ok := doc.(map[string]any); ok {
		for _, kw := range []string{"$id", "id"} {
			if s, ok := obj[kw].(string); ok {
				if u, err := url.Parse(s); err == nil && u.IsAbs() {
					id = u
					break
				}
			}
		}
	}
	base, _ := url.Parse(baseURL)

	names := make([]string, 0, len(refs))
	for name := range refs {
		names = append(names, name)
	}
	sort.Strings(names)
	added := map[string]bool{rootURL: true}
	for _, name := range names {
		ref, err := url.Parse(name)
		if err != nil {
			return nil, fmt.Errorf("reference %q: %v", name, err)
		}
		var at []string
		if ref.IsAbs() {
			at = append(at, ref.String())
		} else {
			at = append(at, base.ResolveReference(ref).String())
			if id != nil {
				at = append(at, id.ResolveReference(ref).String())
			}
		}
		for _, u := range at {
			u, _, _ = strings.Cut(u, "#")
			if added[u] {
				continue
			}
			added[u] = true
			// Each location gets its own decoded copy: the library
			// keeps the document it is given.
			refDoc, err := decode(refs[name])
			if err != nil {
				return nil, fmt.Errorf("reference %q: %v", name, err)
			}
			if err := c.AddResource(u, pinDraft(refDoc)); err != nil {
				return nil, fmt.Errorf("reference %q: %v", name, err)
			}
		}
	}
	if err := c.AddResource(rootURL, pinDraft(doc)); err != nil {
		return nil, err
	}
	return c.Compile(rootURL)
}

// drafts maps the $schema values Confluent recognizes (with or without
// a trailing "#") to the draft it applies. Confluent reads the bare
// "json-schema.org/schema" as draft 4, where the library would read it
// as the latest draft.
var drafts = map[string]string{
	"http://json-schema.org/draft-04/schema":       "http://json-schema.org/draft-04/schema",
	"https://json-schema.org/draft-04/schema":      "http://json-schema.org/draft-04/schema",
	"http://json-schema.org/schema":                "http://json-schema.org/draft-04/schema",
	"https://json-schema.org/schema":               "http://json-schema.org/draft-04/schema",
	"http://json-schema.org/draft-06/schema":       "http://json-schema.org/draft-06/schema",
	"https://json-schema.org/draft-06/schema":      "http://json-schema.org/draft-06/schema",
	"http://json-schema.org/draft-07/schema":       "http://json-schema.org/draft-07/schema",
	"https://json-schema.org/draft-07/schema":      "http://json-schema.org/draft-07/schema",
	"http://json-schema.org/draft/2019-09/schema":  "https://json-schema.org/draft/2019-09/schema",
	"https://json-schema.org/draft/2019-09/schema": "https://json-schema.org/draft/2019-09/schema",
	"http://json-schema.org/draft/2020-12/schema":  "https://json-schema.org/draft/2020-12/schema",
	"https://json-schema.org/draft/2020-12/schema": "https://json-schema.org/draft/2020-12/schema",
}

// pinDraft returns doc with its $schema replaced by the draft Confluent
// would apply: a known draft's URL, or none (draft 7) for any other
// value. Confluent ignores a $schema it does not know; the library
// would try to fetch it as a custom meta-schema.
func pinDraft(doc any) any {
	obj, ok := doc.(map[string]any)
	if !ok {
		return doc
	}
	v, ok := obj["$schema"]
	if !ok {
		return doc
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	delete(out, "$schema")
	if s, ok := v.(string); ok {
		if d, ok := drafts[strings.TrimSuffix(s, "#")]; ok {
			out["$schema"] = d
		}
	}
	return out
}

// noLoader refuses every URL that is neither registered nor a
// meta-schema: a registry must not fetch what a schema names.
type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("%s is not a registered reference (remote and file references are not fetched)", u)
}

// marshalSorted prints v compactly with object keys sorted, numbers as
// written and no HTML escaping.
func marshalSorted(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func countObjects(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		n++
		for _, e := range v {
			n += countObjects(e)
		}
	case []any:
		for _, e := range v {
			n += countObjects(e)
		}
	}
	return n
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case []any:
		return "an array"
	case json.Number, float64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}
