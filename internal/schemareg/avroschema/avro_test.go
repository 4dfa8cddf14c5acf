package avroschema

import (
	"errors"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/schemareg"
)

func mustParse(t *testing.T, text string, refs schemareg.Resolved) *Schema {
	t.Helper()
	s, err := Format{}.Parse(text, refs)
	if err != nil {
		t.Fatalf("Parse(%s): %v", text, err)
	}
	return s.(*Schema)
}

func TestParseInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		refs       schemareg.Resolved
		reason     string // part of the error's text
	}{
		{"not JSON", `{"type": "record"`, nil, "not JSON"},
		{"bare word", `string`, nil, "not JSON"},
		{"unknown primitive", `"integer"`, nil, "unknown type"},
		{"record without fields", `{"type":"record","name":"R"}`, nil, "fields"},
		{"record without name", `{"type":"record","fields":[]}`, nil, "name"},
		{"bad name", `{"type":"record","name":"1R","fields":[]}`, nil, "name"},
		{"duplicate field", `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"a","type":"int"}]}`, nil, "duplicate"},
		{"default of the wrong type", `{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":"x"}]}`, nil, "default"},
		{"enum default not a symbol", `{"type":"enum","name":"E","symbols":["A"],"default":"B"}`, nil, "default"},
		{"fixed without size", `{"type":"fixed","name":"F"}`, nil, "size"},
		{"unknown named type", `{"type":"record","name":"R","fields":[{"name":"a","type":"Missing"}]}`, nil, "unknown type"},
		{"bad reference", `"int"`, schemareg.Resolved{"E": `{"type":"enum","name":"E"`}, "reference"},
		{"reference using what none defines", `"int"`, schemareg.Resolved{"R": `{"type":"record","name":"R","fields":[{"name":"a","type":"Nope"}]}`}, "reference"},
		{"redefining a referenced type",
			`{"type":"record","name":"R","fields":[{"name":"e","type":{"type":"enum","name":"E","symbols":["B"]}}]}`,
			schemareg.Resolved{"E": `{"type":"enum","name":"E","symbols":["A"]}`}, "redefine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Format{}.Parse(tc.text, tc.refs)
			if !errors.Is(err, schemareg.ErrInvalidSchema) {
				t.Fatalf("err = %v, want ErrInvalidSchema", err)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("err = %q, want it to say %q", err, tc.reason)
			}
		})
	}
}

func TestParseReferences(t *testing.T) {
	// Status uses Code, from another reference: the map's order must
	// not matter.
	refs := schemareg.Resolved{
		"com.example.Status": `{"type":"record","name":"Status","namespace":"com.example","fields":[{"name":"code","type":"com.example.Code"}]}`,
		"com.example.Code":   `{"type":"enum","name":"Code","namespace":"com.example","symbols":["OK","FAILED"]}`,
	}
	text := `{"type":"record","name":"Order","namespace":"com.example","fields":[
		{"name":"id","type":"long"},
		{"name":"status","type":"Status"},
		{"name":"codes","type":{"type":"array","items":"com.example.Code"}}]}`
	for range 20 {
		s := mustParse(t, text, refs)
		want := `{"name":"com.example.Order","type":"record","fields":[` +
			`{"name":"id","type":"long","order":"ASCENDING"},` +
			`{"name":"status","type":"com.example.Status","order":"ASCENDING"},` +
			`{"name":"codes","type":{"type":"array","items":"com.example.Code"},"order":"ASCENDING"}]}`
		if got := s.Canonical(true); got != want {
			t.Fatalf("normalized:\n got %s\nwant %s", got, want)
		}
	}

	// A reader that still knows Status by reference reads a writer
	// that has it inline: types compare by what they are.
	inline := mustParse(t, `{"type":"record","name":"Order","namespace":"com.example","fields":[
		{"name":"id","type":"long"},
		{"name":"status","type":{"type":"record","name":"Status","fields":[
			{"name":"code","type":{"type":"enum","name":"Code","symbols":["OK","FAILED","RETRY"]}}]}},
		{"name":"codes","type":{"type":"array","items":"Code"}}]}`, nil)
	byRef := mustParse(t, text, refs)
	got := Format{}.Compatible(byRef, inline)
	if len(got) != 2 || !strings.Contains(got[0], "MISSING_ENUM_SYMBOLS") || !strings.Contains(got[0], "/fields/1/type/fields/0/type/symbols") {
		t.Errorf("Compatible(by reference, inline with a new symbol) = %q", got)
	}
	if got := (Format{}).Compatible(inline, byRef); got != nil {
		t.Errorf("Compatible(inline, by reference) = %q, want nil", got)
	}
}

func TestCanonical(t *testing.T) {
	a := `{"type":"record","name":"R","namespace":"n","fields":[{"name":"a","type":"int","default":1}]}`
	spaced := "{ \"type\" : \"record\",\n  \"name\": \"R\", \"namespace\": \"n\",\n  \"fields\": [ {\"name\": \"a\", \"type\": \"int\", \"default\": 1} ] }"
	reordered := `{"fields":[{"default":1,"type":"int","name":"a"}],"name":"n.R","type":"record"}`
	otherDefault := `{"type":"record","name":"R","namespace":"n","fields":[{"name":"a","type":"int","default":2}]}`
	withDoc := `{"type":"record","name":"R","namespace":"n","doc":"d","fields":[{"name":"a","type":"int","default":1}]}`

	canon := func(text string, normalize bool) string {
		return mustParse(t, text, nil).Canonical(normalize)
	}
	if canon(a, false) != canon(spaced, false) {
		t.Errorf("whitespace changed the canonical text:\n%s\n%s", canon(a, false), canon(spaced, false))
	}
	if canon(a, false) != a {
		t.Errorf("Canonical(false) = %s, want the text as given %s", canon(a, false), a)
	}
	if canon(a, false) == canon(reordered, false) {
		t.Errorf("without normalize, reordered keys are the same schema")
	}
	for _, same := range []string{spaced, reordered} {
		if canon(a, true) != canon(same, true) {
			t.Errorf("normalized differ:\n%s\n%s", canon(a, true), canon(same, true))
		}
	}
	for _, other := range []string{otherDefault, withDoc} {
		if canon(a, true) == canon(other, true) {
			t.Errorf("normalized forms of different schemas are equal: %s", canon(a, true))
		}
	}
	want := `{"name":"n.R","type":"record","fields":[{"name":"a","type":"int","order":"ASCENDING","default":1}]}`
	if got := canon(a, true); got != want {
		t.Errorf("normalized:\n got %s\nwant %s", got, want)
	}
}

func TestNormalizedDetails(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"primitive", `"string"`, `"string"`},
		{"primitive as object", `{"type":"string"}`, `"string"`},
		{"logical", `{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}`,
			`{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}`},
		{"custom properties sorted", `{"type":"int","z":1,"a":"x"}`, `{"type":"int","a":"x","z":1}`},
		{"enum", `{"type":"enum","name":"E","namespace":"n","aliases":["Z","B"],"doc":"d","symbols":["X","Y"],"default":"X"}`,
			`{"name":"n.E","type":"enum","symbols":["X","Y"],"doc":"d","aliases":["n.B","n.Z"],"default":"X"}`},
		{"fixed", `{"type":"fixed","name":"F","size":2}`, `{"name":"F","type":"fixed","size":2}`},
		{"second use by name", `{"type":"record","name":"R","fields":[{"name":"a","type":{"type":"fixed","name":"F","size":2}},{"name":"b","type":"F"}]}`,
			`{"name":"R","type":"record","fields":[{"name":"a","type":{"name":"F","type":"fixed","size":2},"order":"ASCENDING"},{"name":"b","type":"F","order":"ASCENDING"}]}`},
		{"defaults", `{"type":"record","name":"R","fields":[
			{"name":"d","type":"double","default":1},
			{"name":"b","type":"bytes","default":"\u00ff"},
			{"name":"n","type":["null","int"],"default":null},
			{"name":"m","type":{"type":"map","values":"int"},"default":{"y":2,"x":1}}]}`,
			`{"name":"R","type":"record","fields":[` +
				`{"name":"d","type":"double","order":"ASCENDING","default":1.0},` +
				`{"name":"b","type":"bytes","order":"ASCENDING","default":"ÿ"},` +
				`{"name":"n","type":["null","int"],"order":"ASCENDING","default":null},` +
				`{"name":"m","type":{"type":"map","values":"int"},"order":"ASCENDING","default":{"x":1,"y":2}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustParse(t, tc.text, nil).Canonical(true); got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
