package objstore

import (
	"context"
	"time"
)

// DoneFunc is told of every call a Timed store passed on: which
// operation, how long the store below took, the payload it moved (as
// Counting counts it: the bytes handed to Put and PutIfAbsent whether or
// not they succeeded, the bytes Get returned, 0 otherwise) and what it
// returned. It is called on the caller's goroutine after the call, so it
// must be safe for concurrent use and must not block.
type DoneFunc func(op Op, d time.Duration, bytes int64, err error)

// WithTiming returns a Store that times every call on s and reports it
// to done: the agent's object store metrics (requests, latency and
// bytes, from one wrapper). Counting keeps the same counts for tests and
// tools that read them back.
func WithTiming(s Store, done DoneFunc) Store {
	return &timedStore{s: s, done: done}
}

type timedStore struct {
	s    Store
	done DoneFunc
}

var _ Store = (*timedStore)(nil)

func (t *timedStore) Put(ctx context.Context, key string, data []byte) error {
	start := time.Now()
	err := t.s.Put(ctx, key, data)
	t.done(OpPut, time.Since(start), int64(len(data)), err)
	return err
}

func (t *timedStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	start := time.Now()
	err := t.s.PutIfAbsent(ctx, key, data)
	t.done(OpPutIfAbsent, time.Since(start), int64(len(data)), err)
	return err
}

func (t *timedStore) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	start := time.Now()
	out, err := t.s.Get(ctx, key, offset, length)
	t.done(OpGet, time.Since(start), int64(len(out)), err)
	return out, err
}

func (t *timedStore) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := t.s.Delete(ctx, key)
	t.done(OpDelete, time.Since(start), 0, err)
	return err
}

func (t *timedStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	start := time.Now()
	out, err := t.s.List(ctx, prefix)
	t.done(OpList, time.Since(start), 0, err)
	return out, err
}
