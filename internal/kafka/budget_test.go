package kafka

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

func TestByteBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		never := make(chan struct{})
		// 100 bytes for frames of at most 40: partial frames may hold 60.
		b := newByteBudget(100, 40)
		grow := func(f *frameShare, want int64) <-chan error {
			got := make(chan error, 1)
			go func() {
				_, err := b.grow(f, want, never, never)
				got <- err
			}()
			synctest.Wait()
			return got
		}
		granted := func(what string, got <-chan error) {
			t.Helper()
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			default:
				t.Fatalf("%s: still waiting", what)
			}
		}
		waiting := func(what string, got <-chan error) {
			t.Helper()
			if len(got) != 0 {
				t.Fatalf("%s: granted, want it waiting", what)
			}
		}
		checkFree := func(want int64) {
			t.Helper()
			if got := b.free(); got != want {
				t.Fatalf("free %d, want %d", got, want)
			}
		}

		// Arriving frames share 60 bytes: a third one past that becomes
		// a finisher, reserved whole, rather than given its slice.
		p1, p2, p3 := &frameShare{sizeBytes: 40}, &frameShare{sizeBytes: 40}, &frameShare{sizeBytes: 40}
		granted("p1", grow(p1, 30))
		granted("p2", grow(p2, 30))
		granted("p3", grow(p3, 10))
		if p3.heldBytes != 40 || p1.heldBytes != 30 {
			t.Fatalf("p1 holds %d, p3 %d; want 30 and p3 whole", p1.heldBytes, p3.heldBytes)
		}
		checkFree(0)

		// Now the arriving frames want more and the first, past the
		// cap, becomes a finisher but does not fit: they wait for the
		// finisher in order, and a small frame that would fit later does
		// not jump the queue.
		g1, g2 := grow(p1, 10), grow(p2, 10)
		small := &frameShare{sizeBytes: 5}
		gs := grow(small, 5)
		waiting("p1", g1)
		waiting("p2", g2)
		waiting("small", gs)
		b.release(p3)
		synctest.Wait()
		granted("p1 after the finisher released", g1)
		granted("p2 after the finisher released", g2)
		granted("small", gs)
		checkFree(15)
		if p1.arriving || !p2.arriving || !p2.whole() {
			t.Fatalf("p1 arriving %v, p2 arriving %v whole %v: want p1 a finisher and p2 whole but still arriving", p1.arriving, p2.arriving, p2.whole())
		}
		// A frame reserved whole still counts as arriving until it is
		// received: with p2 and small arriving (45 bytes), a frame
		// wanting 20 more would pass the cap, so it waits to finish
		// whole (40 > 15 free); once p2 is received it only needs
		// room, and gets its 20 when small is released.
		late := &frameShare{sizeBytes: 40}
		gl := grow(late, 20)
		waiting("late, past the cap", gl)
		b.received(p2)
		synctest.Wait()
		waiting("late, within the cap but 20 > 15 free", gl)
		b.release(small)
		synctest.Wait()
		granted("late", gl)
		if !late.arriving || late.heldBytes != 20 {
			t.Fatalf("late holds %d, arriving %v; want 20, arriving", late.heldBytes, late.arriving)
		}
		b.release(late)
		b.release(p1)
		b.release(p2)
		checkFree(100)

		// An aborted waiter leaves the queue and unblocks the one behind.
		big := &frameShare{sizeBytes: 40}
		granted("big", grow(big, 40))
		hog := &frameShare{sizeBytes: 40}
		granted("hog", grow(hog, 40))
		abort := make(chan struct{})
		aborted := &frameShare{sizeBytes: 40}
		abortedGot := make(chan error, 1)
		go func() {
			_, err := b.grow(aborted, 40, abort, never)
			abortedGot <- err
		}()
		synctest.Wait()
		next := &frameShare{sizeBytes: 10}
		gn := grow(next, 10)
		waiting("behind the aborted waiter", gn)
		close(abort)
		if err := <-abortedGot; !errors.Is(err, errBudgetAborted) {
			t.Fatalf("aborted grow: %v", err)
		}
		synctest.Wait()
		granted("behind the aborted waiter", gn)
		b.release(aborted) // holds nothing: a no-op
		b.release(big)
		b.release(hog)
		b.release(next)
		checkFree(100)
	})
}

// Partial frames that each hold part of the budget and all want more
// cannot wait for each other: with the whole-frame room kept aside, one
// of them is always reserved whole, finishes and releases, and so on
// until all have.
func TestByteBudgetPartialFramesFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		never := make(chan struct{})
		const frames, size = 8, 40
		b := newByteBudget(100, size)
		done := make(chan int, frames)
		for i := range frames {
			go func() {
				f := &frameShare{sizeBytes: size}
				for !f.whole() {
					want := min(size-f.heldBytes, 10)
					if _, err := b.grow(f, want, never, never); err != nil {
						panic(err)
					}
					// The sender's next bytes take a while.
					time.Sleep(time.Millisecond)
				}
				b.release(f)
				done <- i
			}()
		}
		for range frames {
			<-done
		}
		if got := b.free(); got != 100 {
			t.Fatalf("free %d after every frame finished, want 100", got)
		}
	})
}

func TestFirstShareBytes(t *testing.T) {
	for _, tt := range []struct {
		budget   int64
		conns    int
		want     int64
		whyShort string
	}{
		{DefaultMaxQueuedRequestBytes, DefaultMaxConns, 16 << 10, "defaults"},
		{1 << 40, 1, maxFirstShareBytes, "at most maxFirstShareBytes"},
		{1 << 20, 1 << 20, 1 << minPooledFrameShift, "at least the smallest pooled buffer"},
	} {
		if got := firstShareBytes(tt.budget, tt.conns); got != tt.want {
			t.Errorf("%s: firstShareBytes(%d, %d) = %d, want %d", tt.whyShort, tt.budget, tt.conns, got, tt.want)
		}
	}
}

// Connections share MaxQueuedRequestBytes: a reader that would exceed it
// waits until a handler holding request bytes returns.
func TestQueuedRequestBytesShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGatedHandler(2, false)
		frame := heartbeatFrame(1, 1)
		size := int64(len(frame) - 4)
		s, err := New(Config{
			Logger:                discardLogger,
			MaxRequestBytes:       int32(size),
			MaxQueuedRequestBytes: size, // room for one request
			Registry:              withHandlers(t, registration{12, 0, 4, g.handle}),
		})
		if err != nil {
			t.Fatal(err)
		}
		var clients [2]*pipeConn
		for i := range clients {
			clients[i] = servePipe(t, s)
		}
		go clients[0].c.Write(heartbeatFrame(1, 1))
		<-g.started
		go clients[1].c.Write(heartbeatFrame(2, 2))
		synctest.Wait()
		if len(g.started) != 0 {
			t.Fatal("second request read while the first held all request memory")
		}
		g.release(2) // not started yet; its gate is ready when it does
		g.release(1)
		for i, cl := range clients {
			if corr, _ := readHeartbeat(t, cl.c); corr != int32(i+1) {
				t.Fatalf("client %d: correlation %d", i, corr)
			}
		}
	})
}

func TestNextShare(t *testing.T) {
	for _, tt := range []struct {
		size, first int64
		want        []int64
	}{
		{size: 100, first: 16 << 10, want: []int64{100}},
		{size: 16 << 10, first: 16 << 10, want: []int64{16 << 10}},
		{size: 1 << 20, first: 16 << 10, want: []int64{16 << 10, 64 << 10, 256 << 10, 1 << 20}},
		// Rungs count down from the size: no small last step.
		{size: 1<<20 + 60, first: 16 << 10, want: []int64{16 << 10, 64<<10 + 3, 256<<10 + 15, 1<<20 + 60}},
		{size: 40 << 10, first: 16 << 10, want: []int64{10 << 10, 40 << 10}},
	} {
		var got []int64
		for held := int64(0); held < tt.size; {
			held = nextShare(tt.size, held, tt.first)
			got = append(got, held)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("size %d, first %d: shares %v, want %v", tt.size, tt.first, got, tt.want)
		}
	}
}
