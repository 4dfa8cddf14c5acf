// ListOffsets: v0-11
//   - -2 (earliest) and -4 (earliest local, v8+): the log start offset;
//     every byte is in the object store, so local and remote are one.
//   - -1 (latest): the high watermark; with IsolationLevel (v2+)
//     read_committed, the last stable offset (the first offset of the
//     partition's oldest open transaction, else the high watermark), as
//     Kafka answers it. A timestamp or max-timestamp lookup under
//     read_committed that lands at or above the last stable offset finds
//     nothing (offset -1, timestamp -1), as in Kafka.
//   - -3 (max timestamp, v7+, KIP-734): the last offset of the first
//     batch holding the partition's greatest timestamp, with that
//     timestamp. Kafka before 3.7 answered the same way; since then it
//     names the record inside the batch, which needs reading the batch.
//   - A timestamp: the first batch (from the log start) whose max
//     timestamp reaches it. If the batch's first timestamp reaches it too,
//     the answer is exact: the batch's base offset and first timestamp.
//     Otherwise the wanted record is inside the batch, and the answer is
//     the batch's base offset with its max timestamp: at most one batch
//     early, so a consumer starting there misses nothing. No such batch:
//     offset -1, timestamp -1. The index keeps timestamps per entry, and
//     compaction makes entries of many batches: the lookup reads the
//     headers of the entry it lands in to find the batch (and falls back
//     to the entry, early, if that read fails).
//   - Timestamp lookups scan the partition's index from the log start;
//     a time index replaces the scan when partitions grow long.
//   - v4+: CurrentLeaderEpoch is fenced against epoch 0 (FENCED_ or
//     UNKNOWN_LEADER_EPOCH); LeaderEpoch is 0 in every answer that found
//     an offset, -1 otherwise.
//   - v1+: a partition listed twice is INVALID_REQUEST for each entry; a
//     negative timestamp other than the special ones above, or one sent
//     below the version that added it, is UNSUPPORTED_VERSION.
//   - v0 answers the old OldStyleOffsets list, as if the partition were
//     one segment starting at the log start offset, last modified at its
//     newest batch's max timestamp (its creation time when empty), followed
//     by the log end offset at the current time when it holds data:
//     latest is [end, start], earliest [start], a timestamp the offsets of
//     those modified at or before it, newest first, at most MaxNumOffsets.
//   - -5 (latest tiered, v9+, KIP-1005) and -6 (earliest pending upload,
//     v11+, KIP-1023): offset -1, timestamp -1, as Kafka answers for a
//     topic without tiered storage. Strand has no local tier to move data
//     from: a batch is in the object store before its Produce is
//     answered, so nothing is ever pending upload, and -4 already
//     answers every byte as local.
//   - v10 TimeoutMillis bounds Kafka's remote-storage lookups; Strand's
//     lookups read the local index (and at most one entry's batch
//     headers), so it is not consulted.
//   - ACLs (authz.go): Describe on each topic, else TOPIC_AUTHORIZATION_FAILED.

package kafka

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/recordbatch"
)

func init() { regKey(2, 0, 11, handleListOffsets) }

// Special ListOffsets timestamps.
const (
	listLatest        = -1
	listEarliest      = -2
	listMaxTimestamp  = -3
	listEarliestLocal = -4
	listLatestTiered  = -5
	listPendingUpload = -6
)

// listOffsetsMinVersion is the version that added each special timestamp
// (ReplicaManager.timestampMinSupportedVersion).
var listOffsetsMinVersion = map[int64]int16{
	listLatest:        0,
	listEarliest:      0,
	listMaxTimestamp:  7,
	listEarliestLocal: 8,
	listLatestTiered:  9,
	listPendingUpload: 11,
}

func handleListOffsets(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	view := db.View()
	defer view.Close()
	topics := topicCache{view: view}
	now := r.Deps.now().UnixMilli()

	type tp struct {
		topic     string
		partition int32
	}
	seen := make(map[tp]int)
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			seen[tp{rt.Topic, rp.Partition}]++
		}
	}

	z := r.authz()
	batches := batchesIn(ctx, r, view)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, 0, len(req.Topics))
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, 0, len(rt.Partitions))
		denied := !z.topic(kmsg.ACLOperationDescribe, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			if denied {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				sp.OldStyleOffsets, sp.Offset, sp.Timestamp, sp.LeaderEpoch = nil, -1, -1, -1
			} else if e := listOffset(view, &topics, req, rt.Topic, &rp, &sp, seen[tp{rt.Topic, rp.Partition}] > 1, now, batches); e != nil {
				sp.ErrorCode = e.Code
				sp.OldStyleOffsets, sp.Offset, sp.Timestamp, sp.LeaderEpoch = nil, -1, -1, -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// listOffset answers one partition into sp, or returns its error.
func listOffset(view *meta.View, topics *topicCache, req *kmsg.ListOffsetsRequest, topic string, rp *kmsg.ListOffsetsRequestTopicPartition,
	sp *kmsg.ListOffsetsResponseTopicPartition, dup bool, nowMs int64, batches entryBatches,
) *kerr.Error {
	version := req.Version
	ts := rp.Timestamp
	if version >= 1 {
		if dup {
			return kerr.InvalidRequest
		}
		if minVersion, special := listOffsetsMinVersion[ts]; ts < 0 && (!special || version < minVersion) {
			return kerr.UnsupportedVersion
		}
	}
	t, ps, e := topics.partition(topic, rp.Partition)
	if e != nil {
		return e
	}
	if version >= 4 {
		if e := checkCurrentLeaderEpoch(rp.CurrentLeaderEpoch); e != nil {
			return e
		}
	}
	if version == 0 {
		offs, err := legacyOffsets(view, &t, rp.Partition, ps, ts, rp.MaxNumOffsets, nowMs)
		if err != nil {
			return kerr.UnknownServerError
		}
		sp.OldStyleOffsets = offs
		return nil
	}

	// lastFetchable is Kafka's bound on what a lookup may answer: the
	// last stable offset under read_committed.
	lastFetchable := ps.HighWatermark()
	var found bool
	var err error
	if version >= 2 && req.IsolationLevel == isolationReadCommitted {
		lastFetchable, err = view.LastStableOffset(t.ID, rp.Partition, lastFetchable)
	}
	switch {
	case err != nil:
	case ts == listEarliest, ts == listEarliestLocal:
		sp.Offset, found = ps.LogStartOffset, true
	case ts == listLatest:
		sp.Offset, found = lastFetchable, true
	case ts == listLatestTiered, ts == listPendingUpload:
		// Nothing tiered, nothing pending: not found.
	case ts == listMaxTimestamp:
		sp.Offset, sp.Timestamp, found, err = offsetOfMaxTimestamp(view, t.ID, rp.Partition, ps, batches)
		found = found && sp.Offset < lastFetchable
	default:
		sp.Offset, sp.Timestamp, found, err = offsetForTimestamp(view, t.ID, rp.Partition, ps, ts, batches)
		found = found && sp.Offset < lastFetchable
	}
	switch {
	case err != nil:
		return kerr.UnknownServerError
	case found:
		sp.LeaderEpoch = partitionLeaderEpoch
	default:
		sp.Offset, sp.Timestamp = -1, -1
	}
	return nil
}

// entryBatches returns the headers of the batches of index entry e of a
// partition (from offset from on), false if it cannot read them.
type entryBatches func(id meta.TopicID, p int32, e meta.IndexEntry, from int64) ([]recordbatch.Header, bool)

// batchesIn reads entries' batch headers through the Fetch path's
// reader; nil without one.
func batchesIn(ctx context.Context, r *Request, view *meta.View) entryBatches {
	rd, err := r.Deps.fetcher()
	if err != nil {
		return nil
	}
	return func(id meta.TopicID, p int32, e meta.IndexEntry, from int64) ([]recordbatch.Header, bool) {
		if e.Control || e.BatchCount < 2 {
			return nil, false // nothing finer than the entry
		}
		res, err := rd.ReadUpTo(ctx, view, id, p, max(e.BaseOffset, from), int32(min(e.Length, math.MaxInt32)), e.BaseOffset+int64(e.Records))
		if err != nil || res.Err != 0 {
			return nil, false
		}
		var hs []recordbatch.Header
		for rest := res.Records; len(rest) > 0; {
			b, next, err := recordbatch.Next(rest)
			if err != nil {
				return nil, false
			}
			h, err := recordbatch.ParseHeader(b)
			if err != nil {
				return nil, false
			}
			hs = append(hs, h)
			rest = next
		}
		return hs, len(hs) > 0
	}
}

// offsetForTimestamp finds the first batch at or after the log start
// whose max timestamp reaches ts.
func offsetForTimestamp(view *meta.View, id meta.TopicID, p int32, ps meta.PartitionState, ts int64, batches entryBatches) (offset, timestamp int64, found bool, err error) {
	it, err := view.Seek(id, p, ps.LogStartOffset)
	if err != nil {
		return 0, 0, false, err
	}
	defer it.Close()
	for it.Next() {
		e := it.Entry()
		if e.MaxTimestamp < ts {
			continue
		}
		if e.FirstTimestamp < ts && batches != nil {
			// The record is inside the entry: in which batch?
			if hs, ok := batches(id, p, e, ps.LogStartOffset); ok {
				for _, h := range hs {
					if h.MaxTimestamp >= ts {
						e.BaseOffset, e.FirstTimestamp, e.MaxTimestamp = h.BaseOffset, h.FirstTimestamp, h.MaxTimestamp
						break
					}
				}
			}
		}
		if e.FirstTimestamp >= ts && e.BaseOffset >= ps.LogStartOffset {
			return e.BaseOffset, e.FirstTimestamp, true, nil
		}
		return max(e.BaseOffset, ps.LogStartOffset), e.MaxTimestamp, true, nil
	}
	return 0, 0, false, it.Err()
}

// offsetOfMaxTimestamp finds the first batch holding the greatest
// timestamp at or after the log start.
func offsetOfMaxTimestamp(view *meta.View, id meta.TopicID, p int32, ps meta.PartitionState, batches entryBatches) (offset, timestamp int64, found bool, err error) {
	it, err := view.Seek(id, p, ps.LogStartOffset)
	if err != nil {
		return 0, 0, false, err
	}
	defer it.Close()
	var best meta.IndexEntry
	for it.Next() {
		if e := it.Entry(); !found || e.MaxTimestamp > timestamp {
			best, offset, timestamp, found = e, e.LastOffset(), e.MaxTimestamp, true
		}
	}
	if err := it.Err(); err != nil || !found || batches == nil {
		return offset, timestamp, found, err
	}
	if hs, ok := batches(id, p, best, ps.LogStartOffset); ok {
		for _, h := range hs {
			if h.MaxTimestamp >= timestamp {
				return h.LastOffset(), timestamp, true, nil
			}
		}
	}
	return offset, timestamp, found, nil
}

// legacyOffsets answers ListOffsets v0 (Kafka's legacyFetchOffsetsBefore)
// with the partition as one segment.
func legacyOffsets(view *meta.View, t *meta.Topic, p int32, ps meta.PartitionState, ts int64, maxNum int32, nowMs int64) ([]int64, error) {
	type offsetTime struct{ offset, modifiedMs int64 }
	lastModified := t.CreatedAt
	hasData := ps.NextOffset > ps.LogStartOffset
	if hasData {
		it, err := view.Seek(t.ID, p, ps.NextOffset-1)
		if err != nil {
			return nil, err
		}
		if it.Next() {
			lastModified = it.Entry().MaxTimestamp
		}
		err = it.Err()
		it.Close()
		if err != nil {
			return nil, err
		}
	}
	points := []offsetTime{{ps.LogStartOffset, lastModified}}
	if hasData {
		points = append(points, offsetTime{ps.NextOffset, nowMs})
	}
	start := len(points) - 1
	switch ts {
	case listLatest:
	case listEarliest:
		start = 0
	default:
		for start >= 0 && points[start].modifiedMs > ts {
			start--
		}
	}
	offs := []int64{}
	for ; start >= 0 && int32(len(offs)) < maxNum; start-- {
		offs = append(offs, points[start].offset)
	}
	return offs, nil
}
