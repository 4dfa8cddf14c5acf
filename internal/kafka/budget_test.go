package kafka

import (
	"errors"
	"testing"
	"testing/synctest"
)

func TestByteBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newByteBudget(100)
		never := make(chan struct{})
		if err := b.acquire(60, never, never); err != nil {
			t.Fatal(err)
		}

		// A big waiter queues first; a small one behind it must not jump
		// the queue even though 40 bytes are free.
		bigGot, smallGot := make(chan error, 1), make(chan error, 1)
		go func() { bigGot <- b.acquire(80, never, never) }()
		synctest.Wait()
		go func() { smallGot <- b.acquire(10, never, never) }()
		synctest.Wait()
		if len(bigGot)+len(smallGot) != 0 {
			t.Fatal("a waiter was granted out of order or over capacity")
		}

		b.release(60)
		synctest.Wait()
		if err := <-bigGot; err != nil {
			t.Fatal(err)
		}
		if err := <-smallGot; err != nil {
			t.Fatal(err)
		}
		if got := b.free(); got != 10 {
			t.Fatalf("free %d, want 10", got)
		}

		// An aborted waiter leaves the queue and unblocks the one behind.
		abort := make(chan struct{})
		abortedGot, nextGot := make(chan error, 1), make(chan error, 1)
		go func() { abortedGot <- b.acquire(50, abort, never) }()
		synctest.Wait()
		go func() { nextGot <- b.acquire(10, never, never) }()
		synctest.Wait()
		if len(nextGot) != 0 {
			t.Fatal("waiter granted behind a blocked one")
		}
		close(abort)
		if err := <-abortedGot; !errors.Is(err, errBudgetAborted) {
			t.Fatalf("aborted acquire: %v", err)
		}
		if err := <-nextGot; err != nil {
			t.Fatal(err)
		}
		b.release(80)
		b.release(10)
		b.release(10)
		if got := b.free(); got != 100 {
			t.Fatalf("free %d after releasing everything, want 100", got)
		}
	})
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
