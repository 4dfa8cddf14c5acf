package jdbcsink

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A Debezium table's schema, as the PostgreSQL connector writes it for
//
//	CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(10,2),
//	    born date, seen timestamp, at timestamptz, data bytea, doc jsonb,
//	    ok boolean, ratio double precision, n bigint)
var itemFields = []map[string]any{
	{"field": "id", "type": "int32", "optional": false},
	{"field": "name", "type": "string", "optional": true},
	{"field": "price", "type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal",
		"parameters": map[string]any{"scale": "2", "connect.decimal.precision": "10"}},
	{"field": "born", "type": "int32", "optional": true, "name": "io.debezium.time.Date"},
	{"field": "seen", "type": "int64", "optional": true, "name": "io.debezium.time.MicroTimestamp"},
	{"field": "at", "type": "string", "optional": true, "name": "io.debezium.time.ZonedTimestamp"},
	{"field": "data", "type": "bytes", "optional": true},
	{"field": "doc", "type": "string", "optional": true, "name": "io.debezium.data.Json"},
	{"field": "ok", "type": "boolean", "optional": true},
	{"field": "ratio", "type": "double", "optional": true},
	{"field": "n", "type": "int64", "optional": true},
}

// envelope writes a Debezium change event with its schema, as Connect's
// JsonConverter does with schemas.enable.
func envelope(fields []map[string]any, op string, before, after map[string]any) string {
	row := map[string]any{"type": "struct", "fields": fields, "optional": true, "name": "srv.public.t.Value"}
	schema := map[string]any{"type": "struct", "name": "srv.public.t.Envelope", "fields": []any{
		withField(row, "before"), withField(row, "after"),
		map[string]any{"field": "source", "type": "struct", "fields": []any{}},
		map[string]any{"field": "op", "type": "string"},
		map[string]any{"field": "ts_ms", "type": "int64", "optional": true},
	}}
	payload := map[string]any{"before": before, "after": after, "op": op, "ts_ms": 1700000000000,
		"source": map[string]any{"connector": "postgresql", "schema": "public", "table": "t"}}
	b, _ := json.Marshal(map[string]any{"schema": schema, "payload": payload})
	return string(b)
}

func withField(m map[string]any, name string) map[string]any {
	c := map[string]any{"field": name}
	for k, v := range m {
		c[k] = v
	}
	return c
}

// intKey is a record key {"id": n} with its schema.
func intKey(id int) string {
	return fmt.Sprintf(`{"schema":{"type":"struct","fields":[{"field":"id","type":"int32","optional":false}],"optional":false,"name":"srv.public.t.Key"},"payload":{"id":%d}}`, id)
}

// decimalB64 is Connect's Decimal encoding of unscaled.
func decimalB64(unscaled int64) string {
	n := big.NewInt(unscaled)
	var b []byte
	if n.Sign() >= 0 {
		b = n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
	} else {
		// two's complement in the fewest bytes
		size := len(new(big.Int).Neg(n).Bytes()) + 1
		m := new(big.Int).Add(n, new(big.Int).Lsh(big.NewInt(1), uint(size*8)))
		b = m.Bytes()
		for len(b) < size {
			b = append([]byte{0xff}, b...)
		}
	}
	return base64.StdEncoding.EncodeToString(b)
}

// TestDebeziumEnvelopes: creates, updates, deletes and tombstones in
// Debezium's envelope with its schema, upserted on the record key into
// a table the sink creates, with every Debezium type the issue names;
// a record of an aborted transaction is not written (read_committed).
func TestDebeziumEnvelopes(t *testing.T) {
	targets(t, func(t *testing.T, d *db) {
		topic := uniq("srv.public.items")
		table := strings.ReplaceAll(topic, ".", "_")
		// One partition, so that the aborted transaction lies before
		// the last record, whose offset the sink ends at.
		kafka := cluster(t, 1, topic)
		p := newProducer(t, kafka)
		row1 := map[string]any{"id": 1, "name": "one", "price": decimalB64(1234), "born": 19782, // 2024-02-29
			"seen": int64(1714557600123456), "at": "2024-05-01T10:00:00.25+02:00", "data": base64.StdEncoding.EncodeToString([]byte("hi")),
			"doc": `{"a": [1, 2]}`, "ok": true, "ratio": 0.5, "n": int64(9007199254740993)}
		row2 := map[string]any{"id": 2, "name": "two", "price": decimalB64(-5), "ok": false}
		row1b := with(row1, "name", "one'\"\\ b", "price", decimalB64(-100001))
		row3 := map[string]any{"id": 3}
		p.send(topic, intKey(1), envelope(itemFields, "c", nil, row1))
		p.send(topic, intKey(2), envelope(itemFields, "r", nil, row2))
		p.send(topic, intKey(1), envelope(itemFields, "u", row1, row1b))
		p.send(topic, intKey(2), envelope(itemFields, "d", row2, nil))
		p.send(topic, intKey(2), nil)
		p.send(topic, intKey(3), envelope(itemFields, "c", nil, row3))
		abortedTxn(t, kafka, topic, intKey(99), envelope(itemFields, "c", nil, map[string]any{"id": 99}))
		p.send(topic, intKey(4), envelope(itemFields, "c", nil, map[string]any{"id": 4, "name": "four"}))
		p.send(topic, intKey(4), envelope(itemFields, "d", map[string]any{"id": 4}, nil)) // no tombstone: op d alone deletes

		name := uniq("debezium")
		r := start(t, name, d.config(topic, "insert.mode", "upsert", "primary.key.mode", "record_key",
			"delete.enabled", "true", "schema.evolution", "basic"), kafka, nil)
		waitCaughtUp(t, d, name, p, r)

		var cols []string
		for _, f := range itemFields {
			cols = append(cols, d.text(f["field"].(string)))
		}
		got := d.rows(t, table, cols...)
		want := map[string][]string{
			"postgresql": {
				`1|one'"\ b|-1000.01|2024-02-29|2024-05-01 10:00:00.123456|2024-05-01 08:00:00.25+00|\x6869|{"a": [1, 2]}|true|0.5|9007199254740993`,
				"3|∅|∅|∅|∅|∅|∅|∅|∅|∅|∅",
			},
			"mariadb": {
				`1|one'"\ b|-1000.01|2024-02-29|2024-05-01 10:00:00.123456|2024-05-01 08:00:00.250000|hi|{"a": [1, 2]}|1|0.5|9007199254740993`,
				"3|∅|∅|∅|∅|∅|∅|∅|∅|∅|∅",
			},
		}[d.name]
		if !slices.Equal(got, want) {
			t.Errorf("rows:\n got %q\nwant %q", got, want)
		}
		types := map[string][]string{
			"postgresql": {"integer", "text", "numeric", "date", "timestamp without time zone", "timestamp with time zone",
				"bytea", "jsonb", "boolean", "double precision", "bigint"},
			"mariadb": {"int", "longtext", "decimal", "date", "datetime", "datetime", "longblob", "longtext", "tinyint", "double", "bigint"},
		}[d.name]
		for i, f := range itemFields {
			if typ := d.columnType(t, table, f["field"].(string)); typ != types[i] {
				t.Errorf("column %s: type %s, want %s", f["field"], typ, types[i])
			}
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// with copies m with pairs set.
func with(m map[string]any, kv ...any) map[string]any {
	c := map[string]any{}
	for k, v := range m {
		c[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i].(string)] = kv[i+1]
	}
	return c
}

// abortedTxn produces a record in a transaction and aborts it.
func abortedTxn(t *testing.T, kafka func() []kgo.Opt, topic, key, value string) {
	t.Helper()
	cl, err := kgo.NewClient(append(kafka(), kgo.TransactionalID(uniq("txn")))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
}
