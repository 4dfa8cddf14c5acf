package replica

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// diskFullFS is a Pebble file system on which, while full is set, every
// write, fsync, preallocation and file creation in dir fails with
// ENOSPC, as on a full disk.
func diskFullFS(dir string, full *atomic.Bool) vfs.FS {
	return errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !full.Load() || (op.Path != dir && filepath.Dir(op.Path) != dir) {
			return nil
		}
		switch op.Kind {
		case errorfs.OpCreate, errorfs.OpReuseForWrite, errorfs.OpFileWrite, errorfs.OpFileWriteAt,
			errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo, errorfs.OpFilePreallocate:
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	}))
}

// TestPebbleWriteFailureFailStops: once Pebble cannot write its files,
// the replica calls FailStop at once, with a message naming the file and
// the cause, rather than go on with a store Pebble itself no longer
// trusts (it panics at its next WAL rotation: issue 19's "rotateWAL ...
// sync: unlock of unlocked mutex" in the next snapshot). The replica
// halts when FailStop returns, as a test's does, and nothing panics.
//
// The replicas are not closed: the Pebble goroutine that met the
// failure waits for the process to end, as it would after a real
// FailStop, so Close would wait for it.
func TestPebbleWriteFailureFailStops(t *testing.T) {
	for _, tc := range []struct {
		name string
		// during runs while the disk is full; it may never return.
		during func(ctx context.Context, r *Replica)
	}{
		{"apply", func(ctx context.Context, r *Replica) {
			// Commits do not fsync, so the WAL is written a 32 KiB
			// block at a time: write a few blocks' worth.
			r.Propose(ctx, meta.CreateTopic{Name: "during", Partitions: 4096})
		}},
		{"snapshot", func(ctx context.Context, r *Replica) {
			r.Snapshot(ctx, memobj.New(), "")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			dir := t.TempDir()
			var full atomic.Bool
			stopped := make(chan error, 1)
			r, err := Open(ctx, Config{
				Dir:      dir,
				Log:      memlog.New(),
				WriterID: "w",
				Logger:   quietLogger(),
				FS:       diskFullFS(dir, &full),
				FailStop: func(err error) { stopped <- err },
			})
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, r, meta.CreateTopic{Name: "before", Partitions: 1})

			full.Store(true)
			go tc.during(ctx, r)
			select {
			case err = <-stopped:
			case <-ctx.Done():
				t.Fatal("Pebble could not write, and FailStop was never called")
			}
			msg := err.Error()
			t.Logf("FailStop: %s", msg)
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(msg, dir) || !strings.Contains(msg, "pebble") {
				t.Errorf("FailStop(%q): want the cause (ENOSPC), the directory and Pebble named", msg)
			}
			if err := r.WaitApplied(ctx, 1<<62); !errors.Is(err, ErrHalted) {
				t.Errorf("after FailStop returned: WaitApplied = %v, want ErrHalted", err)
			}
			select {
			case err := <-stopped:
				t.Errorf("FailStop called twice; again with %v", err)
			default:
			}
		})
	}
}
