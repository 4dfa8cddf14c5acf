package schemareg_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/strandkafka/strand/internal/schemareg"
)

// levels are Confluent's seven compatibility levels.
var levels = []schemareg.Level{
	schemareg.None, schemareg.Backward, schemareg.BackwardTransitive,
	schemareg.Forward, schemareg.ForwardTransitive, schemareg.Full, schemareg.FullTransitive,
}

// evolution is one change from old to new in one format, and whether
// Confluent's registry finds it backward compatible (new reads what
// old wrote) and forward compatible (old reads what new writes).
type evolution struct {
	name          string
	old, new      string
	backward, fwd bool
}

func avroRecord(fields string) string {
	return `{"type":"record","name":"R","namespace":"m","fields":[` + fields + `]}`
}

const protoHead = "syntax = \"proto3\";\npackage m;\n"

func jsonObject(props, extra string) string {
	return `{"type":"object","properties":{` + props + `}` + extra + `}`
}

// classicEvolutions are the classic cases of each format, as
// Confluent's documentation and its checkers decide them.
var classicEvolutions = map[schemareg.Type][]evolution{
	schemareg.TypeAvro: {
		{"add field with default", avroRecord(`{"name":"a","type":"int"}`),
			avroRecord(`{"name":"a","type":"int"},{"name":"b","type":"string","default":""}`), true, true},
		{"add field without default", avroRecord(`{"name":"a","type":"int"}`),
			avroRecord(`{"name":"a","type":"int"},{"name":"b","type":"string"}`), false, true},
		{"remove field with default", avroRecord(`{"name":"a","type":"int"},{"name":"b","type":"string","default":""}`),
			avroRecord(`{"name":"a","type":"int"}`), true, true},
		{"remove field without default", avroRecord(`{"name":"a","type":"int"},{"name":"b","type":"string"}`),
			avroRecord(`{"name":"a","type":"int"}`), true, false},
		{"rename field", avroRecord(`{"name":"a","type":"int"},{"name":"b","type":"string"}`),
			avroRecord(`{"name":"a","type":"int"},{"name":"c","type":"string"}`), false, false},
		// The reader's aliases match the writer's old name.
		{"rename field with alias", avroRecord(`{"name":"a","type":"int"},{"name":"b","type":"string"}`),
			avroRecord(`{"name":"a","type":"int"},{"name":"c","type":"string","aliases":["b"]}`), true, false},
		{"widen int to long", avroRecord(`{"name":"a","type":"int"}`), avroRecord(`{"name":"a","type":"long"}`), true, false},
		{"narrow long to int", avroRecord(`{"name":"a","type":"long"}`), avroRecord(`{"name":"a","type":"int"}`), false, true},
		{"string to int", avroRecord(`{"name":"a","type":"string"}`), avroRecord(`{"name":"a","type":"int"}`), false, false},
		{"add enum symbol", `{"type":"enum","name":"E","symbols":["A"]}`, `{"type":"enum","name":"E","symbols":["A","B"]}`, true, false},
		{"add enum symbol with enum default", `{"type":"enum","name":"E","symbols":["A"],"default":"A"}`,
			`{"type":"enum","name":"E","symbols":["A","B"],"default":"A"}`, true, true},
		{"make field nullable", avroRecord(`{"name":"a","type":"string"}`), avroRecord(`{"name":"a","type":["null","string"]}`), true, false},
	},
	schemareg.TypeProtobuf: {
		{"add field", protoHead + "message M { int64 a = 1; }", protoHead + "message M { int64 a = 1; string b = 2; }", true, true},
		{"remove field", protoHead + "message M { int64 a = 1; string b = 2; }", protoHead + "message M { int64 a = 1; }", true, true},
		{"rename field", protoHead + "message M { int64 a = 1; }", protoHead + "message M { int64 z = 1; }", true, true},
		// A new number is a field removed and another added: the wire
		// does not carry names.
		{"change field number", protoHead + "message M { int64 a = 1; }", protoHead + "message M { int64 a = 2; }", true, true},
		{"widen int32 to int64", protoHead + "message M { int32 a = 1; }", protoHead + "message M { int64 a = 1; }", true, true},
		{"int32 to sint32", protoHead + "message M { int32 a = 1; }", protoHead + "message M { sint32 a = 1; }", false, false},
		{"int64 to string", protoHead + "message M { int64 a = 1; }", protoHead + "message M { string a = 1; }", false, false},
		{"remove message", protoHead + "message M { int64 a = 1; }\nmessage N {}", protoHead + "message M { int64 a = 1; }", false, true},
		{"change package", protoHead + "message M { int64 a = 1; }", "syntax = \"proto3\";\npackage n;\nmessage M { int64 a = 1; }", false, false},
		{"move field into new oneof", protoHead + "message M { int64 a = 1; }", protoHead + "message M { oneof o { int64 a = 1; } }", true, true},
	},
	schemareg.TypeJSON: {
		{"add property to closed model", jsonObject(`"a":{"type":"string"}`, `,"additionalProperties":false`),
			jsonObject(`"a":{"type":"string"},"b":{"type":"string"}`, `,"additionalProperties":false`), true, false},
		{"remove property from closed model", jsonObject(`"a":{"type":"string"},"b":{"type":"string"}`, `,"additionalProperties":false`),
			jsonObject(`"a":{"type":"string"}`, `,"additionalProperties":false`), false, true},
		{"add optional property to open model", jsonObject(`"a":{"type":"string"}`, ``),
			jsonObject(`"a":{"type":"string"},"b":{"type":"string"}`, ``), false, true},
		{"tighten: make property required", jsonObject(`"a":{"type":"string"}`, ``),
			jsonObject(`"a":{"type":"string"}`, `,"required":["a"]`), false, true},
		{"tighten: decrease maxLength", `{"type":"string","maxLength":10}`, `{"type":"string","maxLength":5}`, false, true},
		{"tighten: close the content model", jsonObject(`"a":{"type":"string"}`, ``),
			jsonObject(`"a":{"type":"string"}`, `,"additionalProperties":false`), false, true},
		{"widen integer to number", `{"type":"integer"}`, `{"type":"number"}`, true, false},
		{"string to number", `{"type":"string"}`, `{"type":"number"}`, false, false},
		{"add enum value", `{"type":"string","enum":["a"]}`, `{"type":"string","enum":["a","b"]}`, true, false},
	},
}

// TestConformanceCompatibility registers each classic evolution under
// each of the seven levels, through the REST API: the change's
// directions decide whether POST /compatibility and the registration
// accept it (one earlier version: transitive levels agree with the
// others).
func TestConformanceCompatibility(t *testing.T) {
	srv := newConformanceServer(t)
	n := 0
	for typ, cases := range classicEvolutions {
		for _, c := range cases {
			for _, level := range levels {
				n++
				t.Run(fmt.Sprintf("%s/%s/%s", typ, c.name, level), func(t *testing.T) {
					want := map[schemareg.Level]bool{
						schemareg.None:     true,
						schemareg.Backward: c.backward, schemareg.BackwardTransitive: c.backward,
						schemareg.Forward: c.fwd, schemareg.ForwardTransitive: c.fwd,
						schemareg.Full: c.backward && c.fwd, schemareg.FullTransitive: c.backward && c.fwd,
					}[level]
					checkEvolution(t, srv, fmt.Sprintf("matrix-%d", n), typ, level, []string{c.old}, c.new, want)
				})
			}
		}
	}
}

// transitiveHistories are three versions per format where the third is
// compatible with the second but not the first, in one direction: the
// transitive levels must tell them apart.
var transitiveHistories = []struct {
	typ        schemareg.Type
	name       string
	v1, v2, v3 string
	want       map[schemareg.Level]bool // absent: compatible
}{
	{schemareg.TypeAvro, "field loses its default",
		avroRecord(`{"name":"a","type":"int"}`),
		avroRecord(`{"name":"a","type":"int"},{"name":"b","type":"string","default":""}`),
		avroRecord(`{"name":"a","type":"int"},{"name":"b","type":"string"}`),
		map[schemareg.Level]bool{schemareg.BackwardTransitive: false, schemareg.FullTransitive: false}},
	{schemareg.TypeAvro, "field removed after gaining a default",
		avroRecord(`{"name":"a","type":"int"},{"name":"b","type":"string"}`),
		avroRecord(`{"name":"a","type":"int"},{"name":"b","type":"string","default":""}`),
		avroRecord(`{"name":"a","type":"int"}`),
		map[schemareg.Level]bool{schemareg.ForwardTransitive: false, schemareg.FullTransitive: false}},
	{schemareg.TypeProtobuf, "message removed before",
		protoHead + "message M { int64 a = 1; }\nmessage N {}",
		protoHead + "message M { int64 a = 1; }",
		protoHead + "message M { int64 a = 1; string b = 2; }",
		map[schemareg.Level]bool{schemareg.BackwardTransitive: false, schemareg.FullTransitive: false}},
	{schemareg.TypeJSON, "maxLength added before",
		`{"type":"string"}`,
		`{"type":"string","maxLength":10}`,
		`{"type":"string","maxLength":10,"title":"short"}`,
		map[schemareg.Level]bool{schemareg.BackwardTransitive: false, schemareg.FullTransitive: false}},
}

func TestConformanceTransitive(t *testing.T) {
	srv := newConformanceServer(t)
	for i, h := range transitiveHistories {
		for _, level := range levels {
			t.Run(fmt.Sprintf("%s/%s/%s", h.typ, h.name, level), func(t *testing.T) {
				want, ok := h.want[level]
				if !ok {
					want = true
				}
				checkEvolution(t, srv, fmt.Sprintf("transitive-%d-%s", i, level), h.typ, level, []string{h.v1, h.v2}, h.v3, want)
			})
		}
	}
}

// checkEvolution registers history under subject at NONE, sets level,
// and checks that candidate is compatible (want) both by POST
// /compatibility (against the versions the level names, and verbose
// with reasons exactly when not) and by registering it (200 or 409).
func checkEvolution(t *testing.T, srv *httptest.Server, subject string, typ schemareg.Type, level schemareg.Level, history []string, candidate string, want bool) {
	t.Helper()
	body := func(schema string) string {
		b, err := json.Marshal(schemareg.RegisterRequest{Schema: schema, SchemaType: typ})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var cfg map[string]string
	if st := call(t, srv, "PUT", "/config/"+subject, `{"compatibility":"NONE"}`, &cfg); st != 200 {
		t.Fatalf("PUT config NONE: %d %v", st, cfg)
	}
	for i, s := range history {
		var e apiError
		if st := call(t, srv, "POST", "/subjects/"+subject+"/versions", body(s), &e); st != 200 {
			t.Fatalf("register version %d: %d %+v", i+1, st, e)
		}
	}
	if st := call(t, srv, "PUT", "/config/"+subject, fmt.Sprintf(`{"compatibility":%q}`, level), &cfg); st != 200 {
		t.Fatalf("PUT config %s: %d %v", level, st, cfg)
	}
	var res struct {
		IsCompatible bool     `json:"is_compatible"`
		Messages     []string `json:"messages"`
	}
	if st := call(t, srv, "POST", "/compatibility/subjects/"+subject+"/versions?verbose=true", body(candidate), &res); st != 200 {
		t.Fatalf("POST compatibility: %d", st)
	}
	if res.IsCompatible != want || (len(res.Messages) == 0) != want {
		t.Errorf("POST compatibility at %s = %+v, want compatible %v", level, res, want)
	}
	var e apiError
	st := call(t, srv, "POST", "/subjects/"+subject+"/versions", body(candidate), &e)
	switch {
	case want && st != 200:
		t.Errorf("register at %s: %d %+v, want 200", level, st, e)
	case !want && (st != 409 || e.Code != 409):
		t.Errorf("register at %s: %d %+v, want 409", level, st, e)
	}
}
