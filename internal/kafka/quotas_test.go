package kafka

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/quota"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/replica"
)

// setQuotas sets quota key to v for each entity, through kadm.
func setQuotas(t *testing.T, a *testAgent, key string, v float64, entities ...kadm.ClientQuotaEntity) {
	t.Helper()
	var entries []kadm.AlterClientQuotaEntry
	for _, e := range entities {
		entries = append(entries, kadm.AlterClientQuotaEntry{Entity: e, Ops: []kadm.AlterClientQuotaOp{setQuota(key, v)}})
	}
	for _, r := range alterQuotas(t, a, false, entries...) {
		if r.Err != nil {
			t.Fatalf("%v: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
}

// quotaConn is a raw connection whose requests carry clientID.
type quotaConn struct {
	net.Conn
	fmt *kmsg.RequestFormatter
}

func dialAs(t *testing.T, a *testAgent, clientID string) quotaConn {
	t.Helper()
	return quotaConn{dial(t, a.addr), kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
}

func (c quotaConn) send(t *testing.T, corr int32, req kmsg.Request) {
	t.Helper()
	write(t, c.Conn, c.fmt.AppendRequest(nil, req, corr))
}

func (c quotaConn) roundTrip(t *testing.T, corr int32, req kmsg.Request) kmsg.Response {
	t.Helper()
	c.send(t, corr, req)
	resp := req.ResponseKind()
	decodeResponse(t, readFrame(t, c.Conn), resp, req.GetVersion())
	return resp
}

// TestProduceQuotaMutes: a Produce that breaks its client's
// producer_byte_rate is answered at once with throttle_time_ms set
// (KIP-219), and nothing more is read from the connection meanwhile;
// another client on the agent is neither throttled nor muted.
func TestProduceQuotaMutes(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	raiseMetadataLevel(t, a, meta.MetadataLevel4)
	setQuotas(t, a, quota.KeyProducerByteRate, 1024, quotaEntity("client-id=slow"))
	// 200 KiB against 1 KiB/s: throttled for over a minute.
	// Whether the topic exists does not matter: Kafka counts the
	// request's bytes.
	big := produceReq(9, 1, nil, rawPart{topic: "nowhere", records: batchtest.Build(t, batchtest.Options{ValueBytes: 200 << 10})})

	slow := dialAs(t, a, "slow")
	resp := slow.roundTrip(t, 1, big).(*kmsg.ProduceResponse)
	if resp.ThrottleMillis <= 0 {
		t.Fatalf("throttle_time_ms %d for 200 KiB against 1 KiB/s, want > 0", resp.ThrottleMillis)
	}
	// Muted: an ApiVersions sent now is not read. (A slow machine can
	// only make this pass wrongly, never fail: the mute lasts seconds.)
	slow.send(t, 2, kmsg.NewPtrApiVersionsRequest())
	slow.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var nerr net.Error
	if n, err := slow.Read(make([]byte, 4)); !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("a muted connection answered: %d bytes, %v", n, err)
	}

	fast := dialAs(t, a, "fast")
	if r := fast.roundTrip(t, 1, big).(*kmsg.ProduceResponse); r.ThrottleMillis != 0 {
		t.Fatalf("a client without a quota throttled %d ms", r.ThrottleMillis)
	}
	fast.roundTrip(t, 2, kmsg.NewPtrApiVersionsRequest())
}

// TestThrottleBeforeKIP219: a response version whose client does not
// throttle itself (Produce before v6) is held for the throttle time;
// from v6 it goes at once. Both mute the connection.
func TestThrottleBeforeKIP219(t *testing.T) {
	a := newTestAgent(t)
	raiseMetadataLevel(t, a, meta.MetadataLevel4)
	setQuotas(t, a, quota.KeyProducerByteRate, 1, quotaEntity("client-id="))
	for _, v := range []int16{5, 6} {
		c := &Conn{srv: a.Server}
		c.mu.principal = auth.Anonymous
		id := "v" + string(rune('0'+v))
		r := &Request{Header: Header{Key: produceKey, Version: v, ClientID: &id}, Conn: c, Deps: a.Deps}
		p := &call{}
		p.share.sizeBytes = 1000
		resp := &kmsg.ProduceResponse{Version: v}
		throttle, hold := c.enforceQuotas(r, p, resp, time.Millisecond)
		switch {
		case resp.ThrottleMillis <= 0 || throttle != time.Duration(resp.ThrottleMillis)*time.Millisecond:
			t.Errorf("v%d: throttle_time_ms %d, throttled %v, want the same, > 0", v, resp.ThrottleMillis, throttle)
		case v < 6 && hold != time.Duration(resp.ThrottleMillis)*time.Millisecond:
			t.Errorf("v%d: response held %v, want its throttle %d ms", v, hold, resp.ThrottleMillis)
		case v >= 6 && hold != 0:
			t.Errorf("v%d: response held %v, want 0 (the client throttles itself)", v, hold)
		case c.mutedUntil.Load() <= int64(time.Since(a.Server.epoch)):
			t.Errorf("v%d: connection not muted", v)
		}
	}
}

// TestRequestPercentageQuota: handling time counts against
// request_percentage, time the handler was parked does not, and
// ApiVersions is exempt.
func TestRequestPercentageQuota(t *testing.T) {
	a := newTestAgent(t)
	raiseMetadataLevel(t, a, meta.MetadataLevel4)
	// 10% of a handler: 1 s of handling over the 10 s window.
	setQuotas(t, a, quota.KeyRequestPercentage, 10, quotaEntity("client-id="))
	c := &Conn{srv: a.Server}
	c.mu.principal = auth.Anonymous
	run := func(client string, key int16, handled, waited time.Duration) int32 {
		r := &Request{Header: Header{Key: key, Version: 12, ClientID: &client}, Conn: c, Deps: a.Deps, waited: waited}
		resp := &kmsg.MetadataResponse{Version: 12}
		c.enforceQuotas(r, &call{}, resp, handled)
		return resp.ThrottleMillis
	}
	if ms := run("busy", 3, 900*time.Millisecond, 0); ms != 0 {
		t.Fatalf("0.9 s of handling against 1 s throttled %d ms", ms)
	}
	// 1.4 s over 10 s is 14%: (14-10)/10 of the 10 s window, 4 s,
	// capped at one window (1 s) as Kafka caps request throttles.
	if ms := run("busy", 3, 500*time.Millisecond, 0); ms != 1000 {
		t.Fatalf("1.4 s of handling against 1 s throttled %d ms, want the 1 s cap", ms)
	}
	if ms := run("parked", 3, 3*time.Second, 3*time.Second); ms != 0 {
		t.Fatalf("a request parked all along throttled %d ms", ms)
	}
	if ms := run("versions", apiVersionsKey, 3*time.Second, 0); ms != 0 {
		t.Fatalf("ApiVersions throttled %d ms", ms)
	}
}

// TestFetchQuota: a Fetch over its client's consumer_byte_rate is
// answered without records and with throttle_time_ms; another client
// reads the same records.
func TestFetchQuota(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	raiseMetadataLevel(t, a, meta.MetadataLevel4)
	a.createTopic(t, "f", 1, nil)
	if err := a.Client.ProduceSync(a.ctx(t), &kgo.Record{Topic: "f", Value: make([]byte, 4096)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// 10 B/s: one answer may carry 100 bytes, and the first batch
	// (KIP-74) is more.
	setQuotas(t, a, quota.KeyConsumerByteRate, 10, quotaEntity("client-id=reader"))
	req := fetchReq(11, 0, 1, 1<<20, fetchPartReq{topic: "f", maxBytes: 1 << 20})

	reader := dialAs(t, a, "reader")
	resp := reader.roundTrip(t, 1, req).(*kmsg.FetchResponse)
	parts := fetchPartitions(resp)
	if resp.ThrottleMillis <= 0 || len(parts) != 1 || len(parts[0].RecordBatches) != 0 || parts[0].HighWatermark != 1 {
		t.Fatalf("throttled fetch: throttle %d ms, partitions %+v; want > 0 ms and no records", resp.ThrottleMillis, parts)
	}
	other := dialAs(t, a, "other")
	resp = other.roundTrip(t, 1, req).(*kmsg.FetchResponse)
	if parts := fetchPartitions(resp); resp.ThrottleMillis != 0 || len(parts) != 1 || len(parts[0].RecordBatches) == 0 {
		t.Fatalf("unthrottled fetch: throttle %d ms, partitions %+v", resp.ThrottleMillis, parts)
	}
}

// TestUserQuota: a quota of a user bounds every client id of the
// user's connections together (the principal until SASL sets one comes
// from the test seam).
func TestUserQuota(t *testing.T) {
	a, _ := newDataAgent(t, nil, withDeps(func(d *Deps) {
		d.quotaUser = func(clientID string) string {
			if clientID == "alice-1" || clientID == "alice-2" {
				return "alice"
			}
			return ""
		}
	}))
	raiseMetadataLevel(t, a, meta.MetadataLevel4)
	setQuotas(t, a, quota.KeyProducerByteRate, 10_000, quotaEntity("user=alice"))
	// 60 KB each: alone within 10 s of 10 KB/s, together not.
	req := produceReq(9, 1, nil, rawPart{topic: "nowhere", records: batchtest.Build(t, batchtest.Options{ValueBytes: 60_000})})
	if r := dialAs(t, a, "alice-1").roundTrip(t, 1, req).(*kmsg.ProduceResponse); r.ThrottleMillis != 0 {
		t.Fatalf("alice's first 60 KB throttled %d ms", r.ThrottleMillis)
	}
	if r := dialAs(t, a, "bob").roundTrip(t, 1, req).(*kmsg.ProduceResponse); r.ThrottleMillis != 0 {
		t.Fatalf("bob, without a quota, throttled %d ms", r.ThrottleMillis)
	}
	if r := dialAs(t, a, "alice-2").roundTrip(t, 1, req).(*kmsg.ProduceResponse); r.ThrottleMillis == 0 {
		t.Fatal("alice's second client not throttled: the user's quota is not shared")
	}
}

// TestQuotaOnEveryAgent: a quota set through one agent is enforced by
// another agent on the same log once that agent's copy applied it.
func TestQuotaOnEveryAgent(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	raiseMetadataLevel(t, a, meta.MetadataLevel4)
	r2, err := replica.Open(a.ctx(t), replica.Config{Dir: t.TempDir(), Log: a.Log, WriterID: "agent-2", Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r2.Close() })
	// b's clock moves only when the test says, so its quota cache's
	// reread interval is the test's to pass.
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	b, _ := newDataAgent(t, nil, withMetaDB(func(*replica.Replica) MetaDB { return r2 }),
		withDeps(func(d *Deps) { d.Now = func() time.Time { return time.Unix(0, now.Load()) } }))
	req := produceReq(9, 1, nil, rawPart{topic: "nowhere", records: batchtest.Build(t, batchtest.Options{ValueBytes: 200 << 10})})
	// b reads its (empty) quotas before the change, so the change must
	// reach its cache too.
	if r := dialAs(t, b, "slow").roundTrip(t, 1, req).(*kmsg.ProduceResponse); r.ThrottleMillis != 0 {
		t.Fatalf("throttled %d ms before any quota", r.ThrottleMillis)
	}
	setQuotas(t, a, quota.KeyProducerByteRate, 1024, quotaEntity("client-id=slow"))
	if err := r2.Sync(a.ctx(t)); err != nil {
		t.Fatal(err)
	}
	// Within the reread interval b still enforces what it read...
	if r := dialAs(t, b, "slow").roundTrip(t, 1, req).(*kmsg.ProduceResponse); r.ThrottleMillis != 0 {
		t.Fatalf("throttled %d ms by a quota read before the interval passed", r.ThrottleMillis)
	}
	// ...and once it passed, what its copy applied.
	now.Add(int64(quotaReloadInterval))
	if r := dialAs(t, b, "slow").roundTrip(t, 1, req).(*kmsg.ProduceResponse); r.ThrottleMillis == 0 {
		t.Fatal("the other agent did not enforce the quota set through the first")
	}
}
