// Package loglettest owns the conformance suite for sharedlog.Loglet
// backends, in the manner of testing/fstest: every backend's tests call
// Run (and RunDurable if it persists), so the contract documented on
// sharedlog.Loglet is pinned down in one place.
//
// The suite is backend-neutral and sized for network backends: a few
// hundred appends per case, scaled with Options.
package loglettest

import (
	"context"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// Options scale the suite. The zero value gives the defaults.
type Options struct {
	// Entries is the number of appends in the sequential and tailing
	// cases. Default 200.
	Entries int
	// Appenders and AppendsPerAppender shape the concurrent cases.
	// Defaults 8 and 50.
	Appenders          int
	AppendsPerAppender int
	// MaxEntryBytes is the largest entry the backend must store; the
	// suite appends entries of exactly this size. Default 1 MiB; lower
	// it for backends with smaller item limits.
	MaxEntryBytes int
	// Timeout bounds each case as a deadlock guard, not a speed check.
	// Default 2 minutes.
	Timeout time.Duration
	// Seed seeds the random-operations case; 0 picks one from the clock.
	// The seed is logged when that case fails.
	Seed int64
}

func (o Options) withDefaults() Options {
	if o.Entries <= 0 {
		o.Entries = 200
	}
	if o.Appenders <= 0 {
		o.Appenders = 8
	}
	if o.AppendsPerAppender <= 0 {
		o.AppendsPerAppender = 50
	}
	if o.MaxEntryBytes <= 0 {
		o.MaxEntryBytes = 1 << 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano()
	}
	return o
}

// Run runs the conformance suite with default Options.
func Run(t *testing.T, newLoglet func(t *testing.T) sharedlog.Loglet) {
	t.Helper()
	Options{}.Run(t, newLoglet)
}

// RunDurable runs the reopen suite with default Options.
func RunDurable(t *testing.T, open func(t *testing.T, dir string) sharedlog.Loglet) {
	t.Helper()
	Options{}.RunDurable(t, open)
}

// Run runs every conformance case as a subtest. newLoglet returns a new,
// empty loglet for each case; it may register its own t.Cleanup for
// resources beyond the loglet. Run closes each loglet when its case ends,
// also after a case closed it itself, so a second Close must not panic.
func (o Options) Run(t *testing.T, newLoglet func(t *testing.T) sharedlog.Loglet) {
	t.Helper()
	o = o.withDefaults()
	cases := []struct {
		name string
		fn   func(e *env)
	}{
		{"Empty", testEmpty},
		{"AppendReadBack", testAppendReadBack},
		{"ReadNextBounds", testReadNextBounds},
		{"NoAliasing", testNoAliasing},
		{"EntrySizes", testEntrySizes},
		{"ConcurrentAppends", testConcurrentAppends},
		{"Seal", testSeal},
		{"SealEmpty", testSealEmpty},
		{"AppendRacingSeal", testAppendRacingSeal},
		{"PrefixTrim", testPrefixTrim},
		{"TailingReader", testTailingReader},
		{"WaitTail", testWaitTail},
		{"CanceledContext", testCanceledContext},
		{"Close", testClose},
		{"RandomOps", testRandomOps},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), o.Timeout)
			defer cancel()
			l := newLoglet(t)
			t.Cleanup(func() { _ = l.Close() })
			tc.fn(&env{t: t, ctx: ctx, l: l, o: o})
		})
	}
}

// RunDurable runs the cases for backends that persist: state written
// through one loglet must be there when the same storage is opened again.
// open opens the loglet stored under dir, creating it if it is new; the
// suite gives each case a fresh dir (from t.TempDir) and calls open again
// with the same dir to reopen. Backends that keep no files use dir as a
// unique name. The suite closes every loglet it opens.
func (o Options) RunDurable(t *testing.T, open func(t *testing.T, dir string) sharedlog.Loglet) {
	t.Helper()
	o = o.withDefaults()
	cases := []struct {
		name string
		fn   func(r *reopener)
	}{
		{"ReopenEmpty", testReopenEmpty},
		{"Reopen", testReopen},
		{"ReopenSealed", testReopenSealed},
		{"ReopenTrimmed", testReopenTrimmed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), o.Timeout)
			defer cancel()
			dir := t.TempDir()
			r := &reopener{open: open, dir: dir}
			r.env = env{t: t, ctx: ctx, l: open(t, dir), o: o}
			t.Cleanup(func() { _ = r.l.Close() })
			tc.fn(r)
		})
	}
}

// reopener is an env whose loglet can be closed and opened again.
type reopener struct {
	env
	open func(t *testing.T, dir string) sharedlog.Loglet
	dir  string
}

func (r *reopener) reopen() {
	r.t.Helper()
	if err := r.l.Close(); err != nil {
		r.t.Fatalf("Close before reopen: %v", err)
	}
	r.l = r.open(r.t, r.dir)
}
