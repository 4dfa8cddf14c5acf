package cli

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestWriteOutput(t *testing.T) {
	type row struct {
		Name       string `json:"name" yaml:"name"`
		Partitions int    `json:"partitions" yaml:"partitions"`
	}
	v := []row{{"orders", 4}}
	text := func(w io.Writer) error { _, err := io.WriteString(w, "orders 4\n"); return err }
	for format, want := range map[string]string{
		OutputText: "orders 4\n",
		OutputJSON: "[\n  {\n    \"name\": \"orders\",\n    \"partitions\": 4\n  }\n]\n",
		OutputYAML: "- name: orders\n  partitions: 4\n",
	} {
		var b bytes.Buffer
		if err := WriteOutput(&b, format, v, text); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if b.String() != want {
			t.Errorf("%s: got %q, want %q", format, b.String(), want)
		}
	}
	var b bytes.Buffer
	if err := WriteOutput(&b, "xml", v, text); !errors.Is(err, ErrUsage) || b.Len() != 0 {
		t.Errorf("xml: err %v, wrote %q; want a usage error and nothing written", err, b.String())
	}
}

// TestJSONShapedYAML: a json-tagged value encodes to yaml under its json
// names, in field order, in block style.
func TestJSONShapedYAML(t *testing.T) {
	type inner struct {
		NodeID int32 `json:"node_id"`
	}
	v := struct {
		TrimPoint uint64  `json:"trim_point"`
		Agents    []inner `json:"agents"`
		Note      string  `json:"note"`
	}{7, []inner{{1}}, "a: b"}
	var b bytes.Buffer
	if err := WriteOutput(&b, OutputYAML, jsonShaped{v}, nil); err != nil {
		t.Fatal(err)
	}
	want := "trim_point: 7\nagents:\n  - node_id: 1\nnote: 'a: b'\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	b.Reset()
	if err := WriteOutput(&b, OutputJSON, jsonShaped{v}, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"trim_point": 7`) {
		t.Errorf("json: %s", b.String())
	}
}
