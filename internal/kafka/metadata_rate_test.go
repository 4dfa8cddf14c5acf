package kafka

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestBytePacer checks the pace: a burst goes at once, and takers past it
// wait, in turn, for the refill to pay what they take.
func TestBytePacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		p := newBytePacer(100, 50) // 100 bytes a second, 50 at once
		start := time.Now()
		if err := p.take(ctx, 50, nil); err != nil || time.Since(start) != 0 {
			t.Fatalf("the burst waited %v (%v)", time.Since(start), err)
		}
		// Two takers of 100 each: the first is paid after 1 s, the
		// second after 2 s.
		done := make(chan time.Duration, 2)
		for range 2 {
			go func() {
				p.take(ctx, 100, nil)
				done <- time.Since(start)
			}()
			synctest.Wait()
		}
		if first, second := <-done, <-done; first != time.Second || second != 2*time.Second {
			t.Fatalf("takers paid after %v and %v, want 1s and 2s", first, second)
		}
		// A quiet spell refills up to the burst, no more.
		time.Sleep(time.Hour)
		at := time.Now()
		p.take(ctx, 50, nil)
		p.take(ctx, 50, nil)
		if waited := time.Since(at); waited != 500*time.Millisecond {
			t.Fatalf("after an hour, 100 bytes waited %v, want 500ms (a 50-byte burst)", waited)
		}
		// An ended connection stops waiting.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := p.take(cctx, 1000, nil); err == nil {
			t.Fatal("a canceled take returned nil")
		}
	})
}
