package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// yieldDriver drives a fetchYield window by window on a fake clock with
// made-up scheduling waits.
type yieldDriver struct {
	t           *testing.T
	y           *fetchYield
	now         time.Time
	waits, slow uint64
}

func newYieldDriver(t *testing.T) *yieldDriver {
	d := &yieldDriver{t: t, now: time.Unix(1_700_000_000, 0)}
	d.y = newFetchYield(func() time.Time { return d.now }, func() (uint64, uint64) {
		w, s := d.waits, d.slow
		d.waits, d.slow = 0, 0
		return w, s
	})
	return d
}

// window sends bytesPerSec of records through the pace for one window,
// with other requests or not, then ends the window having seen waits of
// which slow were slow, and returns the new rate.
func (d *yieldDriver) window(bytesPerSec float64, others bool, waits, slow uint64) float64 {
	d.y.reserve(int64(bytesPerSec*yieldWindow.Seconds()), false)
	if others {
		d.y.others.Add(1)
	}
	d.now = d.now.Add(yieldWindow)
	d.waits, d.slow = waits, slow
	d.y.reserve(0, false)
	return d.rate()
}

func (d *yieldDriver) rate() float64 {
	d.y.mu.Lock()
	defer d.y.mu.Unlock()
	return d.y.mu.rate
}

// TestFetchYieldRate checks how the adaptive fetch pace moves: off while
// too few waits were seen to judge, while no other request arrives
// however slow the waits, and while few waits are slow; once others
// arrive and the share of slow waits passes the target, on at half what
// fetches carry, halved again while the share stays far above it, never
// below the floor; then grown by at most yieldMaxIncrease a window once
// the share is below the target, and off again once it is twice what
// fetches carry, or when other requests stop.
func TestFetchYieldRate(t *testing.T) {
	const carried = 600e6
	if r := newYieldDriver(t).window(carried, false, 1000, 500); r != 0 {
		t.Fatalf("slow waits, no other requests: rate %.0f, want off", r)
	}
	if r := newYieldDriver(t).window(carried, true, yieldMinWaits/2, yieldMinWaits/2); r != 0 {
		t.Fatalf("too few waits to judge: rate %.0f, want off", r)
	}
	d := newYieldDriver(t)
	if r := d.window(carried, true, 1000, 1); r != 0 {
		t.Fatalf("others, 0.1%% slow waits: rate %.0f, want off", r)
	}
	r := d.window(carried, true, 1000, 100)
	if r != carried*yieldMaxDecrease {
		t.Fatalf("others, 10%% slow waits: rate %.0f, want %.0f", r, carried*yieldMaxDecrease)
	}
	for prev := r; prev > yieldFloorBytesPerSec; prev = r {
		r = d.window(carried, true, 1000, 100)
		if want := max(yieldFloorBytesPerSec, prev*yieldMaxDecrease); r != want {
			t.Fatalf("still 10%% slow waits: rate %.0f, want %.0f", r, want)
		}
	}
	// No slow waits: the smoothed share falls below the target, and the
	// rate grows from then on, by at most yieldMaxIncrease a window.
	var grew int
	for range 50 {
		prev := r
		if r = d.window(carried, true, 1000, 0); r > prev {
			grew++
			if r > prev*yieldMaxIncrease*(1+1e-9) {
				t.Fatalf("rate grew from %.0f to %.0f in a window", prev, r)
			}
		}
		if r == 0 {
			t.Fatalf("pace off while fetches carry %.0f", carried)
		}
	}
	if grew < 10 || r < 200e6 {
		t.Fatalf("rate grew in %d of 50 windows without slow waits, to %.0f", grew, r)
	}
	for i := 0; r != 0; i++ {
		if i == 50 {
			t.Fatalf("pace still on at %.0f when fetches carry 1 MB/s", r)
		}
		r = d.window(1e6, true, 1000, 0)
	}

	d.window(carried, true, 1000, 100)
	if d.rate() == 0 {
		t.Fatal("pace did not engage again")
	}
	for range int(yieldIdle / yieldWindow) {
		if r := d.window(carried, false, 1000, 100); r == 0 {
			t.Fatal("pace off before others were gone for yieldIdle")
		}
	}
	if r := d.window(carried, false, 1000, 100); r != 0 {
		t.Fatalf("no other request for %v: rate %.0f, want off", yieldIdle, r)
	}
}

// TestFetchYieldKeepsUpWithProducers checks that however contended, the
// pace stays at twice the rate Produce requests bring bytes in, when that
// is above the floor, so consumers paced down still keep up.
func TestFetchYieldKeepsUpWithProducers(t *testing.T) {
	const produced = 100e6
	d := newYieldDriver(t)
	for range 30 {
		d.y.produced.Add(int64(produced * yieldWindow.Seconds()))
		d.window(600e6, true, 1000, 100)
	}
	d.y.mu.Lock()
	rate, producedRate := d.y.mu.rate, d.y.mu.producedRate
	d.y.mu.Unlock()
	if producedRate < 0.99*produced || producedRate > produced {
		t.Fatalf("smoothed produce rate %.0f, want about %.0f", producedRate, produced)
	}
	if rate != yieldProducedFactor*producedRate {
		t.Fatalf("contended with producers bringing in %.0f: rate %.0f, want %.0f", producedRate, rate, yieldProducedFactor*producedRate)
	}
}

// TestFetchYieldWaits checks what an answer waits while the pace is on:
// the time the rate takes to pay for it and the answers before it, but
// nothing for an answer smaller than yieldPacedBytes or one at the tail
// of its partitions, whose bytes the answers after it pay for.
func TestFetchYieldWaits(t *testing.T) {
	d := newYieldDriver(t)
	rate := d.window(400e6, true, 1000, 50)
	if rate == 0 {
		t.Fatal("pace did not engage")
	}
	if w := d.y.reserve(yieldPacedBytes-1, false); w != 0 {
		t.Fatalf("an answer below yieldPacedBytes waits %v", w)
	}
	n := int64(8 << 20)
	want := time.Duration(float64(n+yieldPacedBytes-1) / rate * float64(time.Second))
	if w := d.y.reserve(n, false); w != want {
		t.Fatalf("an answer of %d bytes after %d waits %v, want %v", n, yieldPacedBytes-1, w, want)
	}
	// An answer at the tail passes the debt, and adds to it, up to
	// yieldTailDebt.
	if w := d.y.reserve(n, true); w != 0 {
		t.Fatalf("an answer of %d bytes at the tail waits %v", n, w)
	}
	if w := d.y.reserve(int64(rate*yieldTailDebt.Seconds()), true); w != 0 {
		t.Fatalf("an answer of %v at the rate at the tail waits %v", yieldTailDebt, w)
	}
	d.y.mu.Lock()
	debt := -d.y.mu.tokens
	d.y.mu.Unlock()
	if debt != rate*yieldTailDebt.Seconds() {
		t.Fatalf("answers at the tail left a debt of %.0f bytes, want %.0f", debt, rate*yieldTailDebt.Seconds())
	}
	d.y.mu.Lock()
	d.y.mu.tokens = -float64(n + yieldPacedBytes - 1 + n)
	d.y.mu.Unlock()
	d.now = d.now.Add(want)
	if w := d.y.reserve(yieldPacedBytes, false); w != time.Duration(float64(n+yieldPacedBytes)/rate*float64(time.Second)) {
		t.Fatalf("once the debt before the tail answer was paid, an answer of %d bytes waits %v", yieldPacedBytes, w)
	}
}

// TestFetchYieldWiring checks that the server counts requests other than
// Fetch for the pace, and Produce request bytes, and that Fetch answers
// take their records from it: after a Metadata request and a contended
// window, a fetch of a batch finds the pace on and leaves it owing the
// batch.
func TestFetchYieldWiring(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	a.createTopic(t, "t", 1, nil)
	produceBytes(t, a, "t", 100<<10, 100<<10)
	// Its own clock, and every wait for a CPU slow. (reserve reads
	// them under the lock.)
	y := a.Deps.shared.fetchYield
	now := time.Now()
	y.mu.Lock()
	y.now = func() time.Time { return now }
	y.waits = func() (uint64, uint64) { return 1000, 1000 }
	y.mu.window = now
	y.mu.Unlock()
	others := y.others.Load()

	fetchOnce := func() int {
		t.Helper()
		resp := a.rawRequest(t, fetchReq(11, 0, 1, 1<<20, fetchPartReq{topic: "t", maxBytes: 1 << 20})).(*kmsg.FetchResponse)
		return len(fetchPartitions(resp)[0].RecordBatches)
	}
	fetchOnce()
	if n := y.others.Load() - others; n != 0 {
		t.Fatalf("%d other requests counted after a Fetch", n)
	}
	a.rawRequest(t, metadataReq(12, []string{"t"}))
	if n := y.others.Load() - others; n != 1 {
		t.Fatalf("%d other requests counted after a Metadata request, want 1", n)
	}
	produced := y.produced.Load()
	batch := batchtest.Build(t, batchtest.Options{Records: 1, ValueBytes: 1000})
	req := produceReq(9, -1, nil, rawPart{"t", 0, batch})
	a.rawRequest(t, req)
	if n, want := y.produced.Load()-produced, int64(len(frameFor(1, req))-4); n != want {
		t.Fatalf("a Produce request of %d bytes counted as %d produced", want, n)
	}
	y.mu.Lock()
	now = now.Add(yieldWindow)
	y.mu.Unlock()
	n := fetchOnce()
	y.mu.Lock()
	rate, owed := y.mu.rate, -y.mu.tokens
	y.mu.Unlock()
	if rate == 0 || owed != float64(n) || n < 100<<10 {
		t.Fatalf("fetch of %d record bytes: pace rate %.0f, owing %.0f", n, rate, owed)
	}
}

// produceFresh produces batches of about batchBytes, stamped now, to
// partition 0 of topic until it holds total bytes.
func produceFresh(t *testing.T, a *testAgent, topic string, batchBytes, total int) {
	t.Helper()
	produceCopies(t, a, topic, batchtest.Build(t, batchtest.Options{Records: 1, ValueBytes: batchBytes, FirstTimestamp: time.Now().UnixMilli()}), total)
}

// pacedBehind puts a's adaptive fetch pace on, on a stopped clock, and an
// hour in debt: the catching-up answers ahead.
func pacedBehind(a *testAgent) *fetchYield {
	y := a.Deps.shared.fetchYield
	now := time.Now()
	y.mu.Lock()
	defer y.mu.Unlock()
	y.now = func() time.Time { return now }
	y.mu.window = now
	y.mu.rate, y.mu.at = yieldFloorBytesPerSec, now
	y.mu.tokens = -yieldFloorBytesPerSec * time.Hour.Seconds()
	return y
}

// TestFetchTailNotPaced checks that the pace does not hold a consumer at
// the tail of its partitions behind catching-up ones: with the pace an
// hour in debt, an answer that reads fresh records up to the high
// watermark, more than yieldPacedBytes of them, is sent at once (on the
// unfixed pace it waited its turn, and the read timed out); its bytes do
// not add to a debt already past yieldTailDebt.
func TestFetchTailNotPaced(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	a.createTopic(t, "t", 1, nil)
	produceFresh(t, a, "t", 256<<10, 2<<20)
	y := pacedBehind(a)
	y.mu.Lock()
	owed := -y.mu.tokens
	y.mu.Unlock()

	resp := a.rawRequest(t, fetchReq(11, 0, 1, 50<<20, fetchPartReq{topic: "t", maxBytes: 10 << 20})).(*kmsg.FetchResponse)
	p := fetchPartitions(resp)[0]
	n := len(p.RecordBatches)
	if p.ErrorCode != 0 || n < 2<<20 {
		t.Fatalf("fetch at the tail: code %d, %d record bytes, want the 2 MiB produced", p.ErrorCode, n)
	}
	y.mu.Lock()
	debt := -y.mu.tokens
	y.mu.Unlock()
	if debt != owed {
		t.Fatalf("an answer of %d bytes at the tail, an hour's debt ahead, left the pace owing %.0f, want %.0f (no more)", n, debt, owed)
	}
}

// TestFetchNearTail checks which answers pass the pace as a consumer's at
// the tail (fetchAnswer.tail): fresh records read to the end, or to
// within tailBytes of it; not fresh records read further from the end,
// nor old records read to the end (a consumer re-reading a backlog), nor
// an answer below yieldPacedBytes, which never waits anyway.
func TestFetchNearTail(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	a.createTopic(t, "fresh", 1, nil)
	a.createTopic(t, "old", 1, nil)
	produceFresh(t, a, "fresh", 256<<10, 4<<20)
	produceBytes(t, a, "old", 256<<10, 2<<20) // batchtest's fixed 2023 timestamps
	y := pacedBehind(a)
	tailBytes := y.tailBytes() // yieldPacedBytes: nothing produced
	rd, err := a.Deps.fetcher()
	if err != nil {
		t.Fatal(err)
	}
	db, err := a.Deps.meta()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		topic    string
		maxBytes int32
		want     bool
	}{
		{"fresh", 10 << 20, true},
		{"fresh", int32(4<<20 - tailBytes/2), true},
		{"fresh", 2 << 20, false},
		{"old", 10 << 20, false},
		{"fresh", 512 << 10, false},
	} {
		req := fetchReq(11, 0, 1, 50<<20, fetchPartReq{topic: c.topic, maxBytes: c.maxBytes})
		f := fetchAnswer{r: &Request{Deps: a.Deps}, req: req, rd: rd}
		view := db.View()
		f.plan(view, req.ResponseKind().(*kmsg.FetchResponse))
		total, failed, err := f.read(t.Context(), view, 50<<20, true)
		view.Close()
		if err != nil || failed {
			t.Fatalf("%s, %d bytes a partition: read failed: %v", c.topic, c.maxBytes, err)
		}
		if f.tail != c.want {
			t.Errorf("%s, %d bytes a partition: %d record bytes read, at the tail %v, want %v", c.topic, c.maxBytes, total, f.tail, c.want)
		}
	}
}

// TestFetchPrepaid checks the accounting of an answer paid for before its
// read (fetchAnswer.prepay): a consumer re-reading old records, not at
// the tail, pays the pace from the index's estimate, and once read the
// difference is charged or refunded, so the pace is owed exactly the
// records sent.
func TestFetchPrepaid(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	a.createTopic(t, "old", 1, nil)
	produceBytes(t, a, "old", 256<<10, 3<<20)
	y := pacedBehind(a)
	y.mu.Lock()
	y.mu.tokens = 0
	y.mu.Unlock()

	resp := a.rawRequest(t, fetchReq(11, 0, 1, 50<<20, fetchPartReq{topic: "old", maxBytes: 2 << 20})).(*kmsg.FetchResponse)
	p := fetchPartitions(resp)[0]
	n := len(p.RecordBatches)
	if p.ErrorCode != 0 || n < yieldPacedBytes {
		t.Fatalf("fetch: code %d, %d record bytes", p.ErrorCode, n)
	}
	y.mu.Lock()
	debt := -y.mu.tokens
	y.mu.Unlock()
	if debt != float64(n) {
		t.Fatalf("an answer of %d record bytes left the pace owing %.0f", n, debt)
	}
}
