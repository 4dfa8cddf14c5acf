package meta

// The key-value interface the state machine works against. It is what
// apply and View actually use of Pebble, and no more, so the state
// machine cannot reach the file system, the log or a clock through it:
// package replica adapts a Pebble indexed batch (Batch) and a Pebble
// snapshot (Snapshot), MemStore is the in-memory reference.
//
// A Batch belongs to the one goroutine applying. A Snapshot's Get and
// NewIter may be called concurrently, as a View may be read from several
// goroutines; an Iterator belongs to the goroutine that made it.

// Reader reads one consistent state.
type Reader interface {
	// Get returns the value stored under key; found is false if there
	// is none. The caller owns the returned slice.
	Get(key []byte) (value []byte, found bool, err error)
	// NewIter returns an iterator over the keys in [lower, upper); a
	// nil bound is no bound. The iterator sees the state as of the
	// call. The caller must Close it.
	NewIter(lower, upper []byte) (Iterator, error)
}

// Iterator walks keys in byte order within its bounds. It starts
// unpositioned; each positioning method reports whether it landed on a
// key. Key and Value belong to the iterator and are valid until the next
// positioning call: the caller copies what it keeps. *pebble.Iterator
// implements it as is.
type Iterator interface {
	First() bool
	Last() bool
	Next() bool
	Prev() bool
	// SeekGE moves to the first key >= key, SeekLT to the last < key.
	SeekGE(key []byte) bool
	SeekLT(key []byte) bool
	Key() []byte
	Value() []byte
	// Error is the error that ended the iteration, if any.
	Error() error
	Close() error
}

// Batch is what apply reads and writes. Its reads see its own writes; no
// one else sees them until the driver commits it, with the applied
// position written in the same batch. Set and Delete copy their
// arguments, so the caller may reuse its buffers.
type Batch interface {
	Reader
	Set(key, value []byte) error
	Delete(key []byte) error
	// DeleteRange deletes every key in [start, end).
	DeleteRange(start, end []byte) error
}

// Snapshot is the state a View reads: a Reader whose answers never
// change, released by Close.
type Snapshot interface {
	Reader
	Close() error
}
