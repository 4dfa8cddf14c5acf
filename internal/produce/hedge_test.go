package produce_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

var errInjected = errors.New("injected PUT failure")

// putStep scripts one Put of a scriptStore: it takes delay (of the
// bubble's fake time, cut short by ctx), then fails if fail is set, after
// writing the object if written is set too (a lost reply).
type putStep struct {
	delay         time.Duration
	fail, written bool
}

// scriptStore runs its Puts by a script, in the order they arrive; Puts
// past the script run at once. It records every key put and deleted.
type scriptStore struct {
	objstore.Store
	mu      sync.Mutex
	script  []putStep
	puts    []string
	deletes []string
}

func (s *scriptStore) then(steps ...putStep) {
	s.mu.Lock()
	s.script = append(s.script, steps...)
	s.mu.Unlock()
}

func (s *scriptStore) Put(ctx context.Context, key string, data []byte) error {
	s.mu.Lock()
	var st putStep
	if len(s.script) > 0 {
		st, s.script = s.script[0], s.script[1:]
	}
	s.puts = append(s.puts, key)
	s.mu.Unlock()
	if st.delay > 0 {
		select {
		case <-time.After(st.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if st.fail {
		if st.written {
			if err := s.Store.Put(context.Background(), key, data); err != nil {
				return err
			}
		}
		return errInjected
	}
	return s.Store.Put(ctx, key, data)
}

func (s *scriptStore) Delete(ctx context.Context, key string) error {
	s.mu.Lock()
	s.deletes = append(s.deletes, key)
	s.mu.Unlock()
	return s.Store.Delete(ctx, key)
}

func (s *scriptStore) keys() (puts, deletes []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.puts), slices.Clone(s.deletes)
}

// committedKeys is the object keys the partition's index points at, in
// offset order.
func committedKeys(t *testing.T, v meta.Viewer, id meta.TopicID) []string {
	t.Helper()
	view := v.View()
	defer view.Close()
	it, err := view.Seek(id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var ks []string
	for it.Next() {
		ks = append(ks, it.Entry().ObjectKey)
	}
	return ks
}

func storedKeys(t *testing.T, s objstore.Store) []string {
	t.Helper()
	infos, err := s.List(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, i := range infos {
		ks = append(ks, i.Key)
	}
	return ks
}

// warmUp produces n batches one after the other through p, one flush
// each.
func warmUp(t *testing.T, e *env, p *produce.Pipeline, n int) {
	t.Helper()
	for i := range n {
		b, _ := e.batch(t, 0, 1, 10, uint64(1000+i))
		if _, err := p.Produce(testCtx(t), []produce.Batch{b}); err != nil {
			t.Fatal(err)
		}
	}
}

// An upload is hedged when it runs past the percentile of recent upload
// times, not before, and not while fewer than 16 were timed; the hedge
// writes the same bytes under a new key, wins, and is the one object
// committed; the slow primary is cancelled and its key deleted.
func TestHedgeStartsPastThePercentile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &scriptStore{Store: memobj.New()}
		e := newEnv(t, store, 1)
		p := e.pipeline(t, produce.Config{HedgePercentile: 0.9, HedgeMaxRatio: 1})

		// 16 uploads of 100ms: no hedge yet (too few samples), though
		// all ran past any percentile of what came before.
		for range 16 {
			store.then(putStep{delay: 100 * time.Millisecond})
		}
		// Four of 60ms: timed, under p90 (100ms), not hedged.
		for range 4 {
			store.then(putStep{delay: 60 * time.Millisecond})
		}
		warmUp(t, e, p, 20)
		if st := p.Stats(); st.Hedges != 0 {
			t.Fatalf("%d hedges while warming up, want 0", st.Hedges)
		}

		// A primary of 1s; its hedge takes 10ms.
		store.then(putStep{delay: time.Second}, putStep{delay: 10 * time.Millisecond})
		b, _ := e.batch(t, 0, 1, 10, 1)
		start := time.Now()
		a := submit(t, p, b)
		time.Sleep(99 * time.Millisecond)
		synctest.Wait()
		if st := p.Stats(); st.Hedges != 0 {
			t.Fatalf("hedged at +99ms, before p90 of the upload times (100ms)")
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if st := p.Stats(); st.Hedges != 1 {
			t.Fatalf("%d hedges at +101ms, want 1", st.Hedges)
		}
		waitAck(t, a)
		if d := time.Since(start); d != 110*time.Millisecond {
			t.Fatalf("answered at +%v, want +110ms (hedge at p90 plus its 10ms)", d)
		}
		if err := p.Close(testCtx(t)); err != nil {
			t.Fatal(err)
		}

		puts, deletes := store.keys()
		primary, hedge := puts[20], puts[21]
		if primary == hedge {
			t.Fatalf("the hedge reused the key %s", primary)
		}
		committed := committedKeys(t, e.viewer(), e.topic)
		if len(committed) != 21 || committed[20] != hedge {
			t.Fatalf("committed %d objects, the last %s; want 21, the last the hedge's %s", len(committed), committed[len(committed)-1], hedge)
		}
		if !slices.Equal(deletes, []string{primary}) {
			t.Fatalf("deleted %v, want the primary's key %s", deletes, primary)
		}
		if got := storedKeys(t, store); !slices.Equal(got, committed) {
			t.Fatalf("store holds %v, want the committed objects %v", got, committed)
		}
		if n := sum(logCommits(t, e.log)); n != 21 {
			t.Fatalf("%d CommitObject commands, want 21", n)
		}
		if st := p.Stats(); st.Hedges != 1 || st.HedgeWins != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// The primary fails (its object written, the reply lost) while its hedge
// runs; the hedge succeeds. The flush commits exactly once, under the
// hedge's key, the primary's object is deleted, and an idempotent
// producer's retry of the same batch gets the same offset back.
func TestHedgeWinsAfterPrimaryFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &scriptStore{Store: memobj.New()}
		e := newEnv(t, store, 1)
		p := e.pipeline(t, produce.Config{HedgePercentile: 0.5, HedgeMaxRatio: 1, UploadAttempts: 1})
		for range 16 {
			store.then(putStep{delay: 100 * time.Millisecond})
		}
		warmUp(t, e, p, 16)

		// Primary: fails at +300ms with its object written. Hedge: starts
		// at +100ms, succeeds at +600ms.
		store.then(putStep{delay: 300 * time.Millisecond, fail: true, written: true}, putStep{delay: 500 * time.Millisecond})
		b, o := e.batch(t, 0, 3, 10, 7)
		o.ProducerID, o.ProducerEpoch, o.BaseSequence = 42, 0, 0
		b, err := produce.BatchFrom(e.topic, 0, batchtest.Build(t, o))
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.Produce(testCtx(t), []produce.Batch{b})
		if err != nil || res[0].Code != 0 {
			t.Fatalf("produce = %v, %v; want the hedge's success", res, err)
		}
		first := res[0].BaseOffset
		if err := p.Close(testCtx(t)); err != nil {
			t.Fatal(err)
		}

		puts, deletes := store.keys()
		primary, hedge := puts[16], puts[17]
		committed := committedKeys(t, e.viewer(), e.topic)
		if len(committed) != 17 || committed[16] != hedge {
			t.Fatalf("committed %v, want 17 objects, the last the hedge's %s", committed, hedge)
		}
		if n := sum(logCommits(t, e.log)); n != 17 {
			t.Fatalf("%d CommitObject commands, want 17: the flush committed more than once", n)
		}
		if !slices.Equal(deletes, []string{primary}) {
			t.Fatalf("deleted %v, want the failed primary's %s", deletes, primary)
		}
		if got := storedKeys(t, store); !slices.Equal(got, committed) {
			t.Fatalf("store holds %v, want the committed objects", got)
		}

		// The producer retries (it never learnt of the hedge): apply
		// knows the sequence and answers with the first offset.
		p2 := e.pipeline(t, produce.Config{AgentID: "agent-1-9"})
		res, err = p2.Produce(testCtx(t), []produce.Batch{b})
		if err != nil || res[0].Code != 0 || res[0].BaseOffset != first {
			t.Fatalf("retry = %+v, %v; want offset %d again", res, err, first)
		}
		if hw := highWatermark(t, e.viewer(), e.topic, 0); hw != first+3 {
			t.Fatalf("high watermark %d, want %d: the batch is in the log more than once", hw, first+3)
		}
		got := e.readAll(t, fetch.NewReader(store, fetch.NewCache(0)), 0)
		if last := lastOffset(t, got); last != first+2 {
			t.Fatalf("read up to offset %d, want %d", last, first+2)
		}
	})
}

// Hedges never pass HedgeMaxRatio of uploads, however slow the store.
func TestHedgeRatioBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &scriptStore{Store: memobj.New()}
		e := newEnv(t, store, 1)
		p := e.pipeline(t, produce.Config{HedgePercentile: 0.5, HedgeMaxRatio: 0.25})
		for range 16 {
			store.then(putStep{delay: 10 * time.Millisecond})
		}
		warmUp(t, e, p, 16)
		// Every upload now runs 1s, far past p50: each would be hedged
		// if the ratio allowed (the hedges take as long).
		for range 40 {
			store.then(putStep{delay: time.Second})
		}
		warmUp(t, e, p, 20)
		st := p.Stats()
		// 36 uploads earned 9 hedges; the last few may still be due.
		if st.Hedges == 0 || st.Hedges > 9 {
			t.Fatalf("%d hedges over 36 uploads at HedgeMaxRatio 0.25, want 1 to 9", st.Hedges)
		}
	})
}

// With MaxPutsPerSec, a steady stream of batches is cut no more often
// than the budget allows, hedges' share included; a lone batch after a
// quiet spell waits only FlushInterval for company.
func TestPutBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    produce.Config
		maxPut int
	}{
		{"no hedging", produce.Config{MaxPutsPerSec: 10}, 100 + 1},
		// Cuts are 110ms apart, leaving 10% for hedges.
		{"hedging", produce.Config{MaxPutsPerSec: 10, HedgePercentile: 0.9, HedgeMaxRatio: 0.1, HedgeMinDelay: 50 * time.Millisecond}, 91 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := objstore.WithCounters(memobj.New())
				e := newEnv(t, store, 1)
				p := e.pipeline(t, tc.cfg)
				b, _ := e.batch(t, 0, 1, 100, 1)

				// A lone batch goes out after FlushInterval.
				start := time.Now()
				waitAck(t, submit(t, p, b))
				if d := time.Since(start); d != produce.DefaultFlushInterval {
					t.Fatalf("a lone batch waited %v, want FlushInterval (%v)", d, produce.DefaultFlushInterval)
				}
				time.Sleep(time.Second)

				// 10s of a batch every millisecond.
				before := store.Snapshot().Op(objstore.OpPut).Requests
				var acks []*produce.Ack
				for range 10_000 {
					acks = append(acks, submit(t, p, b))
					time.Sleep(time.Millisecond)
				}
				puts := int(store.Snapshot().Op(objstore.OpPut).Requests - before)
				for _, a := range acks {
					waitAck(t, a)
				}
				if puts > tc.maxPut || puts < tc.maxPut*9/10 {
					t.Fatalf("%d PUTs in 10s, want at most %d (and near it: the stream is steady)", puts, tc.maxPut)
				}
			})
		})
	}
}

// TestPutBudgetSchedule: under MaxPutsPerSec a flush whose turn came
// before its first batch waits FlushInterval for the calls arriving with
// it, and the late cut does not move the schedule. Before, the first
// call was cut alone at once and the next cut came a whole spacing after
// it, so the calls arriving with the first waited that long.
func TestPutBudgetSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const spacing = 100 * time.Millisecond
		e := newEnv(t, memobj.New(), 1)
		cuts := &cutLog{}
		p := e.pipeline(t, produce.Config{MaxPutsPerSec: 10, Observer: cuts})
		b, _ := e.batch(t, 0, 1, 100, 1)
		start := time.Now()
		at := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) }

		waitAck(t, submit(t, p, b)) // cut at 5ms; the next turn is at 105ms
		// Late for the turn at 105ms: two calls 2ms apart go in one
		// flush, FlushInterval after the first.
		at(150 * time.Millisecond)
		a1 := submit(t, p, b)
		at(152 * time.Millisecond)
		a2 := submit(t, p, b)
		// After that cut, the next call waits for the turn at 205ms,
		// not for 255ms.
		at(160 * time.Millisecond)
		a3 := submit(t, p, b)
		for _, a := range []*produce.Ack{a1, a2, a3} {
			waitAck(t, a)
		}
		var got []time.Duration
		for _, c := range cuts.times() {
			got = append(got, c.Sub(start))
		}
		want := []time.Duration{5 * time.Millisecond, 155 * time.Millisecond, 2*spacing + 5*time.Millisecond}
		if !slices.Equal(got, want) {
			t.Fatalf("cuts at %v, want %v", got, want)
		}
	})
}
