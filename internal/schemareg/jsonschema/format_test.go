package jsonschema

import (
	"errors"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/schemareg"
)

func mustParse(t *testing.T, text string, refs schemareg.Resolved) schemareg.Schema {
	t.Helper()
	s, err := Format{}.Parse(text, refs)
	if err != nil {
		if len(text) > 200 {
			text = text[:200] + "..."
		}
		t.Fatalf("Parse(%s): %v", text, err)
	}
	return s
}

func TestParseDrafts(t *testing.T) {
	// exclusiveMaximum is a boolean in draft 4 and a number after it;
	// a schema valid in one draft is invalid in the other, which shows
	// the draft each $schema selects.
	const boolExcl = `"type":"number","maximum":10,"exclusiveMaximum":true`
	const numExcl = `"type":"number","exclusiveMaximum":10`
	for _, tc := range []struct {
		name, schema string
		ok           bool
	}{
		{"draft4 bool", `{"$schema":"http://json-schema.org/draft-04/schema#",` + boolExcl + `}`, true},
		{"draft4 number", `{"$schema":"http://json-schema.org/draft-04/schema#",` + numExcl + `}`, false},
		{"bare json-schema.org is draft4", `{"$schema":"http://json-schema.org/schema#",` + boolExcl + `}`, true},
		{"draft6", `{"$schema":"http://json-schema.org/draft-06/schema#",` + numExcl + `}`, true},
		{"draft6 bool", `{"$schema":"http://json-schema.org/draft-06/schema#",` + boolExcl + `}`, false},
		{"draft7", `{"$schema":"http://json-schema.org/draft-07/schema#",` + numExcl + `}`, true},
		{"default is draft7", `{` + numExcl + `}`, true},
		{"default is not draft4", `{` + boolExcl + `}`, false},
		{"unknown $schema is draft7", `{"$schema":"http://example.com/custom",` + numExcl + `}`, true},
		{"draft2019", `{"$schema":"https://json-schema.org/draft/2019-09/schema",` + numExcl + `}`, true},
		{"draft2020", `{"$schema":"https://json-schema.org/draft/2020-12/schema","prefixItems":[{"type":"string"}]}`, true},
		{"draft2020 bad prefixItems", `{"$schema":"https://json-schema.org/draft/2020-12/schema","prefixItems":{"type":"string"}}`, false},
		{"boolean schema", `true`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Format{}.Parse(tc.schema, nil)
			if tc.ok && err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !tc.ok && !errors.Is(err, schemareg.ErrInvalidSchema) {
				t.Fatalf("Parse: %v, want ErrInvalidSchema", err)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		refs         schemareg.Resolved
		reason       string // part of the error
	}{
		{"not json", `{"type":`, nil, "unexpected EOF"},
		{"trailing", `{"type":"string"} x`, nil, "after top-level value"},
		{"array root", `[{"type":"string"}]`, nil, "object or a boolean"},
		{"string root", `"string"`, nil, "object or a boolean"},
		{"unknown type", `{"type":"strin"}`, nil, "strin"},
		{"negative minLength", `{"type":"string","minLength":-1}`, nil, "minLength"},
		{"bad pattern", `{"type":"string","pattern":"("}`, nil, "pattern"},
		{"required not array", `{"type":"object","required":"a"}`, nil, "required"},
		{"unresolved ref", `{"$ref":"customer.json"}`, nil, "not a registered reference"},
		{"remote ref not fetched", `{"$ref":"https://example.com/s.json"}`, nil, "not a registered reference"},
		{"file ref not read", `{"$ref":"file:///etc/hostname"}`, nil, "not a registered reference"},
		{"invalid reference", `{"$ref":"customer.json"}`, schemareg.Resolved{"customer.json": `{"type":1}`}, "customer.json"},
		{"too many objects", `{"anyOf":[` + strings.Repeat(`{"type":"string"},`, maxSchemaObjects) + `{}]}`, nil, "objects"},
		{"too many objects in references", `{"$ref":"r.json"}`, schemareg.Resolved{"r.json": `{"allOf":[` + strings.Repeat(`{},`, maxSchemaObjects) + `{}]}`}, "objects"},
		{"reference not json", `{"$ref":"customer.json"}`, schemareg.Resolved{"customer.json": `{`}, "customer.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Format{}.Parse(tc.schema, tc.refs)
			if !errors.Is(err, schemareg.ErrInvalidSchema) {
				t.Fatalf("Parse = %T, %v; want ErrInvalidSchema", s, err)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("Parse: %v; want the reason to mention %q", err, tc.reason)
			}
		})
	}
}

func TestReferences(t *testing.T) {
	address := `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`
	customer := `{"type":"object","properties":{"name":{"type":"string"},"address":{"$ref":"address.json"}},"required":["name"]}`
	for _, tc := range []struct {
		name, schema string
		refs         schemareg.Resolved
	}{
		{"relative", `{"type":"object","properties":{"c":{"$ref":"customer.json"}}}`,
			schemareg.Resolved{"customer.json": customer, "address.json": address}},
		{"relative to $id", `{"$id":"https://example.com/schemas/order.json","type":"object","properties":{"c":{"$ref":"customer.json"}}}`,
			schemareg.Resolved{"customer.json": customer, "address.json": address}},
		{"absolute name", `{"type":"object","properties":{"c":{"$ref":"https://example.com/customer.json"}}}`,
			schemareg.Resolved{"https://example.com/customer.json": customer, "https://example.com/address.json": address}},
		{"fragment into a reference", `{"type":"object","properties":{"c":{"$ref":"defs.json#/definitions/customer"}}}`,
			schemareg.Resolved{"defs.json": `{"definitions":{"customer":` + customer + `}}`, "address.json": address}},
		{"draft2020 reference", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"c":{"$ref":"customer.json"}}}`,
			schemareg.Resolved{"customer.json": customer, "address.json": address}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, tc.schema, tc.refs)
			good := `{"c":{"name":"ann","address":{"city":"Oslo"}}}`
			if err := validate(t, s, good); err != nil {
				t.Fatalf("Validate(%s): %v", good, err)
			}
			// Refused by the referenced schema, and by the reference's own
			// reference.
			for _, bad := range []string{`{"c":{"address":{"city":"Oslo"}}}`, `{"c":{"name":"ann","address":{"city":7}}}`} {
				if err := validate(t, s, bad); !errors.Is(err, ErrInvalidDocument) {
					t.Fatalf("Validate(%s) = %v, want ErrInvalidDocument", bad, err)
				}
			}
		})
	}
}

func validate(t *testing.T, s schemareg.Schema, doc string) error {
	t.Helper()
	v, err := Decode([]byte(doc))
	if err != nil {
		t.Fatalf("Decode(%s): %v", doc, err)
	}
	return Validate(s, v)
}

func TestValidate(t *testing.T) {
	s := mustParse(t, `{
		"type": "object",
		"properties": {
			"id": {"type": "integer", "minimum": 1},
			"name": {"type": "string", "maxLength": 5},
			"tags": {"type": "array", "items": {"enum": ["a", "b"]}},
			"email": {"type": "string", "format": "email"}
		},
		"required": ["id"],
		"additionalProperties": false
	}`, nil)
	for _, tc := range []struct {
		doc string
		ok  bool
	}{
		{`{"id":1}`, true},
		{`{"id":9007199254740993,"name":"ann","tags":["a","b"]}`, true},
		{`{"id":1,"email":"ann@example.com"}`, true},
		{`{}`, false},
		{`{"id":0}`, false},
		{`{"id":1.5}`, false},
		{`{"id":"1"}`, false},
		{`{"id":1,"name":"annabel"}`, false},
		{`{"id":1,"tags":["c"]}`, false},
		{`{"id":1,"extra":true}`, false},
		{`{"id":1,"email":"not an address"}`, false}, // draft 7 asserts formats
		{`[]`, false},
		{`null`, false},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			err := validate(t, s, tc.doc)
			if tc.ok && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrInvalidDocument) {
				t.Fatalf("Validate = %v, want ErrInvalidDocument", err)
			}
		})
	}

	type other struct{ schemareg.Schema }
	if err := Validate(other{}, map[string]any{}); err == nil || errors.Is(err, ErrInvalidDocument) {
		t.Fatalf("Validate(another format's schema) = %v, want a usage error", err)
	}
}

func TestCanonical(t *testing.T) {
	const a = `{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer","maximum":1.50}},"description":"<x> & y"}`
	const aSpaced = `{
		"type" : "object",
		"properties" : {
			"b" : { "type" : "string" },
			"a" : { "type" : "integer", "maximum" : 1.50 }
		},
		"description" : "<x> & y"
	}`
	const aReordered = `{"description":"<x> & y","properties":{"a":{"maximum":1.50,"type":"integer"},"b":{"type":"string"}},"type":"object"}`
	const b = `{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"number","maximum":1.50}},"description":"<x> & y"}`

	p := func(text string) schemareg.Schema { return mustParse(t, text, nil) }
	for _, tc := range []struct {
		name       string
		x, y       string
		normalize  bool
		wantEqual  bool
		wantCanonX string // "" to skip
	}{
		{"whitespace", a, aSpaced, false, true, a},
		{"key order kept", a, aReordered, false, false, a},
		{"normalize sorts keys", a, aReordered, true, true, aReordered},
		{"normalize keeps differences", a, b, true, false, ""},
		{"different schemas", a, b, false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cx, cy := p(tc.x).Canonical(tc.normalize), p(tc.y).Canonical(tc.normalize)
			if (cx == cy) != tc.wantEqual {
				t.Fatalf("Canonical(%v):\n%s\n%s\nequal = %v, want %v", tc.normalize, cx, cy, cx == cy, tc.wantEqual)
			}
			if tc.wantCanonX != "" && cx != tc.wantCanonX {
				t.Fatalf("Canonical(%v) = %s, want %s", tc.normalize, cx, tc.wantCanonX)
			}
			// The canonical text is itself a schema with the same text.
			if again := p(cx).Canonical(tc.normalize); again != cx {
				t.Fatalf("Canonical of the canonical text = %s, want %s", again, cx)
			}
		})
	}
	if got := p(`{"type":"string"}`).Type(); got != schemareg.TypeJSON {
		t.Fatalf("Type() = %q", got)
	}
	if got := (Format{}).Type(); got != schemareg.TypeJSON {
		t.Fatalf("Format.Type() = %q", got)
	}
}
