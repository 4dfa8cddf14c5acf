package cli

import (
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// CheckOutputFormat refuses an unknown --format before a command sends
// anything, so a typo costs no request.
func CheckOutputFormat(format string) error {
	switch format {
	case OutputText, OutputJSON, OutputYAML, "":
		return nil
	}
	return fmt.Errorf("%w: --format %q: want text, json or yaml", ErrUsage, format)
}

// jsonShaped wraps a value whose type carries only json tags (the
// agent's admin answers) so that its yaml has the same field names, in
// the same order, as its json.
type jsonShaped struct{ v any }

func (j jsonShaped) MarshalJSON() ([]byte, error) { return json.Marshal(j.v) }

func (j jsonShaped) MarshalYAML() (any, error) {
	b, err := json.Marshal(j.v)
	if err != nil {
		return nil, err
	}
	// JSON is YAML: decoding it into a node keeps the key order.
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	if len(n.Content) == 0 {
		return nil, nil
	}
	blockStyle(n.Content[0])
	return n.Content[0], nil
}

// blockStyle drops the flow style and quoting that parsing JSON leaves
// on every node, so the yaml reads like any other command's.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}
