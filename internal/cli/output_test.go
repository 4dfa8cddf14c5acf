package cli

import (
	"bytes"
	"errors"
	"io"
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
		if err := writeOutput(&b, format, v, text); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if b.String() != want {
			t.Errorf("%s: got %q, want %q", format, b.String(), want)
		}
	}
	var b bytes.Buffer
	if err := writeOutput(&b, "xml", v, text); !errors.Is(err, ErrUsage) || b.Len() != 0 {
		t.Errorf("xml: err %v, wrote %q; want a usage error and nothing written", err, b.String())
	}
}
