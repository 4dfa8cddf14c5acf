package sharedlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandkafka/strand/internal/clock"
)

// Opener opens the loglet a segment URL names, creating it empty if it
// does not exist yet. Every call returns a new handle that the caller
// closes; handles on one URL, in one process or several, share the
// loglet's entries and its seal. A backend may allow only one open
// handle per loglet (filelog locks its directory): a VirtualLog keeps at
// most one per URL, so such a log serves one process. On error there is
// no handle: the caller closes nothing.
type Opener func(ctx context.Context, url string) (Loglet, error)

// checked returns o made to keep its contract whatever it returns: a
// handle that comes with an error is dropped, and a nil one without an
// error is an error. An Opener built on a backend's constructor, which
// returns a *T, hands a nil *T back as a Loglet that is not nil, and
// whose Close panics in whatever cleanup holds it.
func (o Opener) checked() Opener {
	return func(ctx context.Context, url string) (Loglet, error) {
		ll, err := o(ctx, url)
		switch {
		case err != nil:
			return nil, err
		case ll == nil:
			return nil, fmt.Errorf("sharedlog: the Opener returned no loglet for %q", url)
		}
		return ll, nil
	}
}

// VirtualOptions configure a VirtualLog. The zero value is usable for a
// MetaStore that already holds a chain.
type VirtualOptions struct {
	// InitialURL is the loglet of the first segment, used only when the
	// MetaStore holds no chain yet. Its loglet must be empty.
	InitialURL string

	// NextURL names the loglet of a segment this client adds on its own,
	// when it finishes a reconfiguration another client started and then
	// abandoned (the active loglet is sealed but the chain was never
	// extended). Given the chain being extended, it must return a URL no
	// chain of this log has used. Clients racing to finish one stall may
	// agree on the name or not: the MetaStore picks one winner.
	// Default: DefaultNextURL.
	NextURL func(c Chain) (string, error)

	// PollInterval is how often the log rereads the MetaStore while it
	// waits for another client's reconfiguration, and how often WaitTail
	// polls a loglet that is not a TailWaiter: always one that is not a
	// TailProber either (every backend is one or the other; only a
	// wrapper that hides both, as tests use, is polled so), and a
	// TailProber while a reader is eager (Eager). Default 20ms.
	PollInterval time.Duration

	// IdlePollInterval is how often WaitTail polls a TailProber (a
	// loglet on a service that bills every request: S3, DynamoDB) while
	// no reader is eager, counted from the last time the handle learned
	// the tail: an append through it tells the tail as a probe would.
	// Its polls cost one request each, plus a read of the trim point
	// once per slotlog TrimGrace/2 (a minute by default): at most 5 in
	// a minute. An agent whose lease renewals come more often (every
	// 12s on such a log by default) sends no probes at all: 5 renewals
	// and that read. Readers that wait for other agents' appends hold
	// Eager, so a copy that lags while idle keeps nobody waiting.
	// Default 15s.
	IdlePollInterval time.Duration

	// StallTimeout is how long an appender that found the active loglet
	// sealed waits for the sealing client to extend the chain before it
	// extends the chain itself. Too short and appenders steal operators'
	// reconfigurations (harmless, but Reconfigure then reports
	// ErrConflict); too long and an abandoned reconfiguration stops
	// appends for that long. Default 2s; negative means at once.
	StallTimeout time.Duration

	// TargetCheckTimeout bounds how long a reconfiguration waits for its
	// target loglet to open and answer, before the seal. A backend whose
	// client retries until its context ends (etcd's does) would otherwise
	// hold an operator's migration to an unreachable target for as long
	// as the caller's context allows. Default 15s.
	TargetCheckTimeout time.Duration

	// Clock times the log's own waits: for another client's
	// reconfiguration (PollInterval, StallTimeout) and between polls of
	// a loglet that is not a TailWaiter. Default clock.Real.
	Clock clock.Clock
}

const (
	defaultPollInterval     = 20 * time.Millisecond
	defaultIdlePollInterval = 15 * time.Second
	defaultStallTimeout     = 2 * time.Second
	// defaultTargetCheckTimeout is long enough for a remote backend's
	// first connection (TLS, authentication, a DynamoDB table check) and
	// short enough that a wrong URL is reported while the operator waits.
	defaultTargetCheckTimeout = 15 * time.Second
	// maxChainAttempts bounds how many chains one operation tries before
	// giving up: every retry follows a seal or a lost CAS, and a log is
	// reconfigured a few times a month, so needing this many means
	// something keeps sealing the log.
	maxChainAttempts = 16
)

// ErrSegmentNotEmpty: the loglet meant for a new segment already holds
// entries (or is sealed). Its positions would not start at the segment's
// Start, so it cannot join the chain.
var ErrSegmentNotEmpty = errors.New("sharedlog: loglet for a new segment is not empty")

// VirtualLog is the shared log as its users see it: one address space of
// dense global positions over a chain of loglet segments kept in a
// MetaStore. Appends go to the active (last) segment; reads go to the
// segment that owns the position. Reconfigure moves the log to a new
// loglet, on any backend, while clients keep appending: it seals the
// active loglet, reads its final tail, and CASes a chain in which a new
// segment starts at that tail. A writer that meets the seal rereads the
// chain and retries on the new segment; if the client that sealed never
// writes the chain, the writer finishes the reconfiguration itself.
//
// Several VirtualLogs (one per agent) may share a MetaStore and its
// loglets. Safe for concurrent use.
type VirtualLog struct {
	ms   MetaStore
	open Opener
	opts VirtualOptions
	clk  clock.Clock

	// reconfigMu serializes this handle's chain writes (Reconfigure,
	// finishing a stall, trimming), which would otherwise only make each
	// other lose CASes.
	reconfigMu sync.Mutex
	// openMu serializes opening loglets, so callers that need one segment
	// at once open it once.
	openMu sync.Mutex

	mu struct {
		sync.Mutex
		// chain is the newest chain this handle has seen. It is never
		// changed in place: installs replace it.
		chain Chain
		// loglets holds an open handle per segment URL.
		loglets map[string]Loglet
		closed  bool
		// changed, when a waiter made it, is closed on a chain install,
		// a local append, a CheckTail that raised seen, an Eager hold or
		// Close, and then cleared.
		changed chan struct{}
		// moving is the flight getting this handle off a sealed active
		// segment; appenders that meet the seal together share it.
		moving *flight
	}

	// waiting mirrors mu.changed != nil, so appends skip the lock when
	// nobody waits. A waiter sets it before it checks the tail, so an
	// append that finds it unset is seen by that check.
	waiting atomic.Bool
	// eager counts the Eager holds: while it is positive, WaitTail
	// polls a TailProber every PollInterval.
	eager atomic.Int64
	// seen is the highest global tail this handle has learned, from
	// its appends and tail checks: every position below it is durable
	// and readable. A polling WaitTail returns it without asking the
	// backend when it is past after, and asks a TailProber only whether
	// the tail moved when it is after.
	seen atomic.Uint64
	// seenAt is when seen was last raised or confirmed (UnixNano on
	// clk): WaitTail's first probe of a TailProber waits a poll period
	// from it.
	seenAt atomic.Int64

	// testHooks let tests stop a reconfiguration at a chosen step.
	testHooks struct {
		// beforeSeal runs after the new loglet is checked, before the
		// active one is sealed.
		beforeSeal func()
	}
}

type flight struct {
	done chan struct{}
}

var (
	_ Log        = (*VirtualLog)(nil)
	_ TailWaiter = (*VirtualLog)(nil)
	_ Eager      = (*VirtualLog)(nil)
)

// OpenVirtual opens the log whose chain ms holds, opening segments with
// open. If ms holds no chain it creates one whose single segment is
// opts.InitialURL. The VirtualLog does not own ms.
func OpenVirtual(ctx context.Context, ms MetaStore, open Opener, opts VirtualOptions) (*VirtualLog, error) {
	if ms == nil || open == nil {
		return nil, errors.New("sharedlog: OpenVirtual needs a MetaStore and an Opener")
	}
	if opts.NextURL == nil {
		opts.NextURL = DefaultNextURL
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = defaultPollInterval
	}
	if opts.IdlePollInterval <= 0 {
		opts.IdlePollInterval = defaultIdlePollInterval
	}
	if opts.StallTimeout == 0 {
		opts.StallTimeout = defaultStallTimeout
	}
	if opts.TargetCheckTimeout <= 0 {
		opts.TargetCheckTimeout = defaultTargetCheckTimeout
	}
	v := &VirtualLog{ms: ms, open: open.checked(), opts: opts, clk: clock.OrReal(opts.Clock)}
	v.mu.loglets = make(map[string]Loglet)
	c, err := ms.Get(ctx)
	if err != nil {
		return nil, err
	}
	if c.Empty() {
		if c, err = v.bootstrap(ctx); err != nil {
			v.Close()
			return nil, err
		}
	}
	v.install(c)
	return v, nil
}

// bootstrap writes the first chain, or adopts the one a racing client
// wrote.
func (v *VirtualLog) bootstrap(ctx context.Context) (Chain, error) {
	url := v.opts.InitialURL
	if url == "" {
		return Chain{}, errors.New("sharedlog: the MetaStore holds no chain and no InitialURL was given")
	}
	ll, err := v.open(ctx, url)
	if err != nil {
		return Chain{}, fmt.Errorf("sharedlog: open initial segment %q: %w", url, err)
	}
	first := Chain{Version: 1, Segments: []Segment{{Start: 0, URL: url}}}
	err = checkEmpty(ctx, ll, url)
	if err == nil {
		err = v.ms.CAS(ctx, 0, first)
	}
	if err == nil {
		v.adopt(first, url, ll)
		return first, nil
	}
	// A racing client may have bootstrapped first (and even appended to
	// the initial loglet, making it look non-empty).
	c, gerr := v.ms.Get(ctx)
	if gerr != nil || c.Empty() {
		ll.Close()
		return Chain{}, err
	}
	v.adopt(c, url, ll)
	return c, nil
}

// Chain returns the newest chain this handle has seen.
func (v *VirtualLog) Chain() Chain {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.mu.chain.Clone()
}

// Close closes the loglet handles the log opened. It neither seals the
// log nor closes the MetaStore. Calls after Close return ErrClosed.
func (v *VirtualLog) Close() error {
	v.mu.Lock()
	if v.mu.closed {
		v.mu.Unlock()
		return nil
	}
	v.mu.closed = true
	lls := v.mu.loglets
	v.mu.loglets = nil
	v.wakeLocked()
	v.mu.Unlock()
	var errs []error
	for _, ll := range lls {
		errs = append(errs, ll.Close())
	}
	return errors.Join(errs...)
}

// Append writes entry to the active segment. When the active loglet turns
// out sealed it follows the reconfiguration and retries there, at most
// maxChainAttempts times. An error that wraps ErrSealed means the entry
// was written nowhere; it may also wrap the error (a canceled ctx, a
// MetaStore failure) that stopped Append from following the log.
func (v *VirtualLog) Append(ctx context.Context, entry []byte) (Pos, error) {
	for range maxChainAttempts {
		act, ll, err := v.active(ctx)
		if err != nil {
			return 0, err
		}
		if act.Sealed {
			return 0, ErrSealed
		}
		p, err := ll.Append(ctx, entry)
		if err == nil {
			v.noteSeen(act.Start + p + 1)
			v.wake()
			return act.Start + p, nil
		}
		if v.dropped(err, act.URL) {
			continue
		}
		if !errors.Is(err, ErrSealed) {
			return 0, err
		}
		if err := v.moveOn(ctx, act.URL); err != nil {
			return 0, fmt.Errorf("sharedlog: append: %w (following the reconfiguration: %w)", ErrSealed, err)
		}
	}
	return 0, fmt.Errorf("sharedlog: append met %d sealed segments in a row: %w", maxChainAttempts, ErrSealed)
}

// CheckTail asks the active loglet. If it is sealed, the log has either
// moved on (reread the chain and ask the new active loglet) or is being
// reconfigured, in which case the sealed tail is the log's tail: the new
// segment will start there.
func (v *VirtualLog) CheckTail(ctx context.Context) (Pos, bool, error) {
	tail, sealed, err := v.checkTail(ctx)
	if err == nil && v.noteSeen(tail) {
		// A waiter asleep between polls returns this tail now. It is
		// woken, never cancelled: a request cut off mid-flight is billed
		// all the same, and a burst of them kills dynalite.
		v.wake()
	}
	return tail, sealed, err
}

func (v *VirtualLog) checkTail(ctx context.Context) (Pos, bool, error) {
	for range maxChainAttempts {
		c, err := v.current()
		if err != nil {
			return 0, false, err
		}
		act := c.Active()
		if act.Sealed {
			return act.End, true, nil
		}
		tail, sealed, err := v.checkSegmentTail(ctx, act)
		if v.dropped(err, act.URL) {
			continue
		}
		if err != nil || !sealed {
			return tail, false, err
		}
		nc, err := v.reload(ctx)
		if err != nil {
			return 0, false, err
		}
		if na := nc.Active(); na.URL == act.URL && !na.Sealed {
			return tail, false, nil
		}
	}
	return 0, false, fmt.Errorf("sharedlog: check tail: the chain changed %d times in a row", maxChainAttempts)
}

// checkSegmentTail returns the global tail of seg's loglet and whether it
// is sealed.
func (v *VirtualLog) checkSegmentTail(ctx context.Context, seg Segment) (Pos, bool, error) {
	ll, err := v.loglet(ctx, seg.URL)
	if err != nil {
		return 0, false, err
	}
	tail, sealed, err := ll.CheckTail(ctx)
	if err != nil {
		return 0, false, err
	}
	return seg.Start + tail, sealed, nil
}

// ReadNext reads from the one segment that owns from, so a call never
// crosses a segment boundary, and never returns an entry at or past a
// sealed segment's End: a loglet may hold zombie entries there, written
// after the seal by a backend that let them in, and they are not part of
// the log.
func (v *VirtualLog) ReadNext(ctx context.Context, from, max Pos) ([]Entry, error) {
	for range maxChainAttempts {
		c, err := v.current()
		if err != nil {
			return nil, err
		}
		if from < c.TrimPoint {
			return nil, ErrTrimmed
		}
		i, ok := c.segmentFor(from)
		if !ok {
			if from < c.Segments[0].Start {
				return nil, ErrTrimmed
			}
			return nil, nil // past the End of a sealed log
		}
		seg := c.Segments[i]
		// [from, end) is the range to read; it may be empty, but the
		// loglet still reports a from below its trim point.
		end := max
		if seg.Sealed {
			end = min(end, seg.End)
		}
		end = maxPos(end, from)
		ll, err := v.loglet(ctx, seg.URL)
		if err != nil {
			return nil, err
		}
		es, err := ll.ReadNext(ctx, from-seg.Start, end-seg.Start)
		if v.dropped(err, seg.URL) {
			continue // the next round sees the trim point
		}
		if err != nil {
			return nil, err
		}
		if len(es) > 0 || from == end {
			return globalEntries(es, seg, from, end)
		}
		if seg.Sealed {
			return nil, fmt.Errorf("sharedlog: segment %q returned nothing at %d, below its sealed end %d", seg.URL, from, seg.End)
		}
		// Nothing at from in the active loglet: the log's tail, unless
		// the loglet was sealed and the log moved on without us.
		_, sealed, err := ll.CheckTail(ctx)
		if err != nil {
			return nil, err
		}
		if !sealed {
			return nil, nil
		}
		nc, err := v.reload(ctx)
		if err != nil {
			return nil, err
		}
		if na := nc.Active(); na.URL == seg.URL && !na.Sealed {
			return nil, nil // reconfiguration under way; nothing past the seal yet
		}
	}
	return nil, fmt.Errorf("sharedlog: read: the chain changed %d times in a row", maxChainAttempts)
}

func maxPos(a, b Pos) Pos {
	if a > b {
		return a
	}
	return b
}

// globalEntries maps a loglet's entries to global positions, checking
// that the loglet kept its contract: dense from `from`, below end.
func globalEntries(es []Entry, seg Segment, from, end Pos) ([]Entry, error) {
	for i := range es {
		p := seg.Start + es[i].Pos
		if p != from+Pos(i) || p >= end {
			return nil, fmt.Errorf("sharedlog: segment %q returned position %d for a read from %d below %d (entry %d)",
				seg.URL, p, from, end, i)
		}
		es[i].Pos = p
	}
	return es, nil
}

// PrefixTrim trims every segment's loglet below before (clamped to the
// tail), then records before as the chain's trim point, dropping sealed
// segments that lie wholly below it and closing their loglets. Loglets
// are trimmed first so a crash between the two steps leaves no loglet
// that the chain no longer names holding entries; the next PrefixTrim
// repeats the work. A CAS that failed is settled by rereading the chain,
// since it may have stored the trim.
func (v *VirtualLog) PrefixTrim(ctx context.Context, before Pos) error {
	tail, _, err := v.CheckTail(ctx)
	if err != nil {
		return err
	}
	before = min(before, tail)
	v.reconfigMu.Lock()
	defer v.reconfigMu.Unlock()
	c, err := v.current()
	if err != nil {
		return err
	}
	var casErr error
	for range maxChainAttempts {
		if before <= c.TrimPoint {
			return nil
		}
		for _, seg := range c.Segments {
			if seg.Start >= before {
				break
			}
			local := before - seg.Start
			if seg.Sealed {
				local = min(local, seg.End-seg.Start)
			}
			ll, err := v.loglet(ctx, seg.URL)
			if err != nil {
				return err
			}
			if err := ll.PrefixTrim(ctx, local); err != nil {
				return fmt.Errorf("sharedlog: trim segment %q below %d: %w", seg.URL, local, err)
			}
		}
		next := c.Clone()
		next.Version++
		next.TrimPoint = before
		for len(next.Segments) > 1 && next.Segments[0].End <= before {
			next.Segments = next.Segments[1:]
		}
		err := v.ms.CAS(ctx, c.Version, next)
		if err == nil {
			v.install(next)
			return nil
		}
		// Lost to a reconfiguration or another trim, or failed, perhaps
		// after storing next: the chain tells, and the next round either
		// finds the trim point there or trims again.
		casErr = fmt.Errorf("sharedlog: trim: CAS of chain version %d: %w", next.Version, err)
		var rerr error
		if c, rerr = v.reload(ctx); rerr != nil {
			return fmt.Errorf("%w (rereading it: %w)", casErr, rerr)
		}
	}
	return fmt.Errorf("sharedlog: trim failed %d CASes in a row, the last: %w", maxChainAttempts, casErr)
}

// WaitTail blocks until the tail passes after, the log is sealed, or ctx
// is done. It waits on the active loglet when that is a TailWaiter, and
// otherwise polls it (waking early for appends and CheckTails made
// through this handle, which it answers without asking the backend, for
// a chain change and for Eager): every PollInterval, except a
// TailProber, which it asks with TailMoved, and while no reader is
// eager only every IdlePollInterval. A tail this handle saw past after is returned
// without asking the backend.
func (v *VirtualLog) WaitTail(ctx context.Context, after Pos) (Pos, error) {
	// known is a loglet-local tail of segment probed, one this call
	// checked or after itself: from then on a TailProber is asked only
	// whether its tail moved past it.
	var (
		probed string
		known  Pos
	)
	for {
		c, err := v.current()
		if err != nil {
			return 0, err
		}
		act := c.Active()
		if act.Sealed {
			return act.End, nil
		}
		if after < act.Start {
			return act.Start, nil // the active segment starts past after
		}
		ll, err := v.loglet(ctx, act.URL)
		if err != nil {
			return 0, err
		}
		var tail Pos
		if tw, ok := ll.(TailWaiter); ok {
			t, err := tw.WaitTail(ctx, after-act.Start)
			if v.dropped(err, act.URL) {
				continue
			}
			if err != nil {
				return act.Start + t, err
			}
			if tail = act.Start + t; tail > after {
				return tail, nil
			}
			// At the tail and not waiting: the loglet is sealed.
		} else {
			ch := v.changed()
			seen := Pos(v.seen.Load())
			if seen > after {
				return seen, nil
			}
			prober, _ := ll.(TailProber)
			if prober != nil && probed != act.URL && after == seen {
				// Every position below after is in the log, so the
				// loglet need only say whether its tail is past it.
				probed, known = act.URL, after-act.Start
			}
			if prober != nil && probed == act.URL {
				if after == seen && v.eager.Load() == 0 {
					// seen is the tail as of seenAt (an append, most
					// likely this agent's renewal): an idle probe
					// sooner than a poll period after it is a request
					// spent on what the handle knows. An eager reader
					// probes at once, as Eager promises.
					wait := v.opts.IdlePollInterval - clock.Since(v.clk, time.Unix(0, v.seenAt.Load()))
					if wait > 0 {
						if err := v.waitChange(ctx, ch, wait); err != nil {
							return act.Start + known, err
						}
						continue
					}
				}
				moved, err := prober.TailMoved(ctx, known)
				if v.dropped(err, act.URL) {
					continue
				}
				if err != nil {
					return act.Start + known, err
				}
				if !moved {
					if err := v.waitChange(ctx, ch, v.pollWait(prober)); err != nil {
						return act.Start + known, err
					}
					continue
				}
			}
			t, sealed, err := ll.CheckTail(ctx)
			if v.dropped(err, act.URL) {
				continue
			}
			if err != nil {
				return 0, err
			}
			tail = act.Start + t
			v.noteSeen(tail)
			if tail > after {
				return tail, nil
			}
			if !sealed {
				probed, known = act.URL, t
				if err := v.waitChange(ctx, ch, v.pollWait(prober)); err != nil {
					return tail, err
				}
				continue
			}
		}
		if err := v.awaitMoveOff(ctx, act.URL, -1); err != nil {
			return tail, err
		}
	}
}

// pollWait is how long WaitTail waits between polls of a loglet that is
// not a TailWaiter; prober is the loglet as a TailProber, or nil.
func (v *VirtualLog) pollWait(prober TailProber) time.Duration {
	if prober == nil || v.eager.Load() > 0 {
		return v.opts.PollInterval
	}
	return v.opts.IdlePollInterval
}

// Eager implements the Eager power: while a hold lasts, WaitTail polls
// every PollInterval; taking one wakes a waiter to poll at once.
func (v *VirtualLog) Eager() (release func()) {
	v.eager.Add(1)
	v.mu.Lock()
	v.wakeLocked()
	v.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { v.eager.Add(-1) }) }
}

// noteSeen records that every position below tail is durable (and when
// it was learned: seenAt), and reports whether that raised seen.
func (v *VirtualLog) noteSeen(tail Pos) bool {
	for {
		a := v.seen.Load()
		if uint64(tail) < a {
			return false
		}
		raised := uint64(tail) > a
		if !raised || v.seen.CompareAndSwap(a, uint64(tail)) {
			v.seenAt.Store(v.clk.Now().UnixNano())
			return raised
		}
	}
}

// dropped reports whether err is ErrClosed from the loglet at url because
// a trim dropped its segment from the chain (install closes such
// loglets), rather than because the log was closed. The loglet was
// sealed before it could be dropped, so an append that met this was not
// written; the caller retries on the newer chain.
func (v *VirtualLog) dropped(err error, url string) bool {
	if !errors.Is(err, ErrClosed) {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return !v.mu.closed && !v.mu.chain.Contains(url)
}

// active returns the active segment and its loglet (nil if the segment
// is sealed), taking the lock once on the append path.
func (v *VirtualLog) active(ctx context.Context) (Segment, Loglet, error) {
	v.mu.Lock()
	if v.mu.closed {
		v.mu.Unlock()
		return Segment{}, nil, ErrClosed
	}
	act := v.mu.chain.Active()
	ll := v.mu.loglets[act.URL]
	v.mu.Unlock()
	if ll != nil || act.Sealed {
		return act, ll, nil
	}
	ll, err := v.loglet(ctx, act.URL)
	return act, ll, err
}

// current returns the newest chain seen, or ErrClosed.
func (v *VirtualLog) current() (Chain, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mu.closed {
		return Chain{}, ErrClosed
	}
	return v.mu.chain, nil
}

// reload reads the chain from the MetaStore, installs it, and returns the
// newest chain seen.
func (v *VirtualLog) reload(ctx context.Context) (Chain, error) {
	c, err := v.ms.Get(ctx)
	if err != nil {
		return Chain{}, fmt.Errorf("sharedlog: reload chain: %w", err)
	}
	if c.Empty() {
		return Chain{}, fmt.Errorf("%w: the MetaStore lost the chain", ErrInvalidChain)
	}
	v.install(c)
	return v.current()
}

// install makes c the handle's chain if it is newer, and closes the
// loglets of segments it no longer names.
func (v *VirtualLog) install(c Chain) {
	v.mu.Lock()
	if v.mu.closed || c.Version <= v.mu.chain.Version {
		v.mu.Unlock()
		return
	}
	v.mu.chain = c
	var drop []Loglet
	for url, ll := range v.mu.loglets {
		if !c.Contains(url) {
			drop = append(drop, ll)
			delete(v.mu.loglets, url)
		}
	}
	v.wakeLocked()
	v.mu.Unlock()
	for _, ll := range drop {
		ll.Close()
	}
}

// adopt caches ll as the handle on url if c names url and none is cached
// yet, and closes it otherwise.
func (v *VirtualLog) adopt(c Chain, url string, ll Loglet) {
	v.mu.Lock()
	if !v.mu.closed && c.Contains(url) && v.mu.loglets[url] == nil {
		v.mu.loglets[url] = ll
		ll = nil
	}
	v.mu.Unlock()
	if ll != nil {
		ll.Close()
	}
}

// loglet returns the open handle on url, opening it on first use.
func (v *VirtualLog) loglet(ctx context.Context, url string) (Loglet, error) {
	v.mu.Lock()
	ll, closed := v.mu.loglets[url], v.mu.closed
	v.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case ll != nil:
		return ll, nil
	}
	v.openMu.Lock()
	defer v.openMu.Unlock()
	v.mu.Lock()
	ll = v.mu.loglets[url]
	v.mu.Unlock()
	if ll != nil {
		return ll, nil
	}
	ll, err := v.open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("sharedlog: open segment %q: %w", url, err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mu.closed {
		ll.Close()
		return nil, ErrClosed
	}
	v.mu.loglets[url] = ll
	return ll, nil
}

// changed returns a channel closed at the next chain install, local
// append, CheckTail that saw a newer tail, Eager hold or Close. Take it
// before checking the condition waited for.
func (v *VirtualLog) changed() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mu.changed == nil {
		v.mu.changed = make(chan struct{})
		v.waiting.Store(true)
	}
	return v.mu.changed
}

// wake wakes waiters after a local append or a CheckTail that raised
// seen.
func (v *VirtualLog) wake() {
	if !v.waiting.Load() {
		return
	}
	v.mu.Lock()
	v.wakeLocked()
	v.mu.Unlock()
}

func (v *VirtualLog) wakeLocked() {
	if v.mu.changed != nil {
		close(v.mu.changed)
		v.mu.changed = nil
		v.waiting.Store(false)
	}
}

// waitChange waits for ch, at most d on the log's clock, or ctx.
func (v *VirtualLog) waitChange(ctx context.Context, ch <-chan struct{}, d time.Duration) error {
	timeout, t := clock.After(v.clk, d)
	defer t.Stop()
	select {
	case <-ch:
	case <-timeout:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
