package kafka

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// deleteRecords deletes with kadm and returns the one partition's answer.
func (a *testAgent) deleteRecords(t *testing.T, topic string, p int32, offset int64) kadm.DeleteRecordsResponse {
	t.Helper()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: p, At: offset})
	resps, err := a.Admin.DeleteRecords(a.ctx(t), os)
	if err != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}
	r, ok := resps.Lookup(topic, p)
	if !ok {
		t.Fatalf("DeleteRecords: no answer for %s[%d] in %v", topic, p, resps)
	}
	return r
}

func (a *testAgent) startOffset(t *testing.T, topic string, p int32) int64 {
	t.Helper()
	los, err := a.Admin.ListStartOffsets(a.ctx(t), topic)
	if err != nil {
		t.Fatalf("ListStartOffsets: %v", err)
	}
	lo, ok := los.Lookup(topic, p)
	if !ok || lo.Err != nil {
		t.Fatalf("ListStartOffsets %s[%d]: %v, %v", topic, p, ok, lo.Err)
	}
	return lo.Offset
}

// TestDeleteRecordsKadm: deleting moves what every read path sees as the
// start of the partition, and only that.
func TestDeleteRecordsKadm(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	const topic = "dr"
	a.createTopic(t, topic, 2, nil)
	// Partition 0: five batches of four records, [0,4) ... [16,20).
	opts := make([]batchtest.Options, 5)
	for i := range opts {
		opts[i] = batchtest.Options{Records: 4, ValueBytes: 8, Seed: uint64(i)}
		if sp := a.produceRaw(t, topic, 0, batchtest.Build(t, opts[i])); sp.ErrorCode != 0 || sp.BaseOffset != int64(4*i) {
			t.Fatalf("produce batch %d: code %d base %d", i, sp.ErrorCode, sp.BaseOffset)
		}
	}
	a.produceRaw(t, topic, 1, batchtest.Build(t, batchtest.Options{Records: 3}))

	// 10 falls inside [8,12): that batch stays in the index, the two
	// before it go.
	if r := a.deleteRecords(t, topic, 0, 10); r.Err != nil || r.LowWatermark != 10 {
		t.Fatalf("delete to 10: low watermark %d, %v", r.LowWatermark, r.Err)
	}
	if r := a.deleteRecords(t, topic, 1, -1); r.Err != nil || r.LowWatermark != 3 {
		t.Fatalf("delete partition 1 to the high watermark: low watermark %d, %v", r.LowWatermark, r.Err)
	}
	if got := a.startOffset(t, topic, 0); got != 10 {
		t.Fatalf("start offset %d, want 10", got)
	}
	if got := a.startOffset(t, topic, 1); got != 3 {
		t.Fatalf("partition 1 start offset %d, want 3", got)
	}
	ends, err := a.Admin.ListEndOffsets(a.ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := ends.Lookup(topic, 0); e.Offset != 20 {
		t.Fatalf("end offset %d, want 20", e.Offset)
	}
	view := a.Replica.View()
	it, err := view.Seek(a.topicID(t, topic), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for it.Next() {
		bases = append(bases, it.Entry().BaseOffset)
	}
	it.Close()
	view.Close()
	if want := []int64{8, 12, 16}; !slices.Equal(bases, want) {
		t.Fatalf("index %v, want %v", bases, want)
	}

	// Fetch below the log start is out of range, at it returns the
	// straddling batch whole (the client skips what lies below).
	for _, tt := range []struct {
		offset int64
		code   int16
	}{{0, kerr.OffsetOutOfRange.Code}, {9, kerr.OffsetOutOfRange.Code}, {10, 0}, {19, 0}} {
		resp := a.rawRequest(t, fetchReq(11, 0, 0, 1<<20, fetchPartReq{topic: topic, offset: tt.offset, maxBytes: 1 << 20})).(*kmsg.FetchResponse)
		sp := fetchPartitions(resp)[0]
		if sp.ErrorCode != tt.code {
			t.Fatalf("fetch at %d: code %d, want %d", tt.offset, sp.ErrorCode, tt.code)
		}
		if tt.code == 0 && sp.LogStartOffset != 10 {
			t.Fatalf("fetch at %d: log start %d, want 10", tt.offset, sp.LogStartOffset)
		}
	}

	// A consumer from the start reads exactly offsets 10 to 19.
	got := a.consume(t, topic, 1, 10)
	for i, r := range got {
		off := int64(10 + i)
		batch, idx := off/4, int(off%4)
		if r.Offset != off || !bytes.Equal(r.Value, batchtest.Value(opts[batch], idx)) {
			t.Fatalf("record %d: offset %d value %q, want %d %q", i, r.Offset, r.Value, off, batchtest.Value(opts[batch], idx))
		}
	}

	// The log start never moves back; beyond the high watermark is out
	// of range and changes nothing.
	if r := a.deleteRecords(t, topic, 0, 4); r.Err != nil || r.LowWatermark != 10 {
		t.Fatalf("delete to 4: low watermark %d, %v", r.LowWatermark, r.Err)
	}
	if r := a.deleteRecords(t, topic, 0, 21); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete beyond the high watermark: %v, want OFFSET_OUT_OF_RANGE", r.Err)
	}
	if got := a.startOffset(t, topic, 0); got != 10 {
		t.Fatalf("start offset %d after failed deletes, want 10", got)
	}

	// Metadata is unaffected.
	td, err := a.Admin.ListTopics(a.ctx(t), topic)
	if err != nil || td[topic].Err != nil || len(td[topic].Partitions) != 2 {
		t.Fatalf("ListTopics: %v %+v", err, td[topic])
	}
}

// TestDeleteRecordsRequest: answers at every version, for partitions that
// cannot be deleted, and one log entry per request.
func TestDeleteRecordsRequest(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	a.createTopic(t, "d", 2, nil)
	a.createTopic(t, "compacted", 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")})
	a.produceRaw(t, "d", 0, batchtest.Build(t, batchtest.Options{Records: 5}))
	a.produceRaw(t, "compacted", 0, batchtest.Build(t, batchtest.Options{Records: 1, KeyBytes: 1}))

	type part struct {
		topic     string
		partition int32
		offset    int64
	}
	type answer struct {
		code  int16
		lowWM int64
	}
	unknown, oor := kerr.UnknownTopicOrPartition.Code, kerr.OffsetOutOfRange.Code
	for v := int16(0); v <= 2; v++ {
		parts := []part{
			{"d", 0, int64(v + 1)},
			{"d", 1, 1},
			{"d", 2, 0},
			{"nope", 0, 0},
			{"d", 0, -2},
			{"compacted", 0, -1},
		}
		want := []answer{
			{0, int64(v + 1)},
			{oor, -1},
			{unknown, -1},
			{unknown, -1},
			{oor, -1},
			{kerr.PolicyViolation.Code, -1},
		}
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.Version, req.TimeoutMillis = v, 5000
		for _, p := range parts {
			if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != p.topic {
				rt := kmsg.NewDeleteRecordsRequestTopic()
				rt.Topic = p.topic
				req.Topics = append(req.Topics, rt)
			}
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = p.partition, p.offset
			rt := &req.Topics[len(req.Topics)-1]
			rt.Partitions = append(rt.Partitions, rp)
		}
		before, _, err := a.Log.CheckTail(a.ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		resp := a.rawRequest(t, req).(*kmsg.DeleteRecordsResponse)
		var got []answer
		for i, st := range resp.Topics {
			if st.Topic != req.Topics[i].Topic {
				t.Fatalf("v%d: topic %d is %q, want %q", v, i, st.Topic, req.Topics[i].Topic)
			}
			for j, sp := range st.Partitions {
				if sp.Partition != req.Topics[i].Partitions[j].Partition {
					t.Fatalf("v%d: %s partition %d answered as %d", v, st.Topic, req.Topics[i].Partitions[j].Partition, sp.Partition)
				}
				got = append(got, answer{sp.ErrorCode, sp.LowWatermark})
			}
		}
		if len(got) != len(want) {
			t.Fatalf("v%d: %d answers, want %d", v, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("v%d: %+v: got %+v, want %+v", v, parts[i], got[i], want[i])
			}
		}
		after, _, err := a.Log.CheckTail(a.ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if after != before+1 {
			t.Errorf("v%d: the request took %d log entries, want 1", v, after-before)
		}
	}

	// Nothing to delete proposes nothing.
	before, _, _ := a.Log.CheckTail(a.ctx(t))
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "nope"
	rt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}
	req.Topics = append(req.Topics, rt)
	resp := a.request(t, req).(*kmsg.DeleteRecordsResponse)
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != unknown {
		t.Fatalf("unknown topic: code %d", c)
	}
	if after, _, _ := a.Log.CheckTail(a.ctx(t)); after != before {
		t.Fatalf("a request with nothing to delete appended %d entries", after-before)
	}
}
