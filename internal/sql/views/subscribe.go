package views

import (
	"context"
	"sync"

	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Subscription limits. A subscriber's queue is bounded in changes, not
// batches: one epoch's output may be far larger than its input (a join).
const (
	// DefaultMaxQueuedChanges is how many changes a subscriber may hold
	// unread before its subscription ends with 53400: the view never
	// waits for a slow client, and a client that stops reading costs at
	// most this much memory.
	DefaultMaxQueuedChanges = 100_000
	// maxSnapshotRows bounds the snapshot a subscription starts with
	// (distinct rows; it is read into memory under the view's commit
	// lock, so it also bounds how long a subscribe delays the view's
	// next epoch).
	maxSnapshotRows = 1_000_000
)

// configurationLimitExceeded is PostgreSQL's 53400.
const configurationLimitExceeded = "53400"

// Update is one epoch's changes to a view: the snapshot (every row at
// the epoch the subscription started, with its count) or a later
// epoch's consolidated changes.
type Update struct {
	// Epoch is the view's epoch number on this agent (flow.Driver.Epoch):
	// increasing, gapless per task, but local to the agent.
	Epoch   uint64
	Changes []types.Change
}

// Subscription is a view's stream of updates: first its snapshot
// (unless asked without), then each committed epoch's changes, with no
// gap or overlap between the two. It is used by one goroutine.
type Subscription struct {
	cols []exec.Column
	t    *task
	max  int
	// ready is signalled (capacity 1) when the queue or err changes.
	ready chan struct{}
	mu    struct {
		sync.Mutex
		// snapshot is the first update, until Next returns it; it is
		// bounded by maxSnapshotRows, not counted in queued.
		snapshot *Update
		queue    []Update
		queued   int // changes in queue
		err      error
		closed   bool
	}
}

// Subscribe starts a subscription to the view with relation id id.
// snapshot false starts with the next epoch's changes. maxQueued <= 0
// is DefaultMaxQueuedChanges. The caller must Close it.
func (r *Runner) Subscribe(id uint64, snapshot bool, maxQueued int) (*Subscription, error) {
	if maxQueued <= 0 {
		maxQueued = DefaultMaxQueuedChanges
	}
	t, err := r.ready(id)
	if err != nil {
		return nil, err
	}
	t.mu.Unlock()
	// The commit lock keeps the task's loop between epochs: what the
	// snapshot reads is exactly the epochs it has published, and the
	// subscription is registered before the next one commits.
	t.commitMu.Lock()
	defer t.commitMu.Unlock()
	t.mu.Lock()
	if t.mu.view == nil || t.mu.stopped {
		t.mu.Unlock()
		return nil, sqlerr.Errorf(sqlerr.ObjectNotInPrerequisiteState, "materialized view %q is not running: subscribe again", t.rel.Name)
	}
	cols, view, epoch := t.mu.cols, t.mu.view, t.mu.epochs
	t.mu.readers++ // the snapshot's read keeps the state open
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.mu.readers--
		if t.mu.readers == 0 {
			t.mu.idle.Broadcast()
		}
		t.mu.Unlock()
	}()
	s := &Subscription{cols: cols, t: t, max: maxQueued, ready: make(chan struct{}, 1)}
	if snapshot {
		var rows []types.Change
		var tooMany bool
		err := view.Scan(nil, func(row types.Row, n int64) bool {
			if len(rows) == maxSnapshotRows {
				tooMany = true
				return false
			}
			rows = append(rows, types.Change{Row: row, Diff: n})
			return true
		})
		if err != nil {
			return nil, err
		}
		if tooMany {
			return nil, sqlerr.Errorf(sqlerr.ProgramLimitExceeded, "materialized view %q has more than %d rows to snapshot: SUBSCRIBE ... WITH (SNAPSHOT = false) streams its changes without one", t.rel.Name, maxSnapshotRows)
		}
		// The snapshot is not held against the queue's bound: it is
		// bounded by maxSnapshotRows instead.
		s.mu.snapshot = &Update{Epoch: epoch, Changes: rows}
	}
	t.mu.Lock()
	if t.mu.view == nil || t.mu.stopped {
		t.mu.Unlock()
		return nil, sqlerr.Errorf(sqlerr.ObjectNotInPrerequisiteState, "materialized view %q stopped", t.rel.Name)
	}
	if t.mu.subs == nil {
		t.mu.subs = map[*Subscription]struct{}{}
	}
	t.mu.subs[s] = struct{}{}
	t.mu.Unlock()
	return s, nil
}

// Columns are the view's columns.
func (s *Subscription) Columns() []exec.Column { return s.cols }

// Next returns the next update, blocking until there is one, the
// subscription ends (its error: the view was dropped, the queue
// overflowed) or ctx ends.
func (s *Subscription) Next(ctx context.Context) (Update, error) {
	for {
		s.mu.Lock()
		if u := s.mu.snapshot; u != nil {
			s.mu.snapshot = nil
			s.mu.Unlock()
			return *u, nil
		}
		if len(s.mu.queue) > 0 {
			u := s.mu.queue[0]
			s.mu.queue[0] = Update{}
			s.mu.queue = s.mu.queue[1:]
			if len(s.mu.queue) == 0 {
				s.mu.queue = nil
			}
			s.mu.queued -= len(u.Changes)
			s.mu.Unlock()
			return u, nil
		}
		err := s.mu.err
		s.mu.Unlock()
		if err != nil {
			return Update{}, err
		}
		select {
		case <-s.ready:
		case <-ctx.Done():
			return Update{}, context.Cause(ctx)
		}
	}
}

// Ready reports whether Next would return without waiting.
func (s *Subscription) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.snapshot != nil || len(s.mu.queue) > 0 || s.mu.err != nil
}

// Close ends the subscription.
func (s *Subscription) Close() {
	t := s.t
	t.mu.Lock()
	delete(t.mu.subs, s)
	t.mu.Unlock()
	s.mu.Lock()
	s.mu.closed, s.mu.queue, s.mu.snapshot = true, nil, nil
	s.mu.Unlock()
}

// push queues an epoch's changes, or ends the subscription when they
// would exceed its bound. It never blocks.
func (s *Subscription) push(u Update) (keep bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed || s.mu.err != nil {
		return false
	}
	if s.mu.queued+len(u.Changes) > s.max {
		s.mu.queue, s.mu.queued = nil, 0
		s.mu.err = sqlerr.Errorf(configurationLimitExceeded,
			"SUBSCRIBE to %q fell behind: more than %d changes unread; the subscription ended so the view does not wait for it (read faster, or subscribe again)", s.t.rel.Name, s.max)
		s.signal()
		return false
	}
	s.mu.queue = append(s.mu.queue, u)
	s.mu.queued += len(u.Changes)
	s.signal()
	return true
}

// end ends the subscription with err.
func (s *Subscription) end(err error) {
	s.mu.Lock()
	if s.mu.err == nil {
		s.mu.err = err
	}
	s.mu.Unlock()
	s.signal()
}

func (s *Subscription) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// publishLocked hands an epoch's changes to the task's subscribers;
// t.mu is held. A subscriber that overflows is dropped.
func (t *task) publishLocked(epoch uint64, changes []types.Change) {
	if len(changes) == 0 {
		return
	}
	for s := range t.mu.subs {
		if !s.push(Update{Epoch: epoch, Changes: changes}) {
			delete(t.mu.subs, s)
		}
	}
}

// endSubscriptions ends every subscription with err; the task is
// stopping (the view was dropped, or the agent is shutting down).
func (t *task) endSubscriptions(err error) {
	t.mu.Lock()
	subs := t.mu.subs
	t.mu.subs, t.mu.stopped = nil, true
	t.mu.Unlock()
	for s := range subs {
		s.end(err)
	}
}
