package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/retry"
	"github.com/strandkafka/strand/internal/sharedlog"
)

// proposal is one ProposeBatch call: its commands go into one entry.
type proposal struct {
	cmds  []meta.RawCommand
	bytes int // encoded size of cmds inside an entry

	done    chan struct{}
	once    sync.Once
	results []meta.Result
	err     error
}

func (p *proposal) finish(results []meta.Result, err error) {
	p.once.Do(func() {
		p.results, p.err = results, err
		close(p.done)
	})
}

// entryWaiter is an entry this replica appended: the proposals it carries,
// in order.
type entryWaiter struct {
	props []*proposal
}

// complete splits an entry's results among its proposals.
func (w *entryWaiter) complete(results []meta.Result) {
	for _, p := range w.props {
		if len(results) < len(p.cmds) {
			// Apply returns one result per command; anything else is a bug.
			p.finish(nil, fmt.Errorf("replica: entry applied with %d results left for %d commands", len(results), len(p.cmds)))
			continue
		}
		p.finish(results[:len(p.cmds):len(p.cmds)], nil)
		results = results[len(p.cmds):]
	}
}

func failWaiters(ws []*entryWaiter, err error) {
	for _, w := range ws {
		failProposals(w.props, err)
	}
}

func failProposals(ps []*proposal, err error) {
	for _, p := range ps {
		p.finish(nil, err)
	}
}

// proposalQueue holds proposals until the appender takes them. It is
// bounded in commands and bytes; enqueue blocks while it is full.
type proposalQueue struct {
	mu struct {
		sync.Mutex
		items []*proposal
		cmds  int
		bytes int
		// space is closed and replaced whenever proposals leave.
		space chan struct{}
	}
	// ready has a token while items is not empty, for the appender.
	ready chan struct{}
}

func (q *proposalQueue) init() {
	q.mu.space = make(chan struct{})
	q.ready = make(chan struct{}, 1)
}

// drain empties the queue and returns what was in it.
func (q *proposalQueue) drain() []*proposal {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.mu.items
	q.mu.items, q.mu.cmds, q.mu.bytes = nil, 0, 0
	close(q.mu.space)
	q.mu.space = make(chan struct{})
	return items
}

// Propose appends c to the log, waits until this replica has applied it,
// and returns its result. A non-nil error means no result is known: with
// ErrAmbiguous, ErrClosed or a ctx error the command may still apply.
func (r *Replica) Propose(ctx context.Context, c meta.Command) (meta.Result, error) {
	res, err := r.ProposeBatch(ctx, []meta.Command{c})
	if err != nil {
		return meta.Result{}, err
	}
	return res[0], nil
}

// ProposeBatch is Propose for several commands that must land in one entry,
// and so apply together, in order.
func (r *Replica) ProposeBatch(ctx context.Context, cmds []meta.Command) ([]meta.Result, error) {
	p, err := r.Submit(ctx, cmds)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// Proposal is a batch of commands handed to Submit, on its way to the log.
type Proposal struct {
	r *Replica
	p *proposal // nil for an empty batch
}

// Submit queues cmds to land in one entry, like ProposeBatch, and returns
// once they are queued, without waiting for the append or the apply. It
// blocks only while the queue is full.
//
// Entries are appended in the order their commands were queued, so
// commands one caller submits in sequence apply in that sequence: a
// caller can queue under its own lock (fixing the order) and wait after
// releasing it. The exception is a failed append: its commands fail
// (Wait returns the error), or after ErrAmbiguous may still land later.
func (r *Replica) Submit(ctx context.Context, cmds []meta.Command) (*Proposal, error) {
	if len(cmds) == 0 {
		return &Proposal{r: r}, nil
	}
	p, err := r.newProposal(cmds)
	if err != nil {
		return nil, err
	}
	if err := r.enqueue(ctx, p); err != nil {
		return nil, err
	}
	return &Proposal{r: r, p: p}, nil
}

// Wait returns the results of the submitted commands once this replica has
// applied them. The error cases are Propose's: with ErrAmbiguous,
// ErrClosed or a ctx error the commands may still apply.
func (pd *Proposal) Wait(ctx context.Context) ([]meta.Result, error) {
	p, r := pd.p, pd.r
	if p == nil {
		return nil, nil
	}
	select {
	case <-p.done:
		return p.results, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-r.ctx.Done():
		// Close fails what it finds, but p may have slipped into the
		// queue after Close drained it.
		select {
		case <-p.done:
			return p.results, p.err
		default:
			return nil, ErrClosed
		}
	}
}

// newProposal encodes cmds and checks they fit in one entry.
func (r *Replica) newProposal(cmds []meta.Command) (*proposal, error) {
	if len(cmds) > r.cfg.MaxEntryCommands {
		return nil, fmt.Errorf("%w: %d commands, at most %d", ErrTooLarge, len(cmds), r.cfg.MaxEntryCommands)
	}
	p := &proposal{cmds: make([]meta.RawCommand, len(cmds)), done: make(chan struct{})}
	level := r.Features().MetadataLevel()
	for i, c := range cmds {
		// At the level this copy finalized: the level only goes up, so
		// whoever reads the entry reads this version.
		rc, err := meta.EncodeCommandAt(c, level)
		if err != nil {
			return nil, fmt.Errorf("replica: %w", err)
		}
		// A command that fails to decode would halt every replica, so
		// check the bytes before they can reach the log.
		if _, err := meta.DecodeCommand(rc); err != nil {
			return nil, fmt.Errorf("replica: %v does not round-trip: %w", c.Type(), err)
		}
		p.cmds[i] = rc
		p.bytes += meta.RawCommandSize(rc)
	}
	if p.bytes+meta.EntryHeaderMaxBytes > r.cfg.MaxEntryBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, p.bytes+meta.EntryHeaderMaxBytes, r.cfg.MaxEntryBytes)
	}
	return p, nil
}

// enqueue adds p to the queue, waiting for room. A proposal always fits in
// an empty queue: ProposeBatch bounded it by the entry limits, which
// Validate keeps below the queue limits.
func (r *Replica) enqueue(ctx context.Context, p *proposal) error {
	q := &r.q
	for {
		if err := r.proposeErr(); err != nil {
			return err
		}
		q.mu.Lock()
		if len(q.mu.items) == 0 || (q.mu.cmds+len(p.cmds) <= r.cfg.MaxPendingCommands &&
			q.mu.bytes+p.bytes <= r.cfg.MaxPendingBytes) {
			q.mu.items = append(q.mu.items, p)
			q.mu.cmds += len(p.cmds)
			q.mu.bytes += p.bytes
			q.mu.Unlock()
			select {
			case q.ready <- struct{}{}:
			default:
			}
			return nil
		}
		space := q.mu.space
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.ctx.Done():
			return ErrClosed
		case <-space:
		}
	}
}

// take waits for proposals and removes the longest prefix of the queue
// that fits in one entry.
func (r *Replica) take() ([]*proposal, bool) {
	q := &r.q
	for {
		q.mu.Lock()
		if len(q.mu.items) > 0 {
			n, cmds, size := 0, 0, meta.EntryHeaderMaxBytes
			for _, p := range q.mu.items {
				if n > 0 && (cmds+len(p.cmds) > r.cfg.MaxEntryCommands || size+p.bytes > r.cfg.MaxEntryBytes) {
					break
				}
				n, cmds, size = n+1, cmds+len(p.cmds), size+p.bytes
			}
			taken := q.mu.items[:n:n]
			q.mu.items = q.mu.items[n:]
			q.mu.cmds -= cmds
			q.mu.bytes -= size - meta.EntryHeaderMaxBytes
			close(q.mu.space)
			q.mu.space = make(chan struct{})
			if len(q.mu.items) > 0 {
				select {
				case q.ready <- struct{}{}:
				default:
				}
			}
			q.mu.Unlock()
			return taken, true
		}
		q.mu.Unlock()
		select {
		case <-r.ctx.Done():
			return nil, false
		case <-q.ready:
		}
	}
}

// runAppender cuts entries from the queue and appends them one at a time.
// While an append is in flight, proposals pile up and go out together in
// the next entry: group commit. Appends are serialized so this writer's
// sequence numbers reach the log in order; apply drops any entry whose
// sequence is not above the last one applied.
func (r *Replica) runAppender() {
	defer r.wg.Done()
	inc := r.Incarnation()
	var seq uint64
	var buf []byte
	for {
		props, ok := r.take()
		if !ok {
			return
		}
		if err := r.proposeErr(); err != nil {
			failProposals(props, err)
			continue
		}
		seq++
		e := meta.Entry{
			WriterID:    r.cfg.WriterID,
			Incarnation: inc,
			Seq:         seq,
			Timestamp:   r.cfg.Clock.Now().UnixMilli(),
		}
		for _, p := range props {
			e.Commands = append(e.Commands, p.cmds...)
		}
		buf = meta.AppendEntry(buf[:0], &e)

		// Register before appending: the entry may apply before Append
		// even returns.
		r.mu.Lock()
		if err := r.proposeErrLocked(); err != nil {
			r.mu.Unlock()
			failProposals(props, err)
			continue
		}
		r.mu.waiters[seq] = &entryWaiter{props: props}
		r.mu.Unlock()

		pos, err := r.appendWithRetry(buf)
		if err != nil {
			r.abandon(seq, err)
			continue
		}
		// Tell a polling player where the entry is, so the proposer does
		// not wait out a poll interval.
		r.noteTail(pos + 1)
	}
}

// appendWithRetry appends data, retrying an ambiguous failure with the
// identical bytes: if an earlier try landed, apply drops the copy. This
// is the one place an entry is sent again (see appendRetry); what the
// log refuses for good (sealed, rejected, closed) is not.
func (r *Replica) appendWithRetry(data []byte) (sharedlog.Pos, error) {
	ambiguous := false
	var err error
	loop := appendRetry.Start(r.ctx, r.cfg.Clock)
	for loop.Next() {
		ctx, cancel := context.WithTimeout(r.ctx, appendAttemptTimeout)
		var pos sharedlog.Pos
		pos, err = r.log.Append(ctx, data)
		cancel()
		if err == nil {
			return pos, nil
		}
		if final(err) {
			if !ambiguous {
				return 0, fmt.Errorf("replica: append: %w", err)
			}
			break
		}
		ambiguous = true
		r.logger.Warn("replica: append failed; retrying the same entry", "attempt", loop.Attempt(), "err", err)
	}
	if loop.Err() != nil && !errors.Is(loop.Err(), retry.ErrExhausted) {
		return 0, fmt.Errorf("%w: closed while retrying: %w", ErrAmbiguous, err)
	}
	return 0, fmt.Errorf("%w: %d attempts, last: %w", ErrAmbiguous, loop.Attempt(), err)
}

// final reports whether err, from an append, says the entry was not
// written and sending it again cannot help.
func final(err error) bool {
	return errors.Is(err, sharedlog.ErrSealed) || errors.Is(err, sharedlog.ErrRejected) || errors.Is(err, sharedlog.ErrClosed)
}

// abandon fails the proposals of seq, unless apply already answered them
// (an earlier try of an ambiguous append landed).
func (r *Replica) abandon(seq uint64, err error) {
	r.mu.Lock()
	w, ok := r.mu.waiters[seq]
	delete(r.mu.waiters, seq)
	r.mu.Unlock()
	if ok {
		failProposals(w.props, err)
	}
}
