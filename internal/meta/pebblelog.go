package meta

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
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
