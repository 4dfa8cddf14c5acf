package jdbcsink

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/connect/avroconv"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/schemareg"
	"github.com/strandkafka/strand/internal/schemareg/avroschema"
)

// registryURL serves Strand's schema registry over an in-process
// metadata store.
func registryURL(t *testing.T) string {
	t.Helper()
	db := metatest.New(nil)
	db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel6}}})
	reg := schemareg.New(db, avroschema.Format{})
	srv := httptest.NewServer(schemareg.Handler(reg, func(*http.Request, schemareg.Op, string) error { return nil }))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestAvroEnvelopes: Debezium's change events written by Confluent's
// AvroConverter (keys and values in the wire format, schemas in the
// registry) are written as their JSON form is (TestDebeziumEnvelopes'
// rows), and a column added in a later schema version is added to the
// table.
func TestAvroEnvelopes(t *testing.T) {
	url := registryURL(t)
	conv := func(side string) *avroconv.Converter {
		c, err := avroconv.Parse(map[string]string{side + ".converter": avroconv.AvroClass, "schema.registry.url": url}, side)
		if err != nil {
			t.Fatal(err)
		}
		cv, err := avroconv.New(c)
		if err != nil {
			t.Fatal(err)
		}
		return cv
	}
	keys, values := conv("key"), conv("value")
	targets(t, func(t *testing.T, d *db) {
		topic := uniq("srv.public.items")
		table := strings.ReplaceAll(topic, ".", "_")
		kafka := cluster(t, 1, topic)
		p := newProducer(t, kafka)
		send := func(key, value string) {
			t.Helper()
			ctx := context.Background()
			k, err := keys.FromConnect(ctx, topic, []byte(key))
			if err != nil {
				t.Fatal(err)
			}
			var v []byte
			if value != "" {
				if v, err = values.FromConnect(ctx, topic, []byte(value)); err != nil {
					t.Fatal(err)
				}
			}
			if v == nil {
				p.send(topic, string(k), nil)
			} else {
				p.send(topic, string(k), v)
			}
		}
		row1 := map[string]any{"id": 1, "name": "one", "price": decimalB64(1234), "born": 19782, // 2024-02-29
			"seen": int64(1714557600123456), "at": "2024-05-01T10:00:00.25+02:00", "data": "aGk=",
			"doc": `{"a": [1, 2]}`, "ok": true, "ratio": 0.5, "n": int64(9007199254740993)}
		row2 := map[string]any{"id": 2, "name": "two", "price": decimalB64(-5), "ok": false}
		row1b := with(row1, "name", "one'\"\\ b", "price", decimalB64(-100001))
		send(intKey(1), envelope(itemFields, "c", nil, row1))
		send(intKey(2), envelope(itemFields, "r", nil, row2))
		send(intKey(1), envelope(itemFields, "u", row1, row1b))
		send(intKey(2), envelope(itemFields, "d", row2, nil))
		send(intKey(2), "")
		send(intKey(3), envelope(itemFields, "c", nil, map[string]any{"id": 3}))
		// A column added: a second version of the value's schema.
		withNote := append(slices.Clone(itemFields), map[string]any{"field": "note", "type": "string", "optional": true})
		send(intKey(4), envelope(withNote, "c", nil, map[string]any{"id": 4, "name": "four", "note": "new"}))

		name := uniq("avro")
		r := start(t, name, d.config(topic, "insert.mode", "upsert", "primary.key.mode", "record_key",
			"delete.enabled", "true", "schema.evolution", "basic",
			"key.converter", avroconv.AvroClass, "value.converter", avroconv.AvroClass,
			"key.converter.schema.registry.url", url, "value.converter.schema.registry.url", url), kafka, nil)
		waitCaughtUp(t, d, name, p, r)

		var cols []string
		for _, f := range withNote {
			cols = append(cols, d.text(f["field"].(string)))
		}
		got := d.rows(t, table, cols...)
		want := map[string][]string{
			"postgresql": {
				`1|one'"\ b|-1000.01|2024-02-29|2024-05-01 10:00:00.123456|2024-05-01 08:00:00.25+00|\x6869|{"a": [1, 2]}|true|0.5|9007199254740993|∅`,
				"3|∅|∅|∅|∅|∅|∅|∅|∅|∅|∅|∅",
				"4|four|∅|∅|∅|∅|∅|∅|∅|∅|∅|new",
			},
			"mariadb": {
				`1|one'"\ b|-1000.01|2024-02-29|2024-05-01 10:00:00.123456|2024-05-01 08:00:00.250000|hi|{"a": [1, 2]}|1|0.5|9007199254740993|∅`,
				"3|∅|∅|∅|∅|∅|∅|∅|∅|∅|∅|∅",
				"4|four|∅|∅|∅|∅|∅|∅|∅|∅|∅|new",
			},
		}[d.name]
		if !slices.Equal(got, want) {
			t.Errorf("rows:\n got %q\nwant %q", got, want)
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestAvroConverterConfig: the sink takes the AvroConverter, refuses
// the converters it cannot read, still takes the StringConverter and
// ByteArrayConverter (their bytes read as JSON, as before), and keeps
// the registry's credentials secret.
func TestAvroConverterConfig(t *testing.T) {
	base := func(kv ...string) map[string]string {
		c := map[string]string{"connection.url": "jdbc:postgresql://h/db", "topics": "t"}
		for i := 0; i+1 < len(kv); i += 2 {
			c[kv[i]] = kv[i+1]
		}
		return c
	}
	c, err := Parse(base("value.converter", avroconv.AvroClass, "value.converter.schema.registry.url", "http://r:8081",
		"value.converter.basic.auth.credentials.source", "USER_INFO", "value.converter.basic.auth.user.info", "u:p"))
	if err != nil || c.ValueAvro == nil || c.KeyAvro != nil || c.ValueAvro.User != "u" || c.ValueAvro.Password != "p" {
		t.Fatalf("Parse = %+v, %v", c, err)
	}
	if _, err := Parse(base("value.converter", "io.confluent.connect.protobuf.ProtobufConverter")); err == nil || !strings.Contains(err.Error(), "Protobuf is not served") {
		t.Errorf("Protobuf: %v", err)
	}
	if _, err := Parse(base("key.converter", "org.apache.kafka.connect.storage.StringConverter")); err != nil {
		t.Errorf("StringConverter: %v", err)
	}
	if !Secret("value.converter.basic.auth.user.info") || !Secret("basic.auth.user.info") || Secret("value.converter.schema.registry.url") {
		t.Error("Secret: the registry's user info is a secret, its URL is not")
	}
}
