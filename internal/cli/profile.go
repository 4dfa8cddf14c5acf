// Named profiles: sets of client options (options.go's -X keys) kept in
// profiles.yaml in the user's config directory, one of them current,
// whose values the client commands take as their defaults. The `profile`
// command creates, selects, lists, prints and deletes them.

package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// EnvConfigDir overrides where profiles.yaml lives (default: strand
// under os.UserConfigDir, e.g. ~/.config/strand).
const EnvConfigDir = "STRAND_CONFIG_DIR"

// EnvProfile selects a profile for one command, over the file's current
// one.
const EnvProfile = "STRAND_PROFILE"

// ErrUnknownProfile reports a profile name the file does not hold.
var ErrUnknownProfile = errors.New("unknown profile")

// profileFile is profiles.yaml.
type profileFile struct {
	Current  string                       `yaml:"current,omitempty"`
	Profiles map[string]map[string]string `yaml:"profiles,omitempty"`
}

// profile is one named profile: -X keys and their values.
type profile struct {
	Name   string            `json:"name" yaml:"name"`
	Values map[string]string `json:"values" yaml:"values"`
}

func profilePath() (string, error) {
	dir := os.Getenv(EnvConfigDir)
	if dir == "" {
		base, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("profiles: %w (set %s)", err, EnvConfigDir)
		}
		dir = filepath.Join(base, "strand")
	}
	return filepath.Join(dir, "profiles.yaml"), nil
}

// loadProfiles reads profiles.yaml; a missing file is no profiles.
func loadProfiles() (*profileFile, string, error) {
	path, err := profilePath()
	if err != nil {
		return nil, "", err
	}
	pf := &profileFile{}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return pf, path, nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("profiles: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(pf); err != nil && !errors.Is(err, io.EOF) {
		return nil, "", fmt.Errorf("profiles: %s: %w", path, err)
	}
	return pf, path, nil
}

// save writes pf next to path and renames it into place, so a crash
// leaves the old file or the new one. 0600: a profile may hold a
// password.
func (pf *profileFile) save(path string) error {
	b, err := yaml.Marshal(pf)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("profiles: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".profiles-*.yaml")
	if err != nil {
		return fmt.Errorf("profiles: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("profiles: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("profiles: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("profiles: %w", err)
	}
	return nil
}

func (pf *profileFile) get(name string) (profile, error) {
	v, ok := pf.Profiles[name]
	if !ok {
		return profile{}, fmt.Errorf("%w: %q", ErrUnknownProfile, name)
	}
	return profile{Name: name, Values: v}, nil
}

// currentProfile is the profile $STRAND_PROFILE names, else the file's
// current one; none is an empty profile.
func currentProfile() (profile, error) {
	pf, _, err := loadProfiles()
	if err != nil {
		return profile{}, err
	}
	name := os.Getenv(EnvProfile)
	if name == "" {
		name = pf.Current
	}
	if name == "" {
		return profile{}, nil
	}
	return pf.get(name)
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// checkProfileValues checks each key and value as -X would take it, on
// a scratch set of client flags.
func checkProfileValues(values map[string]string) error {
	var o ClientOptions
	fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
	o.Register(fs)
	for _, k := range sortedKeys(values) {
		if err := o.setKey(fs, k, values[k]); err != nil {
			return err
		}
	}
	return nil
}

// NewProfileCommand returns `profile` with create, use, list, print and
// delete.
func NewProfileCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Named sets of client options (brokers, TLS, SASL...), one of them current",
		Long: "Profiles hold client options under a name, so `strand profile use prod` points every\n" +
			"client command at another cluster. They live in profiles.yaml in $" + EnvConfigDir + ", else in\n" +
			"strand under the user's config directory (~/.config/strand on Linux); $" + EnvProfile + "\n" +
			"picks one for a single command. The current profile's values are the defaults of the\n" +
			"client flags: precedence is flag > -X > environment (STRAND_BROKERS...) > profile >\n" +
			"built-in default. The keys are -X's:\n" + clientKeysHelp() +
			"A profile holding pass stores it in plain text (the file is 0600); pass.file is safer.",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newProfileCreateCmd(), newProfileUseCmd(), newProfileListCmd(), newProfilePrintCmd(), newProfileDeleteCmd())
	return cmd
}

func newProfileCreateCmd() *cobra.Command {
	var opts []string
	cmd := &cobra.Command{
		Use:   "create NAME [-X key=value]...",
		Short: "Create a profile from -X options and make it current",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			values := make(map[string]string)
			for _, kv := range opts {
				k, v, err := splitKeyValue("-X", kv)
				if err != nil {
					return err
				}
				values[k] = v
			}
			if err := checkProfileValues(values); err != nil {
				return err
			}
			pf, path, err := loadProfiles()
			if err != nil {
				return err
			}
			if _, ok := pf.Profiles[name]; ok {
				return fmt.Errorf("%w: profile %q exists; delete it first", ErrUsage, name)
			}
			if pf.Profiles == nil {
				pf.Profiles = make(map[string]map[string]string)
			}
			pf.Profiles[name] = values
			pf.Current = name
			if err := pf.save(path); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created profile %s (now current) in %s\n", name, path)
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&opts, "option", "X", nil, "client option key=value (repeatable)")
	return cmd
}

// changeProfile loads the file, fails unless it holds name, applies
// change and saves the result.
func changeProfile(name string, change func(pf *profileFile)) error {
	pf, path, err := loadProfiles()
	if err != nil {
		return err
	}
	if _, err := pf.get(name); err != nil {
		return err
	}
	change(pf)
	return pf.save(path)
}

func newProfileUseCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "use NAME",
		Short: "Make a profile current",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := changeProfile(args[0], func(pf *profileFile) { pf.Current = args[0] }); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "profile %s is current\n", args[0])
			return nil
		},
	}
}

func newProfileDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a profile (if it was current, none is)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := changeProfile(args[0], func(pf *profileFile) {
				delete(pf.Profiles, args[0])
				if pf.Current == args[0] {
					pf.Current = ""
				}
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted profile %s\n", args[0])
			return nil
		},
	}
}

// profileListEntry is one row of `profile list`.
type profileListEntry struct {
	Name    string `json:"name" yaml:"name"`
	Current bool   `json:"current" yaml:"current"`
}

func newProfileListCmd() *cobra.Command {
	var format *string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the profiles; the current one is marked *",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := CheckOutputFormat(*format); err != nil {
				return err
			}
			pf, _, err := loadProfiles()
			if err != nil {
				return err
			}
			out := []profileListEntry{}
			for _, name := range slices.Sorted(maps.Keys(pf.Profiles)) {
				out = append(out, profileListEntry{Name: name, Current: name == pf.Current})
			}
			return WriteOutput(cmd.OutOrStdout(), *format, out, func(w io.Writer) error {
				t := newTable(w, "NAME", "CURRENT")
				for _, e := range out {
					mark := ""
					if e.Current {
						mark = "*"
					}
					t.row(e.Name, mark)
				}
				return t.flush()
			})
		},
	}
	format = addOutputFlag(cmd)
	return cmd
}

// redacted stands in for a password in printed profiles.
const redacted = "[REDACTED]"

func newProfilePrintCmd() *cobra.Command {
	var format *string
	cmd := &cobra.Command{
		Use:   "print [NAME]",
		Short: "Print a profile's options (default: the current profile), the password redacted",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := CheckOutputFormat(*format); err != nil {
				return err
			}
			var (
				p   profile
				err error
			)
			if len(args) == 1 {
				var pf *profileFile
				if pf, _, err = loadProfiles(); err == nil {
					p, err = pf.get(args[0])
				}
			} else if p, err = currentProfile(); err == nil && p.Name == "" {
				err = fmt.Errorf("%w: no profile is current (strand profile use NAME)", ErrUnknownProfile)
			}
			if err != nil {
				return err
			}
			p.Values = maps.Clone(p.Values)
			if _, ok := p.Values["pass"]; ok {
				p.Values["pass"] = redacted
			}
			if p.Values == nil {
				p.Values = map[string]string{}
			}
			return WriteOutput(cmd.OutOrStdout(), *format, p, func(w io.Writer) error {
				t := newTable(w, "KEY", "VALUE")
				for _, k := range sortedKeys(p.Values) {
					t.row(k, p.Values[k])
				}
				return t.flush()
			})
		},
	}
	format = addOutputFlag(cmd)
	return cmd
}
