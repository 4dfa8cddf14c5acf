package kafka

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// testNowMs is the agent clock in offset tests.
const testNowMs = 5000

// newOffsetsAgent has topic "empty" (2 partitions) and topic "data" (1
// partition) holding three batches with out-of-order timestamps:
//
//	offsets 0-2  timestamps 1000..1002
//	offsets 3-4  timestamps 2000..2005
//	offsets 5-9  timestamps 1500..1600
func newOffsetsAgent(t *testing.T) *testAgent {
	t.Helper()
	a := newTestAgent(t, withDeps(func(d *Deps) { d.Now = func() time.Time { return time.UnixMilli(testNowMs) } }))
	a.createTopic(t, "empty", 2, nil)
	a.createTopic(t, "data", 1, nil)
	offs := a.commit(t, "data", 0,
		testBatch{records: 3, firstTs: 1000, maxTsMs: 1002},
		testBatch{records: 2, firstTs: 2000, maxTsMs: 2005},
	)
	offs = append(offs, a.commit(t, "data", 0, testBatch{records: 5, firstTs: 1500, maxTsMs: 1600})...)
	if !slices.Equal(offs, []int64{0, 3, 5}) {
		t.Fatalf("committed at %v", offs)
	}
	return a
}

func TestListOffsetsKadm(t *testing.T) {
	a := newOffsetsAgent(t)
	type want struct {
		topic     string
		offset    int64
		timestamp int64 // checked when not 0
	}
	tests := []struct {
		name string
		list func() (map[string]map[int32]int64, map[string]map[int32]int64, error)
		want []want
	}{
		{name: "start", list: listed(a.Admin.ListStartOffsets(a.ctx(t), "empty", "data")),
			want: []want{{"empty", 0, 0}, {"data", 0, 0}}},
		{name: "end", list: listed(a.Admin.ListEndOffsets(a.ctx(t), "empty", "data")),
			want: []want{{"empty", 0, 0}, {"data", 10, 0}}},
		{name: "committed", list: listed(a.Admin.ListCommittedOffsets(a.ctx(t), "data")),
			want: []want{{"data", 10, 0}}},
		{name: "after first timestamp", list: listed(a.Admin.ListOffsetsAfterMilli(a.ctx(t), 1000, "data")),
			want: []want{{"data", 0, 1000}}},
		{name: "inside first batch", list: listed(a.Admin.ListOffsetsAfterMilli(a.ctx(t), 1001, "data")),
			want: []want{{"data", 0, 1002}}},
		{name: "between batches", list: listed(a.Admin.ListOffsetsAfterMilli(a.ctx(t), 1003, "data")),
			want: []want{{"data", 3, 2000}}},
		{name: "inside second batch", list: listed(a.Admin.ListOffsetsAfterMilli(a.ctx(t), 2001, "data")),
			want: []want{{"data", 3, 2005}}},
		// kadm turns "none" into the end offset with a second request.
		{name: "after every timestamp", list: listed(a.Admin.ListOffsetsAfterMilli(a.ctx(t), 3000, "data", "empty")),
			want: []want{{"data", 10, 0}, {"empty", 0, 0}}},
		{name: "max timestamp", list: listed(a.Admin.ListMaxTimestampOffsets(a.ctx(t), "data")),
			want: []want{{"data", 4, 2005}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			offs, tss, err := tt.list()
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				got, ok := offs[w.topic][0]
				if !ok || got != w.offset {
					t.Errorf("%s: offset %d (listed %v), want %d", w.topic, got, ok, w.offset)
				}
				if w.timestamp != 0 && tss[w.topic][0] != w.timestamp {
					t.Errorf("%s: timestamp %d, want %d", w.topic, tss[w.topic][0], w.timestamp)
				}
			}
		})
	}
}

// listed turns a kadm listing, made when the table is built, into
// offsets and timestamps by topic and partition, or its first error.
func listed(l kadm.ListedOffsets, err error) func() (map[string]map[int32]int64, map[string]map[int32]int64, error) {
	return func() (map[string]map[int32]int64, map[string]map[int32]int64, error) {
		if err != nil {
			return nil, nil, err
		}
		if err := l.Error(); err != nil {
			return nil, nil, err
		}
		offs := make(map[string]map[int32]int64)
		tss := make(map[string]map[int32]int64)
		l.Each(func(o kadm.ListedOffset) {
			if offs[o.Topic] == nil {
				offs[o.Topic], tss[o.Topic] = make(map[int32]int64), make(map[int32]int64)
			}
			offs[o.Topic][o.Partition], tss[o.Topic][o.Partition] = o.Offset, o.Timestamp
		})
		return offs, tss, nil
	}
}

func listOffsetsReq(version int16, topic string, parts ...kmsg.ListOffsetsRequestTopicPartition) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = version
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rt.Partitions = parts
	req.Topics = append(req.Topics, rt)
	return req
}

func listPart(p int32, ts int64, maxNum int32, epoch int32) kmsg.ListOffsetsRequestTopicPartition {
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.MaxNumOffsets, rp.CurrentLeaderEpoch = p, ts, maxNum, epoch
	return rp
}

func TestListOffsetsVersions(t *testing.T) {
	a := newOffsetsAgent(t)
	type answer struct {
		code              *kerr.Error
		offset, timestamp int64
		epoch             int32
		old               []int64 // v0
	}
	tests := []struct {
		name    string
		version int16
		topic   string
		parts   []kmsg.ListOffsetsRequestTopicPartition
		want    []answer
	}{
		// v0, the old list form.
		{name: "v0 latest", version: 0, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -1, 10, -1)},
			want: []answer{{old: []int64{10, 0}}}},
		{name: "v0 latest one", version: 0, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -1, 1, -1)},
			want: []answer{{old: []int64{10}}}},
		{name: "v0 earliest", version: 0, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -2, 10, -1)},
			want: []answer{{old: []int64{0}}}},
		{name: "v0 before last write", version: 0, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, 1599, 10, -1)},
			want: []answer{{old: []int64{}}}},
		{name: "v0 after last write", version: 0, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, 1600, 10, -1)},
			want: []answer{{old: []int64{0}}}},
		{name: "v0 now", version: 0, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, testNowMs, 10, -1)},
			want: []answer{{old: []int64{10, 0}}}},
		{name: "v0 empty latest", version: 0, topic: "empty", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(1, -1, 10, -1)},
			want: []answer{{old: []int64{0}}}},
		{name: "v0 unknown partition", version: 0, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(1, -1, 10, -1)},
			want: []answer{{code: kerr.UnknownTopicOrPartition}}},
		// v1 as kafka-python sends it.
		{name: "v1 latest", version: 1, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -1, 0, -1)},
			want: []answer{{offset: 10, timestamp: -1, epoch: -1}}}, // no epoch before v4
		{name: "v1 earliest", version: 1, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -2, 0, -1)},
			want: []answer{{offset: 0, timestamp: -1, epoch: -1}}},
		{name: "v1 timestamp", version: 1, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, 1003, 0, -1)},
			want: []answer{{offset: 3, timestamp: 2000, epoch: -1}}},
		{name: "v1 max timestamp is too new", version: 1, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -3, 0, -1)},
			want: []answer{{code: kerr.UnsupportedVersion}}},
		{name: "v1 duplicate partition", version: 1, topic: "data",
			parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -1, 0, -1), listPart(0, -2, 0, -1)},
			want:  []answer{{code: kerr.InvalidRequest}, {code: kerr.InvalidRequest}}},
		{name: "v1 unknown topic", version: 1, topic: "nope", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -1, 0, -1)},
			want: []answer{{code: kerr.UnknownTopicOrPartition}}},
		// v4+: leader epochs.
		{name: "v4 latest", version: 4, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -1, 0, 0)},
			want: []answer{{offset: 10, timestamp: -1, epoch: 0}}},
		{name: "v4 newer epoch", version: 4, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -1, 0, 1)},
			want: []answer{{code: kerr.UnknownLeaderEpoch}}},
		{name: "v4 older epoch", version: 4, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -1, 0, -2)},
			want: []answer{{code: kerr.FencedLeaderEpoch}}},
		{name: "v4 timestamp not found", version: 4, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, 9000, 0, -1)},
			want: []answer{{offset: -1, timestamp: -1, epoch: -1}}},
		{name: "v6 max timestamp is too new", version: 6, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -3, 0, -1)},
			want: []answer{{code: kerr.UnsupportedVersion}}},
		{name: "v7 max timestamp", version: 7, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -3, 0, -1)},
			want: []answer{{offset: 4, timestamp: 2005, epoch: 0}}},
		{name: "v7 max timestamp empty", version: 7, topic: "empty", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -3, 0, -1)},
			want: []answer{{offset: -1, timestamp: -1, epoch: -1}}},
		{name: "v7 earliest local is too new", version: 7, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -4, 0, -1)},
			want: []answer{{code: kerr.UnsupportedVersion}}},
		{name: "v8 earliest local", version: 8, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -4, 0, -1)},
			want: []answer{{offset: 0, timestamp: -1, epoch: 0}}},
		{name: "v8 latest tiered is too new", version: 8, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -5, 0, -1)},
			want: []answer{{code: kerr.UnsupportedVersion}}},
		{name: "v9 latest tiered: nothing tiered", version: 9, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -5, 0, -1)},
			want: []answer{{offset: -1, timestamp: -1, epoch: -1}}},
		{name: "v10 pending upload is too new", version: 10, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -6, 0, -1)},
			want: []answer{{code: kerr.UnsupportedVersion}}},
		{name: "v10 latest", version: 10, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -1, 0, -1)},
			want: []answer{{offset: 10, timestamp: -1, epoch: 0}}},
		{name: "v11 pending upload: nothing pending", version: 11, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, -6, 0, -1)},
			want: []answer{{offset: -1, timestamp: -1, epoch: -1}}},
		{name: "v11 timestamp", version: 11, topic: "data", parts: []kmsg.ListOffsetsRequestTopicPartition{listPart(0, 2005, 0, -1)},
			want: []answer{{offset: 3, timestamp: 2005, epoch: 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := listOffsetsReq(tt.version, tt.topic, tt.parts...)
			req.IsolationLevel = 1 // accepted; changes nothing
			resp := a.rawRequest(t, req).(*kmsg.ListOffsetsResponse)
			if len(resp.Topics) != 1 || resp.Topics[0].Topic != tt.topic || len(resp.Topics[0].Partitions) != len(tt.want) {
				t.Fatalf("answer %+v", resp.Topics)
			}
			for i, w := range tt.want {
				got := resp.Topics[0].Partitions[i]
				if w.code != nil {
					if got.ErrorCode != w.code.Code {
						t.Errorf("partition %d: code %d, want %v", i, got.ErrorCode, w.code)
					}
					continue
				}
				if got.ErrorCode != 0 {
					t.Fatalf("partition %d: code %d", i, got.ErrorCode)
				}
				if tt.version == 0 {
					if !slices.Equal(got.OldStyleOffsets, w.old) {
						t.Errorf("offsets %v, want %v", got.OldStyleOffsets, w.old)
					}
					continue
				}
				if got.Offset != w.offset || got.Timestamp != w.timestamp || got.LeaderEpoch != w.epoch {
					t.Errorf("offset %d timestamp %d epoch %d, want %d %d %d",
						got.Offset, got.Timestamp, got.LeaderEpoch, w.offset, w.timestamp, w.epoch)
				}
			}
		})
	}
}

func TestOffsetForLeaderEpoch(t *testing.T) {
	a := newOffsetsAgent(t)
	type answer struct {
		code   *kerr.Error
		epoch  int32
		offset int64
	}
	part := func(p, current, epoch int32) kmsg.OffsetForLeaderEpochRequestTopicPartition {
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p, current, epoch
		return rp
	}
	tests := []struct {
		version int16
		topic   string
		part    kmsg.OffsetForLeaderEpochRequestTopicPartition
		want    answer
	}{
		{4, "data", part(0, 0, 0), answer{epoch: 0, offset: 10}},
		{4, "data", part(0, -1, 0), answer{epoch: 0, offset: 10}},
		{4, "empty", part(1, 0, 0), answer{epoch: 0, offset: 0}},
		{4, "data", part(0, 0, 1), answer{epoch: -1, offset: -1}},
		{4, "data", part(0, 0, -1), answer{epoch: -1, offset: -1}},
		{4, "data", part(0, 0, -2), answer{epoch: -2, offset: 0}},
		{4, "data", part(0, 1, 0), answer{code: kerr.UnknownLeaderEpoch}},
		{4, "data", part(0, -3, 0), answer{code: kerr.FencedLeaderEpoch}},
		{4, "nope", part(0, 0, 0), answer{code: kerr.UnknownTopicOrPartition}},
		{4, "data", part(3, 0, 0), answer{code: kerr.UnknownTopicOrPartition}},
		{3, "data", part(0, 0, 0), answer{epoch: 0, offset: 10}},
		{2, "data", part(0, 5, 0), answer{code: kerr.UnknownLeaderEpoch}},
		// v1 has no CurrentLeaderEpoch: nothing to fence.
		{1, "data", part(0, 5, 0), answer{epoch: 0, offset: 10}},
		// v0 answers no epoch (the decoder's default is -1).
		{0, "data", part(0, 0, 0), answer{epoch: -1, offset: 10}},
	}
	for _, tt := range tests {
		name := "v" + strconv.Itoa(int(tt.version)) + " " + tt.topic + " epoch " + strconv.Itoa(int(tt.part.LeaderEpoch)) +
			" current " + strconv.Itoa(int(tt.part.CurrentLeaderEpoch))
		t.Run(name, func(t *testing.T) {
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			req.Version = tt.version
			req.ReplicaID = -1
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = tt.topic
			rt.Partitions = append(rt.Partitions, tt.part)
			req.Topics = append(req.Topics, rt)
			resp := a.rawRequest(t, req).(*kmsg.OffsetForLeaderEpochResponse)
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("answer %+v", resp.Topics)
			}
			got := resp.Topics[0].Partitions[0]
			var wantCode int16
			if tt.want.code != nil {
				wantCode = tt.want.code.Code
			}
			if got.ErrorCode != wantCode || got.Partition != tt.part.Partition {
				t.Fatalf("partition %d code %d, want %d code %d", got.Partition, got.ErrorCode, tt.part.Partition, wantCode)
			}
			if wantCode == 0 && (got.LeaderEpoch != tt.want.epoch || got.EndOffset != tt.want.offset) {
				t.Fatalf("epoch %d end %d, want %d %d", got.LeaderEpoch, got.EndOffset, tt.want.epoch, tt.want.offset)
			}
		})
	}
}

// Of batches sharing the greatest timestamp, the first one answers.
func TestListOffsetsMaxTimestampTie(t *testing.T) {
	a := newTestAgent(t)
	a.createTopic(t, "ties", 1, nil)
	a.commit(t, "ties", 0,
		testBatch{records: 2, firstTs: 3000, maxTsMs: 3000}, // offsets 0-1
		testBatch{records: 2, firstTs: 1000, maxTsMs: 3000}, // offsets 2-3
		testBatch{records: 2, firstTs: 100, maxTsMs: 200},   // offsets 4-5
	)
	resp := a.rawRequest(t, listOffsetsReq(7, "ties", listPart(0, -3, 0, -1))).(*kmsg.ListOffsetsResponse)
	got := resp.Topics[0].Partitions[0]
	if got.ErrorCode != 0 || got.Offset != 1 || got.Timestamp != 3000 {
		t.Fatalf("code %d offset %d timestamp %d, want offset 1 at 3000", got.ErrorCode, got.Offset, got.Timestamp)
	}
}

// An index entry of several batches (what compaction makes): a
// timestamp lookup and the max-timestamp lookup name the batch inside
// it, reading its headers, not the entry's first or last offset.
func TestListOffsetsInsideAnEntry(t *testing.T) {
	a, dp := newDataAgent(t, nil)
	a.createTopic(t, "merged", 1, nil)
	var data []byte
	for _, ts := range []int64{1000, 5000, 3000} { // offsets 0-1, 2-3, 4-5
		data = append(data, batchtest.Build(t, batchtest.Options{Records: 2, ValueBytes: 10, FirstTimestamp: ts})...)
	}
	b, err := produce.BatchFrom(a.topicID(t, "merged"), 0, data)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := dp.Pipeline.Produce(a.ctx(t), []produce.Batch{b}); err != nil || res[0].Code != 0 {
		t.Fatalf("produce: %v, %+v", err, res)
	}
	for _, tt := range []struct {
		ts, offset, timestamp int64
	}{
		{ts: 2000, offset: 2, timestamp: 5000}, // the entry says 0
		{ts: 3000, offset: 2, timestamp: 5000},
		{ts: 5001, offset: 2, timestamp: 5001},
		{ts: -3, offset: 3, timestamp: 5001}, // the entry says 5
	} {
		resp := a.rawRequest(t, listOffsetsReq(7, "merged", listPart(0, tt.ts, 0, -1))).(*kmsg.ListOffsetsResponse)
		got := resp.Topics[0].Partitions[0]
		if got.ErrorCode != 0 || got.Offset != tt.offset || got.Timestamp != tt.timestamp {
			t.Errorf("timestamp %d: code %d offset %d timestamp %d, want offset %d at %d", tt.ts, got.ErrorCode, got.Offset, got.Timestamp, tt.offset, tt.timestamp)
		}
	}
}
