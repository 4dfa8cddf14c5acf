package kafka

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// sessionFetch is a Fetch of session id at epoch, waiting up to maxWait
// for one byte, of parts (each asking 1 MiB), forgetting forget.
func sessionFetch(version int16, id, epoch, maxWait int32, parts []fetchPartReq, forget ...fetchPartReq) *kmsg.FetchRequest {
	for i := range parts {
		parts[i].maxBytes = 1 << 20
	}
	req := fetchReq(version, maxWait, 1, 8<<20, parts...)
	req.SessionID, req.SessionEpoch = id, epoch
	for _, p := range forget {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = p.topic, p.id, []int32{p.partition}
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

// sessionAnswered lists the partitions of resp as "partition:records batches".
func sessionAnswered(t *testing.T, resp *kmsg.FetchResponse) []string {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("top-level error %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	var out []string
	for _, sp := range fetchPartitions(resp) {
		if sp.ErrorCode != 0 {
			t.Fatalf("partition %d: %v", sp.Partition, kerr.ErrorForCode(sp.ErrorCode))
		}
		out = append(out, fmt.Sprintf("%d:%d", sp.Partition, len(batchesOf(t, sp.RecordBatches))))
	}
	return out
}

func assertAnswered(t *testing.T, step string, resp *kmsg.FetchResponse, want ...string) {
	t.Helper()
	got := sessionAnswered(t, resp)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: answered %v, want %v", step, got, want)
	}
}

// An incremental fetch names only the partitions whose offset moved, and
// is answered only with the partitions that have records or news; a
// forgotten partition is no longer read; a long poll of a session wakes
// for a partition the request did not name.
func TestFetchSessionIncremental(t *testing.T) {
	for _, version := range []int16{7, 12, 13, 16} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			a, _ := newDataAgent(t, nil)
			topic := fmt.Sprintf("s%d", version)
			id := a.createTopic(t, topic, 3, nil)
			part := func(p int32, offset int64) fetchPartReq {
				if version >= 13 {
					return fetchPartReq{id: id, partition: p, offset: offset}
				}
				return fetchPartReq{topic: topic, partition: p, offset: offset}
			}
			batch := func(seed uint64) []byte {
				return batchtest.Build(t, batchtest.Options{Records: 2, ValueBytes: 10, Seed: seed})
			}
			a.produceRaw(t, topic, 0, batch(1))

			resp := a.rawRequest(t, sessionFetch(version, 0, 0, 0, []fetchPartReq{part(0, 0), part(1, 0), part(2, 0)})).(*kmsg.FetchResponse)
			assertAnswered(t, "full", resp, "0:1", "1:0", "2:0")
			sid := resp.SessionID
			if sid <= 0 {
				t.Fatalf("full fetch opened no session: id %d", sid)
			}

			// Partition 0 moved past its batch; nothing else changed.
			resp = a.rawRequest(t, sessionFetch(version, sid, 1, 0, []fetchPartReq{part(0, 2)})).(*kmsg.FetchResponse)
			assertAnswered(t, "caught up", resp)
			if resp.SessionID != sid {
				t.Fatalf("incremental answered session %d, want %d", resp.SessionID, sid)
			}

			// A record in partition 1, which the request does not name.
			a.produceRaw(t, topic, 1, batch(2))
			resp = a.rawRequest(t, sessionFetch(version, sid, 2, 0, nil)).(*kmsg.FetchResponse)
			assertAnswered(t, "new data", resp, "1:1")
			if sp := fetchPartitions(resp)[0]; sp.HighWatermark != 2 {
				t.Fatalf("partition 1 high watermark %d, want 2", sp.HighWatermark)
			}

			// Not moving past it: the same records again.
			resp = a.rawRequest(t, sessionFetch(version, sid, 3, 0, nil)).(*kmsg.FetchResponse)
			assertAnswered(t, "not moved", resp, "1:1")

			// Forget partition 1; its new records are no longer read.
			resp = a.rawRequest(t, sessionFetch(version, sid, 4, 0, nil, part(1, 0))).(*kmsg.FetchResponse)
			assertAnswered(t, "forget", resp)
			a.produceRaw(t, topic, 1, batch(3))
			resp = a.rawRequest(t, sessionFetch(version, sid, 5, 0, nil)).(*kmsg.FetchResponse)
			assertAnswered(t, "forgotten", resp)

			// A long poll wakes for partition 2, which only the
			// session names.
			done := make(chan *kmsg.FetchResponse, 1)
			go func() {
				done <- a.rawRequest(t, sessionFetch(version, sid, 6, int32(guard/time.Millisecond), nil)).(*kmsg.FetchResponse)
			}()
			a.produceRaw(t, topic, 2, batch(4))
			assertAnswered(t, "long poll", <-done, "2:1")
		})
	}
}

// Epochs and ids are checked with Kafka's error codes, and a full fetch
// naming a session closes it.
func TestFetchSessionErrors(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	id := a.createTopic(t, "e", 1, nil)
	byName := []fetchPartReq{{topic: "e"}}
	resp := a.rawRequest(t, sessionFetch(12, 0, 0, 0, byName)).(*kmsg.FetchResponse)
	sid := resp.SessionID
	if sid <= 0 {
		t.Fatalf("no session: id %d", sid)
	}
	for _, tt := range []struct {
		name      string
		req       *kmsg.FetchRequest
		wantCode  int16
		wantTopic bool
	}{
		{"unknown session", sessionFetch(12, sid+1, 1, 0, nil), kerr.FetchSessionIDNotFound.Code, false},
		{"epoch ahead", sessionFetch(12, sid, 2, 0, nil), kerr.InvalidFetchSessionEpoch.Code, false},
		{"by id in a session by name", sessionFetch(13, sid, 1, 0, nil), kerr.FetchSessionTopicIDError.Code, false},
		{"right epoch", sessionFetch(12, sid, 1, 0, nil), 0, false},
		{"same epoch again", sessionFetch(12, sid, 1, 0, nil), kerr.InvalidFetchSessionEpoch.Code, false},
		{"next epoch", sessionFetch(12, sid, 2, 0, nil), 0, false},
		// Epoch -1 fetches without a session, and closes this one.
		{"close", sessionFetch(12, sid, -1, 0, byName), 0, true},
		{"closed", sessionFetch(12, sid, 3, 0, nil), kerr.FetchSessionIDNotFound.Code, false},
	} {
		resp := a.rawRequest(t, tt.req).(*kmsg.FetchResponse)
		if resp.ErrorCode != tt.wantCode || (len(resp.Topics) > 0) != tt.wantTopic {
			t.Fatalf("%s: code %v, %d topics; want %v, topics %v", tt.name, kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics), kerr.ErrorForCode(tt.wantCode), tt.wantTopic)
		}
	}

	// Epoch 0 with an id closes that session and opens another.
	resp = a.rawRequest(t, sessionFetch(16, 0, 0, 0, []fetchPartReq{{id: id}})).(*kmsg.FetchResponse)
	old := resp.SessionID
	resp = a.rawRequest(t, sessionFetch(16, old, 0, 0, []fetchPartReq{{id: id}})).(*kmsg.FetchResponse)
	if resp.SessionID <= 0 || resp.SessionID == old {
		t.Fatalf("reopened session %d, want a new one besides %d", resp.SessionID, old)
	}
	if resp := a.rawRequest(t, sessionFetch(16, old, 1, 0, nil)).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("reopened session's old id: %v, want FETCH_SESSION_ID_NOT_FOUND", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// The cache holds at most its slots: a new session evicts an idle one,
// else a smaller one, else it is not opened (SessionID 0).
func TestFetchSessionCacheEviction(t *testing.T) {
	var nowMs atomic.Int64
	a, _ := newDataAgent(t, nil, withDeps(func(d *Deps) { d.Now = func() time.Time { return time.UnixMilli(nowMs.Load()) } }))
	a.Server.cfg.Deps.shared.sessions = newFetchSessionCache(a.Server.cfg.Deps.now, 2, 100)
	a.createTopic(t, "c", 4, nil)
	open := func(partitions int32) int32 {
		nowMs.Add(1) // the sessions' last use in opening order
		var parts []fetchPartReq
		for p := range partitions {
			parts = append(parts, fetchPartReq{topic: "c", partition: p})
		}
		return a.rawRequest(t, sessionFetch(12, 0, 0, 0, parts)).(*kmsg.FetchResponse).SessionID
	}
	alive := func(id int32) bool {
		resp := a.rawRequest(t, sessionFetch(12, id, 1, 0, nil)).(*kmsg.FetchResponse)
		return resp.ErrorCode != kerr.FetchSessionIDNotFound.Code
	}
	s2, s3 := open(2), open(3)
	if s2 <= 0 || s3 <= 0 {
		t.Fatalf("sessions %d %d, want two", s2, s3)
	}
	if s := open(1); s != 0 {
		t.Fatalf("a smaller session got a slot in a full cache: %d", s)
	}
	s4 := open(4)
	if s4 <= 0 || alive(s2) {
		t.Fatalf("a larger session did not evict the smallest: new %d, smallest still alive", s4)
	}
	// Both left are larger than a new session of one partition; once
	// idle for the eviction time, the least recently used goes.
	nowMs.Add(fetchSessionEvictionIdle.Milliseconds())
	s1 := open(1)
	if s1 <= 0 || alive(s3) || !alive(s4) {
		t.Fatalf("after the idle time: new %d, want the least recently used (%d) evicted, %d kept", s1, s3, s4)
	}
	c := a.Server.cfg.Deps.shared.sessions
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mu.sessions) != 2 || c.mu.parts != 5 {
		t.Fatalf("cache holds %d sessions of %d partitions, want 2 of 5", len(c.mu.sessions), c.mu.parts)
	}
}

// A kgo consumer of many partitions, which uses fetch sessions by
// default, reads every record through incremental fetches.
func TestFetchSessionKgoConsumer(t *testing.T) {
	const partitions = 200
	a, _ := newDataAgent(t, nil)
	a.createTopic(t, "many", partitions, nil)
	cl := a.kgoClient(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"many": allAtStart(partitions)}))
	ctx := a.ctx(t)
	seen := make(map[string]bool)
	for round := range 3 {
		a.produceSpread(t, "many", partitions, round*1000, 1000)
		for len(seen) < (round+1)*1000 {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("round %d: %d records before the guard", round, len(seen))
			}
			for _, fe := range fs.Errors() {
				t.Fatalf("fetch %s[%d]: %v", fe.Topic, fe.Partition, fe.Err)
			}
			for _, r := range fs.Records() {
				if seen[string(r.Key)] {
					t.Fatalf("record %s twice", r.Key)
				}
				seen[string(r.Key)] = true
			}
		}
	}
	c := a.Server.cfg.Deps.shared.sessions
	c.mu.Lock()
	defer c.mu.Unlock()
	var epochs []int32
	for _, s := range c.mu.sessions {
		epochs = append(epochs, s.epoch)
	}
	if len(epochs) != 1 || epochs[0] < 3 {
		t.Fatalf("session epochs %v, want one session past its first incremental fetches", epochs)
	}
}

func allAtStart(partitions int32) map[int32]kgo.Offset {
	offs := make(map[int32]kgo.Offset)
	for p := range partitions {
		offs[p] = kgo.NewOffset().AtStart()
	}
	return offs
}

// With NoFetchSessions a full fetch opens no session (SessionID 0), and
// the client goes on with full fetches.
func TestFetchSessionNone(t *testing.T) {
	a, _ := newDataAgent(t, nil, func(c *agentConfig) { c.Server.FetchSessionSlots = NoFetchSessions })
	a.createTopic(t, "n", 1, nil)
	resp := a.rawRequest(t, sessionFetch(12, 0, 0, 0, []fetchPartReq{{topic: "n"}})).(*kmsg.FetchResponse)
	assertAnswered(t, "full", resp, "0:0")
	if resp.SessionID != 0 {
		t.Fatalf("opened session %d with no session slots", resp.SessionID)
	}
	if resp := a.rawRequest(t, sessionFetch(12, 1, 1, 0, nil)).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("incremental fetch: %v, want FETCH_SESSION_ID_NOT_FOUND", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// The long poll of a session caught up on many partitions reads again
// only the partition that changed, not the session's every partition.
func TestFetchSessionLongPollReadsChanged(t *testing.T) {
	const partitions = 100
	spy := &spyNotifier{calls: make(chan struct{}, 4)}
	a, _ := newDataAgent(t, nil, withSpy(spy))
	a.createTopic(t, "lp", partitions, nil)
	var parts []fetchPartReq
	for p := range int32(partitions) {
		parts = append(parts, fetchPartReq{topic: "lp", partition: p})
	}
	sid := a.rawRequest(t, sessionFetch(12, 0, 0, 0, parts)).(*kmsg.FetchResponse).SessionID
	// The first incremental fetch reads every partition once (the
	// session's watch began after the full fetch read them).
	assertAnswered(t, "settle", a.rawRequest(t, sessionFetch(12, sid, 1, 0, nil)).(*kmsg.FetchResponse))

	done := make(chan *kmsg.FetchResponse, 1)
	go func() {
		done <- a.rawRequest(t, sessionFetch(12, sid, 2, int32(guard/time.Millisecond), nil)).(*kmsg.FetchResponse)
	}()
	spy.waitCall(t)
	a.produceRaw(t, "lp", 7, batchtest.Build(t, batchtest.Options{Records: 1, ValueBytes: 10}))
	assertAnswered(t, "long poll", <-done, "7:1")
	st := a.obs.waitFetchWaited(t)
	if st.Wakeups < 1 || st.PartitionsRechecked > st.Wakeups {
		t.Fatalf("long poll: %d wake-ups read %d partitions again, want at most one each", st.Wakeups, st.PartitionsRechecked)
	}
}

// A session in use by a long poll is neither used by another fetch
// (INVALID_FETCH_SESSION_EPOCH: the one in use moves it past that epoch)
// nor evicted to make room for a new one.
func TestFetchSessionInUse(t *testing.T) {
	spy := &spyNotifier{calls: make(chan struct{}, 4)}
	a, _ := newDataAgent(t, nil, withSpy(spy))
	a.Server.cfg.Deps.shared.sessions = newFetchSessionCache(a.Server.cfg.Deps.now, 1, 100)
	a.createTopic(t, "u", 2, nil)
	sid := a.rawRequest(t, sessionFetch(12, 0, 0, 0, []fetchPartReq{{topic: "u"}})).(*kmsg.FetchResponse).SessionID
	assertAnswered(t, "settle", a.rawRequest(t, sessionFetch(12, sid, 1, 0, nil)).(*kmsg.FetchResponse))

	done := make(chan *kmsg.FetchResponse, 1)
	go func() {
		done <- a.rawRequest(t, sessionFetch(12, sid, 2, int32(guard/time.Millisecond), nil)).(*kmsg.FetchResponse)
	}()
	spy.waitCall(t)
	if resp := a.rawRequest(t, sessionFetch(12, sid, 3, 0, nil)).(*kmsg.FetchResponse); resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("fetch of a session in use: %v, want INVALID_FETCH_SESSION_EPOCH", kerr.ErrorForCode(resp.ErrorCode))
	}
	// Larger, so it would evict the session were it idle.
	if resp := a.rawRequest(t, sessionFetch(12, 0, 0, 0, []fetchPartReq{{topic: "u"}, {topic: "u", partition: 1}})).(*kmsg.FetchResponse); resp.SessionID != 0 {
		t.Fatalf("a new session evicted the one in use: opened %d", resp.SessionID)
	}
	a.produceRaw(t, "u", 0, batchtest.Build(t, batchtest.Options{Records: 1, ValueBytes: 10}))
	assertAnswered(t, "long poll", <-done, "0:1")
	assertAnswered(t, "after the long poll", a.rawRequest(t, sessionFetch(12, sid, 3, 0, []fetchPartReq{{topic: "u", offset: 1}})).(*kmsg.FetchResponse))
}
