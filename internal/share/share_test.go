package share

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/recordbatch"
)

func TestSessionEpochs(t *testing.T) {
	p := func(n int32) meta.PartitionRef { return meta.PartitionRef{TopicID: meta.TopicID{1}, Partition: n} }
	s := newSessions(2)
	k := sessionKey{"g", "m"}
	if _, e := s.update(k, 1, nil, nil); e != kerr.ShareSessionNotFound {
		t.Fatalf("update of no session: %v, want SHARE_SESSION_NOT_FOUND", e)
	}
	ss, e := s.open(k, 7, []meta.PartitionRef{p(0), p(1), p(0)})
	if e != nil || ss.epoch != 1 || !reflect.DeepEqual(ss.parts, []meta.PartitionRef{p(0), p(1)}) {
		t.Fatalf("open: %+v %v, want epoch 1 over p0, p1", ss, e)
	}
	if _, e := s.update(k, 2, nil, nil); e != kerr.InvalidShareSessionEpoch {
		t.Fatalf("update at epoch 2 of a session at 1: %v, want INVALID_SHARE_SESSION_EPOCH", e)
	}
	s.answered(k, []meta.PartitionRef{p(0), p(1)})
	ss, e = s.update(k, 1, []meta.PartitionRef{p(2)}, []meta.PartitionRef{p(0)})
	if e != nil || ss.epoch != 2 || !reflect.DeepEqual(ss.parts, []meta.PartitionRef{p(1), p(2)}) || ss.fresh[p(1)] || !ss.fresh[p(2)] {
		t.Fatalf("update: %+v %v, want epoch 2 over p1, p2 (p2 fresh)", ss, e)
	}
	if _, e := s.check(k, 2); e != nil {
		t.Fatalf("check at epoch 2: %v", e)
	}
	// The limit: a second session fits, a third does not; reopening an
	// existing key does not count twice.
	if _, e := s.open(sessionKey{"g", "m2"}, 8, nil); e != nil {
		t.Fatalf("second session: %v", e)
	}
	if _, e := s.open(sessionKey{"g", "m3"}, 8, nil); e != kerr.ShareSessionLimitReached {
		t.Fatalf("third session: %v, want SHARE_SESSION_LIMIT_REACHED", e)
	}
	if _, e := s.open(k, 7, nil); e != nil {
		t.Fatalf("reopening: %v", e)
	}
	closed := s.closeConn(8)
	if len(closed) != 1 || s.len() != 1 {
		t.Fatalf("closeConn(8) closed %v, %d left; want m2 closed, 1 left", closed, s.len())
	}
	if _, e := s.close(k); e != nil {
		t.Fatalf("close: %v", e)
	}
	if _, e := s.close(k); e != kerr.ShareSessionNotFound {
		t.Fatalf("second close: %v, want SHARE_SESSION_NOT_FOUND", e)
	}
	if nextEpoch(1<<31-1) != 1 {
		t.Fatalf("the epoch after MaxInt32 is %d, want 1", nextEpoch(1<<31-1))
	}
}

// fakeBatch is one batch of the fake log.
type fakeBatch struct {
	base, last int64
	control    bool
}

// fakeFetcher serves fixed batches of every partition.
type fakeFetcher struct {
	batches []fakeBatch
	reads   int
}

func (f *fakeFetcher) ReadUpTo(_ context.Context, view *meta.View, id meta.TopicID, p int32, offset int64, maxBytes int32, upTo int64) (fetch.FetchResult, error) {
	f.reads++
	ps, _, err := view.Partition(id, p)
	if err != nil {
		return fetch.FetchResult{}, err
	}
	res := fetch.FetchResult{HighWatermark: ps.HighWatermark(), LogStartOffset: ps.LogStartOffset}
	for _, b := range f.batches {
		if b.last < offset || b.base >= upTo {
			continue
		}
		if b.control {
			res.Records = recordbatch.AppendControlBatch(res.Records, 1, 0, true, b.base, 0, 0)
			continue
		}
		var recs []byte
		n := int32(b.last - b.base + 1)
		for i := range n {
			recs = recordbatch.AppendRecord(recs, recordbatch.Record{Offset: b.base + int64(i), Value: []byte(fmt.Sprint(b.base + int64(i)))}, b.base, 0)
		}
		res.Records = recordbatch.AppendBatch(res.Records, recordbatch.BatchSpec{BaseOffset: b.base, LastOffsetDelta: n - 1,
			NumRecords: n, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		if len(res.Records) >= int(maxBytes) {
			break
		}
	}
	return res, nil
}

type fixedConfigs Config

func (c fixedConfigs) ShareConfig(string) (Config, error) { return Config(c), nil }

// shareFixture is a metadata copy at level 9 with topic t of one
// partition holding records 0..hw-1, and a Server over it.
type shareFixture struct {
	db    *metatest.DB
	srv   *Server
	topic meta.TopicID
	clk   *clock.Fake
}

func newFixture(t *testing.T, hw int32, batches []fakeBatch, cfg Config) *shareFixture {
	t.Helper()
	f := &shareFixture{clk: clock.NewFake(time.UnixMilli(1_000_000))}
	f.db = metatest.New(f.clk.Now)
	f.db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.LevelShareGroups}}})
	f.topic = f.db.MustPropose(t, meta.CreateTopic{Name: "t", Partitions: 1}).TopicID
	f.db.MustPropose(t, meta.CommitObject{ObjectKey: "o", ObjectSize: 100, Batches: []meta.CommitBatch{{TopicID: f.topic, Length: 100,
		Records: hw, BatchCount: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}}})
	f.srv = NewServer(Options{Meta: f.db, Fetch: &fakeFetcher{batches: batches}, Configs: fixedConfigs(cfg), Clock: f.clk})
	t.Cleanup(func() { f.srv.Close(context.Background()) })
	return f
}

func allowAll(meta.TopicID) int16 { return 0 }

// fetchReq is a ShareFetch of partition 0 of topic t.
func (f *shareFixture) fetchReq(member string, epoch int32, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 2
	req.GroupID, req.MemberID = kmsg.StringPtr("g"), kmsg.StringPtr(member)
	req.ShareSessionEpoch = epoch
	req.MaxRecords = 500
	tp := kmsg.NewShareFetchRequestTopicPartition()
	tp.AcknowledgementBatches = acks
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = f.topic
	rt.Partitions = append(rt.Partitions, tp)
	req.Topics = append(req.Topics, rt)
	return req
}

// acquired returns the response's acquired ranges of partition 0 as
// "first-last/count" and its codes.
func acquired(t *testing.T, resp *kmsg.ShareFetchResponse) (got []string, code, ackCode int16) {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("ShareFetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			for _, a := range p.AcquiredRecords {
				got = append(got, fmt.Sprintf("%d-%d/%d", a.FirstOffset, a.LastOffset, a.DeliveryCount))
			}
			code, ackCode = p.ErrorCode, p.AcknowledgeErrorCode
		}
	}
	return got, code, ackCode
}

func ackBatch(first, last int64, types ...int8) kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
	b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
	b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = first, last, types
	return b
}

func TestFetchAcquireAckRedeliver(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AutoOffsetReset = "earliest"
	// 0-3 data, 4 a control batch, 5-9 data.
	f := newFixture(t, 10, []fakeBatch{{0, 3, false}, {4, 4, true}, {5, 9, false}}, cfg)
	ctx := context.Background()

	resp := f.srv.Fetch(ctx, 1, f.fetchReq("m1", 0), allowAll)
	if got, _, _ := acquired(t, resp); !reflect.DeepEqual(got, []string{"0-3/1", "5-9/1"}) {
		t.Fatalf("m1 acquired %v, want 0-3 and 5-9 (the control record at 4 is no delivery)", got)
	}
	if resp.AcquisitionLockTimeoutMillis != 30000 {
		t.Fatalf("AcquisitionLockTimeoutMillis %d, want 30000", resp.AcquisitionLockTimeoutMillis)
	}
	h, err := recordbatch.ParseHeader(resp.Topics[0].Partitions[0].Records)
	if err != nil || h.BaseOffset != 0 || h.IsControl() {
		t.Fatalf("the first batch returned: %+v %v, want the data batch at 0", h, err)
	}
	// Another member finds nothing left.
	if got, _, _ := acquired(t, f.srv.Fetch(ctx, 2, f.fetchReq("m2", 0), allowAll)); len(got) != 0 {
		t.Fatalf("m2 acquired %v while m1 holds everything", got)
	}
	// m1 accepts 0-3 and releases 5-9 in its next fetch (epoch 1); a
	// new session cannot carry acks; a wrong epoch is refused.
	if r := f.srv.Fetch(ctx, 1, f.fetchReq("m1", 0, ackBatch(0, 3, 1)), allowAll); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("acks in an epoch-0 fetch: %v, want INVALID_REQUEST", kerr.ErrorForCode(r.ErrorCode))
	}
	// Refused before it replaced anything (Kafka checks the acks
	// first): the session stays at epoch 1.
	if r := f.srv.Fetch(ctx, 1, f.fetchReq("m1", 5), allowAll); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("epoch 5: %v, want INVALID_SHARE_SESSION_EPOCH", kerr.ErrorForCode(r.ErrorCode))
	}
	got, _, ackCode := acquired(t, f.srv.Fetch(ctx, 1, f.fetchReq("m1", 1, ackBatch(0, 3, 1), ackBatch(5, 9, 2)), allowAll))
	if ackCode != 0 || !reflect.DeepEqual(got, []string{"5-9/2"}) {
		t.Fatalf("after accepting 0-3 and releasing 5-9, m1 got %v (ack code %d), want 5-9 again with delivery count 2", got, ackCode)
	}
	// m2 acknowledging m1's records is INVALID_RECORD_STATE.
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = kmsg.StringPtr("g"), kmsg.StringPtr("m2"), 1
	at := kmsg.NewShareAcknowledgeRequestTopic()
	at.TopicID = f.topic
	ap := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = 5, 9, []int8{1}
	ap.AcknowledgementBatches = append(ap.AcknowledgementBatches, ab)
	at.Partitions = append(at.Partitions, ap)
	ack.Topics = append(ack.Topics, at)
	ar := f.srv.Acknowledge(ctx, 2, ack, allowAll)
	if ar.ErrorCode != 0 || len(ar.Topics) != 1 || ar.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecordState.Code {
		t.Fatalf("m2 acknowledging m1's records: %+v, want INVALID_RECORD_STATE for the partition", ar)
	}
	// m1's connection drops: its records are released at once.
	f.srv.ConnClosed(1)
	f.srv.releases.Wait()
	if got, _, _ := acquired(t, f.srv.Fetch(ctx, 2, f.fetchReq("m2", 2), allowAll)); !reflect.DeepEqual(got, []string{"5-9/3"}) {
		t.Fatalf("after m1's connection dropped, m2 got %v, want 5-9 with delivery count 3", got)
	}
	v := f.db.View()
	defer v.Close()
	st, ok, err := v.ShareState("g", f.topic, 0)
	if err != nil || !ok || st.StartOffset != 5 || st.EndOffset != 10 {
		t.Fatalf("share state %+v %v %v, want SPSO 5 (0-3 accepted, 4 archived) and SPEO 10", st, ok, err)
	}
}

func TestFetchLimits(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AutoOffsetReset = "earliest"
	cfg.MaxRecordLocks = 100
	batches := []fakeBatch{{0, 9, false}, {10, 19, false}, {20, 199, false}}
	ctx := context.Background()

	t.Run("batch optimized takes whole batches", func(t *testing.T) {
		f := newFixture(t, 200, batches, cfg)
		req := f.fetchReq("m", 0)
		req.MaxRecords, req.BatchSize = 15, 4
		got, _, _ := acquired(t, f.srv.Fetch(ctx, 1, req, allowAll))
		want := []string{"0-3/1", "4-7/1", "8-11/1", "12-15/1", "16-19/1"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("MaxRecords 15, BatchSize 4: %v, want %v", got, want)
		}
	})
	t.Run("record limit is exact", func(t *testing.T) {
		f := newFixture(t, 200, batches, cfg)
		req := f.fetchReq("m", 0)
		req.MaxRecords, req.ShareAcquireMode = 15, acquireRecordLimit
		if got, _, _ := acquired(t, f.srv.Fetch(ctx, 1, req, allowAll)); !reflect.DeepEqual(got, []string{"0-14/1"}) {
			t.Fatalf("RECORD_LIMIT 15: %v, want 0-14", got)
		}
	})
	t.Run("the record-lock cap stops acquisition", func(t *testing.T) {
		f := newFixture(t, 200, batches, cfg)
		req := f.fetchReq("m", 0)
		req.MaxRecords = 1000
		if got, _, _ := acquired(t, f.srv.Fetch(ctx, 1, req, allowAll)); !reflect.DeepEqual(got, []string{"0-99/1"}) {
			t.Fatalf("cap 100: %v, want 0-99", got)
		}
		if got, _, _ := acquired(t, f.srv.Fetch(ctx, 2, f.fetchReq("m2", 0), allowAll)); len(got) != 0 {
			t.Fatalf("at the cap a second member got %v, want nothing", got)
		}
	})
	t.Run("latest starts at the high watermark", func(t *testing.T) {
		c := cfg
		c.AutoOffsetReset = "latest"
		f := newFixture(t, 200, batches, c)
		if got, _, _ := acquired(t, f.srv.Fetch(ctx, 1, f.fetchReq("m", 0), allowAll)); len(got) != 0 {
			t.Fatalf("latest: %v, want nothing (no record after the start)", got)
		}
	})
	t.Run("a topic the client may not read", func(t *testing.T) {
		f := newFixture(t, 200, batches, cfg)
		deny := func(meta.TopicID) int16 { return kerr.TopicAuthorizationFailed.Code }
		if got, code, _ := acquired(t, f.srv.Fetch(ctx, 1, f.fetchReq("m", 0), deny)); len(got) != 0 || code != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("denied topic: %v code %d, want nothing and TOPIC_AUTHORIZATION_FAILED", got, code)
		}
	})
	t.Run("a classic group holds the id", func(t *testing.T) {
		f := newFixture(t, 200, batches, cfg)
		f.db.MustPropose(t, meta.OffsetCommit{Group: "g", Generation: -1, RetentionMs: -1,
			Offsets: []meta.OffsetCommitPartition{{Topic: "t", Offset: 1, LeaderEpoch: -1, CommitTimestamp: -1}}})
		if r := f.srv.Fetch(ctx, 1, f.fetchReq("m", 0), allowAll); r.ErrorCode != kerr.GroupIDNotFound.Code {
			t.Fatalf("classic group under the id: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(r.ErrorCode))
		}
	})
}

func TestLockExpiryByLogClock(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AutoOffsetReset = "earliest"
	cfg.RecordLock = 15 * time.Second
	f := newFixture(t, 5, []fakeBatch{{0, 4, false}}, cfg)
	ctx := context.Background()
	if got, _, _ := acquired(t, f.srv.Fetch(ctx, 1, f.fetchReq("m1", 0), allowAll)); !reflect.DeepEqual(got, []string{"0-4/1"}) {
		t.Fatalf("m1 got %v", got)
	}
	f.clk.Advance(14 * time.Second)
	if got, _, _ := acquired(t, f.srv.Fetch(ctx, 2, f.fetchReq("m2", 0), allowAll)); len(got) != 0 {
		t.Fatalf("before the lock ends m2 got %v", got)
	}
	f.clk.Advance(2 * time.Second)
	if got, _, _ := acquired(t, f.srv.Fetch(ctx, 2, f.fetchReq("m2", 1), allowAll)); !reflect.DeepEqual(got, []string{"0-4/2"}) {
		t.Fatalf("after the lock ended m2 got %v, want 0-4 with delivery count 2", got)
	}
	// m1's late accept fails.
	_, _, ackCode := acquired(t, f.srv.Fetch(ctx, 1, f.fetchReq("m1", 1, ackBatch(0, 4, 1)), allowAll))
	if ackCode != kerr.InvalidRecordState.Code {
		t.Fatalf("m1's accept after its lock ended: ack code %d, want INVALID_RECORD_STATE", ackCode)
	}
}

func TestParseISODurationViaConfig(t *testing.T) {
	for _, tc := range []struct {
		reset string
		kind  resetKind
		d     time.Duration
		bad   bool
	}{
		{"latest", resetLatest, 0, false},
		{"earliest", resetEarliest, 0, false},
		{"by_duration:PT1H30M", resetByDuration, 90 * time.Minute, false},
		{"by_duration:P1D", resetByDuration, 24 * time.Hour, false},
		{"by_duration:1h", 0, 0, true},
		{"oldest", 0, 0, true},
	} {
		c := DefaultConfig()
		c.AutoOffsetReset = tc.reset
		kind, d, err := c.reset()
		if (err != nil) != tc.bad || (!tc.bad && (kind != tc.kind || d != tc.d)) {
			t.Errorf("%q: %v %v %v", tc.reset, kind, d, err)
		}
	}
}

// TestSessionCloseReleases: a ShareFetch at epoch -1 applies its
// acknowledgements, closes the session and releases what the member
// still held; the session is gone after.
func TestSessionCloseReleases(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AutoOffsetReset = "earliest"
	f := newFixture(t, 10, []fakeBatch{{0, 4, false}, {5, 9, false}}, cfg)
	ctx := context.Background()
	if got, _, _ := acquired(t, f.srv.Fetch(ctx, 1, f.fetchReq("m1", 0), allowAll)); !reflect.DeepEqual(got, []string{"0-9/1"}) {
		t.Fatalf("m1 got %v", got)
	}
	closeReq := f.fetchReq("m1", -1, ackBatch(0, 4, 1))
	if _, _, ackCode := acquired(t, f.srv.Fetch(ctx, 1, closeReq, allowAll)); ackCode != 0 {
		t.Fatalf("closing with an accept of 0-4: ack code %d", ackCode)
	}
	if r := f.srv.Fetch(ctx, 1, f.fetchReq("m1", 1), allowAll); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("a fetch in the closed session: %v, want SHARE_SESSION_NOT_FOUND", kerr.ErrorForCode(r.ErrorCode))
	}
	if got, _, _ := acquired(t, f.srv.Fetch(ctx, 2, f.fetchReq("m2", 0), allowAll)); !reflect.DeepEqual(got, []string{"5-9/2"}) {
		t.Fatalf("after m1 closed its session m2 got %v, want 5-9 (released) with delivery count 2, not 0-4 (accepted)", got)
	}
}
