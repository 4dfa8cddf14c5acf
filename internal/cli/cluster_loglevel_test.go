package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/loglevel"
)

// TestClusterLogLevel: `cluster log-level get` lists an agent's
// loggers, root first and kafka.authorizer.logger among them; `set`
// changes one on the agent itself (its levels object says so), `get
// LOGGER` shows it; an unknown logger or level is refused with the
// agent's words and a non-nil error.
func TestClusterLogLevel(t *testing.T) {
	levels := loglevel.New()
	ctx, cancel := context.WithTimeout(t.Context(), commandDeadline)
	defer cancel()
	a, err := agent.Start(ctx, agent.Config{DataDir: t.TempDir(), KafkaListen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0",
		SnapshotInterval: agent.SnapshotsOff, LogLevels: levels},
		slog.New(levels.Handler(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: loglevel.Lowest}))))
	if err != nil {
		t.Fatalf("agent.Start: %v", err)
	}
	t.Cleanup(func() { a.Stop(context.Background()) })
	brokers := a.KafkaAddr()

	rs := rows(mustRun(t, brokers, "", "cluster", "log-level", "get").stdout)
	if len(rs) < 3 || !slices.Equal(rs[0], []string{"AGENT", "LOGGER", "LEVEL"}) || !slices.Equal(rs[1], []string{"0", "root", "INFO"}) {
		t.Fatalf("get: %v", rs)
	}
	if got := findRowAt(rs, 1, "kafka.authorizer.logger"); !slices.Equal(got, []string{"0", "kafka.authorizer.logger", "INFO"}) {
		t.Errorf("get lists kafka.authorizer.logger as %v", got)
	}

	rs = rows(mustRun(t, brokers, "", "cluster", "log-level", "set", "kafka.authorizer.logger", "debug").stdout)
	if len(rs) != 2 || !slices.Equal(rs[0], []string{"AGENT", "LOGGER", "LEVEL", "STATUS"}) || !slices.Equal(rs[1], []string{"0", "kafka.authorizer.logger", "DEBUG", "OK"}) {
		t.Errorf("set: %v", rs)
	}
	i := slices.IndexFunc(levels.Loggers(), func(l loglevel.Logger) bool { return l.Name == "kafka.authorizer.logger" })
	if i < 0 || levels.Loggers()[i].Level != "DEBUG" {
		t.Errorf("the agent's loggers after set: %v", levels.Loggers())
	}
	var got []agentLogger
	out := mustRun(t, brokers, "", "cluster", "log-level", "get", "kafka.authorizer.logger", "--node", "0", "--format", "json").stdout
	if err := json.Unmarshal([]byte(out), &got); err != nil || !slices.Equal(got, []agentLogger{{Agent: 0, Logger: "kafka.authorizer.logger", Level: "DEBUG"}}) {
		t.Errorf("get LOGGER --format json: %v %s", err, out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "nope"}, `no such logger "nope" on agent 0`},
		{[]string{"set", "nope", "INFO"}, "Logger nope does not exist"},
		{[]string{"set", "root", "LOUD"}, "not a supported log level"},
		{[]string{"get", "--node", "7"}, "agent 7"},
	} {
		r := run(t, brokers, "", append([]string{"cluster", "log-level"}, tc.args...)...)
		if r.err == nil || !strings.Contains(r.err.Error()+r.stdout, tc.want) {
			t.Errorf("%v: err %v, stdout %q; want an error saying %q", tc.args, r.err, r.stdout, tc.want)
		}
		if tc.args[0] == "get" && tc.args[1] == "nope" && !errors.Is(r.err, ErrUnknownLogger) {
			t.Errorf("get nope: %v, want ErrUnknownLogger", r.err)
		}
	}
}

// findRowAt returns the first row whose cell i is key.
func findRowAt(rs [][]string, i int, key string) []string {
	for _, r := range rs {
		if len(r) > i && r[i] == key {
			return r
		}
	}
	return nil
}
