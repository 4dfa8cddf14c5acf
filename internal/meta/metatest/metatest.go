// Package metatest holds a whole copy of the metadata state machine in
// memory for the tests of the packages above it: a DB applies every
// proposal at once to a meta.MemStore, the way replica.Replica proposes
// through the shared log and applies to Pebble, so a test of a handler or
// a coordinator that reads Views and proposes commands needs neither
// Pebble nor a log nor the replica's goroutines. What the driver adds
// (appends, retries, dedupe across writers, halting) is tested in package
// replica; that Pebble and a MemStore reach the same state, too.
package metatest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/meta"
)

// writerID names the DB's entries; one writer, one incarnation.
const writerID = "metatest"

// DB is one copy, alone on its log. It is safe for concurrent use:
// proposals apply one at a time, in the order they take the lock, and
// every View is a snapshot that later proposals do not change.
type DB struct {
	now func() time.Time

	mu struct {
		sync.Mutex
		kv  *meta.MemStore
		seq uint64 // of the last entry, which sat at log position seq-1
		// err halts the copy: an entry failed to apply after the
		// MemStore took some of its writes (they apply as they come).
		err error
	}
}

// New returns an empty copy whose entries are stamped by now (time.Now
// when nil); the log clock, which apply reads time from, follows it.
func New(now func() time.Time) *DB {
	if now == nil {
		now = time.Now
	}
	d := &DB{now: now}
	d.mu.kv = meta.NewMemStore()
	return d
}

// View implements meta.Viewer.
func (d *DB) View() *meta.View {
	d.mu.Lock()
	defer d.mu.Unlock()
	return meta.NewView(d.mu.kv.Snapshot())
}

// Sync returns at once: every proposal is applied before it returns and
// there is no other writer.
func (d *DB) Sync(ctx context.Context) error { return ctx.Err() }

// Propose proposes one command.
func (d *DB) Propose(ctx context.Context, c meta.Command) (meta.Result, error) {
	res, err := d.ProposeBatch(ctx, []meta.Command{c})
	if err != nil {
		return meta.Result{}, err
	}
	return res[0], nil
}

// MustPropose proposes c and fails t unless it applied without error,
// in its result too.
func (d *DB) MustPropose(t testing.TB, c meta.Command) meta.Result {
	t.Helper()
	res, err := d.Propose(context.Background(), c)
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		t.Fatalf("%v: %v", c.Type(), err)
	}
	return res
}

// ProposeBatch applies cmds as one log entry and returns their results,
// as replica.Replica.ProposeBatch does once the entry is applied locally.
// Like the driver, it refuses a command that does not round-trip before
// it reaches the log.
func (d *DB) ProposeBatch(ctx context.Context, cmds []meta.Command) ([]meta.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.err != nil {
		return nil, d.mu.err
	}
	e := meta.Entry{WriterID: writerID, Incarnation: 1, Seq: d.mu.seq + 1, Timestamp: d.now().UnixMilli()}
	for _, c := range cmds {
		rc := meta.EncodeCommand(c)
		if _, err := meta.DecodeCommand(rc); err != nil {
			return nil, fmt.Errorf("metatest: %v does not round-trip: %w", c.Type(), err)
		}
		e.Commands = append(e.Commands, rc)
	}
	pos := d.mu.seq
	a := meta.NewApplier(d.mu.kv)
	out, err := a.Apply(pos, meta.AppendEntry(nil, &e))
	if err == nil {
		err = a.Finish(pos + 1)
	}
	if err != nil {
		d.mu.err = fmt.Errorf("metatest: applying entry %d: %w", e.Seq, err)
		return nil, d.mu.err
	}
	d.mu.seq++
	return out.Results, nil
}
