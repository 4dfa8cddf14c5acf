package kafka

import (
	"context"
	"time"

	"github.com/strandkafka/strand/internal/meta"
)

// The long poll of a Fetch (see 01_fetch.go). It watches the partitions
// it reads (Deps.Changes, package partwatch): apply wakes it only after
// a batch that changed one of them, and it then reads only those again,
// keeping a count per partition of the bytes ready, so a wake-up costs
// what changed, not the size of the request. Changes that cannot be
// placed (a halt, the replica closing, a topic deleted) mark every
// partition and it reads them all again.
//
// It also notes which partitions changed since the first read (stale):
// those notified, and those whose state differs from the answer when it
// reads them (a change between the first read and the watch). The read
// after the wait reads only those again and keeps the answers of the
// others (fetchAnswer.reread).

// longPoll is what a waiting Fetch knows of its partitions between
// wake-ups.
type longPoll struct {
	// r is the request, parts the answer's (not the *fetchAnswer, which
	// would then escape to the heap on every Fetch, waiting or not).
	r     *Request
	parts []fetchPart
	// refs are the partitions watched, the parts not answered by plan;
	// idx is each one's index in parts.
	refs []meta.PartitionRef
	idx  []int
	// have is the bytes counted past each one's fetch offset, at most
	// min(PartitionMaxBytes, MinBytes); total their sum.
	have []int64
	// stale marks the ones that changed since the first read.
	stale []bool
	// waits counts the wake-ups.
	waits     WaitStats
	total     int64
	need      int64
	committed bool
}

func (f *fetchAnswer) newLongPoll() *longPoll {
	lp := &longPoll{
		r:         f.r,
		parts:     f.parts,
		need:      int64(f.req.MinBytes),
		committed: f.req.IsolationLevel == isolationReadCommitted,
	}
	for i := range f.parts {
		if p := &f.parts[i]; !p.failed {
			lp.refs = append(lp.refs, meta.PartitionRef{TopicID: p.id, Partition: p.partition})
			lp.idx = append(lp.idx, i)
		}
	}
	lp.have = make([]int64, len(lp.refs))
	lp.stale = make([]bool, len(lp.refs))
	return lp
}

// wait returns once the partitions hold MinBytes (or one of them can no
// longer be read as asked), maxWait has passed, ctx ended (its error) or
// the replica halted (its error). It counts its wake-ups in the
// request's WaitStats, and sets f.reread to the parts that changed
// (nil, all of them, after an error).
func (f *fetchAnswer) wait(ctx context.Context, db MetaDB, n Notifier, maxWait time.Duration) error {
	lp := f.newLongPoll()
	if len(lp.refs) == 0 {
		return nil
	}
	err := lp.wait(ctx, db, n, maxWait)
	f.waits = lp.waits
	f.reread = nil
	if err == nil {
		f.reread = make([]bool, len(f.parts))
		for k, i := range lp.idx {
			f.reread[i] = lp.stale[k]
		}
	}
	return err
}

func (lp *longPoll) wait(ctx context.Context, db MetaDB, n Notifier, maxWait time.Duration) error {
	// Watch first, read second: a batch committed after the read
	// notifies the watch.
	w := n.Watch(lp.refs)
	defer w.Close()
	errer, _ := n.(interface{ Err() error })
	timeout := time.NewTimer(maxWait)
	defer timeout.Stop()
	if ready, _ := lp.checkAll(db); ready {
		return nil
	}
	var changed []int
	for {
		if errer != nil {
			if err := errer.Err(); err != nil {
				return err
			}
		}
		if h := lp.r.Deps.longPollWaiting; h != nil {
			h()
		}
		select {
		case <-w.Ready():
		case <-timeout.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
		var all, ready bool
		var checked int
		changed, all = w.Take(changed[:0])
		for _, k := range changed {
			lp.stale[k] = true
		}
		switch {
		case all:
			for k := range lp.stale {
				lp.stale[k] = true
			}
			ready, checked = lp.checkAll(db)
		case len(changed) > 0:
			ready, checked = lp.check(db, changed)
		default:
			// A signal left by a change an earlier Take got.
			continue
		}
		lp.waits.Wakeups++
		lp.waits.PartitionsRechecked += checked
		if ready {
			return nil
		}
	}
}

// reportWaits tells the server's observer, if it is a WaitObserver,
// what the long poll of r did.
func (r *Request) reportWaits(st WaitStats) {
	if r.Conn == nil || r.Conn.srv == nil {
		return
	}
	if wo, ok := r.Conn.srv.obs.(WaitObserver); ok {
		wo.FetchWaited(r.Conn, st)
	}
}

// checkAll counts every watched partition again. Those it did not get
// to are marked stale: they may have changed unseen.
func (lp *longPoll) checkAll(db MetaDB) (ready bool, checked int) {
	view := db.View()
	defer view.Close()
	for k := range lp.refs {
		if lp.check1(view, k) {
			for j := k + 1; j < len(lp.stale); j++ {
				lp.stale[j] = true
			}
			return true, k + 1
		}
	}
	return false, len(lp.refs)
}

// check counts the watched partitions ks (indexes in refs) again.
func (lp *longPoll) check(db MetaDB, ks []int) (ready bool, checked int) {
	view := db.View()
	defer view.Close()
	for i, k := range ks {
		if lp.check1(view, k) {
			return true, i + 1
		}
	}
	return false, len(ks)
}

// check1 counts watched partition k again, and reports whether the poll
// is over: the partitions hold MinBytes past their fetch offsets (each
// counted up to its PartitionMaxBytes, and under read_committed only
// below the last stable offset), or k can no longer be read as asked,
// which Kafka answers at once too. It marks k stale when its offsets
// are not those of the answer.
func (lp *longPoll) check1(view *meta.View, k int) bool {
	p := &lp.parts[lp.idx[k]]
	st, ok, err := view.Partition(p.id, p.partition)
	if err != nil || !ok {
		lp.stale[k] = true
		return true
	}
	end := st.HighWatermark()
	if end != p.sp.HighWatermark || st.LogStartOffset != p.sp.LogStartOffset {
		lp.stale[k] = true
	}
	if p.offset < st.LogStartOffset || p.offset > end {
		return true
	}
	if lp.committed {
		if end, err = view.LastStableOffset(p.id, p.partition, end); err != nil {
			lp.stale[k] = true
			return true
		}
		if end != p.sp.LastStableOffset {
			lp.stale[k] = true
		}
	}
	var n int64
	if p.offset < end {
		if lp.need <= 1 {
			return true
		}
		if n, err = indexedBytes(view, p, end, min(int64(p.maxBytes), lp.need)); err != nil {
			return true
		}
	}
	lp.total += n - lp.have[k]
	lp.have[k] = n
	return lp.total >= lp.need
}

// indexedBytes adds up the index entries of p from its fetch offset on
// that start below end, stopping once it reaches limit. The first entry
// may start before the offset; counting it whole overestimates by less
// than one entry.
func indexedBytes(view *meta.View, p *fetchPart, end, limit int64) (int64, error) {
	n, _, err := indexedSpan(view, p, end, limit)
	return n, err
}

// indexedSpan is indexedBytes, and also returns the MaxTimestamp of the
// last entry it counted.
func indexedSpan(view *meta.View, p *fetchPart, end, limit int64) (n, lastTs int64, err error) {
	it, err := view.Seek(p.id, p.partition, p.offset)
	if err != nil {
		return 0, 0, err
	}
	defer it.Close()
	for n < limit && it.Next() {
		e := it.Entry()
		if e.BaseOffset >= end {
			break
		}
		n, lastTs = n+e.Length, e.MaxTimestamp
	}
	return n, lastTs, it.Err()
}
