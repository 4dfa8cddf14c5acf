// Client options by key: `-X key=value` on every client command, and
// the values of named profiles (profile.go), with rpk's key names where
// rpk has the setting.
//
// Precedence, highest first: a flag (--brokers), -X (brokers=...), the
// environment (STRAND_BROKERS), the current profile, the built-in
// default. The environment and the profile are read when the command
// tree is built, as the flags' defaults (so --help shows them); -X
// sets a flag's value at parse time unless the flag itself is given.

package cli

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// clientKey is one -X key: the flag it sets, or for client.id (no
// flag) ClientOptions.ClientID.
type clientKey struct {
	key, flag, help string
}

// clientKeys are the -X keys, in the order help lists them.
var clientKeys = []clientKey{
	{"brokers", "brokers", "comma-separated seed brokers"},
	{"tls.enabled", "tls", "true: connect with TLS"},
	{"tls.ca", "tls-ca", "PEM file of the CAs to trust"},
	{"tls.cert", "tls-cert", "PEM client certificate"},
	{"tls.key", "tls-key", "PEM private key of tls.cert"},
	{"sasl.mechanism", "sasl-mechanism", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"},
	{"user", "sasl-user", "SASL user name"},
	{"pass", "sasl-password", "SASL password"},
	{"pass.file", "sasl-password-file", "file holding the SASL password"},
	{"client.id", "", "the Kafka client id (default " + clientID + ")"},
	{"request.timeout", "timeout", "bound on each admin request and each record's delivery (Go duration)"},
}

func lookupClientKey(key string) (clientKey, bool) {
	i := slices.IndexFunc(clientKeys, func(k clientKey) bool { return k.key == key })
	if i < 0 {
		return clientKey{}, false
	}
	return clientKeys[i], true
}

// clientKeysHelp lists the keys for -X's and profile's help.
func clientKeysHelp() string {
	var b strings.Builder
	for _, k := range clientKeys {
		fmt.Fprintf(&b, "  %-16s %s\n", k.key, k.help)
	}
	return b.String()
}

func clientKeyNames() string {
	keys := make([]string, len(clientKeys))
	for i, k := range clientKeys {
		keys[i] = k.key
	}
	return strings.Join(keys, ", ")
}

// unknownKeyError is the usage error for a key -X does not know.
func unknownKeyError(key string) error {
	return fmt.Errorf("%w: unknown client option %q; known: %s", ErrUsage, key, clientKeyNames())
}

// setKey sets key's value in o, whose flags are in fs. A flag given on
// the command line wins: its value is left alone.
func (o *ClientOptions) setKey(fs *pflag.FlagSet, key, value string) error {
	k, ok := lookupClientKey(key)
	if !ok {
		return unknownKeyError(key)
	}
	if k.flag == "" {
		o.ClientID = value
		return nil
	}
	f := fs.Lookup(k.flag)
	if f == nil {
		return fmt.Errorf("%w: client option %s: this command has no --%s", ErrUsage, key, k.flag)
	}
	if f.Changed {
		return nil
	}
	if err := f.Value.Set(value); err != nil {
		return fmt.Errorf("%w: client option %s=%q: %v", ErrUsage, key, value, err)
	}
	return nil
}

// envSet reports whether flag's environment variable sets it, and so
// wins over the profile. A blank one does not: Register reads it as
// the built-in default.
func envSet(flag string) bool {
	return strings.TrimSpace(os.Getenv(envName(flag))) != ""
}

// applyProfile makes the current profile's values the defaults of the
// flags in fs that the environment does not set. A profile that cannot
// be read is kept as o.profileErr and fails the command when it
// connects, not the building of the command tree (strand serve builds
// it too).
func (o *ClientOptions) applyProfile(fs *pflag.FlagSet) {
	p, err := currentProfile()
	if err != nil {
		o.profileErr = err
		return
	}
	for _, key := range sortedKeys(p.Values) {
		value := p.Values[key]
		k, ok := lookupClientKey(key)
		if !ok {
			o.profileErr = fmt.Errorf("profile %s: %w", p.Name, unknownKeyError(key))
			return
		}
		if k.flag != "" && envSet(k.flag) {
			continue
		}
		if err := o.setKey(fs, key, value); err != nil {
			o.profileErr = fmt.Errorf("profile %s: %w", p.Name, err)
			return
		}
		if f := fs.Lookup(k.flag); f != nil {
			f.DefValue = f.Value.String()
		}
	}
}

// optionFlag is -X: each value is applied as it is parsed.
type optionFlag struct {
	o    *ClientOptions
	fs   *pflag.FlagSet
	seen []string
}

func (x *optionFlag) String() string { return strings.Join(x.seen, ",") }
func (x *optionFlag) Type() string   { return "key=value" }

func (x *optionFlag) Set(kv string) error {
	k, v, err := splitKeyValue("-X", kv)
	if err != nil {
		return err
	}
	if err := x.o.setKey(x.fs, k, v); err != nil {
		return err
	}
	x.seen = append(x.seen, kv)
	return nil
}

// registerOptions adds -X to fs and applies the current profile; Register
// calls it once the flags -X sets exist.
func (o *ClientOptions) registerOptions(fs *pflag.FlagSet) {
	o.applyProfile(fs)
	fs.VarP(&optionFlag{o: o, fs: fs}, "option", "X",
		"client option key=value, repeatable ("+clientKeyNames()+
			"); precedence: flag > -X > environment > profile > default (strand profile --help)")
}

// securityKeys are the profile keys that decide how a connection is
// secured: they follow the profile to whatever brokers the command uses.
var securityKeys = []string{"tls.enabled", "tls.ca", "tls.cert", "tls.key", "sasl.mechanism", "user", "pass", "pass.file"}

// profileSecurityNote says which of the current profile's TLS and SASL
// settings apply to brokers other than the profile's (given by --brokers,
// -X brokers or $STRAND_BROKERS), or "" when none do. They apply, as rpk
// applies a profile's TLS and SASL under an -X brokers override, since
// each option is overridden on its own; the note keeps that from being a
// surprise (a password sent to a cluster it was not meant for). Values
// are never printed, only key names.
func profileSecurityNote(fs *pflag.FlagSet) string {
	brokers := fs.Lookup("brokers")
	if brokers == nil {
		return ""
	}
	p, err := currentProfile()
	if err != nil || p.Name == "" {
		return "" // a broken profile fails the command on its own
	}
	// Brokers are the profile's unless something else set them: a
	// profile without brokers leaves the default, which is no override.
	if pb, ok := p.Values["brokers"]; ok && pb == brokers.Value.String() {
		return ""
	} else if !ok && !brokers.Changed && !envSet("brokers") && brokers.Value.String() == DefaultBrokers {
		return ""
	}
	var applied []string
	for _, key := range securityKeys {
		v, ok := p.Values[key]
		if !ok {
			continue
		}
		k, _ := lookupClientKey(key)
		f := fs.Lookup(k.flag)
		if f == nil || f.Changed || envSet(k.flag) || f.Value.String() != v {
			continue // set for this command by a flag, -X or the environment
		}
		applied = append(applied, key)
	}
	if len(applied) == 0 {
		return ""
	}
	return fmt.Sprintf("note: profile %s's %s apply to brokers %s, which are not the profile's (as rpk applies a profile under -X brokers); "+
		"override them with flags or -X, or use a profile for that cluster", p.Name, strings.Join(applied, ", "), brokers.Value.String())
}

// noteProfileSecurity runs profileSecurityNote before every command with
// client flags, printing the note on stderr.
func noteProfileSecurity(root *cobra.Command) {
	for _, c := range root.Commands() {
		noteProfileSecurity(c)
	}
	if root.RunE == nil {
		return
	}
	// The flag may be a parent's persistent one (topic's, group's), so
	// it is looked up once cobra has merged them, when the command runs;
	// profileSecurityNote ignores a command without it.
	prev := root.PreRunE
	root.PreRunE = func(cmd *cobra.Command, args []string) error {
		if note := profileSecurityNote(cmd.Flags()); note != "" {
			fmt.Fprintln(cmd.ErrOrStderr(), note)
		}
		if prev != nil {
			return prev(cmd, args)
		}
		return nil
	}
}
