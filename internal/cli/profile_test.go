package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

// TestMain keeps the tests off the profiles of whoever runs them: a
// current profile with tls.enabled would change every command.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "strand-cli-test")
	if err != nil {
		panic(err)
	}
	os.Setenv(EnvConfigDir, dir)
	os.Unsetenv(EnvProfile)
	code := pgtest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// useConfigDir points the profile commands at a fresh directory, with no
// client environment variables set.
func useConfigDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv(EnvConfigDir, dir)
	t.Setenv(EnvProfile, "")
	os.Unsetenv(EnvProfile)
	for _, k := range clientKeys {
		if k.flag != "" {
			t.Setenv(envName(k.flag), "")
			os.Unsetenv(envName(k.flag))
		}
	}
	return dir
}

// runProfile runs `strand profile ...` in-process.
func runProfile(t *testing.T, args ...string) result {
	t.Helper()
	return runAdmin(t, "profile", args...)
}

// parsedOptions builds a client command (as the tree is built, reading
// the environment and the profile), parses args and returns the options
// the command would connect with.
func parsedOptions(t *testing.T, args ...string) (ClientOptions, error) {
	t.Helper()
	var o ClientOptions
	cmd := &cobra.Command{Use: "c", RunE: func(*cobra.Command, []string) error { return nil }, SilenceErrors: true, SilenceUsage: true}
	o.Register(cmd.Flags())
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.Execute()
	if err == nil {
		err = o.profileErr
	}
	return o, err
}

// TestClientOptionPrecedence: flag > -X > environment > profile >
// default, for a string, a duration and a bool option, with -X before
// and after the flag.
func TestClientOptionPrecedence(t *testing.T) {
	useConfigDir(t)
	o, err := parsedOptions(t)
	if err != nil || o.Brokers != DefaultBrokers || o.Timeout != defaultTimeout || o.Security.TLS || o.ClientID != "" {
		t.Fatalf("no profile: %+v, %v; want the defaults", o, err)
	}
	if r := runProfile(t, "create", "p", "-X", "brokers=profile:1", "-X", "request.timeout=7s", "-X", "tls.enabled=true", "-X", "client.id=prof"); r.err != nil {
		t.Fatalf("profile create: %v", r.err)
	}

	tests := []struct {
		name    string
		env     string // STRAND_BROKERS
		args    []string
		brokers string
		timeout time.Duration
		tls     bool
		id      string
	}{
		{"profile", "", nil, "profile:1", 7 * time.Second, true, "prof"},
		{"env over profile", "env:1", nil, "env:1", 7 * time.Second, true, "prof"},
		{"-X over env", "env:1", []string{"-X", "brokers=x:1", "-X", "request.timeout=3s", "-X", "tls.enabled=false", "-X", "client.id=x"},
			"x:1", 3 * time.Second, false, "x"},
		{"flag over -X", "env:1", []string{"--brokers", "flag:1", "-X", "brokers=x:1", "--timeout", "1s", "-X", "request.timeout=3s"},
			"flag:1", time.Second, true, "prof"},
		{"flag over an earlier -X", "env:1", []string{"-X", "brokers=x:1", "--brokers", "flag:1"}, "flag:1", 7 * time.Second, true, "prof"},
		{"last -X wins", "", []string{"-X", "brokers=x:1", "-X", "brokers=x:2"}, "x:2", 7 * time.Second, true, "prof"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv(EnvBrokers, tt.env)
			}
			o, err := parsedOptions(t, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if o.Brokers != tt.brokers || o.Timeout != tt.timeout || o.Security.TLS != tt.tls || o.ClientID != tt.id {
				t.Fatalf("brokers %q timeout %v tls %v client.id %q; want %q %v %v %q",
					o.Brokers, o.Timeout, o.Security.TLS, o.ClientID, tt.brokers, tt.timeout, tt.tls, tt.id)
			}
		})
	}

	t.Run("STRAND_PROFILE", func(t *testing.T) {
		if r := runProfile(t, "create", "q", "-X", "brokers=q:1"); r.err != nil {
			t.Fatal(r.err)
		}
		t.Setenv(EnvProfile, "p")
		if o, err := parsedOptions(t); err != nil || o.Brokers != "profile:1" {
			t.Fatalf("brokers %q, %v; want p's", o.Brokers, err)
		}
		t.Setenv(EnvProfile, "nope")
		if _, err := parsedOptions(t); !errors.Is(err, ErrUnknownProfile) {
			t.Fatalf("unknown STRAND_PROFILE: err = %v", err)
		}
	})

	for _, bad := range [][]string{{"-X", "bogus=1"}, {"-X", "novalue"}, {"-X", "tls.enabled=maybe"}, {"-X", "request.timeout=soon"}} {
		if _, err := parsedOptions(t, bad...); !errors.Is(err, ErrUsage) {
			t.Errorf("%v: err = %v, want ErrUsage", bad, err)
		}
	}
	// Through a real command, too: the unknown key is named.
	r := run(t, "127.0.0.1:1", "", "topic", "list", "-X", "bogus=1")
	if !errors.Is(r.err, ErrUsage) || !strings.Contains(r.err.Error(), `"bogus"`) {
		t.Errorf("topic list -X bogus=1: err = %v, want a usage error naming the key", r.err)
	}
}

// TestProfileCommands: create, list, use, print and delete, the file
// they keep, and a client command connecting through the current
// profile's brokers with no --brokers.
func TestProfileCommands(t *testing.T) {
	dir := useConfigDir(t)
	brokers := startAgent(t).KafkaAddr()

	if r := runProfile(t, "print"); !errors.Is(r.err, ErrUnknownProfile) {
		t.Fatalf("print with no profile: err = %v", r.err)
	}
	for _, args := range [][]string{
		{"create", "local", "-X", "brokers=" + brokers, "-X", "user=u", "-X", "pass=secret", "-X", "sasl.mechanism=PLAIN"},
		{"create", "other", "-X", "brokers=10.0.0.1:9092"},
	} {
		if r := runProfile(t, args...); r.err != nil {
			t.Fatalf("%v: %v", args, r.err)
		}
	}
	if r := runProfile(t, "create", "local"); !errors.Is(r.err, ErrUsage) {
		t.Errorf("create of an existing profile: err = %v", r.err)
	}
	if r := runProfile(t, "create", "bad", "-X", "colour=red"); !errors.Is(r.err, ErrUsage) {
		t.Errorf("create with an unknown key: err = %v", r.err)
	}

	var list []profileListEntry
	r := runProfile(t, "list", "--format", "json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("list json: %v\n%s", err, r.stdout)
	}
	if want := []profileListEntry{{"local", false}, {"other", true}}; !slices.Equal(list, want) {
		t.Fatalf("list = %+v, want %+v (create makes the new profile current)", list, want)
	}
	if r := runProfile(t, "use", "nope"); !errors.Is(r.err, ErrUnknownProfile) {
		t.Errorf("use of an unknown profile: err = %v", r.err)
	}
	if r := runProfile(t, "use", "local"); r.err != nil {
		t.Fatal(r.err)
	}
	r = runProfile(t, "list")
	if want := [][]string{{"NAME", "CURRENT"}, {"local", "*"}, {"other"}}; !equalRows(rows(r.stdout), want) {
		t.Fatalf("list:\n%s", r.stdout)
	}

	var p profile
	r = runProfile(t, "print", "--format", "yaml")
	if err := yaml.Unmarshal([]byte(r.stdout), &p); err != nil {
		t.Fatalf("print yaml: %v\n%s", err, r.stdout)
	}
	if p.Name != "local" || p.Values["brokers"] != brokers || p.Values["pass"] != redacted {
		t.Fatalf("print = %+v, want local's values, pass redacted", p)
	}
	b, err := os.ReadFile(filepath.Join(dir, "profiles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "profiles.yaml")); st.Mode().Perm() != 0o600 {
		t.Errorf("profiles.yaml mode %v, want 0600", st.Mode().Perm())
	}
	if !strings.Contains(string(b), "current: local") || !strings.Contains(string(b), "pass: secret") {
		t.Fatalf("profiles.yaml:\n%s", b)
	}

	// The agent has no SASL: a profile without it connects through its
	// brokers alone.
	runProfile(t, "delete", "local")
	if r := runProfile(t, "create", "plain", "-X", "brokers="+brokers); r.err != nil {
		t.Fatal(r.err)
	}
	if r := runAdmin(t, "topic", "create", "via-profile", "-p", "1"); r.err != nil {
		t.Fatalf("topic create through the profile: %v\n%s", r.err, r.stderr)
	}
	if r := runAdmin(t, "topic", "list"); r.err != nil || findRow(rows(r.stdout), "via-profile") == nil {
		t.Fatalf("topic list through the profile: %v\n%s", r.err, r.stdout)
	}

	if r := runProfile(t, "delete", "plain"); r.err != nil {
		t.Fatal(r.err)
	}
	r = runProfile(t, "list", "--format", "json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || !slices.Equal(list, []profileListEntry{{"other", false}}) {
		t.Fatalf("list after deleting the current profile = %+v, %v", list, err)
	}
	if r := runProfile(t, "delete", "plain"); !errors.Is(r.err, ErrUnknownProfile) {
		t.Errorf("delete of a deleted profile: err = %v", r.err)
	}

	// A broken file fails client commands when they connect, naming it,
	// not the building of the command tree.
	if err := os.WriteFile(filepath.Join(dir, "profiles.yaml"), []byte("curent: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runAdmin(t, "topic", "list"); r.err == nil || !strings.Contains(r.err.Error(), "profiles.yaml") {
		t.Fatalf("topic list with a broken profiles.yaml: err = %v", r.err)
	}
}

// TestProfileSecurityUnderBrokersOverride: a profile's TLS and SASL
// settings apply to brokers given by -b, -X or the environment, as rpk's
// do, and the command says so on stderr (key names, never values); with
// the profile's own brokers, or settings overridden, it says nothing.
func TestProfileSecurityUnderBrokersOverride(t *testing.T) {
	useConfigDir(t)
	if r := runProfile(t, "create", "prod", "-X", "brokers=prod:9092", "-X", "sasl.mechanism=PLAIN", "-X", "user=alice", "-X", "pass=s3cret"); r.err != nil {
		t.Fatalf("profile create: %v", r.err)
	}
	if r := runProfile(t, "use", "prod"); r.err != nil {
		t.Fatal(r.err)
	}
	// The note comes before connecting; nothing listens, so every command
	// fails, which is beside the point.
	dead := closedPort(t)
	noteOf := func(env string, args ...string) string {
		t.Helper()
		if env != "" {
			t.Setenv(EnvBrokers, env)
			defer os.Unsetenv(EnvBrokers)
		}
		r := runAdmin(t, "topic", append([]string{"list", "--timeout", "200ms"}, args...)...)
		for line := range strings.Lines(r.stderr) {
			if strings.HasPrefix(line, "note: profile") {
				if strings.Contains(line, "s3cret") {
					t.Fatalf("the note prints the password: %s", line)
				}
				return strings.TrimSpace(line)
			}
		}
		return ""
	}
	for _, tt := range []struct {
		name string
		env  string
		args []string
		want string // in the note; "" for no note
	}{
		{"-b", "", []string{"-b", dead}, "sasl.mechanism, user, pass apply to brokers " + dead},
		{"-X brokers", "", []string{"-X", "brokers=" + dead}, "sasl.mechanism, user, pass apply"},
		{"environment", dead, nil, "sasl.mechanism, user, pass apply"},
		{"user overridden", "", []string{"-b", dead, "--sasl-user", "bob"}, "sasl.mechanism, pass apply"},
		{"all overridden", "", []string{"-b", dead, "-X", "sasl.mechanism=", "-X", "user=", "-X", "pass="}, ""},
		{"profile's brokers", "", []string{"-b", "prod:9092", "-X", "request.timeout=1ms"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := noteOf(tt.env, tt.args...)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("note %q, want one with %q", got, tt.want)
			}
		})
	}
}
