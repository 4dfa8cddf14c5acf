package cli

import (
	"encoding/json"
	"io"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// Output formats of list and describe commands (--format), as rpk's:
// text is the aligned table a person reads; json and yaml are the same
// data for scripts, with stable field names.
const (
	OutputText = "text"
	OutputJSON = "json"
	OutputYAML = "yaml"
)

// addOutputFlag registers --format on a list or describe command and
// returns where its value lands. (consume's --format is its record
// template and stays that.)
func addOutputFlag(cmd *cobra.Command) *string {
	f := new(string)
	cmd.Flags().StringVar(f, "format", OutputText, "output format: text, json or yaml")
	return f
}

// WriteOutput writes v in format: text calls text (the command's own
// table), json and yaml encode v, whose fields should carry json and
// yaml tags. An unknown format is a usage error, found before anything
// is written. strand config print uses it too.
func WriteOutput(w io.Writer, format string, v any, text func(io.Writer) error) error {
	switch format {
	case OutputText, "":
		return text(w)
	case OutputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case OutputYAML:
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(v); err != nil {
			return err
		}
		return enc.Close()
	default:
		return CheckOutputFormat(format)
	}
}
