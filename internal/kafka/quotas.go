package kafka

// Client quota enforcement, as Kafka's quota managers do it (package
// quota has the math). After a request is handled, what it used is
// recorded against the quota that applies to its client (the principal's
// name and the header's client id): Produce its request bytes, Fetch the
// record bytes of its answer, every request but the exempt ones its
// handling time against request_percentage. A client over a quota gets
// the throttle time in its response's throttle_time_ms, and its
// connection is muted: nothing more is read from it until the time has
// passed. Versions from KIP-219 on (Throttle() reports that the client
// throttles itself) get the response at once; older ones get it after
// the throttle time, as Kafka delays it.
//
// Fetch is cut to what the quota allows in one window before it reads,
// and an answer over the quota is replaced by one with no records
// (their bytes unrecorded), as Kafka's fetch quota does.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/quota"
)

// quotaReloadInterval is how often an agent checks whether the quotas
// in its copy changed; a change made on this agent is read at once
// (invalidate).
const quotaReloadInterval = 100 * time.Millisecond

// clientQuotas is what an agent knows of quotas: the configured ones,
// cached from its copy of the database, and what clients used.
type clientQuotas struct {
	db  MetaDB
	mgr *quota.Manager
	now func() time.Time

	// loaded is the set every request reads, without a lock; stale
	// forces a reread (this agent changed the quotas).
	loaded atomic.Pointer[loadedQuotas]
	stale  atomic.Bool
	// reload serializes rereads.
	reload sync.Mutex
}

// loadedQuotas is a set, when it was last checked and the quota
// version (meta.View.ClientQuotaVersion) it was read at.
type loadedQuotas struct {
	set     *quota.Set
	at      time.Time
	version uint64
}

func newClientQuotas(db MetaDB, cfg quota.Config, now func() time.Time) *clientQuotas {
	q := &clientQuotas{db: db, mgr: quota.NewManager(cfg), now: now}
	q.stale.Store(true)
	return q
}

// set returns the quotas to enforce. Every quotaReloadInterval, or at
// once when this agent changed them, it checks the quota version of its
// copy and rereads the quotas when that moved. A read that fails keeps
// the last set.
func (q *clientQuotas) set() *quota.Set {
	if q == nil || q.db == nil {
		return nil
	}
	now := q.now()
	if l := q.loaded.Load(); l != nil && !q.stale.Load() && now.Sub(l.at) < quotaReloadInterval {
		return l.set
	}
	q.reload.Lock()
	defer q.reload.Unlock()
	l := q.loaded.Load()
	if l != nil && !q.stale.Load() && now.Sub(l.at) < quotaReloadInterval {
		return l.set
	}
	// Cleared before the read: a change made meanwhile marks it again.
	q.stale.Store(false)
	view := q.db.View()
	defer view.Close()
	next := &loadedQuotas{at: now}
	var err error
	next.version, err = view.ClientQuotaVersion()
	if err == nil && l != nil && next.version == l.version {
		next.set = l.set
		q.loaded.Store(next)
		return next.set
	}
	var qs []meta.ClientQuota
	if err == nil {
		qs, err = view.ClientQuotas()
	}
	switch {
	case err == nil:
		next.set = quota.NewSet(qs)
	case l != nil:
		next.set, next.version = l.set, l.version
		q.stale.Store(true)
	default:
		q.stale.Store(true)
	}
	q.loaded.Store(next)
	return next.set
}

// invalidate makes the next set reread the quotas: this agent changed
// them.
func (q *clientQuotas) invalidate() {
	if q != nil {
		q.stale.Store(true)
	}
}

// quotaClient is who r came from, as quotas see it.
func (r *Request) quotaClient() quota.Client {
	var c quota.Client
	if r.ClientID != nil {
		c.ClientID = *r.ClientID
	}
	if r.Conn != nil {
		c.User = r.Conn.Principal().Name
	}
	if r.Deps != nil && r.Deps.quotaUser != nil {
		if u := r.Deps.quotaUser(c.ClientID); u != "" {
			c.User = u
		}
	}
	return c
}

func (r *Request) quotas() *clientQuotas {
	if r.Deps == nil || r.Deps.shared == nil {
		return nil
	}
	return r.Deps.shared.quotas
}

// quotaExempt are the requests Kafka never throttles for
// request_percentage: the ones a client needs to learn that it is
// throttled, or to authenticate.
func quotaExempt(key int16) bool {
	switch key {
	case apiVersionsKey, 17 /* SaslHandshake */, 36 /* SaslAuthenticate */ :
		return true
	}
	return false
}

// fetchQuotaCap is the most record bytes a Fetch of r may answer under
// its client's consumer_byte_rate; ok is false when none applies.
func (r *Request) fetchQuotaCap() (maxBytes int64, ok bool) {
	q := r.quotas()
	bound, _, ok := q.set().Resolve(quota.Fetch, r.quotaClient())
	if !ok {
		return 0, false
	}
	return int64(q.mgr.MaxInWindow(bound)), true
}

// recordFetch records the record bytes of a Fetch answer against the
// client's consumer_byte_rate. Over it, the answer must carry no records
// (the caller empties it; their bytes are taken back here) and the
// client is throttled.
func (r *Request) recordFetch(records int64) (throttled bool) {
	q := r.quotas()
	bound, measured, ok := q.set().Resolve(quota.Fetch, r.quotaClient())
	if !ok || records == 0 {
		return false
	}
	d := q.mgr.Record(quota.Fetch, measured, bound, float64(records))
	if d == 0 {
		return false
	}
	q.mgr.Unrecord(quota.Fetch, measured, float64(records))
	r.throttle = max(r.throttle, d)
	return true
}

// waitedSince notes that the handler of r waited (for the log, a long
// poll, memory) since start: request_percentage counts the time a
// request keeps an agent busy, not the time it is parked, as Kafka counts
// request handler thread time and not purgatory.
func (r *Request) waitedSince(start time.Time) {
	r.waited += time.Since(start)
}

// enforceQuotas records what the request of p used, sets the throttle
// time in its response and mutes the connection. It returns the
// throttle time and, for a client that does not throttle itself, how
// long to hold the response.
func (c *Conn) enforceQuotas(r *Request, p *call, resp kmsg.Response, handled time.Duration) (throttle, hold time.Duration) {
	if r.Key == produceKey && r.Deps != nil {
		// Tail consumers falling behind for want of CPU (fetch_tail.go).
		r.throttle = max(r.throttle, r.Deps.shared.tailThrottle(p.share.sizeBytes))
	}
	q := r.quotas()
	set := q.set()
	if set.Empty(quota.Produce) && set.Empty(quota.Request) && r.throttle == 0 {
		return 0, 0
	}
	client := r.quotaClient()
	d := r.throttle
	if r.Key == produceKey {
		if bound, measured, ok := set.Resolve(quota.Produce, client); ok {
			d = max(d, q.mgr.Record(quota.Produce, measured, bound, float64(p.share.sizeBytes)))
		}
	}
	if !quotaExempt(r.Key) {
		if bound, measured, ok := set.Resolve(quota.Request, client); ok {
			// Percent of one handler over a second.
			busy := max(handled-r.waited, 0)
			d = max(d, q.mgr.Record(quota.Request, measured, bound, busy.Seconds()*100))
		}
	}
	if d <= 0 {
		return 0, 0
	}
	c.muteFor(d)
	resp = unwrapResponse(resp)
	tr, ok := resp.(kmsg.ThrottleResponse)
	if !ok {
		return d, 0
	}
	cur, selfThrottles := tr.Throttle()
	if st, ok := resp.(kmsg.SetThrottleResponse); ok {
		st.SetThrottle(max(cur, int32(d.Milliseconds())))
	}
	if !selfThrottles {
		return d, d
	}
	return d, 0
}

// muteFor stops the reader taking requests from the connection for d
// (Kafka mutes a throttled client's channel).
func (c *Conn) muteFor(d time.Duration) {
	until := int64(time.Since(c.srv.epoch) + d)
	for {
		cur := c.mutedUntil.Load()
		if cur >= until || c.mutedUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// waitUnmuted returns once the connection is not muted, or with the
// reason the reader stops; waited says whether it was muted.
func (c *Conn) waitUnmuted() (waited bool, err error) {
	for {
		left := time.Duration(c.mutedUntil.Load()) - time.Since(c.srv.epoch)
		if left <= 0 {
			return waited, nil
		}
		waited = true
		t := time.NewTimer(left)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return waited, context.Cause(c.ctx)
		case <-c.srv.drain:
			t.Stop()
			return waited, errDrained
		}
	}
}

// delayResponse holds a response for a client that does not throttle
// itself, until d passed, the connection ends or the server drains (a
// graceful shutdown answers what was read).
func (c *Conn) delayResponse(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.ctx.Done():
	case <-c.srv.drain:
	}
}
