package protoschema

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
		t.Fatalf("Parse: %v\n%s", err, text)
	}
	return s.(*Schema)
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		refs schemareg.Resolved
		// message is a message the file must have, by full name.
		message string
	}{
		{
			name:    "proto3",
			text:    `syntax = "proto3"; package a; message M { string s = 1; }`,
			message: "a.M",
		},
		{
			name:    "proto2 without syntax",
			text:    `message M { optional int32 x = 1; }`,
			message: "M",
		},
		{
			name:    "editions",
			text:    `edition = "2023"; package e; message M { int32 x = 1; }`,
			message: "e.M",
		},
		{
			name: "well-known imports",
			text: `syntax = "proto3";
				import "google/protobuf/timestamp.proto";
				import "google/protobuf/any.proto";
				import "google/protobuf/wrappers.proto";
				message M { google.protobuf.Timestamp at = 1; google.protobuf.Any a = 2; google.protobuf.StringValue s = 3; }`,
			message: "M",
		},
		{
			name: "reference",
			text: `syntax = "proto3"; package a; import "b.proto"; message M { b.N n = 1; }`,
			refs: schemareg.Resolved{
				"b.proto": `syntax = "proto3"; package b; message N { int32 x = 1; }`,
			},
			message: "a.M",
		},
		{
			name: "transitive references",
			text: `syntax = "proto3"; import "b.proto"; message M { N n = 1; O o = 2; }`,
			refs: schemareg.Resolved{
				"b.proto": `syntax = "proto3"; import public "c.proto"; message N { O o = 1; }`,
				"c.proto": `syntax = "proto3"; import "google/protobuf/duration.proto"; message O { google.protobuf.Duration d = 1; }`,
			},
			message: "M",
		},
		{
			name: "a reference named like the root file",
			text: `syntax = "proto3"; import "schema.proto"; message M { N n = 1; }`,
			refs: schemareg.Resolved{
				"schema.proto": `syntax = "proto3"; message N {}`,
			},
			message: "M",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, tc.text, tc.refs)
			if s.Type() != schemareg.TypeProtobuf {
				t.Errorf("Type = %q", s.Type())
			}
			if s.Descriptor().Messages().ByName("M") == nil {
				t.Errorf("no message M in %s", s.Descriptor().Path())
			}
			var found bool
			for i := range s.Descriptor().Messages().Len() {
				found = found || string(s.Descriptor().Messages().Get(i).FullName()) == tc.message
			}
			if !found {
				t.Errorf("no message %s", tc.message)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		refs schemareg.Resolved
		want string // in the error's text: the compiler's reason
	}{
		{"syntax error", `syntax = "proto3"; message M { string s = ; }`, nil, "syntax error"},
		{"unknown type", `syntax = "proto3"; message M { Nope n = 1; }`, nil, "unknown type Nope"},
		{"missing import", `syntax = "proto3"; import "b.proto"; message M {}`, nil, `"b.proto"`},
		{"broken reference", `syntax = "proto3"; import "b.proto"; message M {}`,
			schemareg.Resolved{"b.proto": `syntax = "proto3"; message N { int32 x = 1`}, "b.proto"},
		{"duplicate number", `syntax = "proto3"; message M { int32 a = 1; int32 b = 1; }`, nil, "same tag 1"},
		{"proto3 required", `syntax = "proto3"; message M { required int32 a = 1; }`, nil, "required"},
		{"bad syntax", `syntax = "proto4"; message M {}`, nil, "syntax value"},
		{"unknown well-known", `syntax = "proto3"; import "google/protobuf/nope.proto"; message M {}`, nil, "nope.proto"},
		{"import cycle", `syntax = "proto3"; import "b.proto"; message M {}`,
			schemareg.Resolved{"b.proto": `syntax = "proto3"; import "schema.proto";`}, "cycle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Format{}.Parse(tc.text, tc.refs)
			if !errors.Is(err, schemareg.ErrInvalidSchema) {
				t.Fatalf("err = %v, want ErrInvalidSchema", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestFormatType(t *testing.T) {
	if got := (Format{}).Type(); got != schemareg.TypeProtobuf {
		t.Errorf("Type = %q", got)
	}
}

// FuzzParse: any text parses or is ErrInvalidSchema, never a panic,
// and a schema that parses prints a canonical text that parses back
// to itself.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`syntax = "proto3"; package a; message M { string s = 1; map<int32, M> m = 2; oneof o { bytes b = 3; } }`,
		`syntax = "proto2"; message M { optional int32 x = 1 [default = 7]; optional group G = 2 { optional string s = 1; } extensions 10 to max; }`,
		`edition = "2023"; message M { int32 x = 1; } enum E { option features.enum_type = CLOSED; Z = 0; }`,
		`syntax = "proto3"; import "google/protobuf/any.proto"; message M { google.protobuf.Any a = 1; reserved 5 to 9; reserved "x"; }`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Format{}.Parse(text, nil)
		if err != nil {
			if !errors.Is(err, schemareg.ErrInvalidSchema) {
				t.Fatalf("err = %v, not ErrInvalidSchema", err)
			}
			return
		}
		for _, norm := range []bool{false, true} {
			c := s.Canonical(norm)
			again, err := Format{}.Parse(c, nil)
			if err != nil {
				t.Fatalf("canonical text does not parse: %v\n%s", err, c)
			}
			if got := again.Canonical(norm); got != c {
				t.Fatalf("normalize=%v: canonical text changed on reparse:\n%s\n---\n%s", norm, c, got)
			}
		}
	})
}
