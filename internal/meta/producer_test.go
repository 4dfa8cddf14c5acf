package meta

import (
	"math"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// idem is one idempotent batch of a test: Records records from sequence
// Seq in epoch Epoch.
type idem struct {
	PID     int64
	Epoch   int16
	Seq     int32
	Records int32
}

// idemCommit builds a CommitObject of the batches, all to one partition.
func idemCommit(ref partRef, batches ...idem) CommitObject {
	co := commitTo(1, make([]partRef, len(batches))...)
	for i, b := range batches {
		cb := &co.Batches[i]
		cb.TopicID, cb.Partition = ref.id, ref.partition
		cb.Records = b.Records
		cb.ProducerID, cb.ProducerEpoch, cb.BaseSequence = b.PID, b.Epoch, b.Seq
	}
	return co
}

func TestAllocateProducerID(t *testing.T) {
	r := openReplica(t, newTestLog(), nil, "w")
	type want struct {
		id    int64
		epoch int16
	}
	steps := []struct {
		name string
		cmd  AllocateProducerID
		want want
	}{
		{"first new id", AllocateProducerID{ProducerID: -1, ProducerEpoch: -1}, want{0, 0}},
		{"second new id", AllocateProducerID{ProducerID: -1, ProducerEpoch: -1}, want{1, 0}},
		{"bump known id", AllocateProducerID{ProducerID: 0, ProducerEpoch: 0}, want{0, 1}},
		{"bump again", AllocateProducerID{ProducerID: 0, ProducerEpoch: 1}, want{0, 2}},
		{"unknown id gets a new one", AllocateProducerID{ProducerID: 99, ProducerEpoch: 3}, want{2, 0}},
		{"negative epoch gets a new id", AllocateProducerID{ProducerID: 1, ProducerEpoch: -1}, want{3, 0}},
		{"last bumpable epoch", AllocateProducerID{ProducerID: 1, ProducerEpoch: math.MaxInt16 - 2}, want{1, math.MaxInt16 - 1}},
		{"exhausted epoch gets a new id", AllocateProducerID{ProducerID: 1, ProducerEpoch: math.MaxInt16 - 1}, want{4, 0}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			res := mustOK(t, r, s.cmd)
			if got := (want{res.ProducerID, res.ProducerEpoch}); got != s.want {
				t.Fatalf("AllocateProducerID(%d, %d) = %+v, want %+v", s.cmd.ProducerID, s.cmd.ProducerEpoch, got, s.want)
			}
		})
	}
}

// step is one CommitObject of idempotent batches and the answers expected:
// Code per batch, and Base per batch, the base offset expected (for a
// duplicate, the original one).
type step struct {
	batches []idem
	codes   []*kerr.Error
	bases   []int64
}

func runSteps(t *testing.T, r *testReplica, ref partRef, steps []step) {
	t.Helper()
	for i, s := range steps {
		res := mustOK(t, r, idemCommit(ref, s.batches...))
		for j := range s.batches {
			br := res.Batches[j]
			var want int16
			if s.codes[j] != nil {
				want = s.codes[j].Code
			}
			if br.Code != want {
				t.Fatalf("step %d batch %d %+v: code %v, want %v", i, j, s.batches[j], kerr.ErrorForCode(br.Code), s.codes[j])
			}
			if want == 0 && br.BaseOffset != s.bases[j] {
				t.Fatalf("step %d batch %d %+v: base offset %d, want %d", i, j, s.batches[j], br.BaseOffset, s.bases[j])
			}
		}
	}
}

// answer is what one batch should get: an error, or a base offset.
type answer struct {
	e    *kerr.Error
	base int64
}

func ok1(base int64) answer      { return answer{base: base} }
func fail1(e *kerr.Error) answer { return answer{e: e} }

func one(b idem, a answer) step {
	return step{batches: []idem{b}, codes: []*kerr.Error{a.e}, bases: []int64{a.base}}
}

func TestIdempotentCommit(t *testing.T) {
	const pid = 7
	cases := []struct {
		name  string
		steps []step
		// next is the partition's next offset at the end: duplicates
		// and refused batches take none.
		next int64
	}{
		{"in order", []step{
			one(idem{pid, 0, 0, 10}, ok1(0)),
			one(idem{pid, 0, 10, 5}, ok1(10)),
		}, 15},
		{"duplicate returns the original offset", []step{
			one(idem{pid, 0, 0, 10}, ok1(0)),
			one(idem{pid, 0, 10, 5}, ok1(10)),
			one(idem{pid, 0, 0, 10}, ok1(0)),
			one(idem{pid, 0, 10, 5}, ok1(10)),
			one(idem{pid, 0, 15, 1}, ok1(15)),
		}, 16},
		{"gap", []step{
			one(idem{pid, 0, 0, 10}, ok1(0)),
			one(idem{pid, 0, 11, 1}, fail1(kerr.OutOfOrderSequenceNumber)),
			one(idem{pid, 0, 10, 1}, ok1(10)),
		}, 11},
		{"overlap that is no duplicate", []step{
			one(idem{pid, 0, 0, 10}, ok1(0)),
			one(idem{pid, 0, 5, 10}, fail1(kerr.OutOfOrderSequenceNumber)),
		}, 10},
		{"stale epoch", []step{
			one(idem{pid, 1, 0, 3}, ok1(0)),
			one(idem{pid, 0, 3, 1}, fail1(kerr.InvalidProducerEpoch)),
			one(idem{pid, 0, 0, 3}, fail1(kerr.InvalidProducerEpoch)),
		}, 3},
		{"epoch bump restarts at zero", []step{
			one(idem{pid, 0, 0, 3}, ok1(0)),
			one(idem{pid, 1, 0, 2}, ok1(3)),
			one(idem{pid, 1, 2, 2}, ok1(5)),
			// The old epoch is fenced, its duplicates too.
			one(idem{pid, 0, 0, 3}, fail1(kerr.InvalidProducerEpoch)),
		}, 7},
		{"epoch bump not at zero", []step{
			one(idem{pid, 0, 0, 3}, ok1(0)),
			one(idem{pid, 1, 3, 2}, fail1(kerr.OutOfOrderSequenceNumber)),
		}, 3},
		{"unknown producer accepted at any sequence", []step{
			one(idem{pid, 4, 500, 2}, ok1(0)),
			one(idem{pid, 4, 502, 1}, ok1(2)),
		}, 3},
		{"sequence wraps", []step{
			one(idem{pid, 0, math.MaxInt32 - 1, 2}, ok1(0)),
			one(idem{pid, 0, 0, 2}, ok1(2)),
			one(idem{pid, 0, math.MaxInt32 - 1, 2}, ok1(0)),
		}, 4},
		{"batch across the wrap", []step{
			one(idem{pid, 0, math.MaxInt32 - 1, 4}, ok1(0)),
			one(idem{pid, 0, 2, 1}, ok1(4)),
			one(idem{pid, 0, math.MaxInt32 - 1, 4}, ok1(0)),
		}, 5},
		{"producers are independent", []step{
			one(idem{pid, 0, 0, 2}, ok1(0)),
			one(idem{pid + 1, 0, 0, 2}, ok1(2)),
			one(idem{pid, 0, 0, 2}, ok1(0)),
			one(idem{pid + 1, 0, 2, 1}, ok1(4)),
		}, 5},
		{"negative sequence", []step{
			one(idem{pid, 0, -1, 1}, fail1(kerr.InvalidRecord)),
		}, 0},
		{"several batches in one commit", []step{{
			batches: []idem{{pid, 0, 0, 2}, {pid, 0, 2, 2}, {pid, 0, 0, 2}, {pid, 0, 5, 1}, {pid, 0, 4, 1}},
			codes:   []*kerr.Error{nil, nil, nil, kerr.OutOfOrderSequenceNumber, nil},
			bases:   []int64{0, 2, 0, 0, 4},
		}}, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := openReplica(t, newTestLog(), nil, "w")
			id := mustOK(t, r, CreateTopic{Name: "t", Partitions: 2}).TopicID
			runSteps(t, r, partRef{id, 1}, c.steps)
			if st := partitionState(t, r, id, 1); st.NextOffset != c.next {
				t.Fatalf("next offset %d, want %d", st.NextOffset, c.next)
			}
			if st := partitionState(t, r, id, 0); st.NextOffset != 0 {
				t.Fatalf("partition 0 got offsets: %+v", st)
			}
		})
	}
}

// TestIdempotentWindow: the latest ProducerBatchWindow batches are
// remembered, an older one is not (Kafka answers it
// OUT_OF_ORDER_SEQUENCE_NUMBER as well).
func TestIdempotentWindow(t *testing.T) {
	r := openReplica(t, newTestLog(), nil, "w")
	ref := partRef{mustOK(t, r, CreateTopic{Name: "t", Partitions: 1}).TopicID, 0}
	var steps []step
	for i := range ProducerBatchWindow + 1 {
		steps = append(steps, one(idem{1, 0, int32(i) * 2, 2}, ok1(int64(i)*2)))
	}
	for i := 1; i <= ProducerBatchWindow; i++ {
		steps = append(steps, one(idem{1, 0, int32(i) * 2, 2}, ok1(int64(i)*2)))
	}
	steps = append(steps, one(idem{1, 0, 0, 2}, fail1(kerr.OutOfOrderSequenceNumber)))
	runSteps(t, r, ref, steps)
	if st := partitionState(t, r, ref.id, 0); st.NextOffset != 2*(ProducerBatchWindow+1) {
		t.Fatalf("next offset %d", st.NextOffset)
	}
}

// TestProducerStateExpires: state unwritten for ProducerIDExpirationMs of
// log clock is forgotten, so the producer is unknown again.
func TestProducerStateExpires(t *testing.T) {
	var nowMs atomic.Int64
	nowMs.Store(1_000_000)
	r := openReplica(t, newTestLog(), nil, "w", func(c *testConfig) {
		c.Now = func() time.Time { return time.UnixMilli(nowMs.Load()) }
	})
	ref := partRef{mustOK(t, r, CreateTopic{Name: "t", Partitions: 1}).TopicID, 0}
	runSteps(t, r, ref, []step{
		one(idem{3, 2, 0, 5}, ok1(0)),
	})
	nowMs.Add(ProducerIDExpirationMs - 1)
	runSteps(t, r, ref, []step{
		one(idem{3, 2, 0, 5}, ok1(0)), // still a duplicate
		one(idem{3, 1, 5, 1}, fail1(kerr.InvalidProducerEpoch)),
	})
	nowMs.Add(ProducerIDExpirationMs)
	// Forgotten: an older epoch and any sequence are accepted, and the
	// old batch is no longer a duplicate, as in Kafka.
	runSteps(t, r, ref, []step{
		one(idem{3, 1, 40, 1}, ok1(5)),
		one(idem{3, 1, 41, 1}, ok1(6)),
	})
}

// TestIdempotenceDeterministic: replicas on one log agree on every
// answer and on their digests, and a replica restarted over the log
// keeps refusing duplicates.
func TestIdempotenceDeterministic(t *testing.T) {
	log := newTestLog()
	dirA := NewMemStore()
	a := openReplica(t, log, dirA, "a")
	b := openReplica(t, log, nil, "b")
	ref := partRef{mustOK(t, a, CreateTopic{Name: "t", Partitions: 1}).TopicID, 0}
	pid := mustOK(t, b, AllocateProducerID{ProducerID: -1, ProducerEpoch: -1}).ProducerID
	runSteps(t, a, ref, []step{one(idem{pid, 0, 0, 3}, ok1(0))})
	runSteps(t, b, ref, []step{
		one(idem{pid, 0, 0, 3}, ok1(0)),
		one(idem{pid, 0, 3, 3}, ok1(3)),
	})
	runSteps(t, a, ref, []step{
		one(idem{pid, 0, 3, 3}, ok1(3)),
		one(idem{pid, 0, 7, 1}, fail1(kerr.OutOfOrderSequenceNumber)),
	})
	mustSync(t, a)
	mustSync(t, b)
	if da, db := mustDigest(t, a), mustDigest(t, b); da != db {
		t.Fatalf("digests differ: %x vs %x", da, db)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a = openReplica(t, log, dirA, "a")
	runSteps(t, a, ref, []step{
		one(idem{pid, 0, 3, 3}, ok1(3)),
		one(idem{pid, 0, 6, 1}, ok1(6)),
	})
}

// TestDeleteTopicDropsProducerState: a topic's producer state goes with
// it, so nothing of the topic is left in the store.
func TestDeleteTopicDropsProducerState(t *testing.T) {
	r := openReplica(t, newTestLog(), nil, "w")
	ref := partRef{mustOK(t, r, CreateTopic{Name: "t", Partitions: 1}).TopicID, 0}
	runSteps(t, r, ref, []step{one(idem{1, 0, 0, 1}, ok1(0))})
	mustOK(t, r, DeleteTopic{Name: "t"})
	v := viewOf(t, r)
	start := []byte{prefixProducerState}
	it, err := v.r.NewIter(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for ok := it.SeekGE(start); ok && it.Key()[0] == prefixProducerState; ok = it.Next() {
		t.Fatalf("producer state left after delete: %x", it.Key())
	}
}

func TestProducerCodecs(t *testing.T) {
	t.Run("command round trip", func(t *testing.T) {
		for _, c := range []AllocateProducerID{{-1, -1}, {0, 0}, {math.MaxInt64, math.MaxInt16}} {
			got, err := DecodeCommand(EncodeCommand(c))
			if err != nil || !reflect.DeepEqual(got, Command(c)) {
				t.Fatalf("round trip of %+v = %+v, %v", c, got, err)
			}
		}
	})
	t.Run("state round trip", func(t *testing.T) {
		s := producerState{Epoch: 3, LastWriteMs: 12345, Batches: []producerBatch{{0, 4, 0}, {5, 5, 10}}}
		got, err := decodeProducerState(s.encode(nil))
		if err != nil || !reflect.DeepEqual(got, s) {
			t.Fatalf("round trip of %+v = %+v, %v", s, got, err)
		}
	})
	t.Run("state over the window", func(t *testing.T) {
		s := producerState{Batches: make([]producerBatch, ProducerBatchWindow+1)}
		if _, err := decodeProducerState(s.encode(nil)); err == nil {
			t.Fatal("decoded a state of more batches than the window")
		}
	})
	t.Run("last sequence", func(t *testing.T) {
		for _, c := range []struct{ base, records, want int32 }{
			{0, 1, 0}, {0, 10, 9}, {math.MaxInt32, 1, math.MaxInt32}, {math.MaxInt32, 2, 0}, {math.MaxInt32 - 1, 4, 1},
		} {
			if got := lastSequence(c.base, c.records); got != c.want {
				t.Errorf("lastSequence(%d, %d) = %d, want %d", c.base, c.records, got, c.want)
			}
		}
	})
}
