package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/strandkafka/strand/internal/meta"
)

// pebbleCacheBytes sizes the block cache. Apply's point lookups need the
// filter and index blocks of every level cached; Pebble's 8 MiB default
// thrashes once the offset index passes a few hundred MiB. The cache fills
// on demand, so small stores (and tests) do not pay for it.
const pebbleCacheBytes = 64 << 20

// pebbleOptions are the store's options.
func pebbleOptions(logger *slog.Logger) *pebble.Options {
	opts := &pebble.Options{Logger: pebbleLogger{l: logger}, CacheSize: pebbleCacheBytes}
	// Apply looks up keys that are usually absent (a new object key, a
	// new topic id); without filters each miss reads a block from every
	// level.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	return opts
}

// pebbleLogger sends Pebble's log to slog. Pebble reports every flush and
// compaction at info level, which is noise next to a broker's log, so info
// goes to debug.
type pebbleLogger struct {
	l *slog.Logger
	// fatal, if set, takes Fatalf's message and must not return; nil
	// panics.
	fatal func(msg string)
}

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l.Enabled(context.Background(), slog.LevelDebug) {
		p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf must not return: Pebble calls it when continuing would corrupt the
// store.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := "pebble: " + fmt.Sprintf(format, args...)
	p.l.Error(msg)
	if p.fatal != nil {
		p.fatal(msg)
	}
	panic(msg)
}

// The adapters from Pebble to the state machine's key-value interface
// (meta.Batch, meta.Snapshot). Each is one pointer, so converting it to
// the interface allocates nothing; *pebble.Iterator is a meta.Iterator
// as is. Each calls its own concrete type rather than going through
// pebble.Reader: a call through an interface makes its arguments escape,
// so the IterOptions would be a heap allocation per iterator.

// pebbleBatch is apply's view of an indexed batch: reads see its writes.
type pebbleBatch struct{ b *pebble.Batch }

func (p pebbleBatch) Get(key []byte) ([]byte, bool, error) { return pebbleValue(p.b.Get(key)) }

func (p pebbleBatch) NewIter(lower, upper []byte) (meta.Iterator, error) {
	return pebbleIter(p.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper}))
}

func (p pebbleBatch) Set(key, value []byte) error         { return p.b.Set(key, value, nil) }
func (p pebbleBatch) Delete(key []byte) error             { return p.b.Delete(key, nil) }
func (p pebbleBatch) DeleteRange(start, end []byte) error { return p.b.DeleteRange(start, end, nil) }

// pebbleSnapshot is what a meta.View reads.
type pebbleSnapshot struct{ s *pebble.Snapshot }

func (p pebbleSnapshot) Get(key []byte) ([]byte, bool, error) { return pebbleValue(p.s.Get(key)) }

func (p pebbleSnapshot) NewIter(lower, upper []byte) (meta.Iterator, error) {
	return pebbleIter(p.s.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper}))
}

func (p pebbleSnapshot) Close() error { return p.s.Close() }

// pebbleReader reads the live store, outside any batch: the driver's own
// reads when it opens a copy.
type pebbleReader struct{ db *pebble.DB }

func (p pebbleReader) Get(key []byte) ([]byte, bool, error) { return pebbleValue(p.db.Get(key)) }

func (p pebbleReader) NewIter(lower, upper []byte) (meta.Iterator, error) {
	return pebbleIter(p.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper}))
}

// pebbleValue turns a Pebble Get into meta.Reader's: a copy the caller
// owns, found false for a missing key.
func pebbleValue(v []byte, closer io.Closer, err error) ([]byte, bool, error) {
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v = bytes.Clone(v)
	return v, true, closer.Close()
}

func pebbleIter(it *pebble.Iterator, err error) (meta.Iterator, error) {
	if err != nil {
		// Not it: a nil *pebble.Iterator in an interface is not nil.
		return nil, err
	}
	return it, nil
}
