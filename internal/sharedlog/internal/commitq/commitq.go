// Package commitq owns the group-commit queue of a loglet handle whose
// backend commits a batch of entries in one round trip (pglog, etcdlog):
// the appends waiting to be written, the byte budget that holds appenders
// back when the queue is full, the one writer goroutine that cuts the
// queue into batches and hands each to the backend's commit function,
// and the answer every appender waits for.
//
// What a commit does (the statement or transaction, retries, resolving a
// lost reply, what a backend learns on the way) stays in the backend:
// commitq only decides what goes together and who gets which answer.
//
// The Queue has its own lock and never calls the backend while holding
// it, so a backend may call any Queue method with its own lock held.
package commitq

import (
	"context"
	"runtime"
	"slices"
	"sync"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// requestOverheadBytes is charged to the queue budget per append on top
// of its size, so the byte bound also bounds the count.
const requestOverheadBytes = 128

// Limits bound a Queue. All must be positive.
type Limits struct {
	// MaxBatchEntries and MaxBatchBytes bound one batch; an entry larger
	// than MaxBatchBytes goes alone.
	MaxBatchEntries int
	MaxBatchBytes   int
	// MaxQueueBytes bounds the bytes of appends queued or committing,
	// counting requestOverheadBytes per entry; Append blocks beyond it.
	MaxQueueBytes int
}

// Request is one queued append.
type Request struct {
	// Data is the entry. The Queue keeps the caller's slice: the caller
	// copies it first if it may change.
	Data []byte
	done chan result // capacity 1: the writer never blocks on an answer
}

type result struct {
	pos sharedlog.Pos
	err error
}

func (r *Request) cost() int { return len(r.Data) + requestOverheadBytes }

// Admit refuses an append the backend knows cannot land (the loglet is
// sealed or closed) by returning the error Append should return, saving
// a round trip. It may take the backend's lock.
type Admit func() error

// Commit writes one batch (at least one request) and answers every
// request in it exactly once, through Queue.Ack or Queue.Fail. It runs on
// the writer goroutine, one batch at a time, so while one batch commits
// the next gathers.
type Commit func(batch []*Request)

// Queue is the group-commit queue of one loglet handle. Safe for
// concurrent use.
type Queue struct {
	lim        Limits
	admit      Admit
	commit     Commit
	wake       chan struct{} // capacity 1: a pending wake covers all requests
	writerDone chan struct{}

	mu struct {
		sync.Mutex
		queue       []*Request
		queuedBytes int // the queue and the batch in flight
		// freed is closed and replaced when queuedBytes drops, the queue
		// closes or the backend calls WakeAppenders, to wake appenders
		// held by backpressure.
		freed  chan struct{}
		closed bool
	}
}

// Start returns a Queue whose writer goroutine runs until Close.
func Start(lim Limits, admit Admit, commit Commit) *Queue {
	q := &Queue{
		lim:        lim,
		admit:      admit,
		commit:     commit,
		wake:       make(chan struct{}, 1),
		writerDone: make(chan struct{}),
	}
	q.mu.freed = make(chan struct{})
	go q.writeLoop()
	return q
}

// Append queues data and waits for its batch's answer: its position, or
// the error the commit failed with. Before queueing, and again whenever
// backpressure holds it, it calls the Queue's Admit and returns its
// error if any. A request alone is admitted even if larger than
// MaxQueueBytes.
//
// When ctx ends before the answer, Append returns ctx's error and the
// batch may still land: ambiguous, as the Loglet contract allows.
func (q *Queue) Append(ctx context.Context, data []byte) (sharedlog.Pos, error) {
	req := &Request{Data: data, done: make(chan result, 1)}
	if err := q.enqueue(ctx, req); err != nil {
		return 0, err
	}
	select {
	case r := <-req.done:
		return r.pos, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (q *Queue) enqueue(ctx context.Context, req *Request) error {
	cost := req.cost()
	for {
		// Take freed before admit runs: a refusal the backend learns
		// after admit has looked wakes this very channel, so the wait
		// below cannot miss it.
		q.mu.Lock()
		freed := q.mu.freed
		q.mu.Unlock()
		if err := q.admit(); err != nil {
			return err
		}
		q.mu.Lock()
		if q.mu.closed {
			q.mu.Unlock()
			return sharedlog.ErrClosed
		}
		if q.mu.queuedBytes == 0 || q.mu.queuedBytes+cost <= q.lim.MaxQueueBytes {
			q.mu.queue = append(q.mu.queue, req)
			q.mu.queuedBytes += cost
			q.mu.Unlock()
			q.signalWriter()
			return nil
		}
		q.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WakeAppenders makes appenders held by backpressure call Admit again;
// the backend calls it when it learns something Admit checks.
func (q *Queue) WakeAppenders() {
	q.mu.Lock()
	q.wakeAppendersLocked()
	q.mu.Unlock()
}

func (q *Queue) wakeAppendersLocked() {
	close(q.mu.freed)
	q.mu.freed = make(chan struct{})
}

func (q *Queue) signalWriter() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *Queue) writeLoop() {
	defer close(q.writerDone)
	for {
		batch, stop := q.nextBatch()
		switch {
		case stop:
			return
		case len(batch) == 0:
			<-q.wake
		default:
			q.commit(batch)
		}
	}
}

// nextBatch takes the next batch off the queue: at most MaxBatchEntries
// and MaxBatchBytes, but at least one append. stop is set once the queue
// is closed; queued appends then get ErrClosed.
func (q *Queue) nextBatch() (batch []*Request, stop bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		for _, r := range q.mu.queue {
			r.done <- result{err: sharedlog.ErrClosed}
		}
		q.mu.queue, q.mu.queuedBytes = nil, 0
		return nil, true
	}
	qu := q.mu.queue
	if len(qu) == 0 {
		return nil, false
	}
	n, size := 1, len(qu[0].Data)
	for n < len(qu) && n < q.lim.MaxBatchEntries && size+len(qu[n].Data) <= q.lim.MaxBatchBytes {
		size += len(qu[n].Data)
		n++
	}
	batch = slices.Clone(qu[:n])
	clear(qu[:n])
	q.mu.queue = qu[n:]
	if len(q.mu.queue) == 0 {
		q.mu.queue = qu[:0]
	}
	return batch, false
}

// Ack answers a landed batch's appenders with the positions from first
// up. The backend records what it learned (the tail, its counters)
// before calling Ack, so an appender that sees its answer sees those too.
func (q *Queue) Ack(batch []*Request, first sharedlog.Pos) {
	q.release(batch)
	for i, r := range batch {
		r.done <- result{pos: first + sharedlog.Pos(i)}
	}
	// Let the appenders just woken queue their next entries before the
	// next batch is cut, so closed-loop appenders share one batch rather
	// than alternate between two half-size ones.
	runtime.Gosched()
}

// Fail answers a batch's appenders with err. As with Ack, the backend
// records what err taught it (a seal) first.
func (q *Queue) Fail(batch []*Request, err error) {
	q.release(batch)
	for _, r := range batch {
		r.done <- result{err: err}
	}
}

func (q *Queue) release(batch []*Request) {
	q.mu.Lock()
	for _, r := range batch {
		q.mu.queuedBytes -= r.cost()
	}
	q.wakeAppendersLocked()
	q.mu.Unlock()
}

// Close refuses further appends, calls cancelCommit to cut short the
// batch in flight, and waits for the writer to exit; appends still
// queued then fail with ErrClosed. The batch in flight is answered by
// its commit as usual. Close must be called once.
func (q *Queue) Close(cancelCommit func()) {
	q.mu.Lock()
	q.mu.closed = true
	q.wakeAppendersLocked()
	q.mu.Unlock()
	cancelCommit()
	q.signalWriter()
	<-q.writerDone
}
