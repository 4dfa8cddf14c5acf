package produce_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/produce"
)

// cutLog records when each flush was cut, on the bubble's fake clock.
type cutLog struct {
	mu   sync.Mutex
	cuts []time.Time
}

func (c *cutLog) FlushCut(int, int, int) {
	c.mu.Lock()
	c.cuts = append(c.cuts, time.Now())
	c.mu.Unlock()
}
func (c *cutLog) UploadDone(int, int, time.Duration, error) {}
func (c *cutLog) CommitDone(int, time.Duration, error)      {}
func (c *cutLog) FlushDone(int, time.Duration, error)       {}

func (c *cutLog) times() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.cuts...)
}

// TestFlushInterval checks the flush policy on a fake clock: a flush
// starts at once when nothing uploads; behind a running upload a batch
// waits exactly FlushInterval from its arrival, not for a tick; and an idle
// pipeline does nothing at all.
func TestFlushInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			interval  = 100 * time.Millisecond
			putDelay  = time.Second
			beforeCut = interval - time.Millisecond
		)
		store := objstore.WithLatency(memobj.New(), objstore.FixedLatency(putDelay))
		e := newEnv(t, store, 1)
		cuts := &cutLog{}
		p := e.pipeline(t, produce.Config{FlushInterval: interval, Observer: cuts})
		ctx := context.Background()
		start := time.Now()

		wantCuts := func(want ...time.Duration) {
			t.Helper()
			synctest.Wait()
			got := cuts.times()
			if len(got) != len(want) {
				t.Fatalf("at +%v: %d cuts, want %d", time.Since(start), len(got), len(want))
			}
			for i, w := range want {
				if d := got[i].Sub(start); d != w {
					t.Fatalf("cut %d at +%v, want +%v", i, d, w)
				}
			}
		}

		b, _ := e.batch(t, 0, 1, 10, 1)
		a1 := submit(t, p, b)
		wantCuts(0) // nothing uploading: at once

		time.Sleep(10 * time.Millisecond)
		a2 := submit(t, p, b) // behind the running upload
		time.Sleep(beforeCut)
		wantCuts(0)
		time.Sleep(time.Millisecond)
		wantCuts(0, 10*time.Millisecond+interval)

		waitAck(t, a1)
		waitAck(t, a2)
		if got := time.Since(start); got != 10*time.Millisecond+interval+putDelay {
			t.Fatalf("second flush answered at +%v", got)
		}

		// Idle: no timer fires, nothing is cut.
		time.Sleep(time.Hour)
		wantCuts(0, 10*time.Millisecond+interval)

		// An arrival at an arbitrary time is cut at once, not on a tick.
		time.Sleep(37 * time.Millisecond)
		at := time.Since(start)
		a3 := submit(t, p, b)
		wantCuts(0, 10*time.Millisecond+interval, at)
		waitAck(t, a3)

		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFlushBytesCutsEarly: behind a running upload, reaching FlushBytes
// cuts at once instead of waiting out the interval.
func TestFlushBytesCutsEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := objstore.WithLatency(memobj.New(), objstore.FixedLatency(time.Second))
		e := newEnv(t, store, 1)
		cuts := &cutLog{}
		small, _ := e.batch(t, 0, 1, 10, 1)
		big, _ := e.batch(t, 0, 1, 4000, 2)
		p := e.pipeline(t, produce.Config{FlushInterval: time.Minute, FlushBytes: 3 * len(small.Data), Observer: cuts})
		start := time.Now()

		a1 := submit(t, p, small)
		time.Sleep(time.Millisecond)
		a2 := submit(t, p, small)
		synctest.Wait()
		if n := len(cuts.times()); n != 1 {
			t.Fatalf("%d cuts, want 1", n)
		}
		time.Sleep(time.Millisecond)
		a3 := submit(t, p, big)
		synctest.Wait()
		got := cuts.times()
		if len(got) != 2 || got[1].Sub(start) != 2*time.Millisecond {
			t.Fatalf("cuts at %v, want the second at +2ms", got)
		}
		for _, a := range []*produce.Ack{a1, a2, a3} {
			waitAck(t, a)
		}
	})
}
