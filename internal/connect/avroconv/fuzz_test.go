package avroconv

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/schemareg"
	"github.com/strandkafka/strand/internal/schemareg/avroschema"
)

func decodeJSON(t testing.TB, s string) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// FuzzDecode: any bytes after a registered schema's id decode to the
// JsonConverter form or fail; no panic, no allocation past hamba's
// bounds.
func FuzzDecode(f *testing.F) {
	cs := decodeJSON(f, testSchema).(map[string]any)
	text, err := AvroSchema(cs)
	if err != nil {
		f.Fatal(err)
	}
	as, err := parse(text)
	if err != nil {
		f.Fatal(err)
	}
	var tree any
	_ = json.Unmarshal([]byte(text), &tree)
	back, err := (&fromAvro{named: map[string]map[string]any{}}).schema(tree, "")
	if err != nil {
		f.Fatal(err)
	}
	api := codec()
	v, err := value(cs, decodeJSON(f, `{"id":1,"s":2,"b":-2,"price":"AQ==","at":5,"e":"b","tags":["x"],"attrs":{"k":1.5},"vsd":null,"vsd2":{"scale":1,"value":""}}`))
	if err != nil {
		f.Fatal(err)
	}
	seed, err := api.Marshal(as, v)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		var out any
		if err := api.Unmarshal(as, b, &out); err != nil {
			return
		}
		js, err := appendJSON(nil, back, out)
		if err != nil {
			return
		}
		if !json.Valid(js) {
			t.Fatalf("invalid JSON %s", js)
		}
	})
}

// BenchmarkFromConnect: a Debezium-like envelope converted to the wire
// format, its schema's id cached (the registry is asked once).
func BenchmarkFromConnect(b *testing.B) {
	db := metatest.New(nil)
	db.MustPropose(b, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel6}}})
	reg := schemareg.New(db, avroschema.Format{})
	srv := httptest.NewServer(schemareg.Handler(reg, func(*http.Request, schemareg.Op, string) error { return nil }))
	defer srv.Close()
	c, err := New(&Config{URLs: []string{srv.URL}, AutoRegister: true})
	if err != nil {
		b.Fatal(err)
	}
	rec := []byte(`{"schema":{"type":"struct","name":"p.s.t.Envelope","optional":false,"fields":[` +
		`{"field":"before","type":"struct","name":"p.s.t.Value","optional":true,"fields":[{"field":"id","type":"int32","optional":false},{"field":"name","type":"string","optional":true},{"field":"price","type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"}},{"field":"at","type":"int64","optional":true,"name":"io.debezium.time.MicroTimestamp","version":1}]},` +
		`{"field":"after","type":"struct","name":"p.s.t.Value","optional":true,"fields":[{"field":"id","type":"int32","optional":false},{"field":"name","type":"string","optional":true},{"field":"price","type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"}},{"field":"at","type":"int64","optional":true,"name":"io.debezium.time.MicroTimestamp","version":1}]},` +
		`{"field":"op","type":"string","optional":false},{"field":"ts_ms","type":"int64","optional":true}]},` +
		`"payload":{"before":null,"after":{"id":1,"name":"one","price":"BNI=","at":1714557600123456},"op":"c","ts_ms":1714557600123}}`)
	ctx := context.Background()
	var env struct{ Schema, Payload json.RawMessage }
	if err := json.Unmarshal(rec, &env); err != nil {
		b.Fatal(err)
	}
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(rec)))
		for b.Loop() {
			if _, err := c.FromConnect(ctx, "p.s.t", rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	// As pgsource calls it: the schema apart.
	b.Run("parts", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(env.Payload)))
		for b.Loop() {
			if _, err := c.FromConnectParts(ctx, "p.s.t", env.Schema, env.Payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}
