package cli

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// closedPort returns an address where nothing listens: a port the
// kernel handed out and that was closed again.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestProduceAgentDown: with the agent down, a produce of many records
// fails with one summarized error line naming the count and the first
// error, prints nothing per record, and fails the command. --timeout
// bounds how long each record is retried.
func TestProduceAgentDown(t *testing.T) {
	brokers := closedPort(t)
	for _, tt := range []struct{ name, stdin, wantErr string }{
		{"lines", strings.Repeat("v\n", 200), "connection refused (first error)"},
		// Records read with their own timestamps are bounded by the
		// flush rather than by a delivery timeout (see kgoOpts).
		{"timestamps", strings.Repeat("1700000000000 v\n", 200), "not delivered within --timeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"produce", "t", "--timeout", "1s"}
			if tt.name == "timestamps" {
				args = append(args, "-f", `%d %v\n`)
			}
			r := run(t, brokers, tt.stdin, args...)
			if !errors.Is(r.err, ErrPartialFailure) {
				t.Fatalf("err = %v, want ErrPartialFailure", r.err)
			}
			if msg := r.err.Error(); !strings.HasPrefix(msg, "200 records failed: ") || !strings.Contains(msg, tt.wantErr) {
				t.Errorf("error %q: want the count and the first error", msg)
			}
			if r.stderr != "" {
				t.Errorf("stderr besides the error:\n%s", r.stderr)
			}
		})
	}
}

// TestProduceMissingTopic: a missing topic fails at once with what to do,
// unless --allow-auto-topic-creation asks the cluster to create it, which
// it does only when its auto-creation is on; each case says which.
func TestProduceMissingTopic(t *testing.T) {
	off := newCluster(t)
	on := newCluster(t, kfake.AllowAutoTopicCreation())
	for _, tt := range []struct {
		name, brokers string
		args          []string
		wantErr       error
		wantText      string // in the error, or on stderr without one
	}{
		{"no flag", on, nil, ErrUnknownTopic, "--allow-auto-topic-creation"},
		{"flag, cluster refuses", off, []string{"--allow-auto-topic-creation"}, ErrUnknownTopic, "auto.create.topics.enable is off"},
		{"flag, cluster creates", on, []string{"--allow-auto-topic-creation"}, nil, "the cluster created it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tt.brokers, "v1\nv2\n", append([]string{"produce", "fresh", "--timeout", "5s"}, tt.args...)...)
			if !errors.Is(r.err, tt.wantErr) && !(tt.wantErr == nil && r.err == nil) {
				t.Fatalf("err = %v, want %v\nstderr: %s", r.err, tt.wantErr, r.stderr)
			}
			text := r.stderr
			if r.err != nil {
				text = r.err.Error()
			}
			if !strings.Contains(text, tt.wantText) {
				t.Fatalf("%q does not say %q", text, tt.wantText)
			}
		})
	}
	r := mustRun(t, on, "", "consume", "fresh", "-e", "-f", `%v\n`)
	if r.stdout != "v1\nv2\n" {
		t.Fatalf("auto-created topic holds %q, want v1 and v2", r.stdout)
	}
	if r := run(t, off, "", "consume", "fresh", "-e"); !errors.Is(r.err, ErrUnknownTopic) {
		t.Fatalf("a refused auto-creation created the topic: consume err = %v", r.err)
	}
}

// TestProduceKeylessToCompacted: records without a key to a compacted
// topic fail, and the error says, in the CLI's words, that the topic is
// compacted and each record needs a key, and how to give one; with keys
// the same produce succeeds.
func TestProduceKeylessToCompacted(t *testing.T) {
	a := startAgent(t)
	brokers := a.KafkaAddr()
	mustRun(t, brokers, "", "topic", "create", "users", "-p", "1", "-c", "cleanup.policy=compact")
	r := run(t, brokers, "alice\nbob\n", "produce", "users", "--timeout", "5s")
	if !errors.Is(r.err, ErrPartialFailure) {
		t.Fatalf("keyless produce to a compacted topic: %v, want ErrPartialFailure", r.err)
	}
	for _, want := range []string{"INVALID_RECORD", "2 records had no key", "users (cleanup.policy=compact)", "-k SEP"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, r.err)
		}
	}
	mustRun(t, brokers, "1 alice\n2 bob\n", "produce", "users", "-k", " ")
}
