package protoschema

import (
	"regexp"
	"slices"
	"testing"

	"github.com/strandkafka/strand/internal/schemareg"
)

var errorType = regexp.MustCompile(`^\{errorType:"([A-Z_]+)", description:"(.*)"\}$`)

// incompatible is Compatible's answer as "TYPE path" strings, sorted.
func incompatible(t *testing.T, reader, writer schemareg.Schema) []string {
	t.Helper()
	var out []string
	for _, msg := range (Format{}).Compatible(reader, writer) {
		m := errorType.FindStringSubmatch(msg)
		if m == nil {
			t.Fatalf("message not in Confluent's form: %s", msg)
		}
		path := regexp.MustCompile(`'(#/[^']*)'`).FindStringSubmatch(m[2])
		if path == nil {
			t.Fatalf("message without a path: %s", msg)
		}
		out = append(out, m[1]+" "+path[1])
	}
	slices.Sort(out)
	return out
}

const p3 = `syntax = "proto3"; package p; `

// TestCompatible runs each change from writer to reader both ways:
// backward is Compatible(reader, writer), forward the other way round.
func TestCompatible(t *testing.T) {
	for _, tc := range []struct {
		name           string
		writer, reader string
		refs           schemareg.Resolved
		backward       []string // incompatible differences, "TYPE path"
		forward        []string
	}{
		{
			name:   "identical",
			writer: p3 + `message M { int32 a = 1; }`,
			reader: p3 + `message M { int32 a = 1; }`,
		},
		{
			name:   "field added and removed",
			writer: p3 + `message M { int32 a = 1; }`,
			reader: p3 + `message M { int32 a = 1; string b = 2; }`,
		},
		{
			name:   "field renamed",
			writer: p3 + `message M { int32 a = 1; }`,
			reader: p3 + `message M { int32 z = 1; }`,
		},
		{
			name:     "package changed",
			writer:   p3 + `message M { int32 a = 1; }`,
			reader:   `syntax = "proto3"; package q; message M { int32 a = 1; }`,
			backward: []string{"PACKAGE_CHANGED #/"},
			forward:  []string{"PACKAGE_CHANGED #/"},
		},
		{
			name:     "message removed",
			writer:   p3 + `message M { int32 a = 1; } message N {}`,
			reader:   p3 + `message M { int32 a = 1; }`,
			backward: []string{"MESSAGE_REMOVED #/N"},
		},
		{
			name:     "nested message removed",
			writer:   p3 + `message M { message In {} }`,
			reader:   p3 + `message M {}`,
			backward: []string{"MESSAGE_REMOVED #/M/In"},
		},
		{
			name:   "message moved",
			writer: p3 + `message M {} message N {}`,
			reader: p3 + `message N {} message M {}`,
		},
		{
			name:     "scalar to message",
			writer:   p3 + `message M { int32 a = 1; } message N {}`,
			reader:   p3 + `message M { N a = 1; } message N {}`,
			backward: []string{"FIELD_KIND_CHANGED #/M/1"},
			forward:  []string{"FIELD_KIND_CHANGED #/M/1"},
		},
		{
			name:     "scalar to map",
			writer:   p3 + `message M { int32 a = 1; }`,
			reader:   p3 + `message M { map<string, int32> a = 1; }`,
			backward: []string{"FIELD_KIND_CHANGED #/M/1"},
			forward:  []string{"FIELD_KIND_CHANGED #/M/1"},
		},
		{
			name:     "int32 to string",
			writer:   p3 + `message M { int32 a = 1; }`,
			reader:   p3 + `message M { string a = 1; }`,
			backward: []string{"FIELD_SCALAR_KIND_CHANGED #/M/1"},
			forward:  []string{"FIELD_SCALAR_KIND_CHANGED #/M/1"},
		},
		{
			name:     "int32 to sint32",
			writer:   p3 + `message M { int32 a = 1; }`,
			reader:   p3 + `message M { sint32 a = 1; }`,
			backward: []string{"FIELD_SCALAR_KIND_CHANGED #/M/1"},
			forward:  []string{"FIELD_SCALAR_KIND_CHANGED #/M/1"},
		},
		{
			name:     "fixed32 to fixed64",
			writer:   p3 + `message M { fixed32 a = 1; }`,
			reader:   p3 + `message M { fixed64 a = 1; }`,
			backward: []string{"FIELD_SCALAR_KIND_CHANGED #/M/1"},
			forward:  []string{"FIELD_SCALAR_KIND_CHANGED #/M/1"},
		},
		{
			name:     "float to double",
			writer:   p3 + `message M { float a = 1; }`,
			reader:   p3 + `message M { double a = 1; }`,
			backward: []string{"FIELD_SCALAR_KIND_CHANGED #/M/1"},
			forward:  []string{"FIELD_SCALAR_KIND_CHANGED #/M/1"},
		},
		{
			name:   "varint group",
			writer: p3 + `message M { int32 a = 1; int64 b = 2; uint32 c = 3; uint64 d = 4; bool e = 5; E f = 6; } enum E { Z = 0; }`,
			reader: p3 + `message M { uint64 a = 1; bool b = 2; int64 c = 3; E d = 4; int32 e = 5; uint32 f = 6; } enum E { Z = 0; }`,
		},
		{
			name:   "other wire groups",
			writer: p3 + `message M { sint32 a = 1; string b = 2; fixed32 c = 3; fixed64 d = 4; }`,
			reader: p3 + `message M { sint64 a = 1; bytes b = 2; sfixed32 c = 3; sfixed64 d = 4; }`,
		},
		{
			name:     "message type renamed",
			writer:   p3 + `message M { A a = 1; } message A {} message B {}`,
			reader:   p3 + `message M { B a = 1; } message A {} message B {}`,
			backward: []string{"FIELD_NAMED_TYPE_CHANGED #/M/1"},
			forward:  []string{"FIELD_NAMED_TYPE_CHANGED #/M/1"},
		},
		{
			name:     "named type's content changed",
			writer:   p3 + `message M { A a = 1; } message A { int32 x = 1; }`,
			reader:   p3 + `message M { A a = 1; } message A { string x = 1; }`,
			backward: []string{"FIELD_NAMED_TYPE_CHANGED #/M/1", "FIELD_SCALAR_KIND_CHANGED #/A/1"},
			forward:  []string{"FIELD_NAMED_TYPE_CHANGED #/M/1", "FIELD_SCALAR_KIND_CHANGED #/A/1"},
		},
		{
			name:     "referenced type's content changed",
			writer:   p3 + `import "r.proto"; message M { r.A a = 1; }`,
			reader:   p3 + `import "r2.proto"; message M { r.A a = 1; }`,
			refs:     schemareg.Resolved{"r.proto": `syntax = "proto3"; package r; message A { int32 x = 1; }`, "r2.proto": `syntax = "proto3"; package r; message A { double x = 1; }`},
			backward: []string{"FIELD_NAMED_TYPE_CHANGED #/M/1", "FIELD_SCALAR_KIND_CHANGED #/A/1"},
			forward:  []string{"FIELD_NAMED_TYPE_CHANGED #/M/1", "FIELD_SCALAR_KIND_CHANGED #/A/1"},
		},
		{
			name:   "recursive type",
			writer: p3 + `message Node { Node next = 1; int32 v = 2; }`,
			reader: p3 + `message Node { Node next = 1; int32 v = 2; string tag = 3; }`,
		},
		{
			name:     "map value kind changed",
			writer:   p3 + `message M { map<string, int32> m = 1; }`,
			reader:   p3 + `message M { map<string, string> m = 1; }`,
			backward: []string{"FIELD_SCALAR_KIND_CHANGED #/M/1"},
			forward:  []string{"FIELD_SCALAR_KIND_CHANGED #/M/1"},
		},
		{
			name:   "map key in the varint group",
			writer: p3 + `message M { map<int32, string> m = 1; }`,
			reader: p3 + `message M { map<int64, bytes> m = 1; }`,
		},
		{
			name:     "numeric label changed",
			writer:   `syntax = "proto2"; package p; message M { optional int32 a = 1; }`,
			reader:   `syntax = "proto2"; package p; message M { repeated int32 a = 1; }`,
			backward: []string{"FIELD_NUMERIC_LABEL_CHANGED #/M/1"},
			forward:  []string{"FIELD_NUMERIC_LABEL_CHANGED #/M/1"},
		},
		{
			name:   "string label changed",
			writer: `syntax = "proto2"; package p; message M { optional string a = 1; }`,
			reader: `syntax = "proto2"; package p; message M { repeated string a = 1; }`,
		},
		{
			// Confluent's parser leaves a proto3 singular field without
			// a label, and an unset label compares equal to any.
			name:   "proto3 singular to repeated",
			writer: p3 + `message M { int32 a = 1; }`,
			reader: p3 + `message M { repeated int32 a = 1; }`,
		},
		{
			name:     "required field",
			writer:   `syntax = "proto2"; package p; message M { optional int32 a = 1; }`,
			reader:   `syntax = "proto2"; package p; message M { optional int32 a = 1; required int32 b = 2; }`,
			backward: []string{"REQUIRED_FIELD_ADDED #/M/2"},
			forward:  []string{"REQUIRED_FIELD_REMOVED #/M/2"},
		},
		{
			name:   "oneof field added",
			writer: p3 + `message M { oneof o { int32 a = 1; } }`,
			reader: p3 + `message M { oneof o { int32 a = 1; string b = 2; } }`,
			// The writer's data never sets b: reading it loses nothing.
			forward: []string{"ONEOF_FIELD_REMOVED #/M/o/2"},
		},
		{
			name:   "oneof deleted whole",
			writer: p3 + `message M { int32 x = 9; oneof o { int32 a = 1; string b = 2; } }`,
			reader: p3 + `message M { int32 x = 9; }`,
		},
		{
			name:     "one field moved into a new oneof",
			writer:   p3 + `message M { int32 a = 1; }`,
			reader:   p3 + `message M { oneof o { int32 a = 1; } }`,
			backward: nil,
		},
		{
			name:     "two fields moved into a oneof",
			writer:   p3 + `message M { int32 a = 1; string b = 2; }`,
			reader:   p3 + `message M { oneof o { int32 a = 1; string b = 2; } }`,
			backward: []string{"MULTIPLE_FIELDS_MOVED_TO_ONEOF #/M/o"},
		},
		{
			name:     "field moved into an existing oneof",
			writer:   p3 + `message M { int32 a = 1; oneof o { string b = 2; } }`,
			reader:   p3 + `message M { oneof o { int32 a = 1; string b = 2; } }`,
			backward: []string{"FIELD_MOVED_TO_EXISTING_ONEOF #/M/o"},
		},
		{
			name:   "oneof renamed",
			writer: p3 + `message M { oneof o { int32 a = 1; string b = 2; } }`,
			reader: p3 + `message M { oneof q { int32 a = 1; string b = 2; } }`,
		},
		{
			name:     "oneof field type changed",
			writer:   p3 + `message M { oneof o { int32 a = 1; string b = 2; } }`,
			reader:   p3 + `message M { oneof o { int32 a = 1; double b = 2; } }`,
			backward: []string{"FIELD_SCALAR_KIND_CHANGED #/M/o/2"},
			forward:  []string{"FIELD_SCALAR_KIND_CHANGED #/M/o/2"},
		},
		{
			name:   "proto3 optional is no oneof",
			writer: p3 + `message M { optional int32 a = 1; optional string b = 2; }`,
			reader: p3 + `message M { int32 a = 1; string b = 2; }`,
		},
		{
			name:   "enum constants and enums",
			writer: p3 + `message M { E e = 1; } enum E { Z = 0; A = 1; B = 2; } enum Gone { G = 0; }`,
			reader: p3 + `message M { E e = 1; } enum E { Z = 0; AA = 1; C = 3; }`,
		},
		{
			name:   "well-known type",
			writer: p3 + `import "google/protobuf/timestamp.proto"; message M { google.protobuf.Timestamp t = 1; }`,
			reader: p3 + `import "google/protobuf/timestamp.proto"; message M { google.protobuf.Timestamp t = 1; int32 x = 2; }`,
		},
		{
			name:     "well-known type swapped",
			writer:   p3 + `import "google/protobuf/timestamp.proto"; message M { google.protobuf.Timestamp t = 1; }`,
			reader:   p3 + `import "google/protobuf/duration.proto"; message M { google.protobuf.Duration t = 1; }`,
			backward: []string{"FIELD_NAMED_TYPE_CHANGED #/M/1"},
			forward:  []string{"FIELD_NAMED_TYPE_CHANGED #/M/1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, r := mustParse(t, tc.writer, tc.refs), mustParse(t, tc.reader, tc.refs)
			if got := incompatible(t, r, w); !slices.Equal(got, sorted(tc.backward)) {
				t.Errorf("backward Compatible(reader, writer) = %q, want %q", got, sorted(tc.backward))
			}
			if got := incompatible(t, w, r); !slices.Equal(got, sorted(tc.forward)) {
				t.Errorf("forward Compatible(writer, reader) = %q, want %q", got, sorted(tc.forward))
			}
		})
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestCompatibleDifferences checks the compatible difference types too,
// which Compatible leaves out of its answer.
func TestCompatibleDifferences(t *testing.T) {
	w := mustParse(t, p3+`message M { int32 a = 1; oneof o { int32 b = 2; } } message N {} enum E { Z = 0; A = 1; }`, nil)
	r := mustParse(t, p3+`message N {} message M { int32 z = 1; int32 b = 2; string c = 3; } enum E { Z = 0; B = 1; C = 2; } enum F { F0 = 0; }`, nil)
	var got []string
	for _, d := range diff(w.file, r.file) {
		got = append(got, string(d.typ)+" "+d.path)
	}
	slices.Sort(got)
	want := sorted([]string{
		"MESSAGE_MOVED #/M",
		"MESSAGE_MOVED #/N",
		"FIELD_NAME_CHANGED #/M/1",
		"ONEOF_REMOVED #/M/o",
		"ONEOF_FIELD_MOVED_TO_TOP_LEVEL #/M/2",
		"FIELD_ADDED #/M/3",
		"ENUM_CONST_CHANGED #/E/1",
		"ENUM_CONST_ADDED #/E/2",
		"ENUM_ADDED #/F",
	})
	if !slices.Equal(got, want) {
		t.Errorf("differences = %q, want %q", got, want)
	}
	for _, d := range diff(w.file, r.file) {
		if !compatibleChanges[d.typ] {
			t.Errorf("%s counted incompatible", d.typ)
		}
	}
}

func TestCompatibleMessage(t *testing.T) {
	w := mustParse(t, p3+`message M { int32 a = 1; }`, nil)
	r := mustParse(t, p3+`message M { string a = 1; }`, nil)
	got := (Format{}).Compatible(r, w)
	want := []string{`{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at path '#/M/1' in the reader schema does not match its kind in the writer schema"}`}
	if !slices.Equal(got, want) {
		t.Errorf("Compatible = %q, want %q", got, want)
	}
}

// TestCompatibleOnce: a message named by many fields is reported once
// per difference, not once per field that names it.
func TestCompatibleOnce(t *testing.T) {
	w := mustParse(t, p3+`message M { A a = 1; A b = 2; } message A { int32 x = 1; }`, nil)
	r := mustParse(t, p3+`message M { A a = 1; A b = 2; } message A { string x = 1; }`, nil)
	got := incompatible(t, r, w)
	want := []string{"FIELD_NAMED_TYPE_CHANGED #/M/1", "FIELD_NAMED_TYPE_CHANGED #/M/2", "FIELD_SCALAR_KIND_CHANGED #/A/1"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

type otherSchema struct{}

func (otherSchema) Type() schemareg.Type  { return schemareg.TypeAvro }
func (otherSchema) Canonical(bool) string { return "" }

func TestCompatibleOtherType(t *testing.T) {
	s := mustParse(t, p3+`message M {}`, nil)
	if got := (Format{}).Compatible(s, otherSchema{}); len(got) != 1 {
		t.Errorf("Compatible with an Avro schema = %q, want one message", got)
	}
}
