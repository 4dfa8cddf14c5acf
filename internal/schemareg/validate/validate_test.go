package validate_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/schemareg"
	"github.com/strandkafka/strand/internal/schemareg/avroschema"
	"github.com/strandkafka/strand/internal/schemareg/jsonschema"
	"github.com/strandkafka/strand/internal/schemareg/protoschema"
	"github.com/strandkafka/strand/internal/schemareg/validate"
	"github.com/strandkafka/strand/internal/topicconfig"
)

const (
	orderAvro  = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"note","type":"string"}]}`
	orderProto = "syntax = \"proto3\";\npackage shop;\nmessage Order { int64 id = 1; string note = 2; message Line { int32 qty = 1; } }\n"
	orderJSON  = `{"title":"shop.Order","type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`
)

// fixture is a registry over in-memory metadata with schemas
// registered, and franz-go's Serde (the client's encoder) for them.
type fixture struct {
	db    *metatest.DB
	reg   *schemareg.Registry
	v     *validate.Validator
	serde *sr.Serde
	ids   map[string]int // by subject
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	db := metatest.New(nil)
	db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel6}}})
	reg := schemareg.New(db, avroschema.Format{}, protoschema.Format{}, jsonschema.Format{})
	return &fixture{db: db, reg: reg, v: validate.New(db, reg, 0, 0), serde: sr.NewSerde(), ids: map[string]int{}}
}

func (f *fixture) register(t testing.TB, subject string, typ schemareg.Type, text string) int {
	t.Helper()
	id, err := f.reg.Register(context.Background(), subject, schemareg.RegisterRequest{Schema: text, SchemaType: typ}, false)
	if err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
	f.ids[subject] = int(id)
	return int(id)
}

// avroOrder is an Order encoded with hamba/avro and framed by sr's
// Confluent header as schema id.
func avroOrder(t testing.TB, id int, order map[string]any) []byte {
	t.Helper()
	s := avro.MustParse(orderAvro)
	serde := sr.NewSerde()
	serde.Register(id, map[string]any{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(s, v) }))
	b, err := serde.Encode(order)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// protoOrder is a shop.Order (index [0]) or shop.Order.Line ([0, 0]),
// marshalled by protobuf-go and framed by sr.
func protoOrder(t testing.TB, id int, index []int, set func(m *dynamicpb.Message)) []byte {
	t.Helper()
	s, err := protoschema.Format{}.Parse(orderProto, nil)
	if err != nil {
		t.Fatal(err)
	}
	md := s.(*protoschema.Schema).Descriptor().Messages().Get(0)
	if len(index) == 2 {
		md = md.Messages().Get(index[1])
	}
	m := dynamicpb.NewMessage(md)
	set(m)
	serde := sr.NewSerde()
	serde.Register(id, m, sr.EncodeFn(func(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }), sr.Index(index...))
	b, err := serde.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonOrder(t testing.TB, id int, doc any) []byte {
	t.Helper()
	serde := sr.NewSerde()
	serde.Register(id, doc, sr.EncodeFn(json.Marshal))
	b, err := serde.Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type kv struct{ key, value []byte }

// batchOf is a record batch holding kvs, compressed with c, as
// franz-go's encoders build it.
func batchOf(t testing.TB, c recordbatch.Compression, kvs ...kv) []byte {
	t.Helper()
	o := batchtest.Options{Compression: c}
	for _, r := range kvs {
		o.Keys, o.Values = append(o.Keys, r.key), append(o.Values, r.value)
	}
	return batchtest.Build(t, o)
}

func value(v []byte) kv { return kv{value: v} }

func TestBatch(t *testing.T) {
	f := newFixture(t)
	avroID := f.register(t, "orders-value", schemareg.TypeAvro, orderAvro)
	otherID := f.register(t, "other-value", schemareg.TypeAvro, `{"type":"record","name":"Other","fields":[{"name":"x","type":"int"}]}`)
	protoID := f.register(t, "porders-value", schemareg.TypeProtobuf, orderProto)
	jsonID := f.register(t, "jorders-value", schemareg.TypeJSON, orderJSON)
	keyID := f.register(t, "orders-key", schemareg.TypeAvro, `"string"`)
	recordID := f.register(t, "shop.Order", schemareg.TypeAvro, orderAvro)
	if recordID != avroID {
		t.Fatalf("one schema under two subjects got ids %d and %d", avroID, recordID)
	}
	f.register(t, "orders-shop.Order", schemareg.TypeAvro, orderAvro)
	f.register(t, "jorders-shop.Order", schemareg.TypeJSON, orderJSON)
	f.register(t, "porders-shop.Order.Line", schemareg.TypeProtobuf, orderProto)

	good := avroOrder(t, avroID, map[string]any{"id": int64(7), "note": "seven"})
	keyAvro, err := avro.Marshal(avro.MustParse(`"string"`), "k1")
	if err != nil {
		t.Fatal(err)
	}
	goodKey := append([]byte{0, 0, 0, 0, byte(keyID)}, keyAvro...)
	values := validate.Policy{Topic: "orders", Value: true}
	recordNames := validate.Policy{Topic: "orders", Value: true, ValueStrategy: topicconfig.RecordNameStrategy}
	topicRecordNames := validate.Policy{Topic: "orders", Value: true, ValueStrategy: topicconfig.TopicRecordNameStrategy}

	tests := []struct {
		name   string
		p      validate.Policy
		c      recordbatch.Compression
		kvs    []kv
		refuse map[int32]string // record index -> part of its message
	}{
		{name: "avro good", p: values, kvs: []kv{value(good), value(good)}},
		{name: "tombstone", p: values, kvs: []kv{value(nil)}},
		{name: "no magic byte", p: values, kvs: []kv{value([]byte(`{"id":7}`))},
			refuse: map[int32]string{0: "not in the schema registry's wire format (it starts with byte 0x7b)"}},
		{name: "too short", p: values, kvs: []kv{value([]byte{0, 0, 1})},
			refuse: map[int32]string{0: "not in the schema registry's wire format (it is 3 bytes long)"}},
		{name: "unknown id", p: values, kvs: []kv{value(avroOrder(t, 9999, map[string]any{"id": int64(1), "note": ""}))},
			refuse: map[int32]string{0: "schema id 9999, which is not registered"}},
		{name: "other subject's id", p: values, kvs: []kv{value(append([]byte{0, 0, 0, 0, byte(otherID)}, 2))},
			refuse: map[int32]string{0: `is not registered under subject "orders-value" (TopicNameStrategy)`}},
		{name: "truncated payload", p: values, kvs: []kv{value(good[:len(good)-2])},
			refuse: map[int32]string{0: "does not decode with schema id"}},
		{name: "bytes left over", p: values, kvs: []kv{value(append(good[:len(good):len(good)], 0))},
			refuse: map[int32]string{0: "bytes left after"}},
		{name: "negative string length", p: values, kvs: []kv{value(append([]byte{0, 0, 0, 0, byte(avroID), 14}, 3))},
			refuse: map[int32]string{0: "does not decode"}},
		{name: "zstd, one bad among good", p: values, c: recordbatch.CompressionZstd,
			kvs:    []kv{value(good), value(good), value([]byte("plain")), value(good)},
			refuse: map[int32]string{2: "wire format"}},
		{name: "gzip, all good", p: values, c: recordbatch.CompressionGzip, kvs: []kv{value(good), value(nil), value(good)}},
		{name: "key good", p: validate.Policy{Topic: "orders", Key: true}, kvs: []kv{{key: goodKey, value: []byte("anything")}, {key: nil}}},
		{name: "key bad", p: validate.Policy{Topic: "orders", Key: true, Value: true}, kvs: []kv{{key: []byte("k"), value: good}},
			refuse: map[int32]string{0: "the key is not in the schema registry's wire format"}},
		{name: "key's subject", p: validate.Policy{Topic: "orders", Key: true}, kvs: []kv{{key: good}},
			refuse: map[int32]string{0: `not registered under subject "orders-key"`}},
		{name: "record name", p: recordNames, kvs: []kv{value(good)}},
		{name: "record name, wrong record", p: recordNames, kvs: []kv{value(append([]byte{0, 0, 0, 0, byte(otherID)}, 2))},
			refuse: map[int32]string{0: `not registered under subject "Other" (RecordNameStrategy)`}},
		{name: "topic record name", p: topicRecordNames, kvs: []kv{value(good)}},
		{name: "topic record name, other topic", p: validate.Policy{Topic: "returns", Value: true, ValueStrategy: topicconfig.TopicRecordNameStrategy},
			kvs: []kv{value(good)}, refuse: map[int32]string{0: `subject "returns-shop.Order"`}},

		{name: "protobuf good", p: validate.Policy{Topic: "porders", Value: true}, kvs: []kv{
			value(protoOrder(t, protoID, []int{0}, func(m *dynamicpb.Message) {
				m.Set(m.Descriptor().Fields().ByName("id"), protoreflect.ValueOf(int64(3)))
				m.Set(m.Descriptor().Fields().ByName("note"), protoreflect.ValueOf("three"))
			})),
			value(protoOrder(t, protoID, []int{0, 0}, func(m *dynamicpb.Message) {
				m.Set(m.Descriptor().Fields().ByName("qty"), protoreflect.ValueOf(int32(2)))
			}))}},
		{name: "protobuf wrong wire type", p: validate.Policy{Topic: "porders", Value: true},
			// field 1 (id, varint) sent as a length-delimited field
			kvs:    []kv{value(append([]byte{0, 0, 0, 0, byte(protoID), 0}, 0x0a, 1, 'x'))},
			refuse: map[int32]string{0: "not a shop.Order"}},
		{name: "protobuf bad UTF-8", p: validate.Policy{Topic: "porders", Value: true},
			kvs:    []kv{value(append([]byte{0, 0, 0, 0, byte(protoID), 0}, 0x12, 1, 0xff))},
			refuse: map[int32]string{0: "does not decode"}},
		{name: "protobuf no such message", p: validate.Policy{Topic: "porders", Value: true},
			kvs:    []kv{value(append([]byte{0, 0, 0, 0, byte(protoID)}, 2, 4))}, // [2]
			refuse: map[int32]string{0: "no message 2 at depth 0"}},
		{name: "protobuf nested record name", p: validate.Policy{Topic: "porders", Value: true, ValueStrategy: topicconfig.TopicRecordNameStrategy},
			kvs: []kv{value(protoOrder(t, protoID, []int{0, 0}, func(m *dynamicpb.Message) {}))}},

		{name: "json good", p: validate.Policy{Topic: "jorders", Value: true}, kvs: []kv{value(jsonOrder(t, jsonID, map[string]any{"id": 4}))}},
		{name: "json refused by the schema", p: validate.Policy{Topic: "jorders", Value: true},
			kvs: []kv{value(jsonOrder(t, jsonID, map[string]any{"id": "four"}))}, refuse: map[int32]string{0: "does not match the schema"}},
		{name: "json two documents", p: validate.Policy{Topic: "jorders", Value: true},
			kvs: []kv{value(append([]byte{0, 0, 0, 0, byte(jsonID)}, `{"id":1} {"id":2}`...))}, refuse: map[int32]string{0: "not one JSON document"}},
		{name: "json title", p: validate.Policy{Topic: "jorders", Value: true, ValueStrategy: topicconfig.TopicRecordNameStrategy},
			kvs: []kv{value(jsonOrder(t, jsonID, map[string]any{"id": 4}))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refused, err := f.v.Batch(context.Background(), tt.p, batchOf(t, tt.c, tt.kvs...))
			if err != nil {
				t.Fatal(err)
			}
			if len(refused) != len(tt.refuse) {
				t.Fatalf("refused %+v, want %d records refused", refused, len(tt.refuse))
			}
			for _, r := range refused {
				want, ok := tt.refuse[r.Index]
				if !ok || !strings.Contains(r.Message, want) {
					t.Errorf("record %d refused with %q, want a message with %q", r.Index, r.Message, want)
				}
			}
		})
	}
}

// lateDB is metadata whose copy learns, at its next Sync, what another
// agent registered a moment ago.
type lateDB struct {
	*metatest.DB
	syncs  int
	onSync func()
}

func (d *lateDB) Sync(ctx context.Context) error {
	d.syncs++
	if d.onSync != nil {
		d.onSync()
		d.onSync = nil
	}
	return d.DB.Sync(ctx)
}

func TestUnknownIDSyncsOnce(t *testing.T) {
	f := newFixture(t)
	late := &lateDB{DB: f.db}
	v := validate.New(late, f.reg, 0, 0)
	p := validate.Policy{Topic: "orders", Value: true}
	late.onSync = func() { f.register(t, "orders-value", schemareg.TypeAvro, orderAvro) }
	rec := avroOrder(t, 1, map[string]any{"id": int64(1), "note": "x"}) // the id the registration will get
	refused, err := v.Batch(context.Background(), p, batchOf(t, 0, value(rec), value(rec)))
	if err != nil || len(refused) != 0 || late.syncs != 1 {
		t.Fatalf("id registered elsewhere: refused %+v, %v, %d syncs; want accepted after one sync", refused, err, late.syncs)
	}
	if f.ids["orders-value"] != 1 {
		t.Fatalf("the registration got id %d, the test assumed 1", f.ids["orders-value"])
	}
	// Known now: no sync. Unknown: one sync for the whole batch.
	if _, err := v.Batch(context.Background(), p, batchOf(t, 0, value(rec))); err != nil || late.syncs != 1 {
		t.Fatalf("known id: %v, %d syncs, want no new sync", err, late.syncs)
	}
	unknown := avroOrder(t, 77, map[string]any{"id": int64(1), "note": "x"})
	refused, err = v.Batch(context.Background(), p, batchOf(t, 0, value(unknown), value(unknown), value(rec)))
	if err != nil || len(refused) != 2 || late.syncs != 2 {
		t.Fatalf("unknown id: refused %+v, %v, %d syncs; want records 0 and 1 refused after one more sync", refused, err, late.syncs)
	}

	// The id is known but not yet under the subject here: the subject
	// is read again after a sync too.
	late.onSync = func() { f.register(t, "returns-value", schemareg.TypeAvro, orderAvro) }
	refused, err = v.Batch(context.Background(), validate.Policy{Topic: "returns", Value: true}, batchOf(t, 0, value(rec)))
	if err != nil || len(refused) != 0 || late.syncs != 3 {
		t.Fatalf("subject registered elsewhere: refused %+v, %v, %d syncs", refused, err, late.syncs)
	}
}

func TestSyncFailureIsUnavailable(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // metatest's Sync fails with the context's error
	_, err := f.v.Batch(ctx, validate.Policy{Topic: "orders", Value: true}, batchOf(t, 0, value(avroOrder(t, 3, map[string]any{"id": int64(1), "note": ""}))))
	if !errors.Is(err, validate.ErrUnavailable) {
		t.Fatalf("Batch = %v, want ErrUnavailable", err)
	}
}

func TestCorruptRecords(t *testing.T) {
	f := newFixture(t)
	b := batchOf(t, 0, value([]byte{0, 0, 0, 0, 1}))
	b = b[:len(b)-1] // a record shorter than its length says
	if _, err := f.v.Batch(context.Background(), validate.Policy{Topic: "orders", Value: true}, b); err == nil || recordbatch.ErrorCode(err) == 0 {
		t.Fatalf("Batch = %v, want a record batch error with a Kafka code", err)
	}
}

// BenchmarkAvro is the cost of validation per MB of Avro values of
// about 1 KiB (an Order with a long note), uncompressed, 1000 a batch:
// the work validation adds to a produce request, once the schema is
// cached.
func BenchmarkAvro(b *testing.B) {
	f := newFixture(b)
	id := f.register(b, "orders-value", schemareg.TypeAvro, orderAvro)
	kvs := make([]kv, 1000)
	for i := range kvs {
		kvs[i] = value(avroOrder(b, id, map[string]any{"id": int64(i), "note": strings.Repeat("n", 1000)}))
	}
	batch := batchOf(b, 0, kvs...)
	p := validate.Policy{Topic: "orders", Value: true}
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		refused, err := f.v.Batch(context.Background(), p, batch)
		if err != nil || len(refused) != 0 {
			b.Fatal(refused, err)
		}
	}
}
