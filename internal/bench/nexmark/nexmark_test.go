package nexmark

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
)

func generate(t *testing.T, cfg Config) []Event {
	t.Helper()
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event
	for {
		ev, ok := g.Next()
		if !ok {
			return evs
		}
		evs = append(evs, ev)
	}
}

func encode(t *testing.T, evs []Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, ev := range evs {
		b, err := ev.JSON()
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString(ev.Kind.Table())
		buf.Write(ev.Key())
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

func TestDeterministic(t *testing.T) {
	cfg := Config{Seed: 7, MaxEvents: 5000}
	a, b := encode(t, generate(t, cfg)), encode(t, generate(t, cfg))
	if !bytes.Equal(a, b) {
		t.Fatal("the same Config gave different events")
	}
	cfg.Seed = 8
	if c := encode(t, generate(t, cfg)); bytes.Equal(a, c) {
		t.Fatal("seeds 7 and 8 gave the same events")
	}
}

func TestProportionsAndIDs(t *testing.T) {
	const n = 50 * 200
	evs := generate(t, Config{Seed: 1, MaxEvents: n})
	if len(evs) != n {
		t.Fatalf("%d events, want MaxEvents %d", len(evs), n)
	}
	counts := map[Kind]int{}
	var persons, auctions []int64
	for i, ev := range evs {
		counts[ev.Kind]++
		if ev.Number != int64(i) {
			t.Fatalf("event %d has Number %d", i, ev.Number)
		}
		switch ev.Kind {
		case KindPerson:
			persons = append(persons, ev.Person.ID)
		case KindAuction:
			auctions = append(auctions, ev.Auction.ID)
			a := ev.Auction
			if a.Category < 10 || a.Category > 14 {
				t.Fatalf("auction %d category %d outside 10-14", a.ID, a.Category)
			}
			if !a.Expires.After(a.DateTime.Time) {
				t.Fatalf("auction %d expires %v, not after %v", a.ID, a.Expires, a.DateTime)
			}
			if a.Reserve < a.InitialBid {
				t.Fatalf("auction %d reserve %d below initial bid %d", a.ID, a.Reserve, a.InitialBid)
			}
			// The seller is a person created already, or one of the
			// 10 ids of lead.
			if a.Seller < firstPersonID || a.Seller > persons[len(persons)-1]+personIDLead {
				t.Fatalf("auction %d seller %d outside [1000, %d]", a.ID, a.Seller, persons[len(persons)-1]+personIDLead)
			}
		case KindBid:
			b := ev.Bid
			if b.Price < 100 || b.Price > 100_000_000 {
				t.Fatalf("bid price %d outside [100, 1e8]", b.Price)
			}
			if b.Bidder < firstPersonID || b.Bidder > persons[len(persons)-1]+personIDLead {
				t.Fatalf("bidder %d outside [1000, %d]", b.Bidder, persons[len(persons)-1]+personIDLead)
			}
			if b.Auction < firstAuctionID || b.Auction > auctions[len(auctions)-1]+auctionIDLead {
				t.Fatalf("bid auction %d outside [1000, %d]", b.Auction, auctions[len(auctions)-1]+auctionIDLead)
			}
		}
	}
	// 1 : 3 : 46, exactly: the event number picks the kind.
	if counts[KindPerson] != n/50 || counts[KindAuction] != 3*n/50 || counts[KindBid] != 46*n/50 {
		t.Fatalf("counts person %d auction %d bid %d, want %d %d %d",
			counts[KindPerson], counts[KindAuction], counts[KindBid], n/50, 3*n/50, 46*n/50)
	}
	// Ids are dense and in order from 1000.
	for i, id := range persons {
		if id != firstPersonID+int64(i) {
			t.Fatalf("person %d has id %d", i, id)
		}
	}
	for i, id := range auctions {
		if id != firstAuctionID+int64(i) {
			t.Fatalf("auction %d has id %d", i, id)
		}
	}
}

func TestHotShares(t *testing.T) {
	// Half the bids go to a hot auction (HotAuctionRatio 2), three
	// quarters to a hot bidder (4), half to a hot channel.
	const n = 50 * 2000
	var bids, hotAuction, hotBidder, hotChannel int
	for _, ev := range generate(t, Config{Seed: 3, MaxEvents: n}) {
		if ev.Kind != KindBid {
			continue
		}
		bids++
		if (ev.Bid.Auction-firstAuctionID)%hotBatch == 0 {
			hotAuction++
		}
		if (ev.Bid.Bidder-firstPersonID)%hotBatch == 1 {
			hotBidder++
		}
		switch ev.Bid.Channel {
		case "Google", "Facebook", "Baidu", "Apple":
			hotChannel++
		}
	}
	within := func(name string, got int, want, tol float64) {
		if f := float64(got) / float64(bids); f < want-tol || f > want+tol {
			t.Errorf("%s share %.3f, want %.2f±%.2f", name, f, want, tol)
		}
	}
	// Random picks land on a hot id too, now and then: hence the
	// one-sided slack.
	within("hot auction", hotAuction, 0.51, 0.02)
	within("hot bidder", hotBidder, 0.75, 0.02)
	within("hot channel", hotChannel, 0.50, 0.02)
}

func TestEventTime(t *testing.T) {
	base := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	t.Run("monotone", func(t *testing.T) {
		evs := generate(t, Config{Seed: 2, MaxEvents: 3000, FirstEventRate: 100, BaseTime: base})
		for i, ev := range evs {
			// Event n is at n/rate seconds: 10 ms apart at 100/s.
			want := base.Add(time.Duration(i) * 10 * time.Millisecond)
			if !ev.Time.Equal(want) {
				t.Fatalf("event %d at %v, want %v", i, ev.Time, want)
			}
			if ev.Watermark.After(ev.Time) {
				t.Fatalf("event %d: watermark %v after its time %v", i, ev.Watermark, ev.Time)
			}
			var rec time.Time
			switch ev.Kind {
			case KindPerson:
				rec = ev.Person.DateTime.Time
			case KindAuction:
				rec = ev.Auction.DateTime.Time
			default:
				rec = ev.Bid.DateTime.Time
			}
			if !rec.Equal(ev.Time) {
				t.Fatalf("event %d: record date_time %v, event time %v", i, rec, ev.Time)
			}
		}
	})
	t.Run("out of order groups", func(t *testing.T) {
		// 953 (the reference's multiplier) mod 10 is 3: a true
		// permutation. A group size dividing 952 would permute nothing.
		const group = 10
		evs := generate(t, Config{Seed: 2, MaxEvents: 800, FirstEventRate: 1000, BaseTime: base, OutOfOrderGroupSize: group})
		seen := map[int64]bool{}
		disorder := false
		for i, ev := range evs {
			// Every time stays inside its group's span, and no later
			// event falls below an earlier one's watermark.
			lo := base.Add(time.Duration(i/group*group) * time.Millisecond)
			hi := lo.Add((group - 1) * time.Millisecond)
			if ev.Time.Before(lo) || ev.Time.After(hi) {
				t.Fatalf("event %d at %v, outside its group [%v, %v]", i, ev.Time, lo, hi)
			}
			for _, later := range evs[i:] {
				if later.Time.Before(ev.Watermark) {
					t.Fatalf("event %d at %v is below event %d's watermark %v", later.Number, later.Time, i, ev.Watermark)
				}
			}
			if i > 0 && ev.Time.Before(evs[i-1].Time) {
				disorder = true
			}
			seen[ev.Time.UnixMilli()] = true
		}
		if !disorder {
			t.Fatal("no event came before its predecessor's time")
		}
		if len(seen) != len(evs) {
			t.Fatalf("%d distinct times for %d events: the group permutation repeats", len(seen), len(evs))
		}
	})
}

func TestJSON(t *testing.T) {
	evs := generate(t, Config{Seed: 5, MaxEvents: 100})
	fields := map[Kind][]string{
		KindPerson:  {"id", "name", "email_address", "credit_card", "city", "state", "date_time", "extra"},
		KindAuction: {"id", "item_name", "description", "initial_bid", "reserve", "date_time", "expires", "seller", "category", "extra"},
		KindBid:     {"auction", "bidder", "price", "channel", "url", "date_time", "extra"},
	}
	for _, ev := range evs {
		b, err := ev.JSON()
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := json.Unmarshal(b, &obj); err != nil {
			t.Fatal(err)
		}
		if len(obj) != len(fields[ev.Kind]) {
			t.Fatalf("%s: %d fields, want %v: %s", ev.Kind.Table(), len(obj), fields[ev.Kind], b)
		}
		for _, f := range fields[ev.Kind] {
			if _, ok := obj[f]; !ok {
				t.Fatalf("%s lacks %q: %s", ev.Kind.Table(), f, b)
			}
		}
		if got, want := obj["date_time"], ev.Time.Format(TimeLayout); got != want {
			t.Fatalf("date_time %v, want %v", got, want)
		}
		// Round trip through the record types.
		back := map[Kind]any{KindPerson: &Person{}, KindAuction: &Auction{}, KindBid: &Bid{}}[ev.Kind]
		if err := json.Unmarshal(b, back); err != nil {
			t.Fatal(err)
		}
		b2, _ := json.Marshal(back)
		if !bytes.Equal(b, b2) {
			t.Fatalf("round trip:\n%s\n%s", b, b2)
		}
	}
}

func TestRecordSizes(t *testing.T) {
	// The extra field pads records to the reference's averages (within
	// the ±20% spread, and a little for JSON's field names, which the
	// reference's sizes do not count).
	sums := map[Kind]int{}
	counts := map[Kind]int{}
	for _, ev := range generate(t, Config{Seed: 9, MaxEvents: 50 * 400}) {
		var n int
		switch ev.Kind {
		case KindPerson:
			p := ev.Person
			n = 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State) + len(p.Extra)
		case KindAuction:
			a := ev.Auction
			n = 8 + len(a.ItemName) + len(a.Description) + 40 + len(a.Extra)
		default:
			n = 32 + len(ev.Bid.Extra)
		}
		sums[ev.Kind] += n
		counts[ev.Kind]++
	}
	for k, want := range map[Kind]float64{KindPerson: 200, KindAuction: 500, KindBid: 100} {
		if avg := float64(sums[k]) / float64(counts[k]); avg < want*0.95 || avg > want*1.05 {
			t.Errorf("%s average size %.1f, want %v±5%%", k.Table(), avg, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []Config{{FirstEventRate: -1}, {MaxEvents: -1}, {BidProportion: -5}, {OutOfOrderGroupSize: -2}} {
		if _, err := NewGenerator(cfg); err == nil {
			t.Errorf("NewGenerator(%+v) accepted it", cfg)
		}
	}
}

func TestPacer(t *testing.T) {
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	fc := clock.NewFake(start)
	p, err := NewPacer(fc, 100) // one event per 10 ms
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// wctx bounds each wait for the pacer to block, so a pacer that
	// never waits fails the test instead of hanging it.
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	// Event 0 is due at once.
	if err := p.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// Events 1-10: the last is due at 100 ms.
	done := make(chan error, 1)
	go func() { done <- p.Wait(ctx, 10) }()
	if err := fc.BlockUntil(wctx, 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(99 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("Wait returned before its events were due")
	default:
	}
	fc.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p.Released() != 11 {
		t.Fatalf("released %d, want 11", p.Released())
	}
	// Behind schedule by less than DefaultMaxCatchUp: no wait at all.
	fc.Advance(500 * time.Millisecond)
	if err := p.Wait(ctx, 40); err != nil { // due at 500 ms; now 600 ms
		t.Fatal(err)
	}
	// Far behind (now 10.6 s; event 51 was due at 510 ms): the schedule
	// moves so the burst is DefaultMaxCatchUp's worth, 1 s at 100/s:
	// events 51-151 go through at once, event 152 waits 10 ms.
	fc.Advance(10 * time.Second)
	if err := p.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ctx, 100); err != nil {
		t.Fatal(err)
	}
	go func() { done <- p.Wait(ctx, 1) }()
	if err := fc.BlockUntil(wctx, 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(10 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A canceled wait returns the context's error.
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- p.Wait(cctx, 1000) }()
	if err := fc.BlockUntil(wctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("canceled Wait: %v", err)
	}
	if _, err := NewPacer(fc, 0); err == nil {
		t.Fatal("NewPacer accepted 0 events/s")
	}
}

func BenchmarkGenerate(b *testing.B) {
	g, err := NewGenerator(Config{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var bytes int64
	for b.Loop() {
		ev, _ := g.Next()
		v, err := ev.JSON()
		if err != nil {
			b.Fatal(err)
		}
		bytes += int64(len(v))
	}
	b.ReportMetric(float64(bytes)/float64(b.N), "B/event")
}
