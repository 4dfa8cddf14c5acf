package filelog_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
	"github.com/strandkafka/strand/internal/sharedlog/filelog/faultfs"
)

// Write failures: a full disk or a failing device. The loglet must never
// acknowledge what is not durable, and must take writes again once the
// fault clears, without being reopened.

// segFault fails ops on segment files.
func segFault(ops faultfs.Op) faultfs.Fault {
	return faultfs.Fault{Ops: ops, Match: func(path string) bool { return strings.HasSuffix(path, ".seg") }}
}

// TestWriteFailureRecovers: while writes or fsyncs of the active segment
// fail, appends fail at once with ErrFailed carrying the cause, and the
// unsynced entry stays invisible; once the fault clears the next append
// lands at the position the failed one would have taken, WaitTail calls
// made during the fault see it, and a reopen finds the log clean: the
// torn bytes of the failed write were cut before anything was written
// over them.
func TestWriteFailureRecovers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault faultfs.Fault
	}{
		{"write", segFault(faultfs.OpWrite)},
		{"fsync", segFault(faultfs.OpSync)},
		{"write and truncate", segFault(faultfs.OpWrite | faultfs.OpTruncate)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			fsys := faultfs.Wrap(filelog.OS)
			var logs logBuffer
			l := open(t, dir, filelog.Options{FS: fsys, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			defer l.Close()
			appendEntries(t, l, 0, 5)

			type waited struct {
				tail sharedlog.Pos
				err  error
			}
			waitDone := make(chan waited, 1)
			go func() {
				tail, err := l.WaitTail(ctx, 4)
				waitDone <- waited{tail, err}
			}()
			// WaitTail(4) returns at once (the tail is 5); this one
			// waits through the fault.
			if w := <-waitDone; w.err != nil || w.tail != 5 {
				t.Fatalf("WaitTail(4) = (%d, %v), want 5", w.tail, w.err)
			}
			go func() {
				tail, err := l.WaitTail(ctx, 5)
				waitDone <- waited{tail, err}
			}()

			fsys.Set(tc.fault)
			for i := range 3 {
				pos, err := l.Append(ctx, []byte(fmt.Sprintf("lost %d", i)))
				if !errors.Is(err, filelog.ErrFailed) || !errors.Is(err, faultfs.ErrNoSpace) {
					t.Fatalf("Append %d during the fault = (%d, %v), want ErrFailed carrying ENOSPC", i, pos, err)
				}
			}
			wantLog(t, l, 0, 5)
			if n := strings.Count(logs.String(), "filelog: write failed"); n != 1 {
				t.Errorf("%d failure reports for one spell of failures, want 1:\n%s", n, logs.String())
			}

			fsys.Clear()
			appendEntries(t, l, 5, 8)
			if w := <-waitDone; w.err != nil || w.tail <= 5 {
				t.Fatalf("WaitTail(5) across the fault = (%d, %v), want a tail past 5", w.tail, w.err)
			}
			wantLog(t, l, 0, 8)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}

			logs = logBuffer{}
			l = open(t, dir, filelog.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			defer l.Close()
			wantLog(t, l, 0, 8)
			if strings.Contains(logs.String(), "torn") {
				t.Errorf("reopen found a torn tail, so the failed write's bytes were left behind:\n%s", logs.String())
			}
			appendEntries(t, l, 8, 9)
		})
	}
}

// TestWriteFailureConcurrent: appenders in flight when fsync starts
// failing all get ErrFailed, every acknowledged entry is below the tail
// and survives a reopen, and appends work again once fsync does.
func TestWriteFailureConcurrent(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	fsys := faultfs.Wrap(filelog.OS)
	l := open(t, dir, filelog.Options{FS: fsys})
	defer l.Close()
	var (
		mu    sync.Mutex
		acked = map[sharedlog.Pos][]byte{}
		wg    sync.WaitGroup
		armed = make(chan struct{})
	)
	var count atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				data := []byte(fmt.Sprintf("g%d-%d", g, i))
				pos, err := l.Append(ctx, data)
				if err != nil {
					if !errors.Is(err, filelog.ErrFailed) {
						t.Errorf("Append: %v, want ErrFailed", err)
					}
					return
				}
				mu.Lock()
				acked[pos] = data
				mu.Unlock()
				if count.Add(1) == 100 {
					fsys.Set(segFault(faultfs.OpSync))
					close(armed)
				}
			}
		})
	}
	wg.Wait()
	<-armed
	tail, _, err := l.CheckTail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if int(tail) != len(acked) {
		t.Fatalf("tail %d but %d acknowledged appends", tail, len(acked))
	}
	fsys.Clear()
	after := []byte("after the fault")
	if pos, err := l.Append(ctx, after); err != nil || pos != tail {
		t.Fatalf("Append after the fault cleared = (%d, %v), want %d", pos, err, tail)
	}
	acked[tail] = after
	tail++
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, dir, filelog.Options{})
	defer l.Close()
	if got, _, err := l.CheckTail(ctx); err != nil || got != tail {
		t.Fatalf("CheckTail after reopen = (%d, %v), want %d", got, err, tail)
	}
	for p := sharedlog.Pos(0); p < tail; {
		es, err := l.ReadNext(ctx, p, tail)
		if err != nil || len(es) == 0 {
			t.Fatalf("ReadNext(%d): %d, %v", p, len(es), err)
		}
		for _, en := range es {
			if !bytes.Equal(en.Data, acked[en.Pos]) {
				t.Fatalf("entry %d = %q, acknowledged %q", en.Pos, en.Data, acked[en.Pos])
			}
		}
		p += sharedlog.Pos(len(es))
	}
}

// TestRollFailureRecovers: a segment roll that fails after renaming the
// new segment into place (the directory fsync fails) fails its appends;
// once the fault clears the roll is redone over the leftover file and
// the log reopens whole.
func TestRollFailureRecovers(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	fsys := faultfs.Wrap(filelog.OS)
	opts := filelog.Options{FS: fsys, SegmentBytes: 1 << 10}
	l := open(t, dir, opts)
	defer l.Close()
	fsys.Set(faultfs.Fault{Ops: faultfs.OpSync, Match: func(path string) bool { return path == dir }})
	n := 0
	for ; ; n++ {
		if _, err := l.Append(ctx, entry(n)); err != nil {
			if !errors.Is(err, filelog.ErrFailed) {
				t.Fatalf("Append %d: %v, want ErrFailed", n, err)
			}
			break
		}
	}
	if segs := segmentFiles(t, dir); len(segs) != 2 {
		t.Fatalf("segments after the failed roll: %v, want the old one and the new one's leftover", bases2names(segs))
	}
	fsys.Clear()
	appendEntries(t, l, n, n+20)
	wantLog(t, l, 0, n+20)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, dir, filelog.Options{SegmentBytes: 1 << 10})
	defer l.Close()
	wantLog(t, l, 0, n+20)
}

// TestSealFailureRecovers: a Seal whose STATE file cannot be made durable
// fails and leaves the loglet unsealed (after a reopen too), though no
// append gets in after it; once the fault clears, Seal succeeds.
func TestSealFailureRecovers(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	fsys := faultfs.Wrap(filelog.OS)
	l := open(t, dir, filelog.Options{FS: fsys})
	defer l.Close()
	appendEntries(t, l, 0, 3)
	fsys.Set(faultfs.Fault{Ops: faultfs.OpSync, Match: func(path string) bool { return filepath.Base(path) == "STATE.tmp" }})
	if err := l.Seal(ctx); !errors.Is(err, filelog.ErrFailed) {
		t.Fatalf("Seal with failing fsync: %v, want ErrFailed", err)
	}
	if _, sealed, _ := l.CheckTail(ctx); sealed {
		t.Fatal("CheckTail reports sealed after the seal failed")
	}
	if pos, err := l.Append(ctx, entry(3)); !errors.Is(err, sharedlog.ErrSealed) {
		t.Fatalf("Append after a failed Seal = (%d, %v), want ErrSealed: the seal may be retried", pos, err)
	}
	fsys.Clear()
	if err := l.Seal(ctx); err != nil {
		t.Fatalf("Seal after the fault cleared: %v", err)
	}
	if tail, sealed, err := l.CheckTail(ctx); err != nil || !sealed || tail != 3 {
		t.Fatalf("CheckTail after the seal = (%d, %v, %v), want 3, sealed", tail, sealed, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, dir, filelog.Options{})
	defer l.Close()
	if tail, sealed, err := l.CheckTail(ctx); err != nil || !sealed || tail != 3 {
		t.Fatalf("CheckTail after reopen = (%d, %v, %v), want 3, sealed", tail, sealed, err)
	}
}

// hookFS calls onSync before every fsync, of files and directories.
type hookFS struct {
	filelog.FS
	onSync func(name string)
}

func (h hookFS) OpenFile(name string, flag int, perm fs.FileMode) (filelog.File, error) {
	f, err := h.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return hookFile{f, h.onSync}, nil
}

type hookFile struct {
	filelog.File
	onSync func(name string)
}

func (f hookFile) Sync() error {
	f.onSync(f.Name())
	return f.File.Sync()
}
