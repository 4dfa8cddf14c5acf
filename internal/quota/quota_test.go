package quota

import (
	"math"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
)

func newFakeManager(t *testing.T, cfg Config) (*Manager, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg.Clock = clk
	return NewManager(cfg), clk
}

// TestThrottleMath checks Kafka's numbers: the rate is measured over at
// least Samples-1 windows, and the throttle is the excess over the
// bound, as a share of it, times that window.
func TestThrottleMath(t *testing.T) {
	m, clk := newFakeManager(t, Config{})
	c := Client{ClientID: "p"}
	// 1000 bytes at once: 1000 over 10 windows of 1 s is 100/s.
	if d := m.Record(Produce, c, 1000, 1000); d != 0 {
		t.Fatalf("1000 bytes against 1000/s throttled %v, want 0", d)
	}
	if got := m.Rate(Produce, c); got != 100 {
		t.Fatalf("rate %v, want 100", got)
	}
	// 14000 more: 15000 over 10 s is 1500/s, half again the bound, so
	// half the 10 s window.
	if d := m.Record(Produce, c, 1000, 14000); d != 5*time.Second {
		t.Fatalf("1500/s against 1000/s throttled %v, want 5s", d)
	}
	// Once the ring spans more than its minimum the window is the time
	// since the oldest sample began: at 15 s, 15000+1000 over 15 s.
	clk.Advance(15 * time.Second)
	if d := m.Record(Produce, c, 1000, 1000); d != 0 {
		t.Fatalf("throttled %v after the bytes aged, want 0", d)
	}
	// A byte throttle is bounded, and far longer than the window.
	if d := m.Record(Produce, c, 1, 1<<30); d != MaxByteThrottle {
		t.Fatalf("huge excess throttled %v, want the cap %v", d, MaxByteThrottle)
	}
	// A request_percentage throttle is bounded by one window, as in
	// Kafka: 50 s of handling against 1%.
	if d := m.Record(Request, c, 1, 5000); d != time.Second {
		t.Fatalf("request excess throttled %v, want the cap 1s", d)
	}
}

// TestSamplesExpire: a sample a whole ring old counts for nothing.
func TestSamplesExpire(t *testing.T) {
	m, clk := newFakeManager(t, Config{})
	c := Client{User: "u"}
	m.Record(Fetch, c, 100, 50_000)
	clk.Advance(11 * time.Second)
	if got := m.Rate(Fetch, c); got != 0 {
		t.Fatalf("rate %v a ring after the only record, want 0", got)
	}
	if d := m.Record(Fetch, c, 100, 10); d != 0 {
		t.Fatalf("throttled %v by bytes a ring old", d)
	}
}

// TestUnrecord: a throttled Fetch's bytes are taken back.
func TestUnrecord(t *testing.T) {
	m, _ := newFakeManager(t, Config{})
	c := Client{ClientID: "f"}
	m.Record(Fetch, c, 1000, 500)
	if d := m.Record(Fetch, c, 1000, 20_000); d == 0 {
		t.Fatal("20500 bytes at once against 1000/s not throttled")
	}
	m.Unrecord(Fetch, c, 20_000)
	if got := m.Rate(Fetch, c); got != 50 {
		t.Fatalf("rate %v after unrecording, want 50", got)
	}
}

// TestHeldToQuota simulates a producer that sends as fast as the agent
// answers and honors every throttle, on a fake clock: after the burst an
// empty history allows (Samples-1 windows of quota, as in Kafka), it
// gets its quota within 10%, whatever its request size, also with
// several requests in flight, all read before the first is throttled.
func TestHeldToQuota(t *testing.T) {
	for _, inflight := range []int{1, 5} {
		for _, size := range []float64{1 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20} {
			m, clk := newFakeManager(t, Config{})
			c := Client{ClientID: "greedy"}
			const bound = 1 << 20 // 1 MiB/s
			start := clk.Now()
			var sent float64
			var from time.Time
			for clk.Now().Sub(start) < 80*time.Second {
				if from.IsZero() && clk.Now().Sub(start) >= 20*time.Second {
					from, sent = clk.Now(), 0
				}
				var d time.Duration
				for range inflight {
					d = max(d, m.Record(Produce, c, bound, size))
					sent += size
				}
				// A millisecond to serve the requests, then the
				// longest throttle.
				clk.Advance(time.Millisecond + d)
			}
			got := sent / clk.Now().Sub(from).Seconds()
			if math.Abs(got-bound)/bound > 0.10 {
				t.Errorf("%d in flight of %v bytes: %.0f B/s against a quota of %d B/s", inflight, size, got, bound)
			}
		}
	}
}

// TestClientsBounded: idle clients are forgotten after IdleExpiry, and
// the table never holds more than MaxClients.
func TestClientsBounded(t *testing.T) {
	m, clk := newFakeManager(t, Config{IdleExpiry: time.Minute, MaxClients: 2})
	m.Record(Produce, Client{ClientID: "a"}, 1, 1)
	clk.Advance(time.Second)
	m.Record(Produce, Client{ClientID: "b"}, 1, 1)
	clk.Advance(time.Second)
	m.Record(Produce, Client{ClientID: "c"}, 1, 1)
	if n := m.Clients(Produce); n != 2 {
		t.Fatalf("%d clients measured, want the bound 2", n)
	}
	if m.Rate(Produce, Client{ClientID: "a"}) != 0 || m.Rate(Produce, Client{ClientID: "b"}) == 0 {
		t.Fatal("the full table did not forget the client idle longest")
	}
	clk.Advance(time.Minute)
	m.Record(Request, Client{ClientID: "d"}, 1, 1)
	if n := m.Clients(Produce); n != 0 {
		t.Fatalf("%d produce clients after a minute idle, want 0", n)
	}
}

// TestResolvePrecedence: each level of Kafka's order applies until it
// is removed, then the next one does, measuring what it names.
func TestResolvePrecedence(t *testing.T) {
	user, client := meta.Named("alice"), meta.Named("app")
	def, none := meta.DefaultQuotaName, meta.QuotaName{}
	c := Client{User: "alice", ClientID: "app"}
	levels := []struct {
		e        meta.QuotaEntity
		measured Client
	}{
		{meta.QuotaEntity{User: user, ClientID: client}, c},
		{meta.QuotaEntity{User: user, ClientID: def}, c},
		{meta.QuotaEntity{User: user}, Client{User: "alice"}},
		{meta.QuotaEntity{User: def, ClientID: client}, c},
		{meta.QuotaEntity{User: def, ClientID: def}, c},
		{meta.QuotaEntity{User: def, ClientID: none}, Client{User: "alice"}},
		{meta.QuotaEntity{ClientID: client}, Client{ClientID: "app"}},
		{meta.QuotaEntity{ClientID: def}, Client{ClientID: "app"}},
	}
	// Distractors that never apply to alice/app.
	qs := []meta.ClientQuota{
		{Entity: meta.QuotaEntity{User: meta.Named("bob")}, Values: map[string]float64{KeyProducerByteRate: 1}},
		{Entity: meta.QuotaEntity{ClientID: meta.Named("other")}, Values: map[string]float64{KeyProducerByteRate: 2}},
		{Entity: meta.QuotaEntity{User: user, ClientID: meta.Named("other")}, Values: map[string]float64{KeyProducerByteRate: 3}},
	}
	distractors := len(qs)
	for i, l := range levels {
		qs = append(qs, meta.ClientQuota{Entity: l.e, Values: map[string]float64{KeyProducerByteRate: float64(100 + i)}})
	}
	for i, l := range levels {
		s := NewSet(append(qs[:distractors:distractors], qs[distractors+i:]...))
		bound, measured, ok := s.Resolve(Produce, c)
		if !ok || bound != float64(100+i) || measured != l.measured {
			t.Errorf("level %d (%+v): bound %v measured %+v ok %v, want %d %+v", i, l.e, bound, measured, ok, 100+i, l.measured)
		}
		// Another key is resolved on its own: nothing bounds fetches.
		if _, _, ok := s.Resolve(Fetch, c); ok {
			t.Errorf("level %d: a fetch quota resolved where none is set", i)
		}
	}
	s := NewSet(qs[:distractors])
	if _, _, ok := s.Resolve(Produce, c); ok {
		t.Error("alice/app resolved a quota of another user or client")
	}
}

// BenchmarkRecord is the cost a request pays for one quota it is
// measured against, with 1000 clients in the table.
func BenchmarkRecord(b *testing.B) {
	m := NewManager(Config{})
	clients := make([]Client, 1000)
	for i := range clients {
		clients[i] = Client{ClientID: "client-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26))}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		m.Record(Produce, clients[i%len(clients)], 1<<20, 1024)
	}
}

// BenchmarkResolve is the cost of finding a client's quota among
// Kafka's eight levels, the one at the bottom applying.
func BenchmarkResolve(b *testing.B) {
	s := NewSet([]meta.ClientQuota{
		{Entity: meta.QuotaEntity{ClientID: meta.DefaultQuotaName}, Values: map[string]float64{KeyProducerByteRate: 1}},
		{Entity: meta.QuotaEntity{User: meta.Named("other")}, Values: map[string]float64{KeyProducerByteRate: 1}},
	})
	c := Client{User: "ANONYMOUS", ClientID: "app"}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := s.Resolve(Produce, c); !ok {
			b.Fatal("not resolved")
		}
	}
}
