package fetch_test

import (
	"context"
	"errors"
	"testing"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/objstore/memobj"
)

// TestCopySlots checks that reads copy their answers only while holding a
// copy slot: with the one slot held by a read that is copying, a second
// read waits instead of copying beside it, and copies once the slot is
// given back; a read waiting for a slot gives up when its context ends.
func TestCopySlots(t *testing.T) {
	cache := fetch.NewCache(1 << 20)
	e := newEnv(t, memobj.New(), 1, cache)
	e.produce(t, 0, build(t, 4, 100, 1))
	v := e.view(t)

	copying := make(chan struct{})
	proceed := make(chan struct{})
	waiting := make(chan struct{})
	r := fetch.WithCopySlots(fetch.NewReader(e.store, cache), 1,
		func() { copying <- struct{}{}; <-proceed },
		func() { waiting <- struct{}{} })
	read := func(ctx context.Context) <-chan error {
		done := make(chan error, 1)
		go func() {
			res, err := r.Read(ctx, v, e.topic, 0, 0, 1<<20)
			if err == nil && len(res.Records) == 0 {
				err = errors.New("no records")
			}
			done <- err
		}()
		return done
	}

	a := read(testCtx(t))
	<-copying
	b := read(testCtx(t))
	select {
	case <-copying:
		t.Fatal("a second read copies while the first holds the only slot")
	case <-waiting:
	}
	proceed <- struct{}{}
	if err := <-a; err != nil {
		t.Fatalf("first read: %v", err)
	}
	<-copying
	proceed <- struct{}{}
	if err := <-b; err != nil {
		t.Fatalf("second read: %v", err)
	}

	a = read(testCtx(t))
	<-copying
	ctx, cancel := context.WithCancel(testCtx(t))
	c := read(ctx)
	<-waiting
	cancel()
	if err := <-c; !errors.Is(err, context.Canceled) {
		t.Fatalf("read waiting for a slot, canceled: %v", err)
	}
	proceed <- struct{}{}
	if err := <-a; err != nil {
		t.Fatalf("read holding the slot: %v", err)
	}
}
