package kafka

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/schemareg"
	"github.com/strandkafka/strand/internal/schemareg/avroschema"
	"github.com/strandkafka/strand/internal/schemareg/jsonschema"
	"github.com/strandkafka/strand/internal/schemareg/protoschema"
	"github.com/strandkafka/strand/internal/schemareg/validate"
)

const (
	svOrderAvro  = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"}]}`
	svOrderProto = "syntax = \"proto3\";\npackage shop;\nmessage Order { int64 id = 1; }\n"
	svOrderJSON  = `{"title":"shop.Order","type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`
)

// schemaAgent is a data agent at metadata level 6 validating schemas
// against a registry over its own replica.
type schemaAgent struct {
	*testAgent
	reg *schemareg.Registry
}

func newSchemaAgent(t *testing.T) *schemaAgent {
	t.Helper()
	var reg *schemareg.Registry
	a, _ := newDataAgent(t, nil, func(c *agentConfig) {
		reg = schemareg.New(c.Replica, avroschema.Format{}, protoschema.Format{}, jsonschema.Format{})
		c.Server.Deps.Schemas = validate.New(c.Replica, reg, 0, 0)
	})
	raiseMetadataLevel(t, a, meta.MetadataLevel6)
	return &schemaAgent{testAgent: a, reg: reg}
}

func (a *schemaAgent) register(t *testing.T, subject string, typ schemareg.Type, text string) int {
	t.Helper()
	id, err := a.reg.Register(a.ctx(t), subject, schemareg.RegisterRequest{Schema: text, SchemaType: typ}, false)
	if err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
	return int(id)
}

// endOffset is the partition's high watermark.
func (a *schemaAgent) endOffset(t *testing.T, topic string, p int32) int64 {
	t.Helper()
	offs, err := a.Admin.ListEndOffsets(a.ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(topic, p)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s[%d]: %+v", topic, p, o)
	}
	return o.Offset
}

// avroSerde encodes Orders as franz-go's sr.Serde frames them, the
// payload by hamba/avro.
func avroSerde(id int) *sr.Serde {
	s := avro.MustParse(svOrderAvro)
	serde := sr.NewSerde()
	serde.Register(id, map[string]any{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(s, v) }))
	return serde
}

func order(id int64) map[string]any { return map[string]any{"id": id} }

// Each kind of bad record is refused with INVALID_RECORD, an
// ErrorRecords entry naming it and Kafka's partition message, and
// nothing of its batch is stored, while a good partition of the same
// request is.
func TestProduceSchemaValidationRefuses(t *testing.T) {
	a := newSchemaAgent(t)
	a.createTopic(t, "orders", 2, map[string]*string{"confluent.value.schema.validation": sp("true")})
	id := a.register(t, "orders-value", schemareg.TypeAvro, svOrderAvro)
	other := a.register(t, "other-value", schemareg.TypeAvro, `{"type":"record","name":"Other","fields":[{"name":"x","type":"int"}]}`)
	good := avroSerde(id).MustEncode(order(1))
	otherRec := avroSerde(other).MustEncode(order(1)) // decodes as Other too: refused for its subject alone
	unknown := avroSerde(4242).MustEncode(order(1))
	batch := func(c recordbatch.Compression, values ...[]byte) []byte {
		return batchtest.Build(t, batchtest.Options{Compression: c, Values: values})
	}
	tests := []struct {
		name    string
		records []byte
		bad     map[int32]string // index -> part of its message
	}{
		{"no magic byte", batch(0, []byte(`{"id":1}`)), map[int32]string{0: "not in the schema registry's wire format"}},
		{"unknown id", batch(0, unknown), map[int32]string{0: "schema id 4242, which is not registered"}},
		{"another subject's id", batch(0, otherRec), map[int32]string{0: `not registered under subject "orders-value"`}},
		{"payload does not decode", batch(0, good[:len(good)-1]), map[int32]string{0: "does not decode with schema id"}},
		{"lz4, one bad among good", batch(recordbatch.CompressionLZ4, good, good, []byte("x"), good, nil), map[int32]string{2: "wire format"}},
		{"zstd, two bad", batch(recordbatch.CompressionZstd, unknown, good, otherRec), map[int32]string{0: "not registered", 2: "orders-value"}},
	}
	c := dial(t, a.addr)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := a.endOffset(t, "orders", 1)
			resp := roundTrip(t, c, int32(i), produceReq(9, -1, nil,
				rawPart{"orders", 0, batch(0, good, nil)}, rawPart{"orders", 1, tt.records})).(*kmsg.ProduceResponse)
			parts := producePartitions(resp)
			if parts[0].ErrorCode != 0 {
				t.Fatalf("the good partition: %v", kerr.ErrorForCode(parts[0].ErrorCode))
			}
			sp := parts[1]
			if sp.ErrorCode != kerr.InvalidRecord.Code || len(sp.ErrorRecords) != len(tt.bad) {
				t.Fatalf("code %d with record errors %+v, want INVALID_RECORD with %d", sp.ErrorCode, sp.ErrorRecords, len(tt.bad))
			}
			for _, er := range sp.ErrorRecords {
				if want, ok := tt.bad[er.RelativeOffset]; !ok || er.ErrorMessage == nil || !strings.Contains(*er.ErrorMessage, want) {
					t.Errorf("record %d: %v, want a message with %q", er.RelativeOffset, er.ErrorMessage, want)
				}
			}
			if sp.ErrorMessage == nil || !strings.Contains(*sp.ErrorMessage, "One or more records have been rejected") {
				t.Errorf("partition message %v", sp.ErrorMessage)
			}
			if after := a.endOffset(t, "orders", 1); after != before {
				t.Fatalf("end offset moved from %d to %d: the refused batch was stored", before, after)
			}
		})
	}
	if n := a.endOffset(t, "orders", 0); n != int64(2*len(tests)) {
		t.Fatalf("the good partition holds %d records, want %d", n, 2*len(tests))
	}

	// A franz-go producer sees INVALID_RECORD.
	cl := a.kgoClient(t, kgo.DefaultProduceTopic("orders"), kgo.RecordRetries(1))
	if err := cl.ProduceSync(a.ctx(t), &kgo.Record{Value: []byte("plain")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("plain value: %v, want INVALID_RECORD", err)
	}
}

// Records serialized by franz-go's sr.Serde in each format, keys
// included, under each subject name strategy, go in and read back as
// they were sent.
func TestProduceSchemaValidationAccepts(t *testing.T) {
	a := newSchemaAgent(t)
	const (
		recordName      = "io.confluent.kafka.serializers.subject.RecordNameStrategy"
		topicRecordName = "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"
	)
	a.createTopic(t, "avro", 1, map[string]*string{"confluent.value.schema.validation": sp("true"), "confluent.key.schema.validation": sp("true")})
	a.createTopic(t, "proto", 1, map[string]*string{"confluent.value.schema.validation": sp("true"), "confluent.value.subject.name.strategy": sp(recordName)})
	a.createTopic(t, "json", 1, map[string]*string{"confluent.value.schema.validation": sp("true"), "confluent.value.subject.name.strategy": sp(topicRecordName)})
	avroID := a.register(t, "avro-value", schemareg.TypeAvro, svOrderAvro)
	keyID := a.register(t, "avro-key", schemareg.TypeAvro, `"string"`)
	protoID := a.register(t, "shop.Order", schemareg.TypeProtobuf, svOrderProto)
	jsonID := a.register(t, "json-shop.Order", schemareg.TypeJSON, svOrderJSON)

	keySerde := sr.NewSerde()
	keySchema := avro.MustParse(`"string"`)
	keySerde.Register(keyID, "", sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(keySchema, v) }))
	parsed, err := protoschema.Format{}.Parse(svOrderProto, nil)
	if err != nil {
		t.Fatal(err)
	}
	md := parsed.(*protoschema.Schema).Descriptor().Messages().Get(0)
	pm := dynamicpb.NewMessage(md)
	pm.Set(md.Fields().ByName("id"), protoreflect.ValueOfInt64(5))
	protoSerde := sr.NewSerde()
	protoSerde.Register(protoID, pm, sr.EncodeFn(func(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }), sr.Index(0))
	jsonSerde := sr.NewSerde()
	jsonSerde.Register(jsonID, map[string]any{}, sr.EncodeFn(json.Marshal))

	sent := map[string]*kgo.Record{
		"avro":  {Topic: "avro", Key: keySerde.MustEncode("k"), Value: avroSerde(avroID).MustEncode(order(3))},
		"proto": {Topic: "proto", Value: protoSerde.MustEncode(pm)},
		"json":  {Topic: "json", Value: jsonSerde.MustEncode(map[string]any{"id": 9})},
	}
	cl := a.kgoClient(t, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	for topic, r := range sent {
		if err := cl.ProduceSync(a.ctx(t), r).FirstErr(); err != nil {
			t.Fatalf("%s: %v", topic, err)
		}
		got := a.consume(t, topic, 1, 1)[0]
		if !bytes.Equal(got.Value, r.Value) || !bytes.Equal(got.Key, r.Key) {
			t.Fatalf("%s: read back %x/%x, sent %x/%x", topic, got.Key, got.Value, r.Key, r.Value)
		}
	}
	// A plain key on a topic validating keys is refused, and a tombstone
	// with a framed key goes in.
	if err := cl.ProduceSync(a.ctx(t), &kgo.Record{Topic: "avro", Key: []byte("k"), Value: sent["avro"].Value}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("plain key: %v, want INVALID_RECORD", err)
	}
	if err := cl.ProduceSync(a.ctx(t), &kgo.Record{Topic: "avro", Key: sent["avro"].Key}).FirstErr(); err != nil {
		t.Fatalf("tombstone: %v", err)
	}
	// Under RecordNameStrategy an Avro Order has no subject shop.Order.
	if err := cl.ProduceSync(a.ctx(t), &kgo.Record{Topic: "proto", Value: avroSerde(avroID).MustEncode(order(1))}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("avro order under shop.Order: %v, want INVALID_RECORD", err)
	}
}

// Validation is off by default, and turning it on by
// IncrementalAlterConfigs takes effect for the next batch; the configs
// show in DescribeConfigs, and a strategy Strand does not know is
// INVALID_CONFIG.
func TestSchemaValidationConfigChange(t *testing.T) {
	a := newSchemaAgent(t)
	a.createTopic(t, "t", 1, nil)
	cl := a.kgoClient(t, kgo.DefaultProduceTopic("t"), kgo.RecordRetries(1))
	if err := cl.ProduceSync(a.ctx(t), &kgo.Record{Value: []byte("plain")}).FirstErr(); err != nil {
		t.Fatalf("validation off: %v", err)
	}
	alter := func(name, value string) error {
		rs, err := a.Admin.AlterTopicConfigs(a.ctx(t), []kadm.AlterConfig{{Name: name, Value: sp(value)}}, "t")
		if err != nil {
			return err
		}
		return rs[0].Err
	}
	if err := alter("confluent.value.schema.validation", "true"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(a.ctx(t), &kgo.Record{Value: []byte("plain")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("validation on: %v, want INVALID_RECORD", err)
	}
	if err := alter("confluent.value.subject.name.strategy", "com.example.MyStrategy"); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("foreign strategy: %v, want INVALID_CONFIG", err)
	}
	rcs, err := a.Admin.DescribeTopicConfigs(a.ctx(t), "t")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("t", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue()
	}
	if got["confluent.value.schema.validation"] != "true" || got["confluent.key.schema.validation"] != "false" ||
		got["confluent.value.subject.name.strategy"] != "io.confluent.kafka.serializers.subject.TopicNameStrategy" {
		t.Fatalf("described %v", got)
	}
}

// Below metadata level 6 the schema validation configs are refused at
// create and alter, and other configs are not; from 6 they are taken.
func TestSchemaValidationConfigsNeedLevel6(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	raiseMetadataLevel(t, a, meta.MetadataLevel5)
	resp, err := a.Admin.CreateTopic(a.ctx(t), 1, -1, map[string]*string{"confluent.value.schema.validation": sp("true")}, "t")
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(resp.ErrMessage, "strand.metadata.version 6") {
		t.Fatalf("create at level 5: %v (%q), want INVALID_CONFIG naming the level", err, resp.ErrMessage)
	}
	a.createTopic(t, "t", 1, map[string]*string{"retention.ms": sp("1000")})
	for _, incremental := range []bool{false, true} {
		var rs kadm.AlterConfigsResponses
		if incremental {
			rs, err = a.Admin.AlterTopicConfigs(a.ctx(t), []kadm.AlterConfig{{Name: "confluent.key.schema.validation", Value: sp("true")}}, "t")
		} else {
			rs, err = a.Admin.AlterTopicConfigsState(a.ctx(t), []kadm.AlterConfig{{Name: "confluent.key.schema.validation", Value: sp("true")}}, "t")
		}
		if err == nil {
			err = rs[0].Err
		}
		if !errors.Is(err, kerr.InvalidConfig) {
			t.Fatalf("alter (incremental %v) at level 5: %v, want INVALID_CONFIG", incremental, err)
		}
	}
	raiseMetadataLevel(t, a, meta.MetadataLevel6)
	rs, err := a.Admin.AlterTopicConfigs(a.ctx(t), []kadm.AlterConfig{{Name: "confluent.key.schema.validation", Value: sp("true")}}, "t")
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		t.Fatalf("alter at level 6: %v", err)
	}
}
