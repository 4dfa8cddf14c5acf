package avroconv

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"testing"

	"github.com/hamba/avro/v2"
)

// TestDecimalBytes: Connect's Decimal bytes (big-endian two's
// complement) survive big.Rat and back, signs and byte boundaries
// included.
func TestDecimalBytes(t *testing.T) {
	for _, n := range []int64{0, 1, -1, 127, 128, -128, -129, 255, 256, -32768, 1234, -100001, 1 << 40, -(1 << 40)} {
		want := new(big.Rat).SetFrac(big.NewInt(n), big.NewInt(100))
		b := decimalBytes(want, 2)
		if got := decimalRat(b, 2); got.Cmp(want) != 0 {
			t.Errorf("%d: %x reads %s, want %s", n, b, got.FloatString(2), want.FloatString(2))
		}
	}
}

// testSchema is a Connect schema with each kind the mapping handles.
const testSchema = `{"type":"struct","name":"p.s.t.Value","optional":false,"fields":[
	{"field":"id","type":"int32","optional":false},
	{"field":"s","type":"int16","optional":true},
	{"field":"b","type":"int8","optional":false},
	{"field":"price","type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"}},
	{"field":"at","type":"int64","optional":true,"name":"io.debezium.time.MicroTimestamp","version":1},
	{"field":"e","type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"a,b"},"default":"a"},
	{"field":"tags","type":"array","optional":true,"items":{"type":"string","optional":false}},
	{"field":"attrs","type":"map","optional":true,"keys":{"type":"string","optional":false},"values":{"type":"double","optional":true}},
	{"field":"vsd","type":"struct","optional":true,"name":"io.debezium.data.VariableScaleDecimal","version":1,"fields":[{"field":"scale","type":"int32","optional":false},{"field":"value","type":"bytes","optional":false}]},
	{"field":"vsd2","type":"struct","optional":true,"name":"io.debezium.data.VariableScaleDecimal","version":1,"fields":[{"field":"scale","type":"int32","optional":false},{"field":"value","type":"bytes","optional":false}]}
	]}`

// TestRoundTripSchema: a Connect schema mapped to Avro and back is the
// same Connect schema (the fields the sink reads: types, names,
// parameters, optionality); a payload written by write, and by hamba's
// encoder from value's conversion, reads back as the JsonConverter's
// form.
func TestRoundTripSchema(t *testing.T) {
	connect := testSchema
	var cs map[string]any
	dec := json.NewDecoder(bytes.NewReader([]byte(connect)))
	dec.UseNumber()
	if err := dec.Decode(&cs); err != nil {
		t.Fatal(err)
	}
	text, err := AvroSchema(cs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parse(text); err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	var tree any
	if err := json.Unmarshal([]byte(text), &tree); err != nil {
		t.Fatal(err)
	}
	back, err := (&fromAvro{named: map[string]map[string]any{}}).schema(tree, "")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(cs)
	got, _ := json.Marshal(back)
	var w, g any
	json.Unmarshal(want, &w)
	json.Unmarshal(got, &g)
	wj, _ := json.Marshal(w)
	gj, _ := json.Marshal(g)
	if !bytes.Equal(wj, gj) {
		t.Errorf("round trip\n got %s\nwant %s\n(avro %s)", gj, wj, text)
	}

	// A value through Avro's binary encoding and back.
	payload := `{"id":1,"s":null,"b":-2,"price":"` + base64.StdEncoding.EncodeToString(decimalBytes(big.NewRat(-1234, 100), 2)) +
		`","at":1714557600123456,"e":"b","tags":["x","y"],"attrs":{"k":1.5},"vsd":{"scale":3,"value":"AQ=="},"vsd2":null}`
	var pv any
	dec = json.NewDecoder(bytes.NewReader([]byte(payload)))
	dec.UseNumber()
	if err := dec.Decode(&pv); err != nil {
		t.Fatal(err)
	}
	v, err := value(cs, pv)
	if err != nil {
		t.Fatal(err)
	}
	as, _ := parse(text)
	api := codec()
	bin, err := api.Marshal(as, v)
	if err != nil {
		t.Fatal(err)
	}
	aw := avro.NewWriter(nil, 0)
	if err := write(aw, cs, pv); err != nil {
		t.Fatal(err)
	}
	// hamba's encoder gives arrays' and maps' blocks their byte size
	// too (Avro allows either): the two agree as read back.
	for name, b := range map[string][]byte{"write": aw.Buffer(), "hamba's encoder": bin} {
		var out any
		if err := api.Unmarshal(as, b, &out); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		js, err := appendJSON(nil, back, out)
		if err != nil {
			t.Fatal(err)
		}
		if string(js) != payload {
			t.Errorf("%s: payload\n got %s\nwant %s", name, js, payload)
		}
	}
}

// TestRefused: a required field with no value and no fallback, and
// names Avro cannot take, are errors rather than bad records.
func TestRefused(t *testing.T) {
	if _, err := AvroSchema(map[string]any{"type": "struct", "name": "a-b.Value", "fields": []any{}}); err == nil {
		t.Error("a record name with '-' was taken")
	}
	if _, err := AvroSchema(map[string]any{"type": "struct", "name": "x.Value", "fields": []any{
		map[string]any{"field": "a b", "type": "int32"}}}); err == nil {
		t.Error("a field name with a space was taken")
	}
	if _, err := value(map[string]any{"type": "array", "items": map[string]any{"type": "int32"}}, nil); err == nil {
		t.Error("null for a required array was taken")
	}
}
