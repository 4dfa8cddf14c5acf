package sinks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/source"
	"github.com/strandkafka/strand/internal/sql/types"
	"github.com/strandkafka/strand/internal/sql/viewplan"
	"github.com/strandkafka/strand/internal/sql/views"
)

const (
	// maxPollRecords bounds a reader's batch (an upsert record is two
	// changes), batchesBuffered the batches read ahead of the epoch.
	maxPollRecords  = 10_000
	maxBatchChanges = 2 * maxPollRecords
	batchesBuffered = 4
	// maxBufferedRecords bounds the records a transaction holds in the
	// producer before Produce waits.
	maxBufferedRecords = 10_000
	// stateCacheBytes is the Pebble cache of a sink's state: Pebble
	// charges each live memtable's whole size to its cache (up to
	// stateMemTables of stateMemTableBytes), so blocks get what is left,
	// 16 MB; with a cache no larger than the memtables every index and
	// filter block read went to the file (as views' did: views/state.go).
	stateMemTableBytes = 16 << 20
	stateMemTables     = 2 // Pebble's default MemTableStopWritesThreshold
	stateCacheBytes    = 16<<20 + stateMemTables*stateMemTableBytes
	// lagInterval is how often the input lag is measured.
	lagInterval = 5 * time.Second
)

// task runs one sink on its owner.
type task struct {
	r      *Runner
	rel    meta.Relation
	rels   []meta.Relation
	dir    string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// windowed: the sink's dataflow closes windows by the watermark, so
	// records their partition's watermark marks late are dropped before
	// it (views.DropLate), as a view's are. Set by runOnce.
	windowed bool
	// commitMu is held over each epoch's step while running, and by a
	// snapshot's checkpoint (snapshot.go): it sees whole epochs.
	commitMu sync.Mutex
	mu       struct {
		sync.Mutex
		st SinkStatus
		// positions are the committed progress, for the lag.
		positions []map[int32]source.Position
		// state is the open state while the sink runs (not while it
		// catches up), epochs the epochs committed since.
		state  *state
		epochs uint64
	}
}

func (r *Runner) newTask(ctx context.Context, rel meta.Relation, rels []meta.Relation) *task {
	t := &task{r: r, rel: rel, rels: rels, dir: r.Dir(rel.ID), done: make(chan struct{})}
	t.ctx, t.cancel = context.WithCancel(ctx)
	t.mu.st.State = "starting"
	return t
}

func (t *task) stop() {
	t.cancel()
	<-t.done
}

func (t *task) status() SinkStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.st
}

func (t *task) setState(state, err string) {
	t.mu.Lock()
	t.mu.st.State, t.mu.st.Err = state, err
	t.mu.Unlock()
}

// run runs the sink until stopped, starting again from the committed
// progress after a failure.
func (t *task) run() {
	defer close(t.done)
	m := t.r.metrics
	m.running.WithLabelValues(t.rel.Name).Set(1)
	// Series from the start: rate() and increase() see the first one.
	m.failures.WithLabelValues(t.rel.Name).Add(0)
	m.restoredAhead.WithLabelValues(t.rel.Name).Add(0)
	backoff := t.r.cfg.RetryBackoff
	for {
		err := t.runOnce()
		if t.ctx.Err() != nil {
			return
		}
		t.r.cfg.Logger.Error("sink failed; starting again from its committed progress", "sink", t.rel.Name, "err", err, "retry_in", backoff)
		t.setState("failed", err.Error())
		m.failures.WithLabelValues(t.rel.Name).Inc()
		if clock.Sleep(t.ctx, t.r.cfg.Clock, backoff) != nil {
			return
		}
		backoff = min(2*backoff, maxRetryBackoff)
	}
}

// state is the sink's open Pebble state.
type state struct {
	db    *pebble.DB
	cache *pebble.Cache
	st    *flow.PebbleStore
	drv   *flow.Driver
	cp    []map[int32]source.Position // nil: no epoch committed
}

func (s *state) close() {
	s.st.Close()
	s.db.Close()
	s.cache.Unref()
}

func (t *task) openState(vw *viewplan.View, inputs int) (*state, error) {
	if err := os.MkdirAll(t.dir, 0o755); err != nil {
		return nil, err
	}
	s := &state{cache: pebble.NewCache(stateCacheBytes)}
	var err error
	s.db, err = pebble.Open(filepath.Join(t.dir, "state"), &pebble.Options{Cache: s.cache, MemTableSize: stateMemTableBytes, MemTableStopWritesThreshold: stateMemTables, Logger: quietLogger{}})
	if err != nil {
		s.cache.Unref()
		return nil, fmt.Errorf("state: %w", err)
	}
	s.st = flow.NewPebbleStore(s.db, nil, false)
	s.drv, err = flow.NewDriver(vw.Graph(), s.st, flow.Options{Index: &vw.Index,
		MaxEpochChanges: t.r.cfg.MaxEpochChanges + inputs*maxBatchChanges})
	if err != nil {
		s.close()
		return nil, err
	}
	b, ok, err := s.drv.Checkpoint()
	if err != nil {
		s.close()
		return nil, err
	}
	if ok {
		var cp progress
		if err := json.Unmarshal(b, &cp); err != nil || len(cp.Inputs) != inputs {
			s.close()
			return nil, fmt.Errorf("state: %w: checkpoint does not match the sink's inputs", types.ErrCorrupt)
		}
		s.cp = cp.Inputs
	}
	return s, nil
}

// runOnce starts the sink: it fences any earlier owner, reads the
// committed progress, brings the local state to exactly it without
// writing, then writes every later epoch in a transaction.
func (t *task) runOnce() error {
	t.setState("starting", "")
	vw, defs, err := views.Compile(t.rel, t.rels)
	t.windowed = vw != nil && vw.Windowed
	if err != nil {
		return err
	}
	envelope := EnvelopeUpsert
	for _, o := range t.rel.Options {
		if o.Key == "envelope" && o.Value != "" {
			envelope = o.Value
		}
	}
	if envelope != EnvelopeUpsert && envelope != EnvelopeChangelog {
		return fmt.Errorf("sink %q: envelope %q is not written", t.rel.Name, envelope)
	}
	ctx := t.ctx
	opts := t.r.cfg.Kafka()
	prod, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...),
		kgo.TransactionalID(TransactionalID(t.rel.ID)),
		kgo.DefaultProduceTopic(t.rel.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(maxBufferedRecords),
		kgo.ProducerLinger(0))...)
	if err != nil {
		return err
	}
	defer prod.Close()
	// InitProducerID with the sink's transactional id: the previous
	// owner's producer is fenced from here on (its next produce or
	// EndTxn fails) and its open transaction is aborted, so the
	// progress read next is final until this task commits.
	if _, _, err := prod.ProducerID(ctx); err != nil {
		return fmt.Errorf("transactional id %s: %w", TransactionalID(t.rel.ID), err)
	}
	ptopic := ProgressTopic(t.rel.ID)
	if err := ensureProgressTopic(ctx, kadm.NewClient(prod), ptopic); err != nil {
		return err
	}
	committed, hasCommitted, err := readProgress(ctx, opts, ptopic)
	if err != nil {
		return err
	}
	if hasCommitted && len(committed.Inputs) != len(defs) {
		return fmt.Errorf("sink %q: %w: the progress topic does not match the sink's inputs", t.rel.Name, types.ErrCorrupt)
	}
	restored := false
	if t.r.cfg.Restore != nil {
		if _, err := os.Stat(t.dir); errors.Is(err, os.ErrNotExist) {
			t.r.cfg.Restore(ctx, t.rel, t.dir)
			_, err := os.Stat(t.dir)
			restored = err == nil
		}
	}
	s, err := t.openState(vw, len(defs))
	if errors.Is(err, flow.ErrStaleLayout) {
		// Begun by an older build (a snapshot or the local copy):
		// built again from the inputs, as with no state at all.
		t.r.cfg.Logger.Info("sink state in an older layout; rebuilding it from the inputs", "sink", t.rel.Name, "err", err)
		if err = os.RemoveAll(t.dir); err == nil {
			restored = false
			s, err = t.openState(vw, len(defs))
		}
	}
	if err != nil {
		return err
	}
	if restored && s.cp != nil && (!hasCommitted || !behindOrEqual(s.cp, committed.Inputs)) {
		// Cannot happen for a snapshot of this sink (snapshot.go): say
		// so apart from the local case below.
		t.r.cfg.Logger.Error("sink: restored snapshot is ahead of the committed progress; not using it", "sink", t.rel.Name)
		t.r.metrics.restoredAhead.WithLabelValues(t.rel.Name).Inc()
	}
	// Local state ahead of the committed progress cannot come from
	// this task (it commits its state only after its transaction); it
	// is another sink's leftovers or a progress topic deleted. Start
	// over from the beginning.
	if s.cp != nil && (!hasCommitted || !behindOrEqual(s.cp, committed.Inputs)) {
		t.r.cfg.Logger.Warn("sink state ahead of its committed progress; rebuilding it", "sink", t.rel.Name)
		s.close()
		if err := os.RemoveAll(t.dir); err != nil {
			return err
		}
		if s, err = t.openState(vw, len(defs)); err != nil {
			return err
		}
	}
	defer s.close()
	// from says how the local state stood against the committed
	// progress, for the log.
	from := "no committed progress"
	began := t.r.cfg.Clock.Now()
	var caughtUp int
	if hasCommitted {
		from = "at the committed progress"
		if s.cp == nil || !equalOffsets(s.cp, committed.Inputs) {
			from = "behind the committed progress"
			if s.cp == nil {
				from = "no local state"
			}
			t.setState("catching up", "")
			if caughtUp, err = t.catchUp(ctx, s, defs, committed.Inputs); err != nil {
				return fmt.Errorf("catching up to the committed progress: %w", err)
			}
		}
	}
	t.r.cfg.Logger.Info("sink running", "sink", t.rel.Name, "from", from, "caught_up_changes", caughtUp,
		"start_duration", clock.Since(t.r.cfg.Clock, began))
	t.setState("running", "")
	enc := newEncoder(vw.Columns, vw.Index, envelope)
	t.mu.Lock()
	t.mu.state, t.mu.epochs = s, 0
	t.mu.Unlock()
	defer func() {
		t.commitMu.Lock()
		t.mu.Lock()
		t.mu.state = nil
		t.mu.Unlock()
		t.commitMu.Unlock()
	}()
	return t.emit(ctx, s, defs, enc, prod, ptopic)
}

// input is one source the sink reads, polled ahead by a goroutine.
type input struct {
	def *source.Def
	ch  chan polled
}

type polled struct {
	b   *source.Batch
	err error
}

// startReaders starts a reader per input from cp (nil: each source's
// startup position), stopping at until when given.
func (t *task) startReaders(ctx context.Context, wg *sync.WaitGroup, defs []*source.Def, cp []map[int32]source.Position, until []map[int32]int64) ([]*input, error) {
	ins := make([]*input, len(defs))
	for i, def := range defs {
		var schemas *source.Schemas
		if t.r.cfg.Schemas != nil {
			schemas = t.r.cfg.Schemas()
		}
		dec, err := source.NewDecoder(def, schemas)
		if err != nil {
			return nil, err
		}
		var start map[int32]source.Position
		if cp != nil {
			if start, err = t.startOf(ctx, def, cp[i]); err != nil {
				return nil, fmt.Errorf("source %s: %w", def.Name, err)
			}
		}
		rc := source.ReaderConfig{Def: def, Decoder: dec, Kafka: t.r.cfg.Kafka(), Start: start,
			StateDir: filepath.Join(t.dir, "upsert-"+strconv.Itoa(i)), Metrics: t.r.cfg.SourceMetrics, MaxPollRecords: maxPollRecords}
		if until != nil {
			rc.Until = until[i]
		}
		rd, err := source.NewReader(ctx, rc)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", def.Name, err)
		}
		in := &input{def: def, ch: make(chan polled, batchesBuffered)}
		ins[i] = in
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer rd.Close()
			for {
				b, err := rd.Poll(ctx)
				select {
				case in.ch <- polled{b, err}:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
	}
	return ins, nil
}

// startOf is where to read def's topic from: cp's positions, and a
// partition it has none for from the log's start (as views do).
func (t *task) startOf(ctx context.Context, def *source.Def, cp map[int32]source.Position) (map[int32]source.Position, error) {
	cl, err := kgo.NewClient(t.r.cfg.Kafka()...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListStartOffsets(ctx, def.Topic)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return nil, err
	}
	start := maps.Clone(cp)
	if start == nil {
		start = map[int32]source.Position{}
	}
	offs.Each(func(o kadm.ListedOffset) {
		if _, ok := start[o.Partition]; !ok && o.Topic == def.Topic {
			start[o.Partition] = source.Position{Offset: o.Offset}
		}
	})
	return start, nil
}

// catchUp advances the local state from where it stands to exactly the
// committed progress, writing nothing: what those epochs output, the
// owner that committed the progress wrote. Every input partition is
// read up to the committed offset and not one record more (a partition
// the progress has no position for is read not at all).
func (t *task) catchUp(ctx context.Context, s *state, defs []*source.Def, target []map[int32]source.Position) (changes int, err error) {
	until := make([]map[int32]int64, len(defs))
	cp := views.ClonePositions(s.cp)
	if cp == nil {
		cp = make([]map[int32]source.Position, len(defs))
	}
	for i, def := range defs {
		start, err := t.startOf(ctx, def, cp[i])
		if err != nil {
			return 0, err
		}
		until[i] = map[int32]int64{}
		for p, pos := range start {
			u := pos.Offset // not in the progress: nothing to read
			if c, ok := target[i][p]; ok {
				u = c.Offset
			}
			if pos.Offset > u {
				return 0, fmt.Errorf("source %s partition %d: its log starts at %d, after the committed progress %d: the records between are gone", def.Name, p, pos.Offset, u)
			}
			until[i][p] = u
		}
		for p := range target[i] {
			if _, ok := start[p]; !ok {
				return 0, fmt.Errorf("source %s: partition %d of the committed progress is not in the topic", def.Name, p)
			}
		}
		cp[i] = start
	}
	reached := func() bool {
		for i := range until {
			for p, u := range until[i] {
				if cp[i][p].Offset < u {
					return false
				}
			}
		}
		return true
	}
	if reached() {
		return 0, t.commitPositions(s, cp, target)
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	// The readers start from the local checkpoint, or without one from
	// the logs' starts (cp): even a source read from its end
	// (scan.startup = 'latest') is rebuilt from its start, since its
	// end has moved past the progress by now.
	ins, err := t.startReaders(rctx, &wg, defs, cp, until)
	if err != nil {
		return 0, err
	}
	wms := make([]time.Time, len(ins))
	for !reached() {
		e, err := t.gather(rctx, ins, cp, wms)
		if err != nil {
			return changes, err
		}
		b, err := json.Marshal(progress{Sink: t.rel.ID, Inputs: cp})
		if err != nil {
			return changes, err
		}
		e.Checkpoint = b
		if _, err := s.drv.Step(e); err != nil {
			return changes, err
		}
		for _, in := range e.Inputs {
			changes += len(in)
		}
	}
	return changes, t.commitPositions(s, cp, target)
}

// commitPositions checks that the state reached target's offsets and
// records target as its checkpoint (event times included).
func (t *task) commitPositions(s *state, cp, target []map[int32]source.Position) error {
	if !equalOffsets(cp, target) {
		return fmt.Errorf("caught up to %v, not to the committed %v", cp, target)
	}
	b, err := json.Marshal(progress{Sink: t.rel.ID, Inputs: target})
	if err != nil {
		return err
	}
	if _, err := s.drv.Step(flow.Epoch{Checkpoint: b}); err != nil {
		return err
	}
	s.cp = views.ClonePositions(target)
	return nil
}

// gather blocks for a batch on any input, then takes what else is
// ready up to the epoch's bound; cp and wms advance with what it takes.
func (t *task) gather(ctx context.Context, ins []*input, cp []map[int32]source.Position, wms []time.Time) (flow.Epoch, error) {
	e := flow.Epoch{Inputs: make([][]types.Change, len(ins))}
	n := 0
	take := func(i int, p polled) error {
		if p.err != nil {
			return fmt.Errorf("source %s: %w", ins[i].def.Name, p.err)
		}
		if cp[i] == nil {
			cp[i] = map[int32]source.Position{}
		}
		for _, pb := range p.b.Partitions {
			if t.windowed {
				pb.Changes = views.DropLate(pb.Changes, pb.Late)
			}
			e.Inputs[i] = append(e.Inputs[i], pb.Changes...)
			n += len(pb.Changes)
			cp[i][pb.Partition] = pb.Next
		}
		if p.b.Watermark.After(wms[i]) {
			wms[i] = p.b.Watermark
		}
		return nil
	}
	chs := make([]chan polled, len(ins))
	for i, in := range ins {
		chs[i] = in.ch
	}
	if err := views.WaitAny(ctx, chs, take); err != nil {
		return e, err
	}
	for more := true; more && n < t.r.cfg.MaxEpochChanges; {
		more = false
		for i, in := range ins {
			select {
			case p := <-in.ch:
				if err := take(i, p); err != nil {
					return e, err
				}
				more = true
			default:
			}
		}
	}
	e.Watermark = wms[0]
	for _, w := range wms[1:] {
		if w.Before(e.Watermark) {
			e.Watermark = w
		}
	}
	return e, nil
}

// emit runs the sink's epochs: each epoch's output and its progress go
// to Kafka in one transaction, committed before the epoch's state
// commits (flow.Epoch.BeforeCommit). The state is never ahead of the
// committed progress: if the transaction fails, or its outcome is
// unknown, the epoch rolls back and the task starts again, catching up
// to whatever was committed.
func (t *task) emit(ctx context.Context, s *state, defs []*source.Def, enc *encoder, prod *kgo.Client, ptopic string) error {
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	cp := views.ClonePositions(s.cp)
	ins, err := t.startReaders(rctx, &wg, defs, s.cp, nil)
	if err != nil {
		return err
	}
	if cp == nil {
		cp = make([]map[int32]source.Position, len(defs))
	}
	t.mu.Lock()
	t.mu.positions = views.ClonePositions(cp)
	t.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		t.measureLag(rctx, defs)
	}()
	m := t.r.metrics
	name := t.rel.Name
	wms := make([]time.Time, len(ins))
	for {
		e, err := t.gather(rctx, ins, cp, wms)
		if err != nil {
			return err
		}
		b, err := json.Marshal(progress{Sink: t.rel.ID, Inputs: cp})
		if err != nil {
			return err
		}
		e.Checkpoint = b
		var written int
		e.BeforeCommit = func(out []types.Change, pending *flow.View) error {
			recs, err := enc.encode(out, pending)
			if err != nil {
				return err
			}
			written = len(recs)
			return t.commitTxn(ctx, prod, recs, ptopic, b)
		}
		t.commitMu.Lock()
		_, err = s.drv.Step(e)
		if err != nil {
			t.commitMu.Unlock()
			return err
		}
		now := t.r.cfg.Clock.Now()
		t.mu.Lock()
		t.mu.st.Transactions++
		t.mu.st.Records += uint64(written)
		t.mu.positions = views.ClonePositions(cp)
		t.mu.epochs++
		t.mu.Unlock()
		t.commitMu.Unlock()
		m.txns.WithLabelValues(name).Inc()
		m.records.WithLabelValues(name).Add(float64(written))
		m.lastEpoch.WithLabelValues(name).Set(float64(now.UnixMicro()) / 1e6)
	}
}

// commitTxn writes recs and the progress record in one transaction and
// commits it. Any error leaves the outcome for the next start to read:
// an aborted or unknown transaction is retried from the committed
// progress, never assumed.
func (t *task) commitTxn(ctx context.Context, prod *kgo.Client, recs []record, ptopic string, prog []byte) error {
	if err := prod.BeginTransaction(); err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		perr error
	)
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if perr == nil {
				perr = err
			}
			mu.Unlock()
		}
	}
	for _, r := range recs {
		prod.Produce(ctx, &kgo.Record{Key: r.key, Value: r.value}, promise)
	}
	prod.Produce(ctx, &kgo.Record{Topic: ptopic, Key: progressKey, Value: prog}, promise)
	ferr := prod.Flush(ctx)
	mu.Lock()
	err := errors.Join(ferr, perr)
	mu.Unlock()
	if err != nil {
		// Best effort: the next start's InitProducerID aborts it anyway.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_ = prod.AbortBufferedRecords(actx)
		_ = prod.EndTransaction(actx, kgo.TryAbort)
		cancel()
		return fmt.Errorf("sink transaction: %w", err)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("sink transaction commit: %w", err)
	}
	return nil
}

// measureLag sets the sink's records-behind gauge every lagInterval:
// the inputs' last stable offsets minus the committed progress.
func (t *task) measureLag(ctx context.Context, defs []*source.Def) {
	cl, err := kgo.NewClient(append(t.r.cfg.Kafka(), kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		t.mu.Lock()
		pos := t.mu.positions
		t.mu.Unlock()
		var behind int64
		ok := true
		for i, def := range defs {
			ends, err := adm.ListEndOffsets(ctx, def.Topic)
			if err == nil {
				err = ends.Error()
			}
			if err != nil {
				ok = false
				break
			}
			ends.Each(func(o kadm.ListedOffset) {
				if o.Topic == def.Topic && i < len(pos) {
					behind += max(0, o.Offset-pos[i][o.Partition].Offset)
				}
			})
		}
		if ok {
			t.r.metrics.lag.WithLabelValues(t.rel.Name).Set(float64(behind))
		}
		if clock.Sleep(ctx, t.r.cfg.Clock, lagInterval) != nil {
			return
		}
	}
}

// quietLogger keeps Pebble's routine messages out of the agent's log.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("sinks: state: "+format, args...))
}
