// Package objstore owns Strand's view of object storage: the Store interface
// every backend implements, the sentinel errors callers branch on, and the
// wrappers (fault injection, added latency, request counters) that sit
// between a backend and its users.
//
// Record data and metadata snapshots live here; nothing else in Strand is
// durable data. Backends live in subpackages (fileobj, memobj, s3obj) and
// all pass storetest.Run.
package objstore

import (
	"context"
	"errors"
)

var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("objstore: object not found")
	// ErrExists: PutIfAbsent lost because the key already exists. The
	// store was not changed by this call.
	ErrExists = errors.New("objstore: object already exists")
	// ErrInvalidRange: Get asked for an offset past the end of the object,
	// or a negative offset.
	ErrInvalidRange = errors.New("objstore: invalid range")
)

// ObjectInfo describes one object returned by List.
type ObjectInfo struct {
	Key  string
	Size int64
}

// Store is an object store. Keys are slash-separated strings without a
// leading slash. Implementations are safe for concurrent use.
//
// Any error other than the sentinels above may mean the operation was
// performed or not: a Put whose reply was lost is durable but reported as a
// failure. Callers that care (the produce path) retry with the same key and
// bytes, which every method below tolerates.
type Store interface {
	// Put writes data under key, replacing any existing object. It is
	// atomic: a concurrent or later reader sees all of data or the old
	// object (or ErrNotFound), never a prefix. Put returns once the object
	// is durable. The store does not retain data after Put returns.
	Put(ctx context.Context, key string, data []byte) error

	// PutIfAbsent is Put that succeeds only if key does not exist, and
	// returns ErrExists otherwise. Of several concurrent PutIfAbsent calls
	// on one key at most one succeeds.
	PutIfAbsent(ctx context.Context, key string, data []byte) error

	// Get returns length bytes of the object starting at offset. A length
	// below zero means "to the end". A range that runs past the end is
	// cut at the end; an offset past the end (offset > size) is
	// ErrInvalidRange. The caller owns the returned slice.
	Get(ctx context.Context, key string, offset, length int64) ([]byte, error)

	// Delete removes key. Deleting a key that does not exist is not an
	// error.
	Delete(ctx context.Context, key string) error

	// List returns the objects whose key starts with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
}

// Aliaser is a Store's optional power: a store that keeps an object in
// places its key names (package express) lists it under a key naming
// where it found copies, which need not be the key it was committed
// under. The gc's reconciler asks for the aliases before it takes a
// listed key for an orphan.
type Aliaser interface {
	// Aliases returns every key the object listed as key may be known
	// by, key included; deleting any of them deletes it.
	Aliases(key string) []string
}
