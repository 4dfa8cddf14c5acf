package avroschema

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/strandkafka/strand/internal/schemareg"
)

var (
	kindRE = regexp.MustCompile(`errorType:'(\w+)'`)
	pathRE = regexp.MustCompile(`path '([^']*)'`)
)

// summary is a message as "KIND location".
func summary(t *testing.T, msg string) string {
	t.Helper()
	k, p := kindRE.FindStringSubmatch(msg), pathRE.FindStringSubmatch(msg)
	if k == nil || p == nil {
		t.Fatalf("message not in Confluent's form: %s", msg)
	}
	return k[1] + " " + p[1]
}

func rec(name string, fields ...string) string {
	return `{"type":"record","name":"` + name + `","fields":[` + strings.Join(fields, ",") + `]}`
}

func field(name, typ string) string { return `{"name":"` + name + `","type":` + typ + `}` }

func fieldDefault(name, typ, def string) string {
	return `{"name":"` + name + `","type":` + typ + `,"default":` + def + `}`
}

// compatCases hold reader, writer and what Confluent reports; nil is
// compatible. Each rule appears both ways.
var compatCases = []struct {
	name           string
	reader, writer string
	want           []string
	// quirk: hamba's own check, the oracle, gets this one wrong.
	quirk bool
}{
	// Primitives and promotions.
	{name: "same primitive", reader: `"int"`, writer: `"int"`},
	{name: "int read as long", reader: `"long"`, writer: `"int"`},
	{name: "int read as float", reader: `"float"`, writer: `"int"`},
	{name: "int read as double", reader: `"double"`, writer: `"int"`},
	{name: "long read as float", reader: `"float"`, writer: `"long"`},
	{name: "long read as double", reader: `"double"`, writer: `"long"`},
	{name: "float read as double", reader: `"double"`, writer: `"float"`},
	{name: "string read as bytes", reader: `"bytes"`, writer: `"string"`},
	{name: "bytes read as string", reader: `"string"`, writer: `"bytes"`},
	{name: "long not read as int", reader: `"int"`, writer: `"long"`, want: []string{"TYPE_MISMATCH /"}},
	{name: "double not read as float", reader: `"float"`, writer: `"double"`, want: []string{"TYPE_MISMATCH /"}},
	{name: "float not read as long", reader: `"long"`, writer: `"float"`, want: []string{"TYPE_MISMATCH /"}},
	{name: "int not read as string", reader: `"string"`, writer: `"int"`, want: []string{"TYPE_MISMATCH /"}},
	{name: "null not read as boolean", reader: `"boolean"`, writer: `"null"`, want: []string{"TYPE_MISMATCH /"}},
	{name: "logical types do not matter", reader: `{"type":"int","logicalType":"date"}`, writer: `"int"`},

	// Records.
	{name: "same record", reader: rec("R", field("a", `"int"`)), writer: rec("R", field("a", `"int"`))},
	{name: "writer field the reader lacks is skipped",
		reader: rec("R", field("a", `"int"`)), writer: rec("R", field("a", `"int"`), field("b", `"string"`))},
	{name: "reader field with a default",
		reader: rec("R", field("a", `"int"`), fieldDefault("b", `"string"`, `"x"`)), writer: rec("R", field("a", `"int"`))},
	{name: "reader field with a null default",
		reader: rec("R", field("a", `"int"`), fieldDefault("b", `["null","string"]`, `null`)), writer: rec("R", field("a", `"int"`))},
	{name: "reader field without a default",
		reader: rec("R", field("a", `"int"`), field("b", `"string"`)), writer: rec("R", field("a", `"int"`)),
		want: []string{"READER_FIELD_MISSING_DEFAULT_VALUE /fields/1"}},
	{name: "field type promoted", reader: rec("R", field("a", `"long"`)), writer: rec("R", field("a", `"int"`))},
	{name: "field type changed", reader: rec("R", field("a", `"int"`)), writer: rec("R", field("a", `"string"`)),
		want: []string{"TYPE_MISMATCH /fields/0/type"}},
	{name: "all problems are reported",
		reader: rec("R", field("a", `"int"`), field("b", `"int"`), field("c", `"int"`)),
		writer: rec("R", field("a", `"string"`), field("b", `"int"`)),
		want:   []string{"TYPE_MISMATCH /fields/0/type", "READER_FIELD_MISSING_DEFAULT_VALUE /fields/2"}},
	{name: "field renamed with an alias",
		reader: rec("R", `{"name":"b","type":"int","aliases":["a"]}`), writer: rec("R", field("a", `"int"`))},
	{name: "field renamed without an alias",
		reader: rec("R", field("b", `"int"`)), writer: rec("R", field("a", `"int"`)),
		want: []string{"READER_FIELD_MISSING_DEFAULT_VALUE /fields/0"}},
	{name: "record renamed", reader: rec("S", field("a", `"int"`)), writer: rec("R", field("a", `"int"`)),
		want: []string{"NAME_MISMATCH /name"}},
	{name: "record renamed with an alias",
		reader: `{"type":"record","name":"S","aliases":["R"],"fields":[{"name":"a","type":"int"}]}`,
		writer: rec("R", field("a", `"int"`))},
	{name: "namespace is part of the name",
		reader: `{"type":"record","name":"R","namespace":"x","fields":[]}`, writer: `{"type":"record","name":"R","namespace":"y","fields":[]}`,
		// hamba's check compares names without namespaces.
		want: []string{"NAME_MISMATCH /name"}, quirk: true},
	{name: "record read as map", reader: `{"type":"map","values":"int"}`, writer: rec("R", field("a", `"int"`)),
		want: []string{"TYPE_MISMATCH /"}},

	// Enums.
	{name: "enum gains a symbol", reader: `{"type":"enum","name":"E","symbols":["A","B","C"]}`,
		writer: `{"type":"enum","name":"E","symbols":["A","B"]}`},
	{name: "enum loses symbols", reader: `{"type":"enum","name":"E","symbols":["B"]}`,
		writer: `{"type":"enum","name":"E","symbols":["C","A","B"]}`,
		want:   []string{"MISSING_ENUM_SYMBOLS /symbols"}},
	{name: "enum loses a symbol, reader has a default",
		reader: `{"type":"enum","name":"E","symbols":["A","B"],"default":"A"}`,
		writer: `{"type":"enum","name":"E","symbols":["A","B","C"]}`},
	{name: "enum renamed", reader: `{"type":"enum","name":"F","symbols":["A"]}`, writer: `{"type":"enum","name":"E","symbols":["A"]}`,
		want: []string{"NAME_MISMATCH /name"}},
	// Avro Java compares a reader enum field missing from the writer,
	// with an enum default and no field default, against the writer
	// record: a type mismatch where the spec would say "no default".
	{name: "enum field missing from the writer, enum has a default",
		reader: rec("R", field("e", `{"type":"enum","name":"E","symbols":["A"],"default":"A"}`)),
		writer: rec("R"),
		want:   []string{"TYPE_MISMATCH /fields/0/type"}},

	// Fixed.
	{name: "same fixed", reader: `{"type":"fixed","name":"F","size":4}`, writer: `{"type":"fixed","name":"F","size":4}`},
	{name: "fixed resized", reader: `{"type":"fixed","name":"F","size":4}`, writer: `{"type":"fixed","name":"F","size":8}`,
		want: []string{"FIXED_SIZE_MISMATCH /size"}},
	{name: "fixed renamed and resized", reader: `{"type":"fixed","name":"G","size":4}`, writer: `{"type":"fixed","name":"F","size":8}`,
		want: []string{"NAME_MISMATCH /name", "FIXED_SIZE_MISMATCH /size"}},
	{name: "fixed read as bytes", reader: `"bytes"`, writer: `{"type":"fixed","name":"F","size":4}`,
		want: []string{"TYPE_MISMATCH /"}},

	// Arrays and maps.
	{name: "array items promoted", reader: `{"type":"array","items":"long"}`, writer: `{"type":"array","items":"int"}`},
	{name: "array items changed", reader: `{"type":"array","items":"int"}`, writer: `{"type":"array","items":"long"}`,
		want: []string{"TYPE_MISMATCH /items"}},
	{name: "map values promoted", reader: `{"type":"map","values":"double"}`, writer: `{"type":"map","values":"float"}`},
	{name: "map values changed", reader: `{"type":"map","values":"int"}`, writer: `{"type":"map","values":"string"}`,
		want: []string{"TYPE_MISMATCH /values"}},
	{name: "array read as map", reader: `{"type":"map","values":"int"}`, writer: `{"type":"array","items":"int"}`,
		want: []string{"TYPE_MISMATCH /"}},

	// Unions.
	{name: "union gains a branch", reader: `["null","int","string"]`, writer: `["null","int"]`},
	{name: "union loses a branch", reader: `["null","int"]`, writer: `["null","string","int"]`,
		want: []string{"MISSING_UNION_BRANCH /1"}},
	{name: "union branch promoted", reader: `["null","long"]`, writer: `["null","int"]`},
	{name: "value read as a union", reader: `["null","long"]`, writer: `"int"`},
	{name: "value read as a union without it", reader: `["null","string"]`, writer: `"int"`,
		want: []string{"MISSING_UNION_BRANCH /"}},
	{name: "union read as a value it always is", reader: `"long"`, writer: `["int"]`},
	// Each failing branch is reported from a fresh root, as Avro Java
	// does.
	{name: "union read as a value it may not be", reader: rec("R", field("a", `"long"`)),
		writer: rec("R", field("a", `["null","int","string"]`)),
		want:   []string{"TYPE_MISMATCH /", "TYPE_MISMATCH /"}},
	{name: "union in a record field", reader: rec("R", field("a", `["null","int"]`)),
		writer: rec("R", field("a", `["null","int","string"]`)),
		want:   []string{"MISSING_UNION_BRANCH /fields/0/type/2"}},
	{name: "union of records matched by name",
		reader: `[` + rec("A", field("x", `"long"`)) + `,` + rec("B", field("y", `"int"`)) + `]`,
		writer: rec("A", field("x", `"int"`))},

	// Recursion.
	{name: "recursive type",
		reader: rec("Node", field("v", `"long"`), field("next", `["null","Node"]`)),
		writer: rec("Node", field("v", `"int"`), field("next", `["null","Node"]`))},
	{name: "recursive type, incompatible",
		reader: rec("Node", field("v", `"int"`), field("next", `["null","Node"]`)),
		writer: rec("Node", field("v", `"long"`), field("next", `["null","Node"]`)),
		// The inner Node pair is in progress when met again, so
		// compatible there: the mismatch is reported once.
		want: []string{"TYPE_MISMATCH /fields/0/type"}},
	{name: "mutually recursive types",
		reader: rec("A", field("b", `["null",`+rec("B", field("a", `["null","A"]`), fieldDefault("n", `"int"`, `0`))+`]`)),
		writer: rec("A", field("b", `["null",`+rec("B", field("a", `["null","A"]`))+`]`))},
}

func TestCompatible(t *testing.T) {
	for _, tc := range compatCases {
		t.Run(tc.name, func(t *testing.T) {
			r, w := mustParse(t, tc.reader, nil), mustParse(t, tc.writer, nil)
			msgs := Format{}.Compatible(r, w)
			var got []string
			for _, m := range msgs {
				got = append(got, summary(t, m))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Compatible =\n%q\nwant\n%q\nmessages: %q", got, tc.want, msgs)
			}
			// hamba's own check, written apart from ours, must agree on
			// the verdict.
			oracleOK := avro.NewSchemaCompatibility().Compatible(r.Avro(), w.Avro()) == nil
			if oracleOK != (len(tc.want) == 0) && !tc.quirk {
				t.Errorf("hamba's SchemaCompatibility says compatible=%v", oracleOK)
			}
		})
	}
}

// The resolution examples the Avro specification gives in its "Schema
// Resolution" section, as an oracle apart from Avro Java.
func TestCompatibleSpecExamples(t *testing.T) {
	for _, tc := range []struct {
		rule           string
		reader, writer string
		ok             bool
	}{
		{"the writer's int may be promoted to long, float, or double", `"double"`, `"int"`, true},
		{"the writer's long may be promoted to float or double", `"float"`, `"long"`, true},
		{"the writer's float may be promoted to double", `"double"`, `"float"`, true},
		{"the writer's string may be promoted to bytes", `"bytes"`, `"string"`, true},
		{"the writer's bytes may be promoted to string", `"string"`, `"bytes"`, true},
		{"the ordering of fields may be different",
			rec("R", field("b", `"string"`), field("a", `"int"`)), rec("R", field("a", `"int"`), field("b", `"string"`)), true},
		{"a reader field without a default absent from the writer is an error",
			rec("R", field("a", `"int"`)), rec("R"), false},
		{"an enum symbol the reader lacks, without a reader default, is an error",
			`{"type":"enum","name":"E","symbols":["A"]}`, `{"type":"enum","name":"E","symbols":["A","B"]}`, false},
		{"if none of the reader's union branches match the writer's schema, an error is signalled",
			`["int","string"]`, `"boolean"`, false},
		{"if the writer's is a union but the reader's is not, each writer branch must match",
			`"long"`, `["int","long"]`, true},
		{"both fixed: sizes and names must match",
			`{"type":"fixed","name":"F","size":16}`, `{"type":"fixed","name":"F","size":12}`, false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got := Format{}.Compatible(mustParse(t, tc.reader, nil), mustParse(t, tc.writer, nil))
			if (got == nil) != tc.ok {
				t.Errorf("Compatible = %q, want compatible=%v", got, tc.ok)
			}
		})
	}
}

// The full text of each kind, as Confluent's Difference writes it.
func TestCompatibleMessages(t *testing.T) {
	for _, tc := range []struct{ reader, writer, want string }{
		{rec("R", field("a", `"int"`), field("x", `"int"`)), rec("R", field("a", `"int"`)),
			`{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'x' at path '/fields/1' in the reader schema has no default value and is missing in the writer schema', additionalInfo:'x'}`},
		{`"int"`, `"string"`,
			`{errorType:'TYPE_MISMATCH', description:'The type (path '/') of a field in the reader schema does not match with the writer schema', additionalInfo:'reader type: INT not compatible with writer type: STRING'}`},
		{rec("a.S"), rec("a.R"),
			`{errorType:'NAME_MISMATCH', description:'The name of the schema has changed (path '/name')', additionalInfo:'expected: a.R'}`},
		{`{"type":"fixed","name":"F","size":4}`, `{"type":"fixed","name":"F","size":8}`,
			`{errorType:'FIXED_SIZE_MISMATCH', description:'The size of FIXED type field at path '/size' in the reader schema does not match with the writer schema', additionalInfo:'expected: 8, found: 4'}`},
		{`{"type":"enum","name":"E","symbols":["A"]}`, `{"type":"enum","name":"E","symbols":["C","A","B"]}`,
			`{errorType:'MISSING_ENUM_SYMBOLS', description:'The reader schema is missing enum symbols '[B, C]' at path '/symbols' in the writer schema', additionalInfo:'[B, C]'}`},
		{`["null","int"]`, `["null","string"]`,
			`{errorType:'MISSING_UNION_BRANCH', description:'The reader schema is missing a type inside a union field at path '/1' in the writer schema', additionalInfo:'reader union lacking writer type: STRING'}`},
	} {
		got := Format{}.Compatible(mustParse(t, tc.reader, nil), mustParse(t, tc.writer, nil))
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("Compatible(%s, %s) =\n%q\nwant\n%q", tc.reader, tc.writer, got, tc.want)
		}
	}
}

type otherSchema struct{}

func (otherSchema) Type() schemareg.Type  { return schemareg.TypeJSON }
func (otherSchema) Canonical(bool) string { return "{}" }

func TestCompatibleOtherType(t *testing.T) {
	s := mustParse(t, `"int"`, nil)
	if got := (Format{}).Compatible(s, otherSchema{}); len(got) != 1 {
		t.Errorf("Compatible(avro, json) = %q, want one message", got)
	}
}
