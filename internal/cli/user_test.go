package cli

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/agent"
)

// TestUser runs `strand user` against an agent with a SASL_PLAINTEXT
// listener: a user created with a password file (and one from the
// environment) lists with its mechanisms and iterations, authenticates
// with the CLI's SASL flags, and once deleted cannot; deleting or
// listing an unknown user is ErrUnknownUser.
func TestUser(t *testing.T) {
	a, err := agent.Start(t.Context(), agent.Config{
		DataDir:          t.TempDir(),
		Listeners:        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		SnapshotInterval: agent.SnapshotsOff,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("agent.Start: %v", err)
	}
	t.Cleanup(func() { a.Stop(t.Context()) })
	brokers, saslBrokers := a.ListenerAddr("PLAINTEXT"), a.ListenerAddr("SASL_PLAINTEXT")
	user := func(args ...string) result {
		t.Helper()
		return runAdmin(t, "user", append(args, "--brokers", brokers)...)
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("carol-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := user("create", "carol", "--password-file", pwFile, "--iterations", "4096"); r.err != nil || r.stdout != "user carol: SCRAM-SHA-256, SCRAM-SHA-512 set\n" {
		t.Fatalf("create carol: %v %q %s", r.err, r.stdout, r.stderr)
	}
	t.Setenv(EnvUserPassword, "dave-pw")
	if r := user("create", "dave", "--mechanism", "scram-sha-512"); r.err != nil {
		t.Fatalf("create dave: %v %s", r.err, r.stderr)
	}
	r := user("list")
	if want := [][]string{{"USER", "MECHANISM", "ITERATIONS"}, {"carol", "SCRAM-SHA-256", "4096"},
		{"carol", "SCRAM-SHA-512", "4096"}, {"dave", "SCRAM-SHA-512", "8192"}}; r.err != nil || !equalRows(rows(r.stdout), want) {
		t.Fatalf("list: %v\n%s", r.err, r.stdout)
	}
	r = user("list", "--format", "json")
	var users []UserListing
	if err := json.Unmarshal([]byte(r.stdout), &users); r.err != nil || err != nil || len(users) != 2 || users[0].User != "carol" ||
		!slices.Equal(users[1].Credentials, []UserCredential{{Mechanism: "SCRAM-SHA-512", Iterations: 8192}}) {
		t.Fatalf("list --format json: %v %v\n%s", r.err, err, r.stdout)
	}

	asCarol := func(mechanism string) result {
		t.Helper()
		return runAdmin(t, "topic", "list", "--brokers", saslBrokers, "--sasl-mechanism", mechanism, "--sasl-user", "carol", "--sasl-password-file", pwFile)
	}
	for _, m := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		if r := asCarol(m); r.err != nil {
			t.Fatalf("topic list as carol over %s: %v %s", m, r.err, r.stderr)
		}
	}
	if r := user("delete", "carol"); r.err != nil || !strings.Contains(r.stdout, "deleted") {
		t.Fatalf("delete carol: %v %q", r.err, r.stdout)
	}
	if r := asCarol("SCRAM-SHA-512"); r.err == nil || !strings.Contains(r.err.Error(), "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("topic list as deleted carol: %v", r.err)
	}
	if r := user("delete", "carol"); !errors.Is(r.err, ErrUnknownUser) {
		t.Fatalf("deleting carol again: %v", r.err)
	}
	if r := user("list", "carol"); !errors.Is(r.err, ErrUnknownUser) {
		t.Fatalf("listing carol: %v", r.err)
	}
	t.Setenv(EnvUserPassword, "")
	for _, args := range [][]string{{"create", "erin"}, {"create", "erin", "--mechanism", "MD5", "--password-file", pwFile}} {
		if r := user(args...); !errors.Is(r.err, ErrUsage) {
			t.Fatalf("user %v: %v, want a usage error", args, r.err)
		}
	}
}
