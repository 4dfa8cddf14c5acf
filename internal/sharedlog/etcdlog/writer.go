package etcdlog

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strandkafka/strand/internal/retry"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/commitq"
)

// The backoff of the writer's resends of a batch whose reply was lost,
// and of the watcher's reconnects.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// commit puts one batch at the tail, following the tail as other writers
// take it, and answers the batch's appenders.
//
// Two loops are the protocol's own and stay here. Following the tail: a
// transaction that finds its slot taken wrote nothing, and the batch
// moves to the next free slot (the compare-and-swap that is the append).
// Resolving a lost reply: the identical transaction, batch id and all,
// is sent to the same slot again until it lands or its else branch shows
// whose batch the slot holds; only this writer knows the slot and the
// id. A batch whose outcome is still unknown after MaxResolveAttempts
// fails as ambiguous, and sending it again is the caller's decision.
func (l *Loglet) commit(reqs []*commitq.Request) {
	var id [batchIDBytes]byte
	_, _ = rand.Read(id[:])
	l.mu.Lock()
	at := l.mu.knownTail
	l.mu.Unlock()
	// pending: a transaction for slot at was sent and its outcome is
	// unknown, so at must not change until it is known.
	pending := false
	var lastErr error
	// resolve paces the resends while pending; its first try is the
	// first send.
	resolve := retry.Policy{Attempts: l.opts.MaxResolveAttempts + 1, Min: minBackoff, Max: maxBackoff}.Start(l.life, nil)
	resolve.Next()
	for attempt := range l.opts.MaxAppendAttempts {
		if attempt > 0 && l.life.Err() != nil {
			break
		}
		resp, err := l.txn(reqs, id[:], at)
		if err != nil {
			if definite(err) {
				if pending {
					// An earlier send may have landed.
					l.finish(reqs, fmt.Errorf("etcdlog: append to %q: outcome unknown: %w (after: %w)", l.path, err, lastErr))
				} else {
					l.finish(reqs, sharedlog.Rejected(fmt.Errorf("etcdlog: append to %q: %w", l.path, err)))
				}
				return
			}
			if !pending {
				l.count(func(s *Stats) { s.Ambiguous++ })
			}
			pending, lastErr = true, err
			if !resolve.Next() {
				break
			}
			continue
		}
		if resp.Succeeded {
			if pending {
				l.count(func(s *Stats) { s.NotLanded++ })
			}
			l.ack(reqs, at)
			return
		}
		el, err := l.parseElse(resp)
		if err != nil {
			l.finish(reqs, err)
			return
		}
		switch {
		case el.slotTaken && bytes.Equal(el.slotID, id[:]):
			// An earlier send of this very transaction landed.
			l.count(func(s *Stats) { s.Landed++ })
			l.ack(reqs, at)
			return
		case pending && !el.slotTaken && el.trimmed > at:
			// The slot was trimmed: whether our send filled it first
			// cannot be told.
			l.finish(reqs, fmt.Errorf("etcdlog: append to %q: outcome unknown: %w (slot %d trimmed since)", l.path, lastErr, at))
			return
		case el.sealed && !el.slotTaken:
			// The seal stops any send of ours still in flight too.
			l.finish(reqs, sharedlog.ErrSealed)
			return
		case !el.slotTaken && el.trimmed <= at:
			l.finish(reqs, fmt.Errorf("%w: %q: slot %d free, trim point %d, not sealed, yet the append failed", ErrCorrupt, l.path, at, el.trimmed))
			return
		}
		// Another writer has the slot (or it is trimmed and we never sent
		// to it): ours can never land there. Follow the tail.
		if pending {
			l.count(func(s *Stats) { s.NotLanded++ })
			pending = false
		}
		if el.sealed {
			l.finish(reqs, sharedlog.ErrSealed)
			return
		}
		l.count(func(s *Stats) { s.Lost++ })
		at = max(at, el.trimmed) + el.count
		l.learn(at, false)
	}
	if l.life.Err() != nil {
		lastErr = fmt.Errorf("%w (%v)", sharedlog.ErrClosed, lastErr)
	}
	if pending {
		l.finish(reqs, fmt.Errorf("etcdlog: append to %q: outcome unknown: %w", l.path, lastErr))
		return
	}
	l.finish(reqs, fmt.Errorf("etcdlog: append to %q: no slot after %d attempts (last error %v)", l.path, l.opts.MaxAppendAttempts, lastErr))
}

// txn sends the batch's transaction for slots [at, at+n).
func (l *Loglet) txn(reqs []*commitq.Request, id []byte, at sharedlog.Pos) (*clientv3.TxnResponse, error) {
	n := sharedlog.Pos(len(reqs))
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.Version(l.k.seal), "=", 0),
		clientv3.Compare(clientv3.Value(l.k.trim), "<", encodePos(at+1)),
		clientv3.Compare(clientv3.CreateRevision(l.k.entry(at)), "=", 0),
	}
	if n > 1 {
		// Redundant while every writer keeps the log dense; cheap
		// insurance that a batch never overwrites.
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(l.k.entry(at+n-1)), "=", 0))
	}
	puts := make([]clientv3.Op, len(reqs))
	for i, r := range reqs {
		puts[i] = clientv3.OpPut(l.k.entry(at+sharedlog.Pos(i)), encodeValue(id, r.Data))
	}
	ctx, cancel := context.WithTimeout(l.life, l.opts.AttemptTimeout)
	defer cancel()
	return l.cli.Txn(ctx).If(cmps...).Then(puts...).Else(
		clientv3.OpGet(l.k.seal, clientv3.WithCountOnly()),
		clientv3.OpGet(l.k.trim),
		clientv3.OpGet(l.k.entry(at)),
		clientv3.OpGet(l.k.entry(at), clientv3.WithRange(l.k.entryEnd), clientv3.WithCountOnly()),
	).Commit()
}

// elseInfo is what a failed append transaction's else branch read.
type elseInfo struct {
	sealed    bool
	trimmed   sharedlog.Pos
	slotTaken bool
	slotID    []byte
	count     sharedlog.Pos // entry keys from the slot up
}

func (l *Loglet) parseElse(resp *clientv3.TxnResponse) (elseInfo, error) {
	rs := resp.Responses
	if len(rs) != 4 {
		return elseInfo{}, fmt.Errorf("%w: else branch returned %d responses", ErrCorrupt, len(rs))
	}
	var el elseInfo
	el.sealed = rs[0].GetResponseRange().Count > 0
	trim := rs[1].GetResponseRange().Kvs
	if len(trim) != 1 {
		return elseInfo{}, fmt.Errorf("%w: %q has no trim key", ErrCorrupt, l.path)
	}
	var err error
	if el.trimmed, err = decodePos(string(trim[0].Value)); err != nil {
		return elseInfo{}, err
	}
	if slot := rs[2].GetResponseRange().Kvs; len(slot) == 1 {
		el.slotTaken = true
		if el.slotID, _, err = decodeValue(slot[0].Value); err != nil {
			return elseInfo{}, err
		}
	}
	el.count = sharedlog.Pos(rs[3].GetResponseRange().Count)
	return el, nil
}

// definite reports whether err proves the transaction was not applied:
// the request was refused as malformed, too large or unauthorized, by
// the client before sending or by the server before proposing it.
func definite(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.ResourceExhausted, codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

// ack answers a landed batch's appenders with their positions.
func (l *Loglet) ack(reqs []*commitq.Request, first sharedlog.Pos) {
	n := sharedlog.Pos(len(reqs))
	l.mu.Lock()
	l.mu.knownTail = max(l.mu.knownTail, first+n)
	l.mu.stats.Batches++
	l.mu.stats.Entries += int64(n)
	l.wakeLocked()
	l.mu.Unlock()
	l.q.Ack(reqs, first)
}

// finish answers a batch's appenders with err.
func (l *Loglet) finish(reqs []*commitq.Request, err error) {
	l.mu.Lock()
	if errors.Is(err, sharedlog.ErrSealed) && !l.mu.sealed {
		l.mu.sealed = true
	}
	l.wakeLocked()
	l.mu.Unlock()
	l.q.Fail(reqs, err)
}

func (l *Loglet) count(f func(*Stats)) {
	l.mu.Lock()
	f(&l.mu.stats)
	l.mu.Unlock()
}

// changedCh returns a channel closed at the next change, starting the
// watcher on first use and waiting until its watch is established, so a
// change after the caller's next read is never missed.
func (l *Loglet) changedCh(ctx context.Context) (<-chan struct{}, error) {
	l.mu.Lock()
	if !l.mu.watching && !l.mu.closed {
		l.mu.watching = true
		l.mu.watchReady = make(chan struct{})
		l.watchDone = make(chan struct{})
		go l.watch(l.mu.watchReady, l.watchDone)
	}
	ready, ch := l.mu.watchReady, l.mu.changed
	l.mu.Unlock()
	select {
	case <-ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.life.Done():
		return nil, sharedlog.ErrClosed
	}
	return ch, nil
}

// watch follows the loglet's keys until Close, waking waiters on every
// event. After an error it resumes from the next revision it has not
// seen, so no event goes missing; if that revision is compacted, it
// wakes everyone to read the tail again.
func (l *Loglet) watch(ready, done chan struct{}) {
	defer close(done)
	var next int64 // the first revision not yet seen; 0 until known
	readyOnce := false
	// The watch goes on until Close: without it appends go unseen.
	loop := retry.Policy{Attempts: retry.Forever, Min: minBackoff, Max: maxBackoff}.Start(l.life, nil)
	for loop.Next() {
		opts := []clientv3.OpOption{clientv3.WithRange(l.k.watchTo), clientv3.WithCreatedNotify()}
		if next > 0 {
			opts = append(opts, clientv3.WithRev(next))
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(l.life))
		for resp := range l.cli.Watch(wctx, l.k.watch, opts...) {
			if err := resp.Err(); err != nil {
				if resp.CompactRevision > 0 {
					next = 0
				}
				break
			}
			loop.Reset()
			if resp.Created && !readyOnce {
				readyOnce = true
				close(ready)
			}
			if resp.Header.Revision >= next {
				next = resp.Header.Revision + 1
			}
			if len(resp.Events) > 0 {
				l.mu.Lock()
				l.wakeLocked()
				l.mu.Unlock()
			}
		}
		cancel()
		l.mu.Lock()
		l.wakeLocked()
		l.mu.Unlock()
	}
	// Closed.
	if !readyOnce {
		close(ready)
	}
}
