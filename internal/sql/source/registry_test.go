package source_test

import (
	"context"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/schemareg"
	"github.com/strandkafka/strand/internal/schemareg/avroschema"
	"github.com/strandkafka/strand/internal/schemareg/jsonschema"
	"github.com/strandkafka/strand/internal/schemareg/protoschema"
	"github.com/strandkafka/strand/internal/sql/source"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

const orderAvro = `{"type": "record", "name": "Order", "namespace": "shop", "fields": [
	{"name": "id", "type": "long"},
	{"name": "qty", "type": "int"},
	{"name": "note", "type": ["null", "string"]},
	{"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
	{"name": "weight", "type": "double"},
	{"name": "ratio", "type": "float"},
	{"name": "paid", "type": "boolean"},
	{"name": "blob", "type": "bytes"},
	{"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
	{"name": "day", "type": {"type": "int", "logicalType": "date"}},
	{"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
	{"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [{"name": "sku", "type": "string"}, {"name": "n", "type": "int"}]}}},
	{"name": "tags", "type": {"type": "map", "values": "long"}}
]}`

const orderProto = `syntax = "proto3";
package shop;
message Order {
  int64 id = 1;
  int32 qty = 2;
  optional string note = 3;
  uint64 big = 4;
  double weight = 5;
  float ratio = 6;
  bool paid = 7;
  bytes blob = 8;
  string at = 9;
  enum State { NEW = 0; PAID = 1; }
  State state = 10;
  message Line { string sku = 1; int32 n = 2; }
  repeated Line lines = 11;
  map<string, int64> tags = 12;
  Line first = 13;
}
`

// registry is an in-memory registry with the order schemas.
type registry struct {
	db      *metatest.DB
	reg     *schemareg.Registry
	schemas *source.Schemas
}

func newRegistry(t testing.TB) *registry {
	t.Helper()
	db := metatest.New(nil)
	db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel6}}})
	reg := schemareg.New(db, avroschema.Format{}, protoschema.Format{}, jsonschema.Format{})
	return &registry{db: db, reg: reg, schemas: source.NewSchemas(db, reg, 0, 0)}
}

func (r *registry) register(t testing.TB, subject string, typ schemareg.Type, text string) int {
	t.Helper()
	id, err := r.reg.Register(context.Background(), subject, schemareg.RegisterRequest{Schema: text, SchemaType: typ}, false)
	if err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
	return int(id)
}

// avroEncode is v encoded by hamba/avro and framed by franz-go's Serde
// under id: what a producer using the registry writes.
func avroEncode(t testing.TB, schema string, id int, v any) []byte {
	t.Helper()
	s := avro.MustParse(schema)
	serde := sr.NewSerde()
	serde.Register(id, map[string]any{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(s, v) }))
	b, err := serde.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// orderCols are columns over both order schemas' fields, and asJSON
// is the same order as JSON, which PostgreSQL's jsonb_to_record reads
// into the same columns: the oracle for what a field's value becomes.
const orderCols = "id int8, qty int2, note text, price numeric, weight float8, ratio float4, paid bool, blob bytea, at timestamptz, day date, state text, lines jsonb, tags jsonb, missing text"

func TestDecodeAvroAgainstPostgres(t *testing.T) {
	r := newRegistry(t)
	id := r.register(t, "orders-value", schemareg.TypeAvro, orderAvro)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2024, 3, 4, 5, 6, 7, 891_000_000, time.UTC)
	for _, c := range []struct {
		name  string
		cols  string
		value map[string]any
		json  string
	}{
		{"all", orderCols, map[string]any{"id": int64(1) << 40, "qty": 7, "note": map[string]any{"string": "fragile"},
			"price": big.NewRat(12345, 100), "weight": 2.5, "ratio": float32(0.25), "paid": true, "blob": []byte("\x00\x01"),
			"at": at, "day": time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), "state": "PAID",
			"lines": []any{map[string]any{"sku": "a", "n": 1}, map[string]any{"sku": "b", "n": 2}}, "tags": map[string]any{"x": int64(1)}},
			`{"id": 1099511627776, "qty": 7, "note": "fragile", "price": 123.45, "weight": 2.5, "ratio": 0.25, "paid": true, "blob": "\\x0001",
			  "at": "2024-03-04T05:06:07.891Z", "day": "2024-02-29", "state": "PAID", "lines": [{"sku": "a", "n": 1}, {"sku": "b", "n": 2}], "tags": {"x": 1}}`},
		{"null union and strings into numbers", "id text, qty int4, note text, weight numeric, paid text", map[string]any{"id": int64(-5), "qty": 70000, "note": nil,
			"price": big.NewRat(0, 1), "weight": 0.1, "ratio": float32(0), "paid": false, "blob": []byte{}, "at": at, "day": at.Truncate(24 * time.Hour),
			"state": "NEW", "lines": []any{}, "tags": map[string]any{}},
			`{"id": -5, "qty": 70000, "note": null, "weight": 0.1, "paid": false}`},
		{"out of range", "qty int2", map[string]any{"id": int64(1), "qty": 70000, "note": nil, "price": big.NewRat(1, 1), "weight": 0.0, "ratio": float32(0),
			"paid": false, "blob": []byte{}, "at": at, "day": at, "state": "NEW", "lines": []any{}, "tags": map[string]any{}},
			`{"qty": 70000}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			def := defOf(t, "avro", c.cols)
			dec, err := source.NewDecoder(def, r.schemas)
			if err != nil {
				t.Fatal(err)
			}
			row, gotErr := dec.Decode(ctx, &kgo.Record{Value: avroEncode(t, orderAvro, id, c.value)})
			want, wantCode := pgRecord(t, conn, def, c.json)
			checkAgainst(t, def, row, gotErr, want, wantCode)
		})
	}
}

// checkAgainst compares a decoded row (or its bad record's SQLSTATE)
// with PostgreSQL's answer.
func checkAgainst(t *testing.T, def *source.Def, row []any, gotErr error, want []*string, wantCode string) {
	t.Helper()
	var br *source.BadRecord
	switch {
	case wantCode != "" && (!errors.As(gotErr, &br) || br.SQLState() != wantCode):
		t.Fatalf("PostgreSQL fails with %s; got %v (row %v)", wantCode, gotErr, row)
	case wantCode == "" && gotErr != nil:
		t.Fatalf("PostgreSQL reads %s; got %v", show(want), gotErr)
	case wantCode == "" && show(texts(def, row)) != show(want):
		t.Fatalf("got  %s\nwant %s", show(texts(def, row)), show(want))
	}
}

func protoOrder(t testing.TB, set func(m *dynamicpb.Message, md protoreflect.MessageDescriptor)) (*dynamicpb.Message, protoreflect.MessageDescriptor) {
	t.Helper()
	s, err := protoschema.Format{}.Parse(orderProto, nil)
	if err != nil {
		t.Fatal(err)
	}
	md := s.(*protoschema.Schema).Descriptor().Messages().Get(0)
	m := dynamicpb.NewMessage(md)
	set(m, md)
	return m, md
}

func protoEncode(t testing.TB, id int, m proto.Message, index ...int) []byte {
	t.Helper()
	serde := sr.NewSerde()
	serde.Register(id, m, sr.EncodeFn(func(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }), sr.Index(index...))
	b, err := serde.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeProtobufAgainstPostgres(t *testing.T) {
	r := newRegistry(t)
	id := r.register(t, "orders-value", schemareg.TypeProtobuf, orderProto)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	f := func(md protoreflect.MessageDescriptor, name string) protoreflect.FieldDescriptor {
		return md.Fields().ByName(protoreflect.Name(name))
	}
	full, _ := protoOrder(t, func(m *dynamicpb.Message, md protoreflect.MessageDescriptor) {
		m.Set(f(md, "id"), protoreflect.ValueOfInt64(-1<<40))
		m.Set(f(md, "qty"), protoreflect.ValueOfInt32(3))
		m.Set(f(md, "note"), protoreflect.ValueOfString("hi"))
		m.Set(f(md, "big"), protoreflect.ValueOfUint64(1<<63+5))
		m.Set(f(md, "weight"), protoreflect.ValueOfFloat64(1e-7))
		m.Set(f(md, "ratio"), protoreflect.ValueOfFloat32(3.25))
		m.Set(f(md, "paid"), protoreflect.ValueOfBool(true))
		m.Set(f(md, "blob"), protoreflect.ValueOfBytes([]byte{0xde, 0xad}))
		m.Set(f(md, "at"), protoreflect.ValueOfString("2024-01-02T03:04:05.5Z"))
		m.Set(f(md, "state"), protoreflect.ValueOfEnum(1))
		lines := m.Mutable(f(md, "lines")).List()
		line := dynamicpb.NewMessage(md.Messages().ByName("Line"))
		line.Set(line.Descriptor().Fields().ByName("sku"), protoreflect.ValueOfString("a"))
		line.Set(line.Descriptor().Fields().ByName("n"), protoreflect.ValueOfInt32(2))
		lines.Append(protoreflect.ValueOfMessage(line))
		m.Mutable(f(md, "tags")).Map().Set(protoreflect.ValueOfString("k").MapKey(), protoreflect.ValueOfInt64(9))
		m.Set(f(md, "first"), protoreflect.ValueOfMessage(line))
	})
	empty, _ := protoOrder(t, func(*dynamicpb.Message, protoreflect.MessageDescriptor) {})
	for _, c := range []struct {
		name string
		cols string
		msg  proto.Message
		json string
	}{
		// protojson writes 64-bit integers as strings; jsonb_to_record
		// reads them into bigint and numeric alike.
		{"all", "id int8, qty int4, note text, big numeric, weight float8, ratio float4, paid bool, blob bytea, at timestamptz, state text, lines jsonb, tags jsonb, first jsonb, missing int4", full,
			`{"id": -1099511627776, "qty": 3, "note": "hi", "big": 9223372036854775813, "weight": 1e-7, "ratio": 3.25, "paid": true, "blob": "\\xdead",
			  "at": "2024-01-02T03:04:05.5Z", "state": "PAID", "lines": [{"sku": "a", "n": 2}], "tags": {"k": "9"}, "first": {"sku": "a", "n": 2}}`},
		// proto3: scalars without presence read as their defaults, an
		// unset optional and an unset message as NULL.
		{"defaults", "id int8, note text, paid bool, state text, first jsonb, lines jsonb", empty,
			`{"id": 0, "note": null, "paid": false, "state": "NEW", "first": null, "lines": []}`},
		{"out of range", "big int8", full, `{"big": 9223372036854775813}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			def := defOf(t, "protobuf", c.cols)
			dec, err := source.NewDecoder(def, r.schemas)
			if err != nil {
				t.Fatal(err)
			}
			row, gotErr := dec.Decode(ctx, &kgo.Record{Value: protoEncode(t, id, c.msg, 0)})
			want, wantCode := pgRecord(t, conn, def, c.json)
			checkAgainst(t, def, row, gotErr, want, wantCode)
		})
	}
}

// TestDecodeRegistryBadRecords: values the registry formats cannot
// read are bad records, with their reason.
func TestDecodeRegistryBadRecords(t *testing.T) {
	r := newRegistry(t)
	avroID := r.register(t, "orders-value", schemareg.TypeAvro, orderAvro)
	protoID := r.register(t, "other-value", schemareg.TypeProtobuf, orderProto)
	ctx := context.Background()
	good := avroEncode(t, orderAvro, avroID, map[string]any{"id": int64(1), "qty": 1, "note": nil, "price": big.NewRat(1, 1),
		"weight": 1.0, "ratio": float32(1), "paid": true, "blob": []byte{}, "at": time.Unix(0, 0), "day": time.Unix(0, 0),
		"state": "NEW", "lines": []any{}, "tags": map[string]any{}})
	msg, _ := protoOrder(t, func(*dynamicpb.Message, protoreflect.MessageDescriptor) {})
	unknown := append([]byte{0, 0, 0, 0x30, 0x39}, good[5:]...) // id 12345
	for _, c := range []struct {
		name   string
		format string
		value  []byte
		reason source.Reason
	}{
		{"no magic byte", "avro", append([]byte{1}, good[1:]...), source.ReasonWireFormat},
		{"too short", "avro", []byte{0, 0}, source.ReasonWireFormat},
		{"unknown id", "avro", unknown, source.ReasonUnknownSchema},
		{"truncated", "avro", good[:len(good)-3], source.ReasonPayload},
		{"trailing bytes", "avro", append(append([]byte{}, good...), 1, 2), source.ReasonPayload},
		{"protobuf id in an avro source", "avro", protoEncode(t, protoID, msg, 0), source.ReasonUnknownSchema},
		{"no such message", "protobuf", protoEncode(t, protoID, msg, 5), source.ReasonPayload},
		{"not protobuf", "protobuf", append(protoEncode(t, protoID, msg, 0), 0xff), source.ReasonPayload},
	} {
		t.Run(c.name, func(t *testing.T) {
			dec, err := source.NewDecoder(defOf(t, c.format, "id int8"), r.schemas)
			if err != nil {
				t.Fatal(err)
			}
			row, err := dec.Decode(ctx, &kgo.Record{Value: c.value})
			var br *source.BadRecord
			if !errors.As(err, &br) || br.Reason != c.reason {
				t.Fatalf("got %v %v, want a bad record for %s", row, err, c.reason)
			}
		})
	}
	if n := r.schemas.Len(); n != 2 {
		t.Fatalf("%d schemas cached, want the 2 registered", n)
	}
}
