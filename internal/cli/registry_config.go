package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/sr"
)

// The compatibility levels and modes of `strand registry config` and
// `strand registry mode`, the global ones and subjects'.

// RegistryConfig is a compatibility level: the global one (Subject
// empty) or a subject's, whose Source says whether the subject has its
// own ("subject") or takes the global one ("global").
type RegistryConfig struct {
	Subject string `json:"subject,omitempty" yaml:"subject,omitempty"`
	Level   string `json:"level" yaml:"level"`
	Source  string `json:"source" yaml:"source"`
}

// globalName stands for the registry as a whole in text output.
const globalName = "(global)"

func printRegistryConfig(w io.Writer, c RegistryConfig) error {
	t := newTable(w, "SUBJECT", "LEVEL", "SOURCE")
	t.row(cmp.Or(c.Subject, globalName), c.Level, c.Source)
	return t.flush()
}

func newRegistryConfigGetCmd(o *registryOptions) *cobra.Command {
	var format *string
	cmd := &cobra.Command{
		Use:   "get [SUBJECT]",
		Short: "Show the global compatibility level, or the one a subject is checked at",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, cancel, err := o.open(cmd.Context(), *format)
			if err != nil {
				return err
			}
			defer cancel()
			out := RegistryConfig{Source: "global"}
			if len(args) == 1 {
				out.Subject, out.Source = args[0], "subject"
			}
			res := cl.Compatibility(ctx, out.Subject)[0]
			if e := (*sr.ResponseError)(nil); errors.As(res.Err, &e) && e.ErrorCode == sr.ErrSubjectLevelCompatibilityNotConfigured.Code {
				// No level of its own: it is checked at the global one.
				out.Source = "global"
				res = cl.Compatibility(sr.WithParams(ctx, sr.DefaultToGlobal), out.Subject)[0]
			}
			if res.Err != nil {
				return registryErr(res.Err)
			}
			out.Level = res.Level.String()
			return WriteOutput(cmd.OutOrStdout(), *format, out, func(w io.Writer) error { return printRegistryConfig(w, out) })
		},
	}
	format = addOutputFlag(cmd)
	return cmd
}

func newRegistryConfigSetCmd(o *registryOptions) *cobra.Command {
	var (
		level  string
		format *string
	)
	cmd := &cobra.Command{
		Use:   "set [SUBJECT] --level LEVEL",
		Short: "Set the global compatibility level, or a subject's",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var l sr.CompatibilityLevel
			if level == "" || l.UnmarshalText([]byte(level)) != nil {
				return fmt.Errorf("%w: --level %q: want NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL or FULL_TRANSITIVE", ErrUsage, level)
			}
			cl, ctx, cancel, err := o.open(cmd.Context(), *format)
			if err != nil {
				return err
			}
			defer cancel()
			out := RegistryConfig{Level: l.String(), Source: "global"}
			if len(args) == 1 {
				out.Subject, out.Source = args[0], "subject"
			}
			if res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: l}, out.Subject)[0]; res.Err != nil {
				return registryErr(res.Err)
			}
			return WriteOutput(cmd.OutOrStdout(), *format, out, func(w io.Writer) error { return printRegistryConfig(w, out) })
		},
	}
	cmd.Flags().StringVar(&level, "level", "", "NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL or FULL_TRANSITIVE (required)")
	format = addOutputFlag(cmd)
	return cmd
}

func newRegistryConfigDeleteCmd(o *registryOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete SUBJECT",
		Short: "Remove a subject's own compatibility level; the global one applies again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, cancel, err := o.open(cmd.Context(), OutputText)
			if err != nil {
				return err
			}
			defer cancel()
			// The answer is the level removed; Confluent's Config names
			// it compatibilityLevel, which sr.ResetCompatibility does not
			// read (it reads compatibility), so both are read here.
			var removed struct {
				Level  string `json:"compatibilityLevel"`
				Level2 string `json:"compatibility"`
			}
			if err := cl.Do(ctx, http.MethodDelete, "/config/"+url.PathEscape(args[0]), nil, &removed); err != nil {
				return registryErr(err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "removed %s's level %s; the global level applies\n", args[0], cmp.Or(removed.Level, removed.Level2))
			return err
		},
	}
}

// RegistryMode is a mode: the global one (Subject empty) or a
// subject's (its own, else the global one).
type RegistryMode struct {
	Subject string `json:"subject,omitempty" yaml:"subject,omitempty"`
	Mode    string `json:"mode" yaml:"mode"`
}

// registryModes are the modes a registry takes. (sr.Mode lacks
// READONLY_OVERRIDE, so the mode commands send and read the mode as a
// string through the client's Do.)
var registryModes = []string{"READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT"}

func modePath(subject string) string {
	if subject == "" {
		return "/mode"
	}
	return "/mode/" + url.PathEscape(subject)
}

func printRegistryMode(w io.Writer, m RegistryMode) error {
	t := newTable(w, "SUBJECT", "MODE")
	t.row(cmp.Or(m.Subject, globalName), m.Mode)
	return t.flush()
}

func newRegistryModeGetCmd(o *registryOptions) *cobra.Command {
	var format *string
	cmd := &cobra.Command{
		Use:   "get [SUBJECT]",
		Short: "Show the global mode, or a subject's",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, cancel, err := o.open(cmd.Context(), *format)
			if err != nil {
				return err
			}
			defer cancel()
			var out RegistryMode
			if len(args) == 1 {
				out.Subject = args[0]
				// A subject without a mode of its own shows the global
				// one, as its help says, rather than 40409.
				ctx = sr.WithParams(ctx, sr.DefaultToGlobal)
			}
			if err := cl.Do(ctx, http.MethodGet, modePath(out.Subject), nil, &out); err != nil {
				return registryErr(err)
			}
			return WriteOutput(cmd.OutOrStdout(), *format, out, func(w io.Writer) error { return printRegistryMode(w, out) })
		},
	}
	format = addOutputFlag(cmd)
	return cmd
}

func newRegistryModeSetCmd(o *registryOptions) *cobra.Command {
	var (
		mode   string
		force  bool
		format *string
	)
	cmd := &cobra.Command{
		Use:   "set [SUBJECT] --mode MODE",
		Short: "Set the global mode, or a subject's",
		Long: "Set the global mode, or a subject's: READWRITE, READONLY (no registrations),\n" +
			"READONLY_OVERRIDE or IMPORT (registrations keep the ids and versions they name; only\n" +
			"over an empty registry or subject unless --force).",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m := strings.ToUpper(mode)
			if !slices.Contains(registryModes, m) {
				return fmt.Errorf("%w: --mode %q: want %s", ErrUsage, mode, strings.Join(registryModes, ", "))
			}
			cl, ctx, cancel, err := o.open(cmd.Context(), *format)
			if err != nil {
				return err
			}
			defer cancel()
			if force {
				ctx = sr.WithParams(ctx, sr.Force)
			}
			out := RegistryMode{Mode: m}
			if len(args) == 1 {
				out.Subject = args[0]
			}
			var answer RegistryMode
			if err := cl.Do(ctx, http.MethodPut, modePath(out.Subject), map[string]string{"mode": m}, &answer); err != nil {
				return registryErr(err)
			}
			return WriteOutput(cmd.OutOrStdout(), *format, out, func(w io.Writer) error { return printRegistryMode(w, out) })
		},
	}
	cmd.Flags().StringVar(&mode, "mode", "", strings.Join(registryModes, ", ")+" (required)")
	cmd.Flags().BoolVar(&force, "force", false, "IMPORT over a subject or registry that has versions")
	format = addOutputFlag(cmd)
	return cmd
}
