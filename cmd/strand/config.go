package main

// Configuration layers of `strand serve`: a flag on the command line
// wins over STRAND_<FLAG_NAME> in the environment, which wins over the
// YAML file of --config, which wins over the flag's default. The file's
// keys are the flag names, found through the flag set, so a flag added
// to serve is a key without more code here. `strand config print`
// shows where each value came from.

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/cli"
)

// Where a serve setting's value came from, as config print names it.
// sourceDerived is a default serve works out from other settings (the
// object store's URL from the data dir, compaction and hedging from the
// store, the listeners from --kafka-listen).
const (
	sourceDefault = "default"
	sourceFile    = "file"
	sourceEnv     = "env"
	sourceFlag    = "flag"
	sourceDerived = "derived"
)

// configFlag is the flag naming the YAML file; it is no key of the
// file, nor is cobra's help flag.
const (
	configFlag = "config"
	helpFlag   = "help"
)

// maxConfigFileBytes bounds the file read: a config of every flag is a
// few kilobytes.
const maxConfigFileBytes = 1 << 20

// layerConfig fills serve's flags from the environment and the --config
// file below the command line, and returns the source of every flag
// not at its default, by flag name.
func layerConfig(fs *pflag.FlagSet) (map[string]string, error) {
	// Changed, not Visit: config print parses the same flags through
	// its own flag set, which Visit of this one does not see.
	src := map[string]string{}
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Changed {
			src[fl.Name] = sourceFlag
		}
	})
	if err := applyEnv(fs); err != nil {
		return nil, err
	}
	fs.VisitAll(func(fl *pflag.Flag) {
		if _, ok := src[fl.Name]; !ok && fl.Changed {
			src[fl.Name] = sourceEnv
		}
	})
	if fl := fs.Lookup(configFlag); fl != nil && fl.Value.String() != "" {
		if err := applyConfigFile(fs, fl.Value.String(), src); err != nil {
			return nil, err
		}
	}
	return src, nil
}

// applyConfigFile sets from the YAML file at path every flag src has
// no source for, recording them as file. Every key is checked, those
// the command line or the environment override too, so a mistake in
// the file is found the day it is written.
func applyConfigFile(fs *pflag.FlagSet, path string, src map[string]string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigFileBytes+1))
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if len(b) > maxConfigFileBytes {
		return fmt.Errorf("config %s: larger than %d bytes", path, maxConfigFileBytes)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil // an empty file sets nothing
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return fmt.Errorf("config %s:%d: want a mapping of flag names to values", path, top.Line)
	}
	// A scratch flag set checks the values that a higher layer overrides.
	var scratch *pflag.FlagSet
	var errs []string
	seen := map[string]bool{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		name := k.Value
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Sprintf("%s:%d: key %q: %s", path, k.Line, name, fmt.Sprintf(format, args...)))
		}
		if fs.Lookup(name) == nil || name == configFlag || name == helpFlag {
			fail("unknown key (the keys are the flags of strand serve)%s", didYouMean(fs, name, ""))
			continue
		}
		if seen[name] {
			fail("given twice")
			continue
		}
		seen[name] = true
		val, err := yamlFlagValue(v)
		if err != nil {
			fail("%v", err)
			continue
		}
		set := fs
		if src[name] != "" {
			if scratch == nil {
				scratch = newServeCmd().Flags()
			}
			set = scratch
		}
		if err := set.Set(name, val); err != nil {
			fail("%v", err)
			continue
		}
		if set == fs {
			src[name] = sourceFile
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("config %s", strings.Join(errs, "; "))
	}
	return nil
}

// yamlFlagValue is a YAML value in a flag's text: a scalar as written, a
// sequence of scalars as the flag's comma-separated form.
func yamlFlagValue(v *yaml.Node) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return "", fmt.Errorf("no value")
		}
		return v.Value, nil
	case yaml.SequenceNode:
		items := make([]string, len(v.Content))
		for i, it := range v.Content {
			if it.Kind != yaml.ScalarNode {
				return "", fmt.Errorf("line %d: a list item must be a plain value", it.Line)
			}
			items[i] = it.Value
		}
		return strings.Join(items, ","), nil
	default:
		return "", fmt.Errorf("want a value or a list of values")
	}
}

// configEntry is one serve setting as config print shows it.
type configEntry struct {
	Key string `json:"key" yaml:"key"`
	// Value is what serve runs with.
	Value  string `json:"value" yaml:"value"`
	Source string `json:"source" yaml:"source"`
	// Given is the flag's own value where serve runs with another (a
	// default derived from other settings).
	Given *string `json:"given,omitempty" yaml:"given,omitempty"`
}

// newConfigCmd is `strand config`.
func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the configuration strand serve would run with",
	}
	serve, resolve := newServe()
	var format string
	print := &cobra.Command{
		Use:   "print",
		Short: "Print every setting of strand serve, its effective value and where it came from (default, file, env or flag)",
		Long: `Print every setting of strand serve with the value it would run with and
its source: flag (the command line), env (STRAND_<FLAG_NAME>), file (the
YAML file of --config) or default, in that order of precedence, or derived
for a default serve works out from other settings (the object store and
log under --data-dir, compaction, hedging and the PUT budget from the
object store, the lease from the log, the listeners and the addresses they
advertise from --kafka-listen). It takes serve's flags and checks them as
serve does: what serve would refuse to start with, it refuses with the
same message. Passwords and tokens are not shown.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cli.CheckOutputFormat(format); err != nil {
				return err
			}
			src, err := layerConfig(serve.Flags())
			if err != nil {
				return err
			}
			r, err := resolve(serve.Flags(), io.Discard)
			if err != nil {
				return err
			}
			effective, err := effectiveValues(r.cfg)
			if err != nil {
				return err
			}
			entries := configEntries(serve.Flags(), src, effective)
			return cli.WriteOutput(cmd.OutOrStdout(), format, entries, func(w io.Writer) error {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE")
				for _, e := range entries {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Key, e.Value, e.Source)
				}
				return tw.Flush()
			})
		},
	}
	// The same flags as serve's, so the command line is a layer here too.
	print.Flags().AddFlagSet(serve.Flags())
	print.Flags().StringVar(&format, "format", "text", "output format: text, json or yaml")
	print.SetFlagErrorFunc(suggestFlag)
	cmd.AddCommand(print)
	return cmd
}

// effectiveValues are the settings of c, by flag name, whose value serve
// may work out rather than take from its flag.
func effectiveValues(c agent.Config) (map[string]string, error) {
	listeners, advertised, err := c.EffectiveListeners()
	if err != nil {
		return nil, err
	}
	hedge := strconv.FormatFloat(c.ObjStoreHedgePercentile, 'g', -1, 64)
	if c.ObjStoreHedgePercentile == agent.HedgeOff {
		hedge = "0" // the flag's spelling of off
	}
	budget := c.MemoryBudget
	return map[string]string{
		"data-dir":                  c.DataDir,
		"objstore":                  c.ObjStore,
		"log":                       c.Log,
		"kafka-listen":              c.KafkaListen,
		"listeners":                 listeners,
		"advertised-listeners":      advertised,
		"compaction-enable":         strconv.FormatBool(c.Compaction),
		"objstore-hedge-percentile": hedge,
		"max-puts-per-sec":          strconv.FormatFloat(c.MaxPutsPerSec, 'g', -1, 64),
		"lease":                     c.Lease.String(),
		"memory-budget":             agent.BytesFlag(&budget).String(),
		"node-id":                   strconv.Itoa(int(c.NodeID)),
	}, nil
}

// configEntries lists the flags of fs, sorted by name, with their
// sources and secrets hidden, and the effective value where serve runs
// with another than the flag's.
func configEntries(fs *pflag.FlagSet, src, effective map[string]string) []configEntry {
	var out []configEntry
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Name == helpFlag {
			return
		}
		s := src[fl.Name]
		if s == "" {
			s = sourceDefault
		}
		e := configEntry{Key: fl.Name, Value: redactSecret(fl.Name, fl.Value.String()), Source: s}
		if v, ok := effective[fl.Name]; ok {
			if v = redactSecret(fl.Name, v); v != e.Value {
				given := e.Value
				e.Value, e.Given = v, &given
				if s == sourceDefault {
					e.Source = sourceDerived
				}
			}
		}
		out = append(out, e)
	})
	return out
}

// redacted replaces a secret in config print.
const redacted = "REDACTED"

// redactSecret hides what is a secret in flag name's value: the whole
// value of a flag that holds a password, token or secret itself (not a
// file of one), and in a URL its user info password and query
// parameters named like one (a postgres:// --log may carry both).
func redactSecret(name, v string) string {
	if v == "" {
		return v
	}
	if secretName(name) && !strings.HasSuffix(name, "-file") {
		return redacted
	}
	if !strings.Contains(v, "://") {
		return v
	}
	u, err := url.Parse(v)
	if err != nil {
		// Unparsable but URL-like: it may hold anything.
		if strings.Contains(v, "@") || strings.Contains(v, "?") {
			return redacted
		}
		return v
	}
	changed := false
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), redacted)
			changed = true
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if secretName(k) {
				q.Set(k, redacted)
				changed = true
			}
		}
		u.RawQuery = q.Encode()
	}
	if !changed {
		return v // as written: String would lower-case the scheme
	}
	return u.String()
}

// secretName reports whether a flag or parameter name names a secret.
func secretName(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"password", "passwd", "token", "secret", "credential"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}
