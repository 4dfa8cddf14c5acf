package authzlog

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/loglevel"
)

func denial(user, topic string) Decision {
	return Decision{Request: acl.Request{Principal: auth.User(user), Host: "10.0.0.7"}, Operation: kmsg.ACLOperationRead,
		ResourceType: kmsg.ACLResourceTypeTopic, Name: topic, Listener: "CLIENT", API: "Fetch"}
}

// TestDenied: a denial is a line with everything an operator needs, at
// INFO by the dynamic logger kafka.authorizer.logger; repeats within a
// window and lines beyond the window's cap are suppressed and counted on
// the next line; every denial is counted whatever is written; the
// logger's level silences it.
func TestDenied(t *testing.T) {
	var out bytes.Buffer
	levels := loglevel.New()
	base := slog.New(levels.Handler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: loglevel.Lowest})))
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	counted := 0
	l := New(Logger(base), clk, func(Decision) { counted++ })
	if !levels.Known(LoggerName) {
		t.Fatalf("%s is not a dynamic logger", LoggerName)
	}

	l.Denied(denial("alice", "orders"), func() string { return "denied by ACL (x)" })
	line := out.String()
	for _, want := range []string{"level=INFO", "component=kafka.authorizer.logger", `msg="authorization denied"`, "principal=User:alice",
		"host=10.0.0.7", "operation=READ", "resource_type=TOPIC", "resource=orders", "pattern=LITERAL", "listener=CLIENT",
		"request=Fetch", `rule="denied by ACL (x)"`} {
		if !strings.Contains(line, want) {
			t.Errorf("line lacks %s: %s", want, line)
		}
	}

	// The same denial again in the window: suppressed.
	out.Reset()
	l.Denied(denial("alice", "orders"), nil)
	l.Denied(denial("alice", "orders"), nil)
	if out.Len() != 0 {
		t.Errorf("a repeat in the window was written: %s", out.String())
	}
	// A distinct one is written and says two were suppressed.
	l.Denied(denial("bob", "orders"), nil)
	if got := out.String(); !strings.Contains(got, "principal=User:bob") || !strings.Contains(got, "suppressed=2") {
		t.Errorf("distinct denial line = %q, want bob with suppressed=2", got)
	}

	// A flood of distinct denials writes at most the cap per window.
	out.Reset()
	for i := range 3 * MaxLinesPerWindow {
		l.Denied(denial("scanner", fmt.Sprintf("t%d", i)), nil)
	}
	if lines := strings.Count(out.String(), "\n"); lines != MaxLinesPerWindow-2 {
		t.Errorf("flood wrote %d lines, want the cap less the two already written: %d", lines, MaxLinesPerWindow-2)
	}
	// The next window writes the repeat again, with the count.
	out.Reset()
	clk.Advance(Window)
	l.Denied(denial("alice", "orders"), nil)
	if got := out.String(); !strings.Contains(got, fmt.Sprintf("suppressed=%d", 3*MaxLinesPerWindow-(MaxLinesPerWindow-2))) {
		t.Errorf("after the window: %q", got)
	}

	// WARN on the logger silences it; the count goes on.
	if err := levels.Set(LoggerName, "WARN"); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	clk.Advance(Window)
	l.Denied(denial("carol", "orders"), nil)
	if out.Len() != 0 {
		t.Errorf("written at WARN: %s", out.String())
	}
	if want := 1 + 2 + 1 + 3*MaxLinesPerWindow + 1 + 1; counted != want {
		t.Errorf("counted %d denials, want %d", counted, want)
	}
	var nilLog *Log
	nilLog.Denied(denial("x", "y"), nil) // no panic
}

// TestAllowed: an allowed check is written only with the logger at
// DEBUG, and is not counted.
func TestAllowed(t *testing.T) {
	var out bytes.Buffer
	levels := loglevel.New()
	base := slog.New(levels.Handler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: loglevel.Lowest})))
	counted := 0
	l := New(Logger(base), nil, func(Decision) { counted++ })
	l.Allowed(denial("alice", "orders"))
	if out.Len() != 0 {
		t.Errorf("an allowed check written at INFO: %s", out.String())
	}
	if err := levels.Set(LoggerName, "DEBUG"); err != nil {
		t.Fatal(err)
	}
	l.Allowed(denial("alice", "orders"))
	l.Allowed(denial("alice", "orders"))
	if got := out.String(); strings.Count(got, `msg="authorization allowed"`) != 2 || !strings.Contains(got, "level=DEBUG") || !strings.Contains(got, "principal=User:alice") {
		t.Errorf("at DEBUG: %q, want two allowed lines (not rate-limited)", got)
	}
	if counted != 0 {
		t.Errorf("allowed checks counted as denials: %d", counted)
	}
}
