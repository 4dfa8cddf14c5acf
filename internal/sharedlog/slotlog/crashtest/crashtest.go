// Package crashtest owns the crash test of slotlog backends: a child
// process (the test binary, re-executed) appends from many goroutines
// with every slot window full and reports each acknowledged position; the
// parent kills it with SIGKILL mid-stream, then opens the log afresh and
// checks that every acknowledged entry is at its position, the log is
// dense with no payload twice, and appending carries on densely past
// whatever holes and orphans the crash left.
package crashtest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// SpecEnv carries the log's spec from parent to child.
const SpecEnv = "STRAND_CRASHTEST_SPEC"

const (
	// childAppenders is how many goroutines the child appends from.
	childAppenders = 16
	// killAfterAcks is how many acknowledgements the parent waits for
	// before the kill.
	killAfterAcks = 150
	// parentAppends is how many entries the parent appends afterwards.
	parentAppends = 20
	timeout       = 60 * time.Second
)

// Open opens a handle on the log that spec names; both processes call it.
type Open func(t testing.TB, spec string) sharedlog.Loglet

// Spec returns the spec the child was given, or "" in the parent.
func Spec() string { return os.Getenv(SpecEnv) }

// Run plays the parent when Spec is empty (spec names the log, set up by
// the caller) and the child otherwise. Call it from a test whose name
// selects only itself.
func Run(t *testing.T, spec string, open Open) {
	if child := Spec(); child != "" {
		runChild(t, child, open)
		return
	}
	runParent(t, spec, open)
}

func runChild(t *testing.T, spec string, open Open) {
	l := open(t, spec)
	ctx := context.Background()
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := range childAppenders {
		wg.Go(func() {
			for i := 0; ; i++ {
				data := fmt.Sprintf("child/%d/%d", g, i)
				p, err := l.Append(ctx, []byte(data))
				if err != nil {
					fmt.Fprintf(os.Stderr, "append: %v\n", err)
					continue
				}
				mu.Lock()
				fmt.Fprintf(out, "ack %d %s\n", p, data)
				out.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait() // never: the parent kills the process
}

func runParent(t *testing.T, spec string, open Open) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), SpecEnv+"="+spec)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[sharedlog.Pos]string{}
	sc := bufio.NewScanner(stdout)
	killed := false
	for sc.Scan() {
		var p uint64
		var data string
		if _, err := fmt.Sscanf(sc.Text(), "ack %d %s", &p, &data); err != nil {
			continue // the test framework's own output
		}
		if prev, dup := acked[sharedlog.Pos(p)]; dup {
			t.Errorf("position %d acknowledged for %q and %q", p, prev, data)
		}
		acked[sharedlog.Pos(p)] = data
		if len(acked) == killAfterAcks && !killed {
			killed = true
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd.Wait()
	if !killed {
		t.Fatalf("child stopped after %d acknowledgements; stderr:\n%s", len(acked), stderr.String())
	}
	t.Logf("child killed after %d acknowledgements", len(acked))

	l := open(t, spec)
	defer l.Close()
	tail := check(t, ctx, l, acked)
	for i := range parentAppends {
		data := fmt.Sprintf("parent/%d", i)
		p, err := l.Append(ctx, []byte(data))
		if err != nil {
			t.Fatalf("Append after the crash: %v", err)
		}
		if p < tail {
			t.Fatalf("Append after the crash landed at %d, below the tail %d", p, tail)
		}
		acked[p] = data
	}
	check(t, ctx, l, acked)
}

// check reads the whole log and returns its tail: every acknowledged
// entry at its position, dense, each payload once and one the writers
// sent.
func check(t *testing.T, ctx context.Context, l sharedlog.Loglet, acked map[sharedlog.Pos]string) sharedlog.Pos {
	t.Helper()
	tail, sealed, err := l.CheckTail(ctx)
	if err != nil || sealed {
		t.Fatalf("CheckTail = (%d, %v, %v)", tail, sealed, err)
	}
	for p := range acked {
		if p >= tail {
			t.Fatalf("acknowledged position %d at or past the tail %d", p, tail)
		}
	}
	seen := map[string]sharedlog.Pos{}
	for p := sharedlog.Pos(0); p < tail; {
		es, err := l.ReadNext(ctx, p, tail)
		if err != nil || len(es) == 0 {
			t.Fatalf("ReadNext(%d) below the tail %d = (%d entries, %v)", p, tail, len(es), err)
		}
		for _, e := range es {
			data := string(e.Data)
			if !strings.HasPrefix(data, "child/") && !strings.HasPrefix(data, "parent/") {
				t.Fatalf("entry %d = %q was never appended", e.Pos, data)
			}
			if q, dup := seen[data]; dup {
				t.Fatalf("payload %q at %d and %d", data, q, e.Pos)
			}
			seen[data] = e.Pos
			if want, ok := acked[e.Pos]; ok && want != data {
				t.Fatalf("entry %d = %q, acknowledged %q", e.Pos, data, want)
			}
			p++
		}
	}
	t.Logf("log dense to %d; %d acknowledged, %d entries whose appends were cut short",
		tail, len(acked), int(tail)-len(acked))
	return tail
}

// SplitSpec splits a spec made of fields joined by spaces.
func SplitSpec(spec string, n int) ([]string, error) {
	f := strings.Fields(spec)
	if len(f) != n {
		return nil, fmt.Errorf("crashtest: spec %q has %d fields, want %s", spec, len(f), strconv.Itoa(n))
	}
	return f, nil
}
