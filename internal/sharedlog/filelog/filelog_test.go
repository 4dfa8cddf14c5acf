package filelog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
	"github.com/strandkafka/strand/internal/sharedlog/loglettest"
)

// configs are the Options the conformance suites run under: the defaults,
// and limits small enough that segments roll, reads page and batches
// split many times per case.
var configs = []struct {
	name string
	opts filelog.Options
}{
	{"default", filelog.Options{}},
	{"small", filelog.Options{SegmentBytes: 4 << 10, MaxBatchBytes: 2 << 10, MaxQueueBytes: 8 << 10, MaxReadBytes: 1 << 10}},
}

func open(tb testing.TB, dir string, opts filelog.Options) *filelog.Loglet {
	tb.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	l, err := filelog.Open(dir, opts)
	if err != nil {
		tb.Fatalf("Open(%s): %v", dir, err)
	}
	return l
}

func TestConformance(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			loglettest.Run(t, func(t *testing.T) sharedlog.Loglet {
				return open(t, t.TempDir(), c.opts)
			})
		})
	}
}

func TestDurable(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			loglettest.RunDurable(t, func(t *testing.T, dir string) sharedlog.Loglet {
				return open(t, dir, c.opts)
			})
		})
	}
}

// entry returns the i-th test entry; sizes vary so offsets do.
func entry(i int) []byte {
	b := make([]byte, 10+(i*53)%400)
	copy(b, fmt.Sprintf("entry %d;", i))
	return b
}

func appendEntries(t *testing.T, l sharedlog.Loglet, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		pos, err := l.Append(t.Context(), entry(i))
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		if pos != sharedlog.Pos(i) {
			t.Fatalf("Append %d landed at %d", i, pos)
		}
	}
}

// wantLog checks the tail and that [from, tail) holds entry(i) at i.
func wantLog(t *testing.T, l sharedlog.Loglet, from, tail int) {
	t.Helper()
	ctx := t.Context()
	gotTail, _, err := l.CheckTail(ctx)
	if err != nil || gotTail != sharedlog.Pos(tail) {
		t.Fatalf("CheckTail = (%d, %v), want %d", gotTail, err, tail)
	}
	for p := sharedlog.Pos(from); p < sharedlog.Pos(tail); {
		es, err := l.ReadNext(ctx, p, sharedlog.Pos(tail))
		if err != nil || len(es) == 0 {
			t.Fatalf("ReadNext(%d): %d entries, %v", p, len(es), err)
		}
		for _, en := range es {
			if en.Pos != p || !bytes.Equal(en.Data, entry(int(p))) {
				t.Fatalf("entry at %d (pos field %d) = %q, want %q", p, en.Pos, en.Data, entry(int(p)))
			}
			p++
		}
	}
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(segs)
	return segs
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	des, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(src, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, de.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestTornTail damages the last entry of the last segment the ways a crash
// mid-write can: reopening keeps exactly the intact prefix, logs the cut,
// and appends carry on at the next position.
func TestTornTail(t *testing.T) {
	const n = 12
	orig := t.TempDir()
	l := open(t, orig, filelog.Options{})
	appendEntries(t, l, 0, n)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(t, orig)
	if len(segs) != 1 {
		t.Fatalf("%d segments, want 1", len(segs))
	}
	name := filepath.Base(segs[0])
	fi, err := os.Stat(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	size := fi.Size()
	lastStart := size - int64(8+len(entry(n-1)))

	type damage struct {
		name string
		fn   func(b []byte) []byte
		keep int // entries that survive
		// zeros: what follows the entries is zeros, a preallocation
		// the writer may have left, kept without a cut.
		zeros bool
	}
	cut := func(at int64) damage {
		return damage{fmt.Sprintf("cut at +%d", at-lastStart), func(b []byte) []byte { return b[:at] }, n - 1, false}
	}
	flip := func(at int64) damage {
		return damage{fmt.Sprintf("flip at +%d", at-lastStart), func(b []byte) []byte { b[at] ^= 0x5a; return b }, n - 1, false}
	}
	damages := []damage{
		{"intact", func(b []byte) []byte { return b }, n, false},
		{"zeros after", func(b []byte) []byte { return append(b, make([]byte, 4096)...) }, n, true},
		{"zeros then garbage after", func(b []byte) []byte { return append(append(b, make([]byte, 4096)...), 1) }, n, false},
		{"partial header after", func(b []byte) []byte { return append(b, 1, 2, 3) }, n, false},
		{"huge length after", func(b []byte) []byte { return append(b, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1) }, n, false},
	}
	for _, at := range []int64{lastStart, lastStart + 1, lastStart + 4, lastStart + 7, lastStart + 8, lastStart + 9, (lastStart + size) / 2, size - 1} {
		damages = append(damages, cut(at))
	}
	for _, at := range []int64{lastStart, lastStart + 3, lastStart + 4, lastStart + 7, lastStart + 8, (lastStart + size) / 2, size - 1} {
		damages = append(damages, flip(at))
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			dir := copyDir(t, orig)
			path := filepath.Join(dir, name)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			damaged := d.fn(b)
			if err := os.WriteFile(path, damaged, 0o644); err != nil {
				t.Fatal(err)
			}
			var logs logBuffer
			l := open(t, dir, filelog.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			wantLog(t, l, 0, d.keep)
			goodEnd := size
			if d.keep < n {
				goodEnd = lastStart
			}
			if cutLogged := strings.Contains(logs.String(), "torn tail"); cutLogged != (int64(len(damaged)) > goodEnd && !d.zeros) {
				t.Fatalf("torn-tail log = %v for %d bytes on disk, want it exactly when something was cut; logs:\n%s", cutLogged, len(damaged), logs.String())
			}
			appendEntries(t, l, d.keep, d.keep+2)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			// The cut was made durable: the next Open finds nothing to cut.
			var again logBuffer
			l = open(t, dir, filelog.Options{Logger: slog.New(slog.NewTextHandler(&again, nil))})
			defer l.Close()
			wantLog(t, l, 0, d.keep+2)
			if strings.Contains(again.String(), "torn tail") {
				t.Fatalf("second Open cut again:\n%s", again.String())
			}
		})
	}
}

// TestCorruptionRefused: damage a crash cannot explain makes Open fail
// with ErrCorrupt instead of silently dropping acknowledged entries.
func TestCorruptionRefused(t *testing.T) {
	orig := t.TempDir()
	l := open(t, orig, filelog.Options{SegmentBytes: 1 << 10})
	appendEntries(t, l, 0, 40)
	if err := l.PrefixTrim(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(t, orig)
	if len(segs) < 4 {
		t.Fatalf("%d segments, want at least 4", len(segs))
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"entry in an earlier segment", func(t *testing.T, dir string) {
			flipByte(t, filepath.Join(dir, filepath.Base(segs[1])), 40)
		}},
		{"earlier segment cut short", func(t *testing.T, dir string) {
			path := filepath.Join(dir, filepath.Base(segs[1]))
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, fi.Size()-3); err != nil {
				t.Fatal(err)
			}
		}},
		{"missing middle segment", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, filepath.Base(segs[2]))); err != nil {
				t.Fatal(err)
			}
		}},
		{"last segment header", func(t *testing.T, dir string) {
			flipByte(t, filepath.Join(dir, filepath.Base(segs[len(segs)-1])), 3)
		}},
		{"state file", func(t *testing.T, dir string) {
			flipByte(t, filepath.Join(dir, "STATE"), 17)
		}},
		{"segment renamed", func(t *testing.T, dir string) {
			last := filepath.Join(dir, filepath.Base(segs[len(segs)-1]))
			if err := os.Rename(last, filepath.Join(dir, "00000000000000999999.seg")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, orig)
			tc.damage(t, dir)
			l, err := filelog.Open(dir, filelog.Options{Logger: slog.New(slog.DiscardHandler)})
			if !errors.Is(err, filelog.ErrCorrupt) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("Open = %v, want ErrCorrupt", err)
			}
		})
	}
}

func flipByte(t *testing.T, path string, at int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0x01
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTrimDeletesSegments: segments roll at SegmentBytes; PrefixTrim
// deletes exactly the files wholly below the trim point, and Open finishes
// a trim that crashed before deleting them.
func TestTrimDeletesSegments(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, filelog.Options{SegmentBytes: 2 << 10})
	appendEntries(t, l, 0, 200)
	before := segmentFiles(t, dir)
	if len(before) < 10 {
		t.Fatalf("%d segments after 200 entries of 2 KiB segments, want many", len(before))
	}
	untrimmed := copyDir(t, dir)

	const trimTo = 150
	if err := l.PrefixTrim(t.Context(), trimTo); err != nil {
		t.Fatal(err)
	}
	wantSegments := func(dir string) {
		t.Helper()
		after := segmentFiles(t, dir)
		var bases []int
		for _, s := range after {
			var b int
			if _, err := fmt.Sscanf(filepath.Base(s), "%d.seg", &b); err != nil {
				t.Fatal(err)
			}
			bases = append(bases, b)
		}
		if len(bases) < 2 || bases[0] > trimTo || bases[1] <= trimTo {
			t.Fatalf("segments from %v remain after trimming to %d: want the one holding %d first", bases, trimTo, trimTo)
		}
		if want := before[len(before)-len(after):]; !slices.Equal(bases2names(after), bases2names(want)) {
			t.Fatalf("segments %v remain, want the last %d of %v", after, len(after), before)
		}
	}
	wantSegments(dir)
	wantLog(t, l, trimTo, 200)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, dir, filelog.Options{SegmentBytes: 2 << 10})
	wantLog(t, l, trimTo, 200)
	appendEntries(t, l, 200, 210)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// Crash between writing STATE and removing files: the old files are
	// still there next to the new STATE, plus a stray temporary file.
	state, err := os.ReadFile(filepath.Join(dir, "STATE"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(untrimmed, "STATE"), state, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(untrimmed, "STATE.tmp"), []byte("half-written"), 0o644); err != nil {
		t.Fatal(err)
	}
	l = open(t, untrimmed, filelog.Options{})
	defer l.Close()
	wantSegments(untrimmed)
	wantLog(t, l, trimTo, 200)
	if _, err := os.Stat(filepath.Join(untrimmed, "STATE.tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stray STATE.tmp survived Open: %v", err)
	}
}

func bases2names(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

// TestGroupCommitAndBackpressure: while one group commit is in its fsync,
// appends gather into the next group (one fsync for all of them), and once
// MaxQueueBytes is reached an append waits outside the queue.
func TestGroupCommitAndBackpressure(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var (
			gate   = make(chan struct{})
			gating atomic.Bool
			syncs  atomic.Int64
		)
		l := open(t, dir, filelog.Options{
			MaxQueueBytes: 4 << 10,
			FS: hookFS{filelog.OS, func(name string) {
				if strings.HasSuffix(name, ".seg") && gating.Load() {
					syncs.Add(1)
					<-gate
				}
			}},
		})
		defer l.Close()
		data := make([]byte, 1000) // charged about 1.1 KiB each

		type res struct {
			pos sharedlog.Pos
			err error
		}
		appendAsync := func(ctx context.Context, b byte) <-chan res {
			ch := make(chan res, 1)
			go func() {
				d := slices.Clone(data)
				d[0] = b
				pos, err := l.Append(ctx, d)
				ch <- res{pos, err}
			}()
			return ch
		}
		gating.Store(true)
		a := appendAsync(ctx, 'a')
		synctest.Wait() // a is in its fsync
		b, c := appendAsync(ctx, 'b'), appendAsync(ctx, 'c')
		synctest.Wait() // b and c are queued: 3 entries charged, under 4 KiB
		dctx, cancel := context.WithCancel(ctx)
		d := appendAsync(dctx, 'd')
		synctest.Wait() // d would exceed 4 KiB: it waits for room
		for name, ch := range map[string]<-chan res{"a": a, "b": b, "c": c, "d": d} {
			select {
			case r := <-ch:
				t.Fatalf("append %s returned (%d, %v) while the first fsync was held", name, r.pos, r.err)
			default:
			}
		}
		cancel()
		if r := <-d; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("append held by backpressure then canceled = (%d, %v), want context.Canceled", r.pos, r.err)
		}
		close(gate)
		for name, ch := range map[string]<-chan res{"a": a, "b": b, "c": c} {
			if r := <-ch; r.err != nil {
				t.Fatalf("append %s: %v", name, r.err)
			}
		}
		if n := syncs.Load(); n != 2 {
			t.Fatalf("%d fsyncs for a then b+c, want 2 (b and c in one group commit)", n)
		}
		// d never entered the queue, so nothing else was written.
		tail, _, err := l.CheckTail(ctx)
		if err != nil || tail != 3 {
			t.Fatalf("CheckTail = (%d, %v), want 3: the canceled, held-back append must not land", tail, err)
		}
		es, err := l.ReadNext(ctx, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		var firsts []byte
		for _, en := range es {
			firsts = append(firsts, en.Data[0])
		}
		if string(firsts) != "abc" && string(firsts) != "acb" {
			t.Fatalf("entries begin %q, want a then b and c", firsts)
		}
	})
}

func TestLocked(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, filelog.Options{})
	if l2, err := filelog.Open(dir, filelog.Options{}); !errors.Is(err, filelog.ErrLocked) {
		if l2 != nil {
			l2.Close()
		}
		t.Fatalf("second Open of an open directory: %v, want ErrLocked", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, dir, filelog.Options{})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestEntryTooLarge(t *testing.T) {
	l := open(t, t.TempDir(), filelog.Options{MaxEntryBytes: 100})
	defer l.Close()
	if _, err := l.Append(t.Context(), make([]byte, 101)); !errors.Is(err, filelog.ErrEntryTooLarge) || !errors.Is(err, sharedlog.ErrRejected) {
		t.Fatalf("Append of 101 bytes with MaxEntryBytes 100: %v, want ErrEntryTooLarge, rejected", err)
	}
	if pos, err := l.Append(t.Context(), make([]byte, 100)); err != nil || pos != 0 {
		t.Fatalf("Append of 100 bytes = (%d, %v), want (0, nil)", pos, err)
	}
}

func TestOptionsValidated(t *testing.T) {
	for _, opts := range []filelog.Options{
		{SegmentBytes: -1},
		{MaxReadBytes: -1},
		{MaxEntryBytes: 2 << 30},
	} {
		if l, err := filelog.Open(t.TempDir(), opts); err == nil {
			l.Close()
			t.Errorf("Open with %+v succeeded", opts)
		}
	}
}

func TestOpenCreatesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	l := open(t, dir, filelog.Options{})
	appendEntries(t, l, 0, 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, dir, filelog.Options{})
	defer l.Close()
	wantLog(t, l, 0, 1)
}
