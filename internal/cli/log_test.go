package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/strandkafka/strand/internal/agent"
)

// startAgent starts an in-process agent on loopback ports and returns
// its HTTP address.
func startAgent(t *testing.T) *agent.Agent {
	t.Helper()
	a, _ := startAgentOn(t, t.TempDir())
	return a
}

// runLog runs `strand log ...` in-process.
func runLog(t *testing.T, args ...string) result {
	t.Helper()
	return runAdmin(t, "log", args...)
}

// runAdmin runs `strand <group> ...`, a command of an agent's admin API,
// in-process.
func runAdmin(t *testing.T, group string, args ...string) result {
	t.Helper()
	root := &cobra.Command{Use: "strand", SilenceUsage: true, SilenceErrors: true}
	AddCommands(root)
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{group}, args...))
	ctx, cancel := context.WithTimeout(t.Context(), commandDeadline)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if ctx.Err() != nil {
		t.Fatalf("strand %s %s: hit the %v deadlock guard", group, strings.Join(args, " "), commandDeadline)
	}
	return result{stdout: out.String(), stderr: errOut.String(), err: err}
}

func mustRunLog(t *testing.T, args ...string) string {
	t.Helper()
	r := runLog(t, args...)
	if r.err != nil {
		t.Fatalf("strand log %s: %v\n%s", strings.Join(args, " "), r.err, r.stderr)
	}
	return r.stdout
}

// TestLogCommands drives status, snapshot and migrate against a real
// agent and checks both the JSON and the table output.
func TestLogCommands(t *testing.T) {
	a := startAgent(t)
	http := "--http=" + a.HTTPAddr()

	var st agent.LogStatus
	if err := json.Unmarshal([]byte(mustRunLog(t, "status", http, "--json")), &st); err != nil {
		t.Fatalf("status --json: %v", err)
	}
	if len(st.Chain.Segments) != 1 || st.Agent.WriterID != a.Replica().WriterID() || st.Snapshot != nil {
		t.Fatalf("status --json: %+v", st)
	}
	if len(st.Agents) != 1 || st.Agents[0].AgentID != st.Agent.WriterID || !st.Agents[0].Live || st.Agents[0].Applied > st.Tail {
		t.Fatalf("status --json: agents %+v, want this agent alone, live, applied up to the tail %d", st.Agents, st.Tail)
	}
	var y struct {
		Tail   uint64 `yaml:"tail"`
		Agents []struct {
			AgentID string `yaml:"agent_id"`
		} `yaml:"agents"`
	}
	if err := yaml.Unmarshal([]byte(mustRunLog(t, "status", http, "--format", "yaml")), &y); err != nil {
		t.Fatalf("status --format yaml: %v", err)
	}
	if y.Tail < st.Tail || len(y.Agents) != 1 || y.Agents[0].AgentID != st.Agent.WriterID {
		t.Fatalf("status --format yaml: %+v, want the --json answer's agent and a tail from %d", y, st.Tail)
	}
	out := mustRunLog(t, "status", http)
	// The agent's own lease heartbeats are log entries, so the active
	// segment's end (and entry count) is the tail, not 0. A renewal
	// between the two status calls would move it, but renewals come
	// every lease/3 (seconds), far apart from these calls.
	tail := strconv.FormatUint(uint64(st.Tail), 10)
	for _, want := range [][]string{
		{"snapshot", "none"},
		{"agent", "writer", st.Agent.WriterID + ","},
		// The agent's own entry in the agent table.
		{"0", st.Agent.WriterID},
		{"0", "0", tail, tail, "active", "file:seg-00000000"},
	} {
		if !hasRow(rows(out), want) {
			t.Errorf("status output lacks the row %q:\n%s", want, out)
		}
	}

	out = mustRunLog(t, "snapshot", http)
	if !strings.Contains(out, agent.SnapshotPrefix+"snap/") {
		t.Errorf("snapshot output names no manifest under %s:\n%s", agent.SnapshotPrefix, out)
	}
	if out := mustRunLog(t, "status", http); !strings.Contains(out, " "+agent.SnapshotPrefix+"snap/") {
		t.Errorf("status after a snapshot shows none:\n%s", out)
	}

	out = mustRunLog(t, "migrate", http, "--to", "file:seg-cli")
	rs := rows(out)
	if !strings.HasPrefix(out, "migrated in ") || len(rs) != 5 {
		t.Fatalf("migrate output:\n%s", out)
	}
	if act := rs[len(rs)-1]; act[4] != "active" || act[5] != "file:seg-cli" {
		t.Errorf("migrate output's last segment %v, want file:seg-cli active", act)
	}
	if err := json.Unmarshal([]byte(mustRunLog(t, "status", http, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if n := len(st.Chain.Segments); n != 2 || st.Chain.Segments[1].URL != "file:seg-cli" || !st.Chain.Segments[0].Sealed {
		t.Errorf("chain after migrate: %+v", st.Chain)
	}

	// A retried migration (say, after its answer was lost) finds the log
	// where it wanted it.
	if out := mustRunLog(t, "migrate", http, "--to", "file:seg-cli"); !strings.HasPrefix(out, "the log is already on file:seg-cli") {
		t.Errorf("migrating onto the active segment again:\n%s", out)
	}
	r := runLog(t, "migrate", http, "--to", "file:seg-00000000")
	if !errors.Is(r.err, ErrAgent) || !strings.Contains(r.err.Error(), "400 Bad Request") {
		t.Errorf("migrating onto a segment already in the chain: %v, want ErrAgent with 400", r.err)
	}
}

// TestLogMigrateUnreachable: `strand log migrate` onto a PostgreSQL that
// refuses connections fails with the agent's reason (so the command
// exits non-zero with it) and the log stays where it was.
func TestLogMigrateUnreachable(t *testing.T) {
	a := startAgent(t)
	http := "--http=" + a.HTTPAddr()
	to := "postgres://strand@" + closedPort(t) + "/strand?log=unreachable"

	r := runLog(t, "migrate", http, "--to", to)
	if !errors.Is(r.err, ErrAgent) || !strings.Contains(r.err.Error(), "502") || !strings.Contains(r.err.Error(), "connection refused") {
		t.Errorf("migrate to an unreachable PostgreSQL: %v, want ErrAgent with 502 and the connection refused", r.err)
	}
	var st agent.LogStatus
	if err := json.Unmarshal([]byte(mustRunLog(t, "status", http, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Chain.Segments) != 1 || st.Chain.Version != 1 || st.Sealed {
		t.Errorf("chain after the refused migration: %+v (sealed %v)", st.Chain, st.Sealed)
	}
}

// hasRow reports whether rs holds a row starting with want.
func hasRow(rs [][]string, want []string) bool {
	for _, r := range rs {
		if len(r) >= len(want) && slices.Equal(r[:len(want)], want) {
			return true
		}
	}
	return false
}

func TestLogUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want error
	}{
		{"migrate without --to", []string{"migrate"}, ErrUsage},
		{"empty --http", []string{"status", "--http="}, ErrUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := runLog(t, tt.args...); !errors.Is(r.err, tt.want) {
				t.Errorf("strand log %v: %v, want %v", tt.args, r.err, tt.want)
			}
		})
	}
}

// TestLogAgentErrors checks that an agent's error answer reaches the
// user as ErrAgent with the agent's message, JSON or not.
func TestLogAgentErrors(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"json", `{"error": "the log is sealed"}`, "the log is sealed"},
		{"plain", "upstream gone", "upstream gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusConflict)
				io.WriteString(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			r := runLog(t, "status", "--http", strings.TrimPrefix(srv.URL, "http://"))
			if !errors.Is(r.err, ErrAgent) || !strings.Contains(r.err.Error(), tt.want) || !strings.Contains(r.err.Error(), "409") {
				t.Errorf("error %v, want ErrAgent with 409 and %q", r.err, tt.want)
			}
		})
	}
}

func TestPrintLogStatus(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	st := agent.LogStatus{
		Chain: agent.ChainStatus{Version: 3, Segments: []agent.SegmentStatus{
			{Start: 0, End: 120, Sealed: true, URL: "file:seg-00000000"},
			{Start: 120, End: 130, URL: "postgres://u:xxxxx@h:5432/db?log=s/seg-2"},
		}},
		Tail: 130, TrimPoint: 100,
		Snapshot: &agent.SnapshotStatus{Pos: 100, Key: "meta/snap/1.json", CreatedAt: now.Add(-90 * time.Second), Files: 7, Bytes: 3 << 20},
		Agent:    agent.AgentStatus{WriterID: "w1", Incarnation: 9, Applied: 127},
		Agents: []agent.AgentLease{
			{NodeID: 1, AgentID: "w1", Host: "10.0.0.1", Port: 9092, Applied: 125, Expires: now.Add(5 * time.Second), Live: true},
			{NodeID: 2, AgentID: "w2", Host: "10.0.0.2", Port: 9092, Applied: 90, Expires: now.Add(-time.Minute)},
		},
	}
	var out bytes.Buffer
	if err := printLogStatus(&out, st, now); err != nil {
		t.Fatal(err)
	}
	rs := rows(out.String())
	for _, want := range []string{
		"tail 130",
		"trim point 100",
		"snapshot position 100, 7 files, 3.0 MiB, taken 2025-01-02T03:02:35Z (1m30s ago)",
		"applied 127 (3 behind the tail)",
		"NODE AGENT ADDRESS APPLIED BEHIND LEASE",
		"1 w1 10.0.0.1:9092 125 5 live until 2025-01-02T03:04:10Z",
		"2 w2 10.0.0.2:9092 90 40 expired 2025-01-02T03:03:05Z",
		"chain version 3",
	} {
		if !hasRow(rs, strings.Fields(want)) {
			t.Errorf("output lacks the row %q:\n%s", want, out.String())
		}
	}
	if got := rs[len(rs)-2]; strings.Join(got, " ") != "0 0 120 120 sealed file:seg-00000000" {
		t.Errorf("sealed segment row %v", got)
	}
	if got := rs[len(rs)-1]; strings.Join(got, " ") != "1 120 130 10 active postgres://u:xxxxx@h:5432/db?log=s/seg-2" {
		t.Errorf("active segment row %v", got)
	}
}
