package meta

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
)

// The harness drives the state machine the way package replica drives it
// over Pebble and the shared log, but synchronously and in memory, so
// apply's tests need neither: a testLog is the shared log, a testReplica
// one copy on a MemStore, proposing entries with its writer id and
// playing the log with an Applier per batch. What the driver adds
// (appending, retries, fencing, halting, Pebble) is tested in package
// replica.

// testLog is a shared log: entries in position order.
type testLog struct{ entries [][]byte }

func newTestLog() *testLog { return &testLog{} }

// testConfig configures a testReplica.
type testConfig struct {
	// Now stamps proposed entries; default a fixed time.
	Now func() time.Time
	// flushEveryCommand sets the Applier knob of that name.
	flushEveryCommand bool
}

// testReplica is one copy. Its methods mirror replica.Replica's, so the
// tests read as they would against it.
type testReplica struct {
	t      *testing.T
	cfg    testConfig
	log    *testLog
	kv     *MemStore
	writer string
	inc    uint64
	seq    uint64
}

// openReplica opens a copy of log on store (a fresh MemStore if nil),
// plays the log to its end and picks an incarnation above any the writer
// used, as replica.Open does.
func openReplica(t *testing.T, log *testLog, store *MemStore, writer string, opts ...func(*testConfig)) *testReplica {
	t.Helper()
	if store == nil {
		store = NewMemStore()
	}
	r := &testReplica{t: t, log: log, kv: store, writer: writer,
		cfg: testConfig{Now: func() time.Time { return time.UnixMilli(1_700_000_000_000) }}}
	for _, o := range opts {
		o(&r.cfg)
	}
	if err := r.Sync(context.Background()); err != nil {
		t.Fatalf("open %s: %v", writer, err)
	}
	last, found, err := LastIncarnation(store, writer)
	if err != nil {
		t.Fatal(err)
	}
	r.inc = 1
	if found {
		r.inc = last + 1
	}
	k, v := LocalIncarnation(writer, r.inc)
	if err := store.Set(k, v); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *testReplica) WriterID() string { return r.writer }

// NextToApply is the position the copy plays from.
func (r *testReplica) NextToApply() uint64 {
	next, err := NextToApply(r.kv)
	if err != nil {
		r.t.Fatal(err)
	}
	return next
}

// play applies the log from the copy's position to its end in one batch
// and returns the outcome of every entry.
func (r *testReplica) play() ([]Outcome, error) {
	from := r.NextToApply()
	if from >= uint64(len(r.log.entries)) {
		return nil, nil
	}
	a := NewApplier(r.kv)
	a.flushEveryCommand = r.cfg.flushEveryCommand
	var outs []Outcome
	for pos := from; pos < uint64(len(r.log.entries)); pos++ {
		out, err := a.Apply(pos, r.log.entries[pos])
		if err != nil {
			return nil, fmt.Errorf("apply at %d: %w", pos, err)
		}
		outs = append(outs, out)
	}
	return outs, a.Finish(uint64(len(r.log.entries)))
}

// Sync plays the log to its end.
func (r *testReplica) Sync(context.Context) error {
	_, err := r.play()
	return err
}

func (r *testReplica) Propose(ctx context.Context, c Command) (Result, error) {
	res, err := r.ProposeBatch(ctx, []Command{c})
	if err != nil {
		return Result{}, err
	}
	return res[0], nil
}

// ProposeBatch appends cmds as one entry, plays the log through it and
// returns its results. Like the driver, it encodes at the metadata level
// its copy holds, and refuses a command that does not round-trip before
// it can reach the log.
func (r *testReplica) ProposeBatch(_ context.Context, cmds []Command) ([]Result, error) {
	f, err := ReadFeatures(r.kv)
	if err != nil {
		return nil, err
	}
	e := Entry{WriterID: r.writer, Incarnation: r.inc, Seq: r.seq + 1, Timestamp: r.cfg.Now().UnixMilli()}
	for _, c := range cmds {
		rc, err := EncodeCommandAt(c, f.MetadataLevel())
		if _, ok := c.(forgedCommand); ok {
			rc, err = EncodeCommand(c), nil
		}
		if err != nil {
			return nil, err
		}
		if _, err := DecodeCommand(rc); err != nil {
			return nil, fmt.Errorf("%v does not round-trip: %w", c.Type(), err)
		}
		e.Commands = append(e.Commands, rc)
	}
	r.seq++
	r.log.entries = append(r.log.entries, AppendEntry(nil, &e))
	outs, err := r.play()
	if err != nil {
		return nil, err
	}
	for _, out := range outs {
		if h := out.Header; h.WriterID == r.writer && h.Incarnation == r.inc && h.Seq == r.seq && !out.Dropped {
			return out.Results, nil
		}
	}
	return nil, fmt.Errorf("entry %d of %s was not applied", r.seq, r.writer)
}

// forgedCommand is a test's stand-in for what an older build wrote, at
// a version this build no longer writes: the harness writes it as it is.
type forgedCommand interface{ forged() }

func (r *testReplica) View() *View { return NewView(r.kv.Snapshot()) }

func (r *testReplica) Digest() ([32]byte, error) {
	v := r.View()
	defer v.Close()
	return v.Digest()
}

// Close ends nothing: the copy is its MemStore, which a test reopens by
// passing it to openReplica again.
func (r *testReplica) Close() error { return nil }

func testCtx(*testing.T) context.Context { return context.Background() }

func mustPropose(t *testing.T, r *testReplica, c Command) Result {
	t.Helper()
	res, err := r.Propose(testCtx(t), c)
	if err != nil {
		t.Fatalf("Propose(%v): %v", c.Type(), err)
	}
	return res
}

func mustOK(t *testing.T, r *testReplica, c Command) Result {
	t.Helper()
	res := mustPropose(t, r, c)
	if res.Code != 0 {
		t.Fatalf("Propose(%v) = %v", c.Type(), res.Err())
	}
	return res
}

func mustSync(t *testing.T, r *testReplica) {
	t.Helper()
	if err := r.Sync(testCtx(t)); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

func mustDigest(t *testing.T, r *testReplica) [32]byte {
	t.Helper()
	d, err := r.Digest()
	if err != nil {
		t.Fatalf("Digest: %v", err)
	}
	return d
}

func viewOf(t *testing.T, r *testReplica) *View {
	t.Helper()
	v := r.View()
	t.Cleanup(func() { v.Close() })
	return v
}

func topicID(t *testing.T, r *testReplica, name string) TopicID {
	t.Helper()
	tp, ok, err := viewOf(t, r).Topic(name)
	if err != nil || !ok {
		t.Fatalf("Topic(%q) = %v, %v", name, ok, err)
	}
	return tp.ID
}

func partitionState(t *testing.T, r *testReplica, id TopicID, p int32) PartitionState {
	t.Helper()
	st, ok, err := viewOf(t, r).Partition(id, p)
	if err != nil || !ok {
		t.Fatalf("Partition(%v, %d) = %v, %v", id, p, ok, err)
	}
	return st
}

// objectSeq makes object keys unique across a test binary.
var objectSeq atomic.Uint64

// commitTo builds a CommitObject of one batch per (id, partition) pair,
// each holding records records: the scenarios' default batch, placed one
// after another.
func commitTo(records int32, parts ...partRef) CommitObject {
	co := CommitObject{ObjectKey: fmt.Sprintf("obj-%d", objectSeq.Add(1))}
	for i, p := range parts {
		cb := scenarioDefaults[reflect.TypeFor[CommitBatch]()].(CommitBatch)
		cb.TopicID, cb.Partition, cb.Records = p.id, p.partition, records
		cb.Position = int64(i) * cb.Length
		cb.FirstTimestamp, cb.MaxTimestamp = 1000, 1000+int64(i)
		co.Batches = append(co.Batches, cb)
		co.ObjectSize = cb.Position + cb.Length
	}
	return co
}

// fakeClock is a proposer clock a test moves by hand; replicas share it.
type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) now() time.Time { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) set(ms int64)   { c.ms.Store(ms) }

func withClock(c *fakeClock) func(*testConfig) { return func(cfg *testConfig) { cfg.Now = c.now } }

// withChecksum appends the entry checksum to body.
func withChecksum(body []byte) []byte {
	return binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
}
