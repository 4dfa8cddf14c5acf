package cli

import (
	"errors"
	"net"
	"strings"
	"testing"
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
