package jsonschema

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/schemareg"
)

var messageRe = regexp.MustCompile(`^\{errorType:"([A-Z_]+)", description:"(?:.*?'(#[^']*)')?.*'\}$`)

// incompatibilities returns Compatible(reader, writer) as "TYPE #/path"
// strings, sorted.
func incompatibilities(t *testing.T, reader, writer schemareg.Schema) []string {
	t.Helper()
	var out []string
	for _, m := range (Format{}).Compatible(reader, writer) {
		g := messageRe.FindStringSubmatch(m)
		if g == nil {
			t.Fatalf("message not in Confluent's shape: %s", m)
		}
		out = append(out, strings.TrimSpace(g[1]+" "+g[2]))
	}
	slices.Sort(out)
	return out
}

const obj = `"type":"object"`

// TestCompatible runs each case both ways: backward (the new schema
// reads what the old one wrote) and forward (the old reads the new).
func TestCompatible(t *testing.T) {
	for _, tc := range []struct {
		name          string
		old, new      string
		backward, fwd []string // incompatibilities, "TYPE #/path"
	}{
		{name: "same", old: `{"type":"string"}`, new: `{"type":"string"}`},
		{name: "annotations only", old: `{"type":"string","title":"a"}`, new: `{"type":"string","title":"b","description":"c"}`},
		{name: "type changed", old: `{"type":"string"}`, new: `{"type":"number"}`,
			backward: []string{"TYPE_CHANGED #/"}, fwd: []string{"TYPE_CHANGED #/"}},
		{name: "integer to number", old: `{"type":"integer"}`, new: `{"type":"number"}`,
			fwd: []string{"TYPE_NARROWED #/"}},
		{name: "nullable", old: `{"type":"string"}`, new: `{"type":["string","null"]}`,
			fwd: []string{"TYPE_CHANGED #/"}},
		{name: "anything reads", old: `{"type":"string"}`, new: `{}`,
			fwd: []string{"TYPE_CHANGED #/"}},

		// Objects: the writer's content model decides whether a new
		// property may already have been written with another type.
		{name: "optional property added to open model",
			old:      `{` + obj + `,"properties":{"a":{"type":"string"}}}`,
			new:      `{` + obj + `,"properties":{"a":{"type":"string"},"b":{"type":"string"}}}`,
			backward: []string{"OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL #/properties/b"}},
		{name: "empty property added to open model",
			old: `{` + obj + `,"properties":{"a":{"type":"string"}}}`,
			new: `{` + obj + `,"properties":{"a":{"type":"string"},"b":{}}}`},
		{name: "optional property added to closed model",
			old: `{` + obj + `,"properties":{"a":{"type":"string"}},"additionalProperties":false}`,
			new: `{` + obj + `,"properties":{"a":{"type":"string"},"b":{"type":"string"}},"additionalProperties":false}`,
			fwd: []string{"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/b"}},
		{name: "required property added to closed model",
			old:      `{` + obj + `,"properties":{"a":{"type":"string"}},"additionalProperties":false}`,
			new:      `{` + obj + `,"properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["b"],"additionalProperties":false}`,
			backward: []string{"REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL #/properties/b"},
			fwd:      []string{"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/b"}},
		{name: "required property with default added to closed model",
			old: `{` + obj + `,"properties":{"a":{"type":"string"}},"additionalProperties":false}`,
			new: `{` + obj + `,"properties":{"a":{"type":"string"},"b":{"type":"string","default":"x"}},"required":["b"],"additionalProperties":false}`,
			fwd: []string{"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/b"}},
		{name: "required property added to open model",
			old:      `{` + obj + `,"properties":{"a":{"type":"string"}}}`,
			new:      `{` + obj + `,"properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["b"]}`,
			backward: []string{"REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL #/properties/b"}},
		{name: "property made required",
			old:      `{` + obj + `,"properties":{"a":{"type":"string"}}}`,
			new:      `{` + obj + `,"properties":{"a":{"type":"string"}},"required":["a"]}`,
			backward: []string{"REQUIRED_ATTRIBUTE_ADDED #/required/a"}},
		{name: "additionalProperties false added",
			old:      `{` + obj + `,"properties":{"a":{"type":"string"}}}`,
			new:      `{` + obj + `,"properties":{"a":{"type":"string"}},"additionalProperties":false}`,
			backward: []string{"ADDITIONAL_PROPERTIES_REMOVED #/additionalProperties"}},
		{name: "additionalProperties schema added",
			old:      `{` + obj + `}`,
			new:      `{` + obj + `,"additionalProperties":{"type":"string"}}`,
			backward: []string{"ADDITIONAL_PROPERTIES_NARROWED #/additionalProperties"}},
		{name: "property added, covered by partially open model",
			old: `{` + obj + `,"additionalProperties":{"type":"string"}}`,
			new: `{` + obj + `,"properties":{"b":{"type":"string"}},"additionalProperties":{"type":"string"}}`},
		{name: "property added, not covered by partially open model",
			old:      `{` + obj + `,"additionalProperties":{"type":"string"}}`,
			new:      `{` + obj + `,"properties":{"b":{"type":"number"}},"additionalProperties":{"type":"string"}}`,
			backward: []string{"PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL #/properties/b", "TYPE_CHANGED #/properties/b"},
			fwd:      []string{"PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL #/properties/b", "TYPE_CHANGED #/properties/b"}},
		{name: "pattern property covers",
			old:      `{` + obj + `,"patternProperties":{"^x_":{"type":"string"}}}`,
			new:      `{` + obj + `,"properties":{"x_b":{"type":"integer"}},"patternProperties":{"^x_":{"type":"string"}}}`,
			backward: []string{"PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL #/properties/x_b", "TYPE_CHANGED #/properties/x_b"},
			fwd:      []string{"PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL #/properties/x_b", "TYPE_CHANGED #/properties/x_b"}},
		{name: "nested property type",
			old:      `{` + obj + `,"properties":{"a":{` + obj + `,"properties":{"b":{"type":"string"}}}}}`,
			new:      `{` + obj + `,"properties":{"a":{` + obj + `,"properties":{"b":{"type":"boolean"}}}}}`,
			backward: []string{"TYPE_CHANGED #/properties/a/properties/b"},
			fwd:      []string{"TYPE_CHANGED #/properties/a/properties/b"}},
		{name: "maxProperties decreased",
			old: `{` + obj + `,"maxProperties":5}`, new: `{` + obj + `,"maxProperties":3}`,
			backward: []string{"MAX_PROPERTIES_DECREASED #/maxProperties"}},

		// Strings and numbers: a reader may only loosen bounds.
		{name: "maxLength decreased", old: `{"type":"string","maxLength":10}`, new: `{"type":"string","maxLength":5}`,
			backward: []string{"MAX_LENGTH_DECREASED #/maxLength"}},
		{name: "maxLength added", old: `{"type":"string"}`, new: `{"type":"string","maxLength":5}`,
			backward: []string{"MAX_LENGTH_ADDED #/maxLength"}},
		{name: "minLength increased", old: `{"type":"string","minLength":1}`, new: `{"type":"string","minLength":2}`,
			backward: []string{"MIN_LENGTH_INCREASED #/minLength"}},
		{name: "pattern changed", old: `{"type":"string","pattern":"^a"}`, new: `{"type":"string","pattern":"^b"}`,
			backward: []string{"PATTERN_CHANGED #/pattern"}, fwd: []string{"PATTERN_CHANGED #/pattern"}},
		{name: "pattern added", old: `{"type":"string"}`, new: `{"type":"string","pattern":"^b"}`,
			backward: []string{"PATTERN_ADDED #/pattern"}},
		{name: "maximum decreased", old: `{"type":"number","maximum":10}`, new: `{"type":"number","maximum":9.5}`,
			backward: []string{"MAXIMUM_DECREASED #/maximum"}},
		{name: "minimum increased", old: `{"type":"number","minimum":0}`, new: `{"type":"number","minimum":0.1}`,
			backward: []string{"MINIMUM_INCREASED #/minimum"}},
		{name: "minimum added", old: `{"type":"integer"}`, new: `{"type":"integer","minimum":0}`,
			backward: []string{"MINIMUM_ADDED #/minimum"}},
		{name: "exclusiveMaximum decreased", old: `{"type":"number","exclusiveMaximum":10}`, new: `{"type":"number","exclusiveMaximum":5}`,
			backward: []string{"EXCLUSIVE_MAXIMUM_DECREASED #/exclusiveMaximum"}},
		{name: "multipleOf expanded", old: `{"type":"number","multipleOf":0.5}`, new: `{"type":"number","multipleOf":1.5}`,
			backward: []string{"MULTIPLE_OF_EXPANDED #/multipleOf"}},
		{name: "multipleOf changed", old: `{"type":"number","multipleOf":2}`, new: `{"type":"number","multipleOf":3}`,
			backward: []string{"MULTIPLE_OF_CHANGED #/multipleOf"}, fwd: []string{"MULTIPLE_OF_CHANGED #/multipleOf"}},

		// Enums and const.
		{name: "enum narrowed", old: `{"enum":["a","b","c"]}`, new: `{"enum":["a","b"]}`,
			backward: []string{"ENUM_ARRAY_NARROWED #/enum"}},
		{name: "enum reordered", old: `{"enum":["a",1,{"x":1,"y":2}]}`, new: `{"enum":[{"y":2,"x":1.0},1,"a"]}`},
		{name: "enum changed", old: `{"enum":["a","b"]}`, new: `{"enum":["a","c"]}`,
			backward: []string{"ENUM_ARRAY_CHANGED #/enum"}, fwd: []string{"ENUM_ARRAY_CHANGED #/enum"}},
		{name: "typed enum narrowed", old: `{"type":"string","enum":["a","b"]}`, new: `{"type":"string","enum":["a"]}`,
			// Everit holds a typed enum as allOf[type, enum]; the narrowed
			// enum leaves a branch unmatched.
			backward: []string{"COMBINED_TYPE_SUBSCHEMAS_CHANGED #/"}},
		{name: "const changed", old: `{"const":"a"}`, new: `{"const":"b"}`,
			backward: []string{"ENUM_ARRAY_CHANGED #/const"}, fwd: []string{"ENUM_ARRAY_CHANGED #/const"}},

		// Arrays.
		{name: "items type changed", old: `{"type":"array","items":{"type":"string"}}`, new: `{"type":"array","items":{"type":"number"}}`,
			backward: []string{"TYPE_CHANGED #/items"}, fwd: []string{"TYPE_CHANGED #/items"}},
		{name: "items widened", old: `{"type":"array","items":{"type":"integer"}}`, new: `{"type":"array","items":{"type":"number"}}`,
			fwd: []string{"TYPE_NARROWED #/items"}},
		{name: "items added", old: `{"type":"array"}`, new: `{"type":"array","items":{"type":"number"}}`,
			backward: []string{"SCHEMA_ADDED #/items"}},
		{name: "maxItems decreased", old: `{"type":"array","maxItems":3}`, new: `{"type":"array","maxItems":2}`,
			backward: []string{"MAX_ITEMS_DECREASED #/maxItems"}},
		{name: "uniqueItems added", old: `{"type":"array"}`, new: `{"type":"array","uniqueItems":true}`,
			backward: []string{"UNIQUE_ITEMS_ADDED #/uniqueItems"}},
		{name: "tuple item added to closed tuple",
			old: `{"type":"array","items":[{"type":"string"}],"additionalItems":false}`,
			new: `{"type":"array","items":[{"type":"string"},{"type":"number"}],"additionalItems":false}`,
			fwd: []string{"ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL #/items/1"}},
		{name: "tuple item added to open tuple",
			old:      `{"type":"array","items":[{"type":"string"}]}`,
			new:      `{"type":"array","items":[{"type":"string"},{"type":"number"}]}`,
			backward: []string{"ITEM_ADDED_TO_OPEN_CONTENT_MODEL #/items/1"}},
		{name: "draft2020 prefixItems closed",
			old: `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","prefixItems":[{"type":"string"}],"items":false}`,
			new: `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","prefixItems":[{"type":"string"},{"type":"number"}],"items":false}`,
			fwd: []string{"ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL #/items/1"}},

		// Combined types.
		{name: "oneOf branch added", old: `{"oneOf":[{"type":"string"},{"type":"number"}]}`,
			new: `{"oneOf":[{"type":"string"},{"type":"number"},{"type":"boolean"}]}`,
			fwd: []string{"SUM_TYPE_NARROWED #/"}},
		{name: "anyOf branch removed", old: `{"anyOf":[{"type":"string"},{"type":"number"}]}`,
			new:      `{"anyOf":[{"type":"string"}]}`,
			backward: []string{"SUM_TYPE_NARROWED #/"}},
		{name: "oneOf branch changed", old: `{"oneOf":[{"type":"string"},{"type":"number"}]}`,
			new:      `{"oneOf":[{"type":"string"},{"type":"boolean"}]}`,
			backward: []string{"COMBINED_TYPE_SUBSCHEMAS_CHANGED #/"},
			fwd:      []string{"COMBINED_TYPE_SUBSCHEMAS_CHANGED #/"}},
		{name: "oneOf branches reordered", old: `{"oneOf":[{"type":"string"},{"type":"number"}]}`,
			new: `{"oneOf":[{"type":"number"},{"type":"string"}]}`},
		{name: "oneOf branch narrowed inside", old: `{"oneOf":[{"type":"string","maxLength":9},{"type":"number"}]}`,
			new:      `{"oneOf":[{"type":"number"},{"type":"string","maxLength":5}]}`,
			backward: []string{"COMBINED_TYPE_SUBSCHEMAS_CHANGED #/"}},
		{name: "anyOf to oneOf", old: `{"anyOf":[{"type":"string"},{"type":"number"}]}`,
			new:      `{"oneOf":[{"type":"string"},{"type":"number"}]}`,
			backward: []string{"COMBINED_TYPE_CHANGED #/"}},
		{name: "plain to oneOf", old: `{"type":"string"}`, new: `{"oneOf":[{"type":"string"},{"type":"null"}]}`,
			fwd: []string{"TYPE_CHANGED #/"}},
		{name: "allOf to one of its parts", old: `{"allOf":[{"type":"string"},{"maxLength":3}]}`, new: `{"type":"string"}`,
			fwd: []string{"TYPE_CHANGED #/"}},
		{name: "not extended", old: `{"not":{"type":"string"}}`, new: `{"not":{"type":["string","number"]}}`,
			backward: []string{"NOT_TYPE_EXTENDED #/not"}},

		// $refs are compared as what they point at.
		{name: "ref inlined",
			old: `{` + obj + `,"properties":{"a":{"$ref":"#/definitions/s"}},"definitions":{"s":{"type":"string"}}}`,
			new: `{` + obj + `,"properties":{"a":{"type":"string"}}}`},
		{name: "ref target changed",
			old:      `{` + obj + `,"properties":{"a":{"$ref":"#/definitions/s"}},"definitions":{"s":{"type":"string"}}}`,
			new:      `{` + obj + `,"properties":{"a":{"$ref":"#/definitions/s"}},"definitions":{"s":{"type":"integer"}}}`,
			backward: []string{"TYPE_CHANGED #/properties/a"}, fwd: []string{"TYPE_CHANGED #/properties/a"}},
		{name: "recursive",
			old: `{"$ref":"#/definitions/node","definitions":{"node":{` + obj + `,"properties":{"v":{"type":"integer"},"next":{"$ref":"#/definitions/node"}}}}}`,
			new: `{"$ref":"#/definitions/node","definitions":{"node":{` + obj + `,"properties":{"v":{"type":"number"},"next":{"$ref":"#/definitions/node"}}}}}`,
			fwd: []string{"TYPE_NARROWED #/properties/v"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, nw := mustParse(t, tc.old, nil), mustParse(t, tc.new, nil)
			if got := incompatibilities(t, nw, old); !slices.Equal(got, tc.backward) {
				t.Errorf("backward (new reads old) = %q, want %q", got, tc.backward)
			}
			if got := incompatibilities(t, old, nw); !slices.Equal(got, tc.fwd) {
				t.Errorf("forward (old reads new) = %q, want %q", got, tc.fwd)
			}
		})
	}
}

func TestCompatibleReferences(t *testing.T) {
	refs := func(customer string) schemareg.Resolved { return schemareg.Resolved{"customer.json": customer} }
	const root = `{` + obj + `,"properties":{"c":{"$ref":"customer.json"}}}`
	old := mustParse(t, root, refs(`{`+obj+`,"properties":{"id":{"type":"integer"}}}`))
	nw := mustParse(t, root, refs(`{`+obj+`,"properties":{"id":{"type":"string"}}}`))
	want := []string{"TYPE_CHANGED #/properties/c/properties/id"}
	if got := incompatibilities(t, nw, old); !slices.Equal(got, want) {
		t.Fatalf("Compatible across a changed reference = %q, want %q", got, want)
	}
	if got := incompatibilities(t, old, old); got != nil {
		t.Fatalf("Compatible(old, old) = %q", got)
	}
}

func TestCompatibleMessage(t *testing.T) {
	w := mustParse(t, `{"type":"string","maxLength":10}`, nil)
	r := mustParse(t, `{"type":"string","maxLength":5}`, nil)
	got := (Format{}).Compatible(r, w)
	want := []string{`{errorType:"MAX_LENGTH_DECREASED", description:"The value at path '#/maxLength' in the reader schema is less than its value in the writer schema'}`}
	if !slices.Equal(got, want) {
		t.Fatalf("Compatible = %q, want %q", got, want)
	}
	type other struct{ schemareg.Schema }
	if got := (Format{}).Compatible(other{}, w); len(got) != 1 {
		t.Fatalf("Compatible with another format's schema = %q, want one message", got)
	}
}

// TestCompatibleBounded: nested oneOfs compare their branches pairwise,
// a product that must stop at maxComparisons rather than run on.
func TestCompatibleBounded(t *testing.T) {
	branch := `{"type":"string"}`
	for range 4 {
		var b strings.Builder
		b.WriteString(`{"oneOf":[`)
		for i := range 6 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"allOf":[%s,{"maxLength":%d}]}`, branch, i+1)
		}
		b.WriteString(`]}`)
		branch = b.String()
	}
	s := mustParse(t, branch, nil).(*Schema)
	const limit = 10_000
	got := incompatible(s, s, limit)
	if len(got) != 1 || !strings.Contains(got[0], "more than 10000") {
		t.Fatalf("Compatible = %q, want the bound's message", got)
	}
	// Two levels down fits: 36 branch pairs, each of 36 leaf pairs.
	inner := s.compiled.OneOf[0].AllOf[0].OneOf[0].AllOf[0]
	c := comparer{onPath: map[pair]bool{}, memo: map[pair][]difference{}, limit: limit}
	if ds := c.compare(view{s: inner}, view{s: inner}); !compatible(ds) || c.exhausted {
		t.Fatalf("compare(inner, inner) = %v, exhausted %v", ds, c.exhausted)
	}
}
