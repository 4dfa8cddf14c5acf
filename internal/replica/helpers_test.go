package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// testTimeout guards against deadlocks only; nothing waits it out on
// purpose.
const testTimeout = 60 * time.Second

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openReplica opens a replica in dir (a fresh temp dir if empty) and closes
// it at cleanup.
func openReplica(t *testing.T, log sharedlog.Log, dir, writer string, opts ...func(*Config)) *Replica {
	t.Helper()
	r, err := tryOpen(t, log, dir, writer, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", writer, err)
	}
	return r
}

func tryOpen(t *testing.T, log sharedlog.Log, dir, writer string, opts ...func(*Config)) (*Replica, error) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := Config{Dir: dir, Log: log, WriterID: writer, Logger: quietLogger()}
	for _, o := range opts {
		o(&cfg)
	}
	r, err := Open(testCtx(t), cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { r.Close() })
	return r, nil
}

func mustPropose(t *testing.T, r *Replica, c meta.Command) meta.Result {
	t.Helper()
	res, err := r.Propose(testCtx(t), c)
	if err != nil {
		t.Fatalf("Propose(%v): %v", c.Type(), err)
	}
	return res
}

func mustOK(t *testing.T, r *Replica, c meta.Command) meta.Result {
	t.Helper()
	res := mustPropose(t, r, c)
	if res.Code != 0 {
		t.Fatalf("Propose(%v) = %v", c.Type(), res.Err())
	}
	return res
}

func mustSync(t *testing.T, r *Replica) {
	t.Helper()
	if err := r.Sync(testCtx(t)); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

func mustDigest(t *testing.T, r *Replica) [32]byte {
	t.Helper()
	d, err := r.Digest()
	if err != nil {
		t.Fatalf("Digest: %v", err)
	}
	return d
}

func viewOf(t *testing.T, r *Replica) *meta.View {
	t.Helper()
	v := r.View()
	t.Cleanup(func() { v.Close() })
	return v
}

func topicID(t *testing.T, r *Replica, name string) meta.TopicID {
	t.Helper()
	v := r.View()
	defer v.Close()
	tp, ok, err := v.Topic(name)
	if err != nil || !ok {
		t.Fatalf("meta.Topic(%q) = %v, %v", name, ok, err)
	}
	return tp.ID
}

func partitionState(t *testing.T, r *Replica, id meta.TopicID, p int32) meta.PartitionState {
	t.Helper()
	v := r.View()
	defer v.Close()
	st, ok, err := v.Partition(id, p)
	if err != nil || !ok {
		t.Fatalf("Partition(%v, %d) = %v, %v", id, p, ok, err)
	}
	return st
}

// objectSeq makes object keys unique across a test binary.
var objectSeq atomic.Uint64

// commitTo builds a CommitObject of one batch per (id, partition) pair,
// each holding records records.
func commitTo(records int32, parts ...partRef) meta.CommitObject {
	co := meta.CommitObject{ObjectKey: fmt.Sprintf("obj-%d", objectSeq.Add(1))}
	for i, p := range parts {
		co.Batches = append(co.Batches, meta.CommitBatch{
			TopicID: p.id, Partition: p.partition,
			Position: int64(i) * 100, Length: 100,
			Records: records, BatchCount: 1,
			FirstTimestamp: 1000, MaxTimestamp: 1000 + int64(i),
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		})
	}
	co.ObjectSize = int64(len(parts)) * 100
	return co
}

// rawEntries reads every entry of log.
func rawEntries(t *testing.T, log sharedlog.Log) []sharedlog.Entry {
	t.Helper()
	ctx := testCtx(t)
	tail, _, err := log.CheckTail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []sharedlog.Entry
	for from := sharedlog.Pos(0); from < tail; {
		es, err := log.ReadNext(ctx, from, tail)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, es...)
		from += sharedlog.Pos(len(es))
	}
	return out
}

// pollingLog hides the TailWaiter of a log, so replicas poll.
type pollingLog struct{ sharedlog.Log }

// faultLog wraps a log to lose append replies, fail appends, and gate or
// count calls. The zero value of each knob is off.
type faultLog struct {
	sharedlog.Log

	// loseReplies: the next n appends are written but report an error.
	loseReplies atomic.Int32
	// failAppends: the next n appends are not written and report an
	// error.
	failAppends atomic.Int32
	// rejectAppends: the next n appends that failAppends lets through
	// are not written and report an error marked sharedlog.ErrRejected.
	rejectAppends atomic.Int32
	// sent records the bytes of every append that reached the log.
	sent struct {
		sync.Mutex
		entries [][]byte
	}

	appendGate gate
	tailGate   gate
	readGate   gate

	checkTails atomic.Int32
	readFroms  struct {
		sync.Mutex
		min sharedlog.Pos
		any bool
	}
}

var errInjected = errors.New("injected fault")

func (f *faultLog) Append(ctx context.Context, entry []byte) (sharedlog.Pos, error) {
	if err := f.appendGate.pass(ctx); err != nil {
		return 0, err
	}
	f.sent.Lock()
	f.sent.entries = append(f.sent.entries, bytes.Clone(entry))
	f.sent.Unlock()
	if f.failAppends.Add(-1) >= 0 {
		return 0, errInjected
	}
	if f.rejectAppends.Add(-1) >= 0 {
		return 0, sharedlog.Rejected(fmt.Errorf("refused: %w", errInjected))
	}
	pos, err := f.Log.Append(ctx, entry)
	if err == nil && f.loseReplies.Add(-1) >= 0 {
		return 0, fmt.Errorf("reply lost: %w", errInjected)
	}
	return pos, err
}

func (f *faultLog) CheckTail(ctx context.Context) (sharedlog.Pos, bool, error) {
	f.checkTails.Add(1)
	// Read first, then wait: a gated check returns a tail that may be
	// stale by the time it returns, like a slow backend's.
	tail, sealed, err := f.Log.CheckTail(ctx)
	if err := f.tailGate.pass(ctx); err != nil {
		return 0, false, err
	}
	return tail, sealed, err
}

func (f *faultLog) ReadNext(ctx context.Context, from, max sharedlog.Pos) ([]sharedlog.Entry, error) {
	if err := f.readGate.pass(ctx); err != nil {
		return nil, err
	}
	f.readFroms.Lock()
	if !f.readFroms.any || from < f.readFroms.min {
		f.readFroms.min, f.readFroms.any = from, true
	}
	f.readFroms.Unlock()
	return f.Log.ReadNext(ctx, from, max)
}

// gate blocks callers while armed. entered receives a token each time a
// caller blocks.
type gate struct {
	mu      sync.Mutex
	armed   chan struct{} // nil when open
	entered chan struct{}
}

// arm makes callers block until release; blocks returns the channel that
// reports each blocked caller.
func (g *gate) arm() (entered <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = make(chan struct{})
	g.entered = make(chan struct{}, 128)
	return g.entered
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.armed != nil {
		close(g.armed)
		g.armed = nil
	}
}

func (g *gate) pass(ctx context.Context) error {
	g.mu.Lock()
	armed, entered := g.armed, g.entered
	g.mu.Unlock()
	if armed == nil {
		return nil
	}
	entered <- struct{}{}
	select {
	case <-armed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sentEntries returns the bytes of every append so far, in order.
func (f *faultLog) sentEntries() [][]byte {
	f.sent.Lock()
	defer f.sent.Unlock()
	return slices.Clone(f.sent.entries)
}

func newFaultLog() *faultLog {
	f := &faultLog{Log: memlog.New()}
	return f
}

// recv waits for a token on ch, failing the test at the deadlock guard.
func recv(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(testTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func (f *faultLog) WaitTail(ctx context.Context, after sharedlog.Pos) (sharedlog.Pos, error) {
	return f.Log.(sharedlog.TailWaiter).WaitTail(ctx, after)
}

// withChecksum appends the entry checksum to body.
func withChecksum(body []byte) []byte {
	return binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
}

// partRef names one partition.
type partRef struct {
	id        meta.TopicID
	partition int32
}

// localStart is the first key local to a copy (meta.LocalSpan).
func localStart() []byte {
	start, _ := meta.LocalSpan()
	return start
}

// withClock gives a replica the clock c; replicas may share one.
func withClock(c clock.Clock) func(*Config) { return func(cfg *Config) { cfg.Clock = c } }
