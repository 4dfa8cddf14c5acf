package protoschema

import (
	"testing"

	"github.com/strandkafka/strand/internal/schemareg"
)

func TestCanonicalGolden(t *testing.T) {
	s := mustParse(t, `
// An order.
syntax = "proto3";
package shop.v1;

import "google/protobuf/timestamp.proto";
import "google/protobuf/descriptor.proto";

option java_package = "com.shop";

extend google.protobuf.FieldOptions { string tag = 50001; }

message Order {
  reserved 9, 20 to max;
  reserved "old";
  oneof pay { string card = 5; int64 cash = 4; }
  string id = 1 [(tag) = "pk", deprecated = true];
  google.protobuf.Timestamp at = 2;
  map<string, Line> lines = 3;
  optional int64 qty = 6 [json_name = "quantity"];
  repeated Status history = 7;
  message Line { string sku = 1; }
  enum Status { STATUS_UNSPECIFIED = 0; DONE = 2; OPEN = 1; }
}
`, nil)
	const want = `syntax = "proto3";
package shop.v1;

import "google/protobuf/timestamp.proto";
import "google/protobuf/descriptor.proto";

option java_package = "com.shop";

message Order {
  reserved 9;
  reserved 20 to max;
  reserved "old";

  string id = 1 [deprecated = true, (shop.v1.tag) = "pk"];
  .google.protobuf.Timestamp at = 2;
  map<string, .shop.v1.Order.Line> lines = 3;
  optional int64 qty = 6 [json_name = "quantity"];
  repeated .shop.v1.Order.Status history = 7;

  oneof pay {
    string card = 5;
    int64 cash = 4;
  }

  message Line {
    string sku = 1;
  }
  enum Status {
    STATUS_UNSPECIFIED = 0;
    DONE = 2;
    OPEN = 1;
  }
}

extend .google.protobuf.FieldOptions {
  string tag = 50001;
}
`
	if got := s.Canonical(false); got != want {
		t.Errorf("Canonical(false) =\n%s\nwant\n%s", got, want)
	}
	const wantNormalized = `syntax = "proto3";
package shop.v1;

import "google/protobuf/descriptor.proto";
import "google/protobuf/timestamp.proto";

option java_package = "com.shop";

message Order {
  reserved 9;
  reserved 20 to max;
  reserved "old";

  string id = 1 [deprecated = true, (shop.v1.tag) = "pk"];
  .google.protobuf.Timestamp at = 2;
  map<string, .shop.v1.Order.Line> lines = 3;
  optional int64 qty = 6 [json_name = "quantity"];
  repeated .shop.v1.Order.Status history = 7;

  oneof pay {
    int64 cash = 4;
    string card = 5;
  }

  message Line {
    string sku = 1;
  }
  enum Status {
    STATUS_UNSPECIFIED = 0;
    OPEN = 1;
    DONE = 2;
  }
}

extend .google.protobuf.FieldOptions {
  string tag = 50001;
}
`
	if got := s.Canonical(true); got != wantNormalized {
		t.Errorf("Canonical(true) =\n%s\nwant\n%s", got, wantNormalized)
	}
}

// TestCanonicalEqual: schemas that differ only in what the canonical
// text leaves out print the same.
func TestCanonicalEqual(t *testing.T) {
	for _, tc := range []struct {
		name      string
		a, b      string
		normalize bool // equal only when normalized
	}{
		{
			name: "layout and comments",
			a:    `syntax = "proto3"; package p; message M { string s = 1; int32 n = 2; }`,
			b: `// header
syntax   =   "proto3";
package p;
/* a message */
message M {
    string s = 1;   // trailing
    int32 n = 2;
}`,
		},
		{
			name: "type name spelling",
			a:    `syntax = "proto3"; package p.q; message M { N n = 1; } message N {}`,
			b:    `syntax = "proto3"; package p.q; message M { .p.q.N n = 1; } message N {}`,
		},
		{
			name: "option order and spelling",
			a:    `syntax = "proto3"; message M { int32 n = 1 [deprecated = true, json_name = "x"]; }`,
			b:    `syntax = "proto3"; message M { int32 n = 1 [json_name = "x", deprecated = true]; }`,
		},
		{
			name: "json_name equal to the default",
			a:    `syntax = "proto3"; message M { int32 my_n = 1 [json_name = "myN"]; }`,
			b:    `syntax = "proto3"; message M { int32 my_n = 1; }`,
		},
		{
			name: "reserved grouping",
			a:    `syntax = "proto3"; message M { reserved 2, 4 to 5, 3; reserved "a", "b"; }`,
			b:    `syntax = "proto3"; message M { reserved 3; reserved 2; reserved "b"; reserved 4 to 5; reserved "a"; }`,
		},
		{
			name:      "field order",
			a:         `syntax = "proto3"; message M { int32 a = 1; int32 b = 2; }`,
			b:         `syntax = "proto3"; message M { int32 b = 2; int32 a = 1; }`,
			normalize: true,
		},
		{
			name:      "enum value order",
			a:         `syntax = "proto3"; enum E { Z = 0; A = 1; B = 2; }`,
			b:         `syntax = "proto3"; enum E { Z = 0; B = 2; A = 1; }`,
			normalize: true,
		},
		{
			name: "import order",
			a: `syntax = "proto3"; import "google/protobuf/any.proto"; import "google/protobuf/empty.proto";
				message M { google.protobuf.Any a = 1; google.protobuf.Empty e = 2; }`,
			b: `syntax = "proto3"; import "google/protobuf/empty.proto"; import "google/protobuf/any.proto";
				message M { google.protobuf.Any a = 1; google.protobuf.Empty e = 2; }`,
			normalize: true,
		},
		{
			// The descriptor does not record whether proto2 was
			// written; Confluent's non-normalized text does.
			name: "proto2 syntax line",
			a:    `syntax = "proto2"; message M { optional int32 a = 1; }`,
			b:    `message M { optional int32 a = 1; }`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := mustParse(t, tc.a, nil), mustParse(t, tc.b, nil)
			if got, want := a.Canonical(true), b.Canonical(true); got != want {
				t.Errorf("normalized texts differ:\n%s\n---\n%s", got, want)
			}
			eq := a.Canonical(false) == b.Canonical(false)
			if eq == tc.normalize {
				t.Errorf("non-normalized texts equal = %v, want %v:\n%s\n---\n%s",
					eq, !tc.normalize, a.Canonical(false), b.Canonical(false))
			}
		})
	}
}

// TestCanonicalDistinct: a change that matters on the wire or to the
// schema's meaning gives another text, normalized or not.
func TestCanonicalDistinct(t *testing.T) {
	base := `syntax = "proto3"; package p; message M { int32 a = 1; string s = 2; } message N {}`
	for _, tc := range []struct{ name, other string }{
		{"field number", `syntax = "proto3"; package p; message M { int32 a = 3; string s = 2; } message N {}`},
		{"field name", `syntax = "proto3"; package p; message M { int32 b = 1; string s = 2; } message N {}`},
		{"field type", `syntax = "proto3"; package p; message M { int64 a = 1; string s = 2; } message N {}`},
		{"label", `syntax = "proto3"; package p; message M { repeated int32 a = 1; string s = 2; } message N {}`},
		{"optional", `syntax = "proto3"; package p; message M { optional int32 a = 1; string s = 2; } message N {}`},
		{"package", `syntax = "proto3"; package q; message M { int32 a = 1; string s = 2; } message N {}`},
		{"message order", `syntax = "proto3"; package p; message N {} message M { int32 a = 1; string s = 2; }`},
		{"oneof", `syntax = "proto3"; package p; message M { oneof o { int32 a = 1; string s = 2; } } message N {}`},
		{"option", `syntax = "proto3"; package p; message M { int32 a = 1 [deprecated = true]; string s = 2; } message N {}`},
		{"syntax", `syntax = "proto2"; package p; message M { optional int32 a = 1; optional string s = 2; } message N {}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := mustParse(t, base, nil), mustParse(t, tc.other, nil)
			for _, norm := range []bool{false, true} {
				if a.Canonical(norm) == b.Canonical(norm) {
					t.Errorf("normalize=%v: same text for different schemas:\n%s", norm, a.Canonical(norm))
				}
			}
		})
	}
}

// TestCanonicalRoundTrip: the canonical text is a schema that parses
// to the same canonical text, so what the registry stores and returns
// is what it would store again.
func TestCanonicalRoundTrip(t *testing.T) {
	refs := schemareg.Resolved{
		"other.proto": `syntax = "proto2"; package other;
			message Cash { required int32 cents = 1 [default = -5]; optional string note = 2 [default = "a\"b\n"];
			  optional group Coin = 3 { optional int32 x = 1; } extensions 100 to 199; }`,
		"opts.proto": `syntax = "proto3"; package opts; import "google/protobuf/descriptor.proto";
			message Meta { int32 a = 1; repeated string b = 2; }
			extend google.protobuf.FieldOptions { Meta meta = 50002; repeated int32 nums = 50003; }
			extend google.protobuf.MessageOptions { bool flag = 50004; }`,
	}
	for _, text := range []string{
		`syntax = "proto3"; package a; import "other.proto"; import "opts.proto";
		 message M {
		   option (opts.flag) = true;
		   other.Cash cash = 1 [(opts.meta) = {a: 3, b: ["x", "y\t"]}, (opts.nums) = 1, (opts.nums) = 2];
		   map<int32, other.Cash> by_id = 2;
		   oneof o { string s = 3; bytes b = 4; }
		   optional double d = 5;
		   message Inner { enum E { option allow_alias = true; Z = 0; A = 1; B = 1; reserved 7 to max; } E e = 1; }
		   Inner inner = 6;
		 }
		 enum Top { TOP_UNSPECIFIED = 0; TOP_ONE = 1 [deprecated = true]; }
		 service S { rpc Get (M) returns (stream M.Inner); rpc Put (stream M) returns (M) { option deprecated = true; } }`,
		refs["other.proto"],
		refs["opts.proto"],
		`syntax = "proto2"; package b; import "other.proto";
		 extend other.Cash { optional string tag = 100; }
		 message P { extend other.Cash { optional int32 n = 101; } optional float f = 1 [default = inf]; optional bytes raw = 2 [default = "\001\377"]; }`,
		`edition = "2023"; package ed; message M { int32 x = 1; repeated int32 xs = 2; M next = 3; }`,
	} {
		s := mustParse(t, text, refs)
		for _, norm := range []bool{false, true} {
			first := s.Canonical(norm)
			again := mustParse(t, first, refs)
			if got := again.Canonical(norm); got != first {
				t.Errorf("normalize=%v: canonical text changed on reparse:\n%s\n---\n%s", norm, first, got)
			}
		}
	}
}
