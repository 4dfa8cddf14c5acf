// Fetch: v4-16
//   - Each partition is read through Deps.Fetch from the local offset
//     index and the object store: HighWatermark and LogStartOffset are the
//     partition's; LastStableOffset equals the high watermark (no
//     transactions yet); AbortedTransactions is null under
//     read_uncommitted and empty under read_committed; PreferredReadReplica
//     (v11+) is -1: any agent serves any partition.
//   - Sizes follow Kafka (KIP-74): PartitionMaxBytes bounds each
//     partition and MaxBytes, capped at maxFetchResponseBytes (Kafka's
//     fetch.max.bytes), the response, but the first partition with data
//     returns its first batch whole however large. Later partitions get
//     what fits in the rest; a first batch that does not fit is left out.
//   - Errors, with HighWatermark, LastStableOffset and LogStartOffset -1
//     as Kafka sends them: UNKNOWN_TOPIC_OR_PARTITION; v13+ topics by id,
//     UNKNOWN_TOPIC_ID for an id not known; OFFSET_OUT_OF_RANGE below the
//     log start or above the high watermark; v9+ CurrentLeaderEpoch is
//     fenced against epoch 0 (FENCED_ or UNKNOWN_LEADER_EPOCH); a store
//     that cannot be read KAFKA_STORAGE_ERROR, bytes that disagree with
//     the index CORRUPT_MESSAGE.
//   - Long poll: when the first read finds fewer than MinBytes, no
//     partition failed and MaxWaitMillis > 0, the handler waits on apply
//     notifications (fetch.Wait on Deps.Changes) until the partitions'
//     index holds MinBytes past their fetch offsets, one of them fails
//     (deleted, offset now out of range), MaxWaitMillis passes or the
//     server begins shutting down, then reads again. No View is held
//     across the wait.
//   - Fetch sessions (v7+, KIP-227) are not kept: every fetch is a full
//     one. A request opening a session (epoch 0) or not using one (epoch
//     -1) is answered with SessionID 0, which tells the client no session
//     was created (Kafka's answer when its session cache is full); the
//     client then sends full fetches, and ForgottenTopics are ignored. An
//     incremental fetch (any other epoch) is FETCH_SESSION_ID_NOT_FOUND
//     with no topics, which makes a client reset to a full fetch.
//   - ReplicaID and ReplicaState (v15+) are ignored: there are no
//     follower fetches, every request is served as a consumer's.
//     LastFetchedEpoch (v12+) is not checked for divergence: the only
//     epoch is 0. IsolationLevel is accepted and, until transactions
//     exist, changes only AbortedTransactions.
//   - Left out: v17+ (KIP-853 replica directory ids; KIP-1166).

package kafka

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(1, 4, 16, handleFetch) }

const (
	// maxFetchResponseBytes caps a response's MaxBytes, as Kafka's broker
	// config fetch.max.bytes (55 MiB by default) does, so one request
	// cannot make the agent hold an unbounded response.
	maxFetchResponseBytes = 55 << 20
	// Fetch session epochs (FetchMetadata): 0 opens a session, -1 asks
	// for none; anything else continues one.
	sessionEpochInitial = 0
	sessionEpochFinal   = -1
	// isolationReadCommitted is IsolationLevel read_committed.
	isolationReadCommitted = 1
)

// fetchPart is one partition of a Fetch request: where it reads and where
// its answer goes.
type fetchPart struct {
	sp        *kmsg.FetchResponseTopicPartition
	id        meta.TopicID
	partition int32
	offset    int64
	maxBytes  int32
	// failed is set when the partition was answered with an error
	// before any read (unknown topic, fenced epoch).
	failed bool
}

func handleFetch(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	rd, err := r.Deps.fetcher()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if req.Version >= 7 && req.SessionEpoch != sessionEpochInitial && req.SessionEpoch != sessionEpochFinal {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, nil
	}

	f := fetchAnswer{r: r, req: req, rd: rd}
	view := db.View()
	f.plan(view, resp)
	total, failed, err := f.read(ctx, view)
	view.Close()
	if err != nil {
		return nil, err
	}
	if req.MaxWaitMillis <= 0 || total >= int64(req.MinBytes) || failed || len(f.parts) == 0 {
		return resp, nil
	}

	n, err := r.Deps.notifier()
	if err != nil {
		return nil, err
	}
	wctx, cancel := r.untilDrain(ctx)
	defer cancel()
	// A halted replica or the drain ends the wait early; either way the
	// client gets what the copy holds now.
	_, werr := fetch.Wait(wctx, n, time.Duration(req.MaxWaitMillis)*time.Millisecond, func() bool { return f.ready(db) })
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if werr != nil && !errors.Is(werr, context.Canceled) {
		r.warn("kafka: fetch long poll ended early", "err", werr)
	}
	view = db.View()
	_, _, err = f.read(ctx, view)
	view.Close()
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// fetchAnswer answers one Fetch request.
type fetchAnswer struct {
	r     *Request
	req   *kmsg.FetchRequest
	rd    Fetcher
	parts []fetchPart
}

// plan builds the response skeleton in request order and resolves every
// partition's topic, answering those that cannot be read.
func (f *fetchAnswer) plan(view *meta.View, resp *kmsg.FetchResponse) {
	req := f.req
	byID := req.Version >= 13
	names := topicCache{view: view}
	ids := make(map[meta.TopicID]cachedTopic)
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewFetchResponseTopic()
		var t meta.Topic
		var ok bool
		var err error
		if byID {
			st.TopicID = rt.TopicID
			id := meta.TopicID(rt.TopicID)
			ct, hit := ids[id]
			if !hit {
				ct.t, ct.ok, ct.err = view.TopicByID(id)
				ids[id] = ct
			}
			t, ok, err = ct.t, ct.ok, ct.err
		} else {
			st.Topic = rt.Topic
			t, ok, err = names.get(rt.Topic)
		}
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			*sp = kmsg.NewFetchResponseTopicPartition()
			sp.RecordBatches = noRecords
			sp.Partition = rp.Partition
			sp.HighWatermark = -1
			part := fetchPart{sp: sp, id: t.ID, partition: rp.Partition, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes}
			var e *kerr.Error
			switch {
			case err != nil:
				e = kerr.UnknownServerError
			case !ok && byID:
				e = kerr.UnknownTopicID
			case !ok || rp.Partition < 0 || rp.Partition >= t.Partitions:
				e = kerr.UnknownTopicOrPartition
			case req.Version >= 9:
				e = checkCurrentLeaderEpoch(rp.CurrentLeaderEpoch)
			}
			if e != nil {
				sp.ErrorCode = e.Code
				part.failed = true
			}
			f.parts = append(f.parts, part)
		}
	}
}

// noRecords is an empty, non-null record set. Kafka always sends records
// as bytes, empty when there are none; librdkafka (kcat) fails to parse a
// null record set ("Protocol parse failure for Fetch v11") and never sees
// the end of the partition.
var noRecords = []byte{}

// read reads every partition not answered by plan, in request order,
// into the response, replacing what an earlier read put there. It
// returns the record bytes read and whether any partition failed; an
// error only when the connection's ctx ended.
func (f *fetchAnswer) read(ctx context.Context, view *meta.View) (total int64, failed bool, err error) {
	remaining := int64(min(f.req.MaxBytes, maxFetchResponseBytes))
	// minOne: the first partition with data takes its first batch
	// whole, however large (KIP-74).
	minOne := true
	for i := range f.parts {
		p := &f.parts[i]
		if p.failed {
			failed = true
			continue
		}
		sp := p.sp
		sp.ErrorCode, sp.RecordBatches, sp.AbortedTransactions = 0, noRecords, nil
		sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
		limit := int32(max(0, min(int64(p.maxBytes), remaining)))
		if minOne && limit == 0 {
			// Kafka still returns the first batch (LogSegment.read
			// with minOneMessage); Read returns it whole for any
			// positive limit.
			limit = 1
		}
		res, rerr := f.rd.Read(ctx, view, p.id, p.partition, p.offset, limit)
		switch {
		case rerr != nil && ctx.Err() != nil:
			return 0, false, context.Cause(ctx)
		case rerr != nil:
			f.r.warn("kafka: fetch read failed", "topic", p.id, "partition", p.partition, "offset", p.offset, "err", rerr)
			sp.ErrorCode = fetchErrCode(rerr).Code
			failed = true
			continue
		case res.Err != 0:
			sp.ErrorCode = res.Err
			failed = true
			continue
		}
		sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = res.HighWatermark, res.HighWatermark, res.LogStartOffset
		if f.req.IsolationLevel == isolationReadCommitted {
			sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
		}
		n := int64(len(res.Records))
		if n == 0 || (!minOne && n > int64(limit)) {
			continue
		}
		sp.RecordBatches = res.Records
		minOne = false
		remaining = max(0, remaining-n)
		total += n
	}
	return total, failed, nil
}

// ready is the long poll's condition, checked against a fresh view after
// each apply: the partitions' index holds MinBytes past their fetch
// offsets (each counted up to its PartitionMaxBytes), or one of them can
// no longer be read as asked, which Kafka answers at once too.
func (f *fetchAnswer) ready(db MetaDB) bool {
	view := db.View()
	defer view.Close()
	need := int64(f.req.MinBytes)
	var have int64
	for i := range f.parts {
		p := &f.parts[i]
		if p.failed {
			continue
		}
		st, ok, err := view.Partition(p.id, p.partition)
		switch {
		case err != nil, !ok:
			return true
		case p.offset < st.LogStartOffset || p.offset > st.HighWatermark():
			return true
		case p.offset == st.HighWatermark():
			continue
		case need <= 1:
			return true
		}
		n, err := indexedBytes(view, p, min(int64(p.maxBytes), need-have))
		if err != nil {
			return true
		}
		if have += n; have >= need {
			return true
		}
	}
	return false
}

// indexedBytes adds up the index entries of p from its fetch offset on,
// stopping once it reaches limit. The first entry may start before the
// offset; counting it whole overestimates by less than one entry.
func indexedBytes(view *meta.View, p *fetchPart, limit int64) (int64, error) {
	it, err := view.Seek(p.id, p.partition, p.offset)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	var n int64
	for n < limit && it.Next() {
		n += it.Entry().Length
	}
	return n, it.Err()
}
