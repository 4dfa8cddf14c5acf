package produce

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/segment"
)

// Pipeline buffers, uploads and commits record batches. Safe for
// concurrent use.
type Pipeline struct {
	cfg Config
	obs Observer

	// ctx bounds uploads and proposals; Close cancels it once drained,
	// or at once when its own ctx ends first.
	ctx    context.Context
	cancel context.CancelFunc

	// kick wakes the committer after a flush's upload ends and on Close.
	kick          chan struct{}
	committerDone chan struct{}
	// cmds is the committer's, reused from commit to commit: a
	// proposal encodes its commands before it returns, and a slice
	// handed to an interface's method would otherwise be allocated
	// anew each time.
	cmds []meta.Command

	mu struct {
		sync.Mutex
		// open takes new batches; nil until the first Submit after a cut.
		open *flush
		// cut holds the flushes cut but not yet taken by the
		// committer, in cut order.
		cut []*flush
		// uploading counts uploads in flight, at most
		// MaxConcurrentUploads.
		uploading int
		// bufferedBytes counts batch bytes accepted and not yet
		// answered: open, uploading, committing.
		bufferedBytes int
		// space is closed and replaced when bufferedBytes shrinks, the
		// open flush is cut, or the pipeline starts closing.
		space chan struct{}
		// seq numbers object keys; the last one used.
		seq     uint64
		closing bool
		// free keeps segment writers for reuse, at most maxFreeWriters.
		free []*segment.Writer
		// objBytes is the starting capacity of the next new writer:
		// the size of the largest recent object, decaying by an
		// eighth with each smaller one. Under load the sizes swing
		// (a flush holds what arrived during the upload before it),
		// and a writer started at the last one's size regrew and
		// recopied its buffer, several times for an object twice as
		// large: 14% of the agent's CPU at saturation.
		objBytes int
		// puts times uploads for the hedge delay; hedges and hedgeWins
		// count hedges started and won.
		puts              putTimes
		hedges, hedgeWins int
		// nextCut is the earliest time the next flush may be cut under
		// MaxPutsPerSec.
		nextCut time.Time
	}
	// cleanups counts goroutines deleting hedge losers; Close waits.
	cleanups sync.WaitGroup
}

type flushState uint8

const (
	stateOpen flushState = iota
	stateUploading
	stateUploaded
	stateFailed
)

// flush is one data object in the making. Fields without a comment are
// written under Pipeline.mu while the flush is open and read-only after
// the cut.
type flush struct {
	key     string
	w       *segment.Writer
	batches []meta.CommitBatch
	acks    []*Ack
	bytes   int // batch data bytes
	opened  time.Time
	// full: a call did not fit, so the flush must be cut at once.
	full bool
	// due: FlushInterval passed since the first batch.
	due   bool
	timer clock.Timer
	// paceTimer waits for MaxPutsPerSec to allow the next cut.
	paceTimer clock.Timer

	// Under Pipeline.mu.
	state   flushState
	objSize int64
	err     error
}

// Ack is the pending outcome of one Submit.
type Ack struct {
	done    chan struct{}
	first   int // index of the call's first batch in its flush
	n       int
	results []meta.BatchResult
	err     error
}

// Done is closed when the outcome is known.
func (a *Ack) Done() <-chan struct{} { return a.done }

// Wait waits for the outcome: one result per batch of the call, in order,
// or an error (ErrUpload, ErrCommit, ErrClosed wrapped) that fails them
// all. A ctx error says nothing about the batches: they may still commit.
func (a *Ack) Wait(ctx context.Context) ([]meta.BatchResult, error) {
	select {
	case <-a.done:
		return a.results, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// New starts a pipeline.
func New(cfg Config) (*Pipeline, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pipeline{
		cfg:           cfg,
		obs:           cfg.Observer,
		kick:          make(chan struct{}, 1),
		committerDone: make(chan struct{}),
	}
	if p.obs == nil {
		p.obs = nopObserver{}
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.mu.space = make(chan struct{})
	go p.runCommitter()
	return p, nil
}

// Produce submits batches and waits until they are committed: the object
// holding them is durable and this replica applied its CommitObject. It
// returns one result per batch, in order; a result may carry a Kafka error
// code (UNKNOWN_TOPIC_OR_PARTITION for a deleted topic, say).
func (p *Pipeline) Produce(ctx context.Context, batches []Batch) ([]meta.BatchResult, error) {
	a, err := p.Submit(ctx, batches)
	if err != nil {
		return nil, err
	}
	return a.Wait(ctx)
}

// Submit copies batches into the open flush, all into the same one, and
// returns without waiting for the commit. Calls are committed in the order
// Submit returned, so a connection that pipelines requests keeps their
// order by submitting them one after the other. Submit blocks while the
// buffered bytes would pass MaxBufferedBytes, until room frees or ctx
// ends; a call larger than that bound waits for an empty buffer.
func (p *Pipeline) Submit(ctx context.Context, batches []Batch) (*Ack, error) {
	a := &Ack{done: make(chan struct{}), n: len(batches)}
	if len(batches) == 0 {
		close(a.done)
		return a, nil
	}
	size, objBytes := 0, 0
	for i := range batches {
		if err := batches[i].check(); err != nil {
			return nil, err
		}
		size += len(batches[i].Data)
		objBytes += len(batches[i].Data) + segment.EntrySize
	}
	if len(batches) > p.cfg.MaxFlushBatches || objBytes > maxFlushObjectBytes {
		return nil, fmt.Errorf("%w: %d batches, %d bytes", ErrTooLarge, len(batches), size)
	}

	p.mu.Lock()
	for !p.admitLocked(len(batches), objBytes, size) {
		if p.mu.closing {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		space := p.mu.space
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-space:
		}
		p.mu.Lock()
	}
	f := p.openLocked()
	a.first = len(f.batches)
	for i := range batches {
		b := &batches[i]
		ref, err := f.w.Add(b.TopicID, b.Partition, b.Data)
		if err != nil {
			// check and admitLocked rule this out. The bytes already
			// added stay in the object unreferenced, which is harmless.
			f.batches = f.batches[:a.first]
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %w", ErrInvalidBatch, err)
		}
		f.batches = append(f.batches, meta.CommitBatch{
			TopicID:        b.TopicID,
			Partition:      b.Partition,
			Position:       ref.Offset,
			Length:         ref.Length,
			Records:        b.Records,
			BatchCount:     b.BatchCount,
			FirstTimestamp: b.FirstTimestamp,
			MaxTimestamp:   b.MaxTimestamp,
			ProducerID:     b.ProducerID,
			ProducerEpoch:  b.ProducerEpoch,
			BaseSequence:   b.BaseSequence,
			Transactional:  b.Transactional,
		})
	}
	if len(f.acks) == 0 {
		f.opened = p.cfg.Clock.Now()
	}
	f.acks = append(f.acks, a)
	f.bytes += size
	p.mu.bufferedBytes += size
	p.maybeCutLocked()
	p.mu.Unlock()
	return a, nil
}

// admitLocked reports whether a call of n batches fits the buffer bound
// and the open flush. A call that fits the buffer but not the open flush
// marks it full, to have it cut.
func (p *Pipeline) admitLocked(n, objBytes, size int) bool {
	if p.mu.closing {
		return false
	}
	if p.mu.bufferedBytes > 0 && p.mu.bufferedBytes+size > p.cfg.MaxBufferedBytes {
		return false
	}
	f := p.mu.open
	if f == nil || len(f.batches) == 0 {
		return true
	}
	if len(f.batches)+n <= p.cfg.MaxFlushBatches && f.w.Len()+objBytes <= maxFlushObjectBytes {
		return true
	}
	f.full = true
	p.maybeCutLocked()
	return p.mu.open == nil
}

// openLocked returns the open flush, starting one if needed.
func (p *Pipeline) openLocked() *flush {
	if p.mu.open != nil {
		return p.mu.open
	}
	p.mu.seq++
	f := &flush{key: segment.ObjectKey(p.cfg.AgentID, p.mu.seq, p.cfg.KeyTime())}
	if n := len(p.mu.free); n > 0 {
		f.w = p.mu.free[n-1]
		p.mu.free = p.mu.free[:n-1]
	} else {
		// Writers whose objects went to the cache are not reused, so a
		// new one starts at about the size of the last object: at full
		// load that fills without regrowing (and recopying) its buffer.
		f.w = segment.NewWriterSize(p.mu.objBytes + p.mu.objBytes/8)
	}
	p.mu.open = f
	return f
}

// maybeCutLocked cuts the open flush if the flush policy (package doc)
// says so, and otherwise makes sure its interval timer runs.
func (p *Pipeline) maybeCutLocked() {
	f := p.mu.open
	if f == nil || len(f.batches) == 0 {
		return
	}
	due := f.due || p.cfg.FlushInterval <= 0
	if !due && f.timer == nil {
		f.timer = p.cfg.Clock.AfterFunc(p.cfg.FlushInterval, func() { p.intervalPassed(f) })
	}
	if p.mu.uploading >= p.cfg.MaxConcurrentUploads {
		return
	}
	bytesCut := p.cfg.PacedCutBytes > 0 && f.bytes >= p.cfg.PacedCutBytes
	forced := f.full || p.mu.closing || bytesCut
	paced := !forced && p.cfg.MaxPutsPerSec > 0
	if paced {
		if wait := p.mu.nextCut.Sub(p.cfg.Clock.Now()); wait > 0 {
			if f.paceTimer == nil {
				f.paceTimer = p.cfg.Clock.AfterFunc(wait, func() { p.pacePassed(f) })
			}
			return
		}
	}
	switch {
	case due || forced || len(f.batches) >= p.cfg.MaxFlushBatches:
	case paced:
		// The pace allows a cut, but the flush's first batch came
		// less than FlushInterval ago (after its turn, or just before
		// it): the interval timer cuts it, with the calls arriving
		// meanwhile. Under load they come in bursts (producers'
		// requests freed by one commit), and cut at the first, the
		// rest would wait a whole spacing for the next flush.
		return
	case p.mu.uploading == 0 || f.bytes >= p.cfg.FlushBytes:
	default:
		return
	}
	clock.Stop(f.timer)
	clock.Stop(f.paceTimer)
	if p.cfg.MaxPutsPerSec > 0 {
		// Cuts keep to the schedule: one that came late (no data was
		// waiting when the pace allowed it) does not push the next one
		// a whole spacing later, unless the pipeline was idle for a
		// spacing or more. Over any window cuts stay within the budget
		// but for one.
		now, spacing := p.cfg.Clock.Now(), p.cutSpacing()
		switch {
		case bytesCut:
			// Cut by size, not by turn: the next turn is a spacing
			// from now. Moving the schedule on by a spacing instead
			// would let size cuts, which come faster than turns at high
			// ingest, push it further ahead at each one, and a flush
			// that never fills would wait for a turn seconds away.
			p.mu.nextCut = now.Add(spacing)
		case now.Sub(p.mu.nextCut) < spacing:
			p.mu.nextCut = p.mu.nextCut.Add(spacing)
		default:
			p.mu.nextCut = now.Add(spacing)
		}
	}
	p.mu.open = nil
	f.state = stateUploading
	p.mu.uploading++
	p.mu.cut = append(p.mu.cut, f)
	p.signalSpaceLocked()
	go p.upload(f)
}

// cutSpacing is the least time between two cuts under MaxPutsPerSec,
// leaving room in the budget for the hedges HedgeMaxRatio allows.
func (p *Pipeline) cutSpacing() time.Duration {
	puts := 1.0
	if p.cfg.HedgePercentile > 0 {
		puts += p.cfg.HedgeMaxRatio
	}
	if x := p.cfg.Express; x != nil {
		// Two PUTs a flush (and the hedges), spread over the zones by
		// the rotating pair: the budget is each bucket's.
		puts = (puts + 1) / float64(x.Zones())
	}
	return time.Duration(puts / p.cfg.MaxPutsPerSec * float64(time.Second))
}

func (p *Pipeline) pacePassed(f *flush) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.open == f {
		f.paceTimer = nil
		p.maybeCutLocked()
	}
}

func (p *Pipeline) intervalPassed(f *flush) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.open == f {
		f.due = true
		p.maybeCutLocked()
	}
}

func (p *Pipeline) signalSpaceLocked() {
	close(p.mu.space)
	p.mu.space = make(chan struct{})
}

func (p *Pipeline) kickCommitter() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// upload writes f's object (hedged: see hedge.go) and hands the flush to
// the committer.
func (p *Pipeline) upload(f *flush) {
	p.obs.FlushCut(f.bytes, len(f.batches), len(f.acks))
	obj := f.w.Finish()
	start := p.cfg.Clock.Now()
	var win putResult
	var shared bool
	if p.cfg.Express != nil {
		win, shared = p.uploadExpress(f, obj)
	} else {
		var r *race
		win, r = p.runRace(f, obj)
		// A hedge still running reads obj: the writer's buffer is
		// neither reused nor given to the cache, which gets a copy.
		shared = p.finishRace(win, r)
	}
	err := win.err
	d := clock.Since(p.cfg.Clock, start)
	if err == nil && p.cfg.Cache != nil {
		cached := obj
		if shared || cap(obj) > 2*len(obj) {
			// The cache counts len, not cap: don't let a small object
			// pin a buffer sized for a large one.
			cached = bytes.Clone(obj)
		}
		p.cfg.Cache.PutObject(win.key, cached)
	}

	p.mu.Lock()
	f.objSize = int64(len(obj))
	p.mu.objBytes = max(len(obj), p.mu.objBytes-p.mu.objBytes/8)
	if err != nil {
		f.state = stateFailed
		f.err = fmt.Errorf("%w: %s after %d attempts: %w", ErrUpload, f.key, win.attempts, err)
		p.cfg.Logger.Error("produce: upload failed", "key", f.key, "attempts", win.attempts, "err", err)
	} else {
		// The committed key is the winner's: the hedge's, if it won.
		f.key = win.key
		f.state = stateUploaded
	}
	if shared || (p.cfg.Cache != nil && err == nil) {
		// The cache (or a running hedge) owns the bytes now.
		f.w = nil
	}
	p.mu.uploading--
	p.maybeCutLocked()
	p.mu.Unlock()
	p.obs.UploadDone(len(obj), win.attempts, d, err)
	p.kickCommitter()
}

// runCommitter proposes uploaded flushes in cut order, every flush whose
// upload has ended in one ProposeBatch, until the pipeline is closed and
// drained.
func (p *Pipeline) runCommitter() {
	defer close(p.committerDone)
	for {
		group, failed, ok := p.takeGroup()
		if !ok {
			return
		}
		for _, f := range failed {
			p.finish(f, nil, f.err)
		}
		if len(group) > 0 {
			p.commit(group)
		}
	}
}

// takeGroup waits for the oldest pending flush to end its upload, then
// takes the longest prefix of pending flushes whose uploads have ended,
// bounded by MaxCommitBytes and maxCommitObjects. ok is false once the
// pipeline is closing and nothing is left.
func (p *Pipeline) takeGroup() (group, failed []*flush, ok bool) {
	for {
		p.mu.Lock()
		n, size := 0, 0
		for _, f := range p.mu.cut {
			if f.state == stateUploading {
				break
			}
			if f.state == stateUploaded {
				est := commitEstimate(f)
				if len(group) > 0 && (len(group) >= maxCommitObjects || size+est > p.cfg.MaxCommitBytes) {
					break
				}
				size += est
				group = append(group, f)
			} else {
				failed = append(failed, f)
			}
			n++
		}
		if n > 0 {
			p.mu.cut = p.mu.cut[n:]
			p.mu.Unlock()
			return group, failed, true
		}
		drained := p.mu.closing && len(p.mu.cut) == 0 && (p.mu.open == nil || len(p.mu.open.batches) == 0)
		p.mu.Unlock()
		if drained {
			return nil, nil, false
		}
		<-p.kick
	}
}

// commitEstimate bounds the encoded size of f's CommitObject.
func commitEstimate(f *flush) int {
	return commitOverheadBytes + len(f.key) + len(f.batches)*maxCommitBatchBytes
}

// commit proposes one CommitObject per flush in one entry and answers
// their calls.
func (p *Pipeline) commit(group []*flush) {
	cmds := p.cmds[:0]
	for _, f := range group {
		cmds = append(cmds, meta.CommitObject{ObjectKey: f.key, ObjectSize: f.objSize, Batches: f.batches})
	}
	start := p.cfg.Clock.Now()
	results, err := p.cfg.Replica.ProposeBatch(p.ctx, cmds)
	// Drop the references, so the buffer keeps no batches alive.
	clear(cmds)
	p.cmds = cmds[:0]
	if errors.Is(err, replica.ErrTooLarge) && len(group) > 1 {
		// The replica's entries are smaller than MaxCommitBytes assumed;
		// nothing was appended, so the flushes can go one by one.
		for _, f := range group {
			p.commit([]*flush{f})
		}
		return
	}
	if err == nil && len(results) != len(group) {
		err = fmt.Errorf("meta returned %d results for %d commands", len(results), len(group))
	}
	p.obs.CommitDone(len(group), clock.Since(p.cfg.Clock, start), err)
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrCommit, err)
	}
	for i, f := range group {
		if err != nil {
			p.finish(f, nil, err)
			continue
		}
		p.finish(f, &results[i], nil)
	}
}

// finish answers f's calls and releases its bytes.
func (p *Pipeline) finish(f *flush, res *meta.Result, err error) {
	if err == nil && len(res.Batches) != len(f.batches) {
		err = fmt.Errorf("%w: %d batch results for %d batches", ErrCommit, len(res.Batches), len(f.batches))
	}
	for _, a := range f.acks {
		if err == nil {
			a.results = res.Batches[a.first : a.first+a.n : a.first+a.n]
		}
		a.err = err
		close(a.done)
	}
	p.obs.FlushDone(f.bytes, clock.Since(p.cfg.Clock, f.opened), err)

	p.mu.Lock()
	p.mu.bufferedBytes -= f.bytes
	if f.w != nil && len(p.mu.free) < maxFreeWriters {
		f.w.Reset()
		p.mu.free = append(p.mu.free, f.w)
	}
	p.signalSpaceLocked()
	p.mu.Unlock()
}

// Close stops accepting calls (Submit returns ErrClosed), cuts what is
// buffered, and waits until every accepted call is answered. If ctx ends
// first, uploads and proposals in flight are abandoned (their calls fail;
// they may still commit) and Close returns ctx.Err() once they are
// answered. Close does not close the Replica.
func (p *Pipeline) Close(ctx context.Context) error {
	p.mu.Lock()
	if !p.mu.closing {
		p.mu.closing = true
		p.signalSpaceLocked()
		p.maybeCutLocked()
	}
	p.mu.Unlock()
	p.kickCommitter()
	select {
	case <-p.committerDone:
		p.cancel()
		p.cleanups.Wait()
		return nil
	case <-ctx.Done():
		p.cancel()
		<-p.committerDone
		p.cleanups.Wait()
		return ctx.Err()
	}
}

// Stats is a snapshot of the pipeline's queues.
type Stats struct {
	BufferedBytes int // accepted and not yet answered
	Uploading     int
	Pending       int // cut and not yet taken by the committer
	// Hedges counts uploads hedged, HedgeWins those whose hedge won.
	Hedges, HedgeWins int
}

// Stats returns the pipeline's queues as they are now.
func (p *Pipeline) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{BufferedBytes: p.mu.bufferedBytes, Uploading: p.mu.uploading, Pending: len(p.mu.cut),
		Hedges: p.mu.hedges, HedgeWins: p.mu.hedgeWins}
}

type nopObserver struct{}

func (nopObserver) FlushCut(int, int, int)                    {}
func (nopObserver) UploadDone(int, int, time.Duration, error) {}
func (nopObserver) CommitDone(int, time.Duration, error)      {}
func (nopObserver) FlushDone(int, time.Duration, error)       {}
