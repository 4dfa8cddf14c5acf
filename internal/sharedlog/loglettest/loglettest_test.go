package loglettest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/loglettest"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// mutantEnv makes TestMutantChild run the suite against one mutant.
const mutantEnv = "LOGLETTEST_MUTANT"

// mutant is memlog with one rule of the contract broken.
type mutant struct {
	*memlog.Loglet
	kind string

	mu       sync.Mutex
	retained map[sharedlog.Pos][]byte // for "retains-buffer"
}

func (m *mutant) Append(ctx context.Context, entry []byte) (sharedlog.Pos, error) {
	switch m.kind {
	case "ignores-ctx":
		ctx = context.Background()
	case "truncates-large":
		entry = entry[:min(len(entry), 64<<10)]
	}
	pos, err := m.Loglet.Append(ctx, entry)
	switch {
	case m.kind == "acks-after-seal" && errors.Is(err, sharedlog.ErrSealed):
		tail, _, _ := m.Loglet.CheckTail(ctx)
		return tail, nil
	case m.kind == "retains-buffer" && err == nil:
		m.mu.Lock()
		m.retained[pos] = entry
		m.mu.Unlock()
	}
	return pos, err
}

func (m *mutant) CheckTail(ctx context.Context) (sharedlog.Pos, bool, error) {
	if m.kind == "ignores-ctx" {
		ctx = context.Background()
	}
	tail, sealed, err := m.Loglet.CheckTail(ctx)
	if m.kind == "tail-lags" && tail > 0 {
		tail--
	}
	return tail, sealed, err
}

func (m *mutant) ReadNext(ctx context.Context, from, max sharedlog.Pos) ([]sharedlog.Entry, error) {
	switch m.kind {
	case "ignores-ctx":
		ctx = context.Background()
	case "reads-past-max":
		max = ^sharedlog.Pos(0)
	}
	es, err := m.Loglet.ReadNext(ctx, from, max)
	switch m.kind {
	case "skips-first":
		if len(es) > 1 && from > 0 {
			es = es[1:]
		}
	case "retains-buffer":
		m.mu.Lock()
		for i := range es {
			if b, ok := m.retained[es[i].Pos]; ok {
				es[i].Data = b
			}
		}
		m.mu.Unlock()
	}
	return es, err
}

func (m *mutant) Seal(ctx context.Context) error {
	switch m.kind {
	case "ignores-ctx":
		ctx = context.Background()
	case "seal-ignored":
		return nil
	}
	return m.Loglet.Seal(ctx)
}

func (m *mutant) PrefixTrim(ctx context.Context, before sharedlog.Pos) error {
	switch m.kind {
	case "ignores-ctx":
		ctx = context.Background()
	case "trim-ignored":
		return nil
	}
	return m.Loglet.PrefixTrim(ctx, before)
}

func (m *mutant) WaitTail(ctx context.Context, after sharedlog.Pos) (sharedlog.Pos, error) {
	if m.kind == "wait-returns-at-once" {
		tail, _, err := m.Loglet.CheckTail(ctx)
		return tail, err
	}
	return m.Loglet.WaitTail(ctx, after)
}

func (m *mutant) Close() error {
	if m.kind == "close-ignored" {
		return nil
	}
	return m.Loglet.Close()
}

// TestMutantChild is the suite run by TestSuiteCatchesMutants in a child
// process; run directly it does nothing.
func TestMutantChild(t *testing.T) {
	kind := os.Getenv(mutantEnv)
	if kind == "" {
		t.Skip("run by TestSuiteCatchesMutants")
	}
	opts := loglettest.Options{Timeout: 20 * time.Second}
	if strings.HasPrefix(kind, "durable-") {
		opts.RunDurable(t, newMemDisk(strings.TrimPrefix(kind, "durable-")).open)
		return
	}
	opts.Run(t, func(t *testing.T) sharedlog.Loglet {
		return &mutant{Loglet: memlog.New(), kind: kind, retained: map[sharedlog.Pos][]byte{}}
	})
}

// TestSuiteCatchesMutants checks that the suite can fail: each mutant
// breaks one rule, and the case pinning that rule must fail on it.
func TestSuiteCatchesMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	for _, tc := range []struct {
		kind, fails string
	}{
		{"none", ""},
		{"skips-first", "ReadNextBounds"},
		{"tail-lags", "AppendReadBack"},
		{"reads-past-max", "ReadNextBounds"},
		{"retains-buffer", "NoAliasing"},
		{"truncates-large", "EntrySizes"},
		{"seal-ignored", "Seal"},
		{"acks-after-seal", "Seal"},
		{"acks-after-seal", "AppendRacingSeal"},
		{"trim-ignored", "PrefixTrim"},
		{"trim-ignored", "RandomOps"},
		{"wait-returns-at-once", "WaitTail"},
		{"ignores-ctx", "CanceledContext"},
		{"close-ignored", "Close"},
		{"durable-none", ""},
		{"durable-forgets-entries", "Reopen"},
		{"durable-forgets-seal", "ReopenSealed"},
		{"durable-forgets-trim", "ReopenTrimmed"},
	} {
		t.Run(tc.kind+"/"+tc.fails, func(t *testing.T) {
			run := "^TestMutantChild$"
			if tc.fails != "" {
				run += "/^" + tc.fails + "$"
			}
			cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), mutantEnv+"="+tc.kind)
			out, err := cmd.CombinedOutput()
			if tc.fails == "" {
				if err != nil || !strings.Contains(string(out), "--- PASS: TestMutantChild") {
					t.Fatalf("the unmutated loglet failed the suite: %v\n%s", err, out)
				}
				return
			}
			if err == nil || !strings.Contains(string(out), "--- FAIL: TestMutantChild/"+tc.fails) {
				t.Fatalf("mutant %s passed case %s: %v\n%s", tc.kind, tc.fails, err, out)
			}
		})
	}
}

// memDisk is a reopenable in-memory "directory" for RunDurable: Close
// saves the loglet's state per dir and open restores it, forgetting what
// the mutant kind says.
type memDisk struct {
	kind string
	mu   sync.Mutex
	dirs map[string]*saved
}

type saved struct {
	entries [][]byte // from position 0; trimmed ones are nil
	trimmed sharedlog.Pos
	sealed  bool
}

func newMemDisk(kind string) *memDisk {
	return &memDisk{kind: kind, dirs: map[string]*saved{}}
}

func (d *memDisk) open(t *testing.T, dir string) sharedlog.Loglet {
	d.mu.Lock()
	s := d.dirs[dir]
	d.mu.Unlock()
	l := &diskLoglet{Loglet: memlog.New(), disk: d, dir: dir}
	if s == nil {
		return l
	}
	ctx := t.Context()
	for i, e := range s.entries {
		if d.kind == "forgets-entries" && i == len(s.entries)-1 {
			break
		}
		if _, err := l.Loglet.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if d.kind != "forgets-trim" {
		l.trimmed = s.trimmed
		if err := l.Loglet.PrefixTrim(ctx, s.trimmed); err != nil {
			t.Fatal(err)
		}
	}
	if s.sealed && d.kind != "forgets-seal" {
		if err := l.Loglet.Seal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

type diskLoglet struct {
	*memlog.Loglet
	disk    *memDisk
	dir     string
	trimmed sharedlog.Pos
}

func (l *diskLoglet) PrefixTrim(ctx context.Context, before sharedlog.Pos) error {
	tail, _, err := l.Loglet.CheckTail(ctx)
	if err != nil {
		return err
	}
	if err := l.Loglet.PrefixTrim(ctx, before); err != nil {
		return err
	}
	l.trimmed = max(l.trimmed, min(before, tail))
	return nil
}

func (l *diskLoglet) Close() error {
	ctx := context.Background()
	tail, sealed, err := l.Loglet.CheckTail(ctx)
	if err != nil {
		return l.Loglet.Close() // closed already
	}
	s := &saved{entries: make([][]byte, tail), trimmed: l.trimmed, sealed: sealed}
	for p := l.trimmed; p < tail; {
		es, err := l.Loglet.ReadNext(ctx, p, tail)
		if err != nil {
			return err
		}
		for _, e := range es {
			s.entries[e.Pos] = e.Data
		}
		p += sharedlog.Pos(len(es))
	}
	l.disk.mu.Lock()
	l.disk.dirs[l.dir] = s
	l.disk.mu.Unlock()
	return l.Loglet.Close()
}
