package slotlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/retry"
	"github.com/strandkafka/strand/internal/sharedlog"
)

// Config configures a Loglet. Slots, Window and MaxEntryBytes are
// required; the rest have defaults.
type Config struct {
	Slots Slots
	// Name identifies the loglet in errors.
	Name string
	// Window is a property of the backend's format, the same for every
	// handle of a log: no handle writes a slot at or past the frontier it
	// knows plus Window. The tail search reads Window+1 slots.
	Window int
	// InFlight bounds this handle's concurrent slot writes; at most
	// Window. Default Window.
	InFlight int
	// TopOnly: the Slots cannot scan upward (S3 lists keys in one order
	// only, and the backend stores them newest first), so the frontier is
	// found from the top Window+1 slots alone.
	TopOnly bool
	// MaxEntryBytes is the largest entry Append takes.
	MaxEntryBytes int
	// MaxReadEntries bounds one ReadNext. Default 256.
	MaxReadEntries int
	// PutAttempts bounds the puts of one slot write whose outcome stays
	// unknown (see writeSlot). Default 6.
	PutAttempts int
	// RetryBackoff is the wait before the second put; it doubles, up to
	// maxRetryBackoff. Default 20ms.
	RetryBackoff time.Duration
	// TrimGrace is how long deletion waits behind a trim point (see the
	// package doc). Default 2 minutes; negative means none: slots are
	// deleted at once, and every acknowledgement and read rereads the
	// trim point. Every handle of a log must use the same value.
	TrimGrace time.Duration
	// Clock measures the trim-grace protocol (when a trim point was read,
	// when a trim was seen, when a put's reply came) and paces the puts
	// of a slot write. Default clock.Real.
	Clock clock.Clock
}

const (
	defaultMaxReadEntries = 256
	defaultPutAttempts    = 6
	defaultRetryBackoff   = 20 * time.Millisecond
	maxRetryBackoff       = time.Second
	// DefaultTrimGrace is Config.TrimGrace's default.
	DefaultTrimGrace = 2 * time.Minute
	// maxLostSlots bounds how many slots one append may lose to other
	// writers; every loss is progress for someone else, so reaching it
	// means this handle keeps losing every race.
	maxLostSlots = 4096
	// maxSealSlots bounds the slots Seal tries while appenders keep
	// filling the frontier ahead of it.
	maxSealSlots = 4096
	// maxScanRounds bounds one frontier search; each round reads Window+1
	// slots, so needing more means writers outrun the search.
	maxScanRounds = 8
	// maxReapMarks bounds the trim points a handle remembers for later
	// deletion.
	maxReapMarks = 16
)

// Loglet is a sharedlog.Loglet over a Slots. Safe for concurrent use.
// Handles on one Slots (in one process or many) share the log.
type Loglet struct {
	cfg Config
	st  Slots
	clk clock.Clock
	// putRetry paces the puts of one slot write (writeSlot).
	putRetry retry.Policy
	grace    time.Duration // TrimGrace, 0 for none
	trust    time.Duration // how old a trim point read may be: grace/2

	// bg outlives callers: a slot write goes on after its caller gave up,
	// because later slots wait for it. Close cancels it.
	bg     context.Context
	stop   context.CancelFunc
	writes sync.WaitGroup

	mu struct {
		sync.Mutex
		closed bool
		// fresh: base and next follow a frontier search.
		fresh bool
		// base: every slot below it holds an entry or is trimmed.
		base sharedlog.Pos
		// next is the position the next append gets; base <= next.
		next sharedlog.Pos
		// inflight counts running slot writes (including abandoned ones).
		inflight int
		// slots holds this handle's appends' slots in [base, next).
		slots map[sharedlog.Pos]*slot
		// lost counts appends lost to other writers in a row.
		lost int
		// sealed: a seal marker sits at sealPos.
		sealed  bool
		sealPos sharedlog.Pos
		// tp is the highest trim point seen; tpReadAt is when the newest
		// read of it was sent (zero before the first).
		tp       sharedlog.Pos
		tpReadAt time.Time
		tpFlight *flight
		// reap: trim points waiting out the grace period before the
		// slots below them are deleted; deleted: below it, done.
		reap    []reapMark
		deleted sharedlog.Pos
		// changed is closed and replaced on every change waiters watch.
		changed chan struct{}
		// known holds this handle's newest acknowledged entries, so
		// that reading them back (a replica applies what it proposed)
		// costs no request.
		known knownEntries
	}
}

// knownEntries is a bounded set of entries by position. A slot is
// written once, so an entry whose token came back ours is the slot's
// content for good, and serving it from memory is serving the log
// (ReadNext checks the trim point as for a read); what falls out is
// read from the service as any other entry. (The occupants a put meets
// are not kept: a Slots may return them without their data.)
type knownEntries struct {
	data  map[sharedlog.Pos][]byte
	bytes int
}

// Bounds on knownEntries: a reader applies its own appends within
// moments, so a few hundred entries cover the gap between
// acknowledgement and read even under load. Past them the lowest
// positions, the oldest appends, go first.
const (
	maxKnownEntries = 256
	maxKnownBytes   = 4 << 20
)

func (o *knownEntries) add(p sharedlog.Pos, data []byte) {
	if len(data) > maxKnownBytes {
		return
	}
	if o.data == nil {
		o.data = make(map[sharedlog.Pos][]byte)
	}
	o.drop(p) // a position rewritten by a rewind counts once
	for len(o.data) > 0 && (len(o.data) >= maxKnownEntries || o.bytes+len(data) > maxKnownBytes) {
		first, lowest := true, sharedlog.Pos(0)
		for q := range o.data {
			if first || q < lowest {
				first, lowest = false, q
			}
		}
		o.drop(lowest)
	}
	o.data[p] = data
	o.bytes += len(data)
}

func (o *knownEntries) drop(p sharedlog.Pos) {
	if d, ok := o.data[p]; ok {
		o.bytes -= len(d)
		delete(o.data, p)
	}
}

// take returns the entries held for [from, end), stopping at the first
// one not held, and forgets them: each is read back once. With none
// held at from, it returns the lowest position held in (from, end), or
// end: how far a read from the service should go, the next call
// serving the rest.
func (o *knownEntries) take(from, end sharedlog.Pos) ([]sharedlog.Entry, sharedlog.Pos) {
	var out []sharedlog.Entry
	for p := from; p < end; p++ {
		d, ok := o.data[p]
		if !ok {
			break
		}
		out = append(out, sharedlog.Entry{Pos: p, Data: d})
		o.drop(p)
	}
	if len(out) == 0 {
		for p := range o.data {
			if p > from && p < end {
				end = p
			}
		}
	}
	return out, end
}

// forgetBelow drops the entries below p: read from the service already.
func (o *knownEntries) forgetBelow(p sharedlog.Pos) {
	for q := range o.data {
		if q < p {
			o.drop(q)
		}
	}
}

var (
	_ sharedlog.Loglet     = (*Loglet)(nil)
	_ sharedlog.TailProber = (*Loglet)(nil)
)

type outcome uint8

const (
	outPending   outcome = iota
	outOurs              // the slot holds this write
	outForeign           // another writer's entry (or garbage below the trim point)
	outSeal              // the seal marker, not this write's
	outBelowTrim         // this write, but below the trim point: not in the log
	outFailed            // unknown
)

// slot is one append's slot write.
type slot struct {
	pos sharedlog.Pos
	out outcome
	err error // for outFailed and outBelowTrim
}

type flight struct {
	done chan struct{}
	err  error
}

type reapMark struct {
	tp   sharedlog.Pos
	seen time.Time // when tp was known to be stored
}

// New returns a Loglet over cfg.Slots. It does no I/O: the first
// operation finds the tail.
func New(cfg Config) (*Loglet, error) {
	switch {
	case cfg.Slots == nil:
		return nil, errors.New("slotlog: no Slots")
	case cfg.Window <= 0:
		return nil, errors.New("slotlog: Window must be positive")
	case cfg.MaxEntryBytes <= 0:
		return nil, errors.New("slotlog: MaxEntryBytes must be positive")
	case cfg.InFlight > cfg.Window:
		return nil, fmt.Errorf("slotlog: InFlight %d exceeds Window %d", cfg.InFlight, cfg.Window)
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = cfg.Window
	}
	if cfg.MaxReadEntries <= 0 {
		cfg.MaxReadEntries = defaultMaxReadEntries
	}
	if cfg.PutAttempts <= 0 {
		cfg.PutAttempts = defaultPutAttempts
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = defaultRetryBackoff
	}
	if cfg.TrimGrace == 0 {
		cfg.TrimGrace = DefaultTrimGrace
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	l := &Loglet{cfg: cfg, st: cfg.Slots, clk: cfg.Clock,
		putRetry: retry.Policy{Attempts: cfg.PutAttempts, Min: cfg.RetryBackoff, Max: maxRetryBackoff}}
	if cfg.TrimGrace > 0 {
		l.grace, l.trust = cfg.TrimGrace, cfg.TrimGrace/2
	}
	l.bg, l.stop = context.WithCancel(context.Background())
	l.mu.slots = make(map[sharedlog.Pos]*slot)
	l.mu.changed = make(chan struct{})
	return l, nil
}

func (l *Loglet) errorf(format string, args ...any) error {
	return fmt.Errorf("slotlog %s: %w", l.cfg.Name, fmt.Errorf(format, args...))
}

// check fails with ctx's error or ErrClosed.
func (l *Loglet) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return sharedlog.ErrClosed
	}
	return nil
}

func (l *Loglet) wakeLocked() {
	close(l.mu.changed)
	l.mu.changed = make(chan struct{})
}

// Append implements sharedlog.Loglet.
func (l *Loglet) Append(ctx context.Context, entry []byte) (sharedlog.Pos, error) {
	if err := l.check(ctx); err != nil {
		return 0, err
	}
	if len(entry) > l.cfg.MaxEntryBytes {
		return 0, sharedlog.Rejected(l.errorf("%w: %d bytes, at most %d", ErrEntryTooLarge, len(entry), l.cfg.MaxEntryBytes))
	}
	if err := l.prepare(ctx); err != nil {
		return 0, err
	}
	s := Slot{Kind: KindEntry, Token: NewToken(), Data: bytes.Clone(entry)}
	for range maxLostSlots {
		sl, err := l.acquire(ctx)
		if err != nil {
			return 0, err
		}
		s.Pos = sl.pos
		go l.write(sl, s)
		pos, err := l.await(ctx, sl)
		if !errors.Is(err, errLost) {
			return pos, err
		}
		if err := l.afterLoss(ctx); err != nil {
			return 0, err
		}
	}
	return 0, l.errorf("append lost %d slots in a row to other writers", maxLostSlots)
}

// errLost: the append's slot went to another writer; it takes another.
var errLost = errors.New("slotlog: slot lost to another writer")

// prepare fails on a closed or sealed handle and searches for the
// frontier when the handle's view is unknown or older than it may trust.
func (l *Loglet) prepare(ctx context.Context) error {
	l.mu.Lock()
	switch {
	case l.mu.closed:
		l.mu.Unlock()
		return sharedlog.ErrClosed
	case l.mu.sealed:
		l.mu.Unlock()
		return sharedlog.ErrSealed
	}
	stale := !l.mu.fresh || l.mu.base < l.mu.tp
	untrusted := l.trust > 0 && !trusted(l.mu.tpReadAt, l.clk.Now(), l.trust)
	l.mu.Unlock()
	if !stale && !untrusted {
		return nil
	}
	if !stale {
		// Only the trim point is too old to trust: if it is still at or
		// below base, nothing this handle knows was trimmed, and one
		// read of it (which the write's check then trusts) does instead
		// of a frontier search. An idle agent's renewals pay this once
		// per trust period.
		tp, err := l.trimPointAsOf(ctx, l.clk.Now())
		if err != nil {
			return err
		}
		l.mu.Lock()
		stale = !l.mu.fresh || l.mu.base < tp
		l.mu.Unlock()
		if !stale {
			return nil
		}
	}
	_, sealed, err := l.refresh(ctx)
	if err != nil {
		return err
	}
	if sealed {
		return sharedlog.ErrSealed
	}
	return nil
}

// acquire hands out the next position once the window and the in-flight
// bound allow.
func (l *Loglet) acquire(ctx context.Context) (*slot, error) {
	l.mu.Lock()
	for {
		switch {
		case l.mu.closed:
			l.mu.Unlock()
			return nil, sharedlog.ErrClosed
		case l.mu.sealed:
			l.mu.Unlock()
			return nil, sharedlog.ErrSealed
		}
		if l.mu.inflight < l.cfg.InFlight && l.mu.next-l.mu.base < sharedlog.Pos(l.cfg.Window) {
			sl := &slot{pos: l.mu.next}
			l.mu.slots[sl.pos] = sl
			l.mu.next++
			l.mu.inflight++
			l.writes.Add(1)
			l.mu.Unlock()
			return sl, nil
		}
		ch := l.mu.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		l.mu.Lock()
	}
}

// write runs one append's slot write to a definite outcome, on the
// handle's context, and records it.
func (l *Loglet) write(sl *slot, s Slot) {
	defer l.writes.Done()
	res := l.writeSlot(l.bg, s)
	out, err := res.out, res.err
	switch out {
	case outOurs:
		// Acknowledged means visible: a slot below the trim point is not.
		tp, terr := l.trimPointAsOf(l.bg, res.done)
		switch {
		case terr != nil:
			out, err = outFailed, l.errorf("slot %d written, trim point unknown: %w", s.Pos, terr)
		case tp > s.Pos:
			out, err = outBelowTrim, l.errorf("slot %d written below the trim point %d by a stale handle; outcome unknown", s.Pos, tp)
		}
	case outSeal:
		// A seal below the trim point is the garbage of a stale sealer.
		tp, terr := l.trimPointAsOf(l.bg, res.done)
		switch {
		case terr != nil:
			out, err = outFailed, l.errorf("slot %d holds a seal, trim point unknown: %w", s.Pos, terr)
		case tp > s.Pos:
			out = outForeign
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.inflight--
	defer l.wakeLocked()
	if sl.out != outPending {
		return // failed already by a rewind below it
	}
	sl.out, sl.err = out, err
	switch out {
	case outOurs:
		l.mu.lost = 0
		if s.Kind == KindEntry {
			l.mu.known.add(s.Pos, s.Data)
		}
	case outForeign:
		l.mu.lost++
	case outSeal:
		l.markSealedLocked(sl.pos)
	case outBelowTrim:
		l.mu.fresh = false
	case outFailed:
		if l.mu.slots[sl.pos] == sl {
			l.rewindLocked(sl)
		}
	}
	l.advanceLocked()
}

// rewindLocked gives up the failed slot sl and every later one: their
// appends fail (ambiguously: their writes may yet land), and sl's
// position is handed out again. A new write there is safe: if the failed
// one landed, the new one meets it and moves on.
func (l *Loglet) rewindLocked(sl *slot) {
	for p, o := range l.mu.slots {
		if p < sl.pos {
			continue
		}
		delete(l.mu.slots, p)
		if o != sl && (o.out == outPending || o.out == outOurs) {
			o.out = outFailed
			// Not wrapped: this append's outcome is unknown whatever
			// made the write below it fail, even a rejection.
			o.err = l.errorf("slot %d: the write of slot %d below it failed: %v", o.pos, sl.pos, sl.err)
		}
	}
	if l.mu.next > sl.pos {
		l.mu.next = sl.pos
	}
}

// advanceLocked moves base over the filled slots at its head.
func (l *Loglet) advanceLocked() {
	for {
		sl := l.mu.slots[l.mu.base]
		if sl == nil {
			return
		}
		switch sl.out {
		case outOurs, outForeign, outBelowTrim:
			delete(l.mu.slots, l.mu.base)
			l.mu.base++
		default:
			return
		}
	}
}

func (l *Loglet) markSealedLocked(p sharedlog.Pos) {
	if !l.mu.sealed || p < l.mu.sealPos {
		l.mu.sealed, l.mu.sealPos = true, p
	}
}

// await waits for an append's slot: acknowledged once every slot below
// it holds an entry.
func (l *Loglet) await(ctx context.Context, sl *slot) (sharedlog.Pos, error) {
	l.mu.Lock()
	for {
		switch {
		case sl.out == outOurs && l.mu.base > sl.pos:
			l.mu.Unlock()
			return sl.pos, nil
		case l.mu.closed:
			l.mu.Unlock()
			return 0, sharedlog.ErrClosed
		case sl.out == outForeign:
			l.mu.Unlock()
			return 0, errLost
		case sl.out == outSeal:
			l.mu.Unlock()
			return 0, sharedlog.ErrSealed
		case sl.out == outFailed || sl.out == outBelowTrim:
			err := sl.err
			l.mu.Unlock()
			return 0, err
		case l.mu.sealed && l.mu.sealPos < sl.pos:
			// Above the seal: never part of the log, landed or not.
			l.mu.Unlock()
			return 0, sharedlog.ErrSealed
		}
		ch := l.mu.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		l.mu.Lock()
	}
}

// afterLoss rescans after Window appends in a row lost their slots: the
// handle is behind the frontier.
func (l *Loglet) afterLoss(ctx context.Context) error {
	l.mu.Lock()
	behind := l.mu.lost >= l.cfg.Window
	if behind {
		l.mu.lost = 0
	}
	l.mu.Unlock()
	if !behind {
		return nil
	}
	_, _, err := l.refresh(ctx)
	return err
}

// result is a slot write's outcome; done is when the reply that decided
// it arrived.
type result struct {
	out  outcome
	done time.Time
	err  error
}

// writeSlot puts s until the outcome is definite, at most PutAttempts
// times, always with the same bytes and token to the same slot. This is
// not a retry of the append: a put whose reply was lost is resolved by
// putting it again, which either lands (the first did not) or meets the
// slot's occupant, whose token says whether the first did. Only this
// handle knows the slot and the token, and the window cannot move past
// the slot until it knows, so the resolution is the protocol's own. An
// outcome still unknown after PutAttempts is returned, and the layer
// that retries appends decides.
func (l *Loglet) writeSlot(ctx context.Context, s Slot) result {
	var lastErr error
	loop := l.putRetry.Start(ctx, l.clk)
	for loop.Next() {
		occ, err := l.st.Put(ctx, s)
		if err == nil {
			return result{out: outOurs, done: l.clk.Now()}
		}
		if errors.Is(err, ErrTaken) {
			if occ == nil {
				o, ok, perr := l.st.Probe(ctx, s.Pos)
				switch {
				case perr != nil:
					lastErr = perr
					continue // the next Put meets the slot again
				case !ok:
					return result{out: outFailed, err: l.errorf("slot %d was taken, then deleted by a trim: outcome unknown", s.Pos)}
				}
				occ = &o
			}
			done := l.clk.Now()
			switch {
			case occ.Token == s.Token:
				if occ.Kind != s.Kind {
					return result{out: outFailed, err: l.errorf("%w: slot %d holds our token with kind %v, we wrote %v", ErrCorrupt, s.Pos, occ.Kind, s.Kind)}
				}
				return result{out: outOurs, done: done}
			case occ.Kind == KindSeal:
				return result{out: outSeal, done: done}
			case occ.Kind == KindEntry:
				return result{out: outForeign, done: done}
			default:
				return result{out: outFailed, err: l.errorf("%w: slot %d has kind %v", ErrCorrupt, s.Pos, occ.Kind)}
			}
		}
		if ctx.Err() != nil {
			return result{out: outFailed, err: l.errorf("slot %d: %w", s.Pos, err)}
		}
		if errors.Is(err, ErrRejected) {
			if loop.Attempt() == 1 {
				// Nothing of ours can be in the slot: the append was
				// refused for good.
				return result{out: outFailed, err: sharedlog.Rejected(err)}
			}
			// An earlier put may have landed.
			return result{out: outFailed, err: l.errorf("slot %d: outcome unknown: %v (after: %w)", s.Pos, err, lastErr)}
		}
		lastErr = err
	}
	if err := loop.Err(); !errors.Is(err, retry.ErrExhausted) {
		return result{out: outFailed, err: l.errorf("slot %d: %w (after: %w)", s.Pos, err, lastErr)}
	}
	return result{out: outFailed, err: l.errorf("slot %d: outcome unknown after %d attempts: %w", s.Pos, l.cfg.PutAttempts, lastErr)}
}

// ReadNext implements sharedlog.Loglet. Below the handle's base it reads
// at once; at or above it, it searches for the frontier first.
func (l *Loglet) ReadNext(ctx context.Context, from, max sharedlog.Pos) ([]sharedlog.Entry, error) {
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	l.mu.Lock()
	tail, tp := l.mu.base, l.mu.tp
	l.mu.Unlock()
	if from < tp {
		return nil, sharedlog.ErrTrimmed
	}
	if from >= tail {
		var err error
		if tail, _, err = l.refresh(ctx); err != nil {
			return nil, err
		}
		l.mu.Lock()
		tp = l.mu.tp
		l.mu.Unlock()
		if from < tp {
			return nil, sharedlog.ErrTrimmed
		}
	}
	if from >= tail || from >= max {
		return nil, nil
	}
	end := min(max, tail, from+sharedlog.Pos(l.cfg.MaxReadEntries))
	l.mu.Lock()
	known, end := l.mu.known.take(from, end)
	l.mu.Unlock()
	if len(known) > 0 {
		// As for a read: a trim point raised since may lie above it.
		tp, err := l.trimPointAsOf(ctx, l.clk.Now())
		if err != nil {
			return nil, err
		}
		if from < tp {
			return nil, sharedlog.ErrTrimmed
		}
		return known, nil
	}
	slots, err := l.st.Read(ctx, from, end)
	if err != nil {
		return nil, err
	}
	// A slot missing below the tail, or one rewritten by a stale handle,
	// can only lie below a trim point raised since.
	if tp, err = l.trimPointAsOf(ctx, l.clk.Now()); err != nil {
		return nil, err
	}
	if from < tp {
		return nil, sharedlog.ErrTrimmed
	}
	out := make([]sharedlog.Entry, 0, len(slots))
	for _, s := range slots {
		want := from + sharedlog.Pos(len(out))
		if s.Pos != want || s.Pos >= end {
			break
		}
		if s.Kind != KindEntry {
			return nil, l.errorf("%w: slot %d below the tail %d holds a %v", ErrCorrupt, s.Pos, tail, s.Kind)
		}
		out = append(out, sharedlog.Entry{Pos: s.Pos, Data: s.Data})
	}
	if len(out) == 0 {
		return nil, l.errorf("%w: slot %d below the tail %d is missing", ErrCorrupt, from, tail)
	}
	l.mu.Lock()
	l.mu.known.forgetBelow(from + sharedlog.Pos(len(out)))
	l.mu.Unlock()
	return out, nil
}

// Seal implements sharedlog.Loglet: it puts a seal marker into the
// frontier slot, walking forward past entries that beat it there.
func (l *Loglet) Seal(ctx context.Context) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	sealed := l.mu.sealed
	l.mu.Unlock()
	if sealed {
		return nil
	}
	p, sealed, err := l.refresh(ctx)
	if err != nil || sealed {
		return err
	}
	tok := NewToken()
	for try := range maxSealSlots {
		if try > 0 && try%l.cfg.Window == 0 {
			// Appenders keep beating us: jump to the frontier.
			fp, sealed, err := l.refresh(ctx)
			if err != nil || sealed {
				return err
			}
			p = max(p, fp)
		}
		res := l.writeSlot(ctx, Slot{Pos: p, Kind: KindSeal, Token: tok})
		switch res.out {
		case outFailed:
			return res.err
		case outForeign:
			p++
			continue
		}
		// Ours or another's seal, unless it sits below the trim point: a
		// stale view put it in a deleted slot.
		tp, err := l.trimPointAsOf(ctx, res.done)
		if err != nil {
			return err
		}
		if tp > p {
			if p, sealed, err = l.refresh(ctx); err != nil || sealed {
				return err
			}
			continue
		}
		l.mu.Lock()
		l.markSealedLocked(p)
		l.wakeLocked()
		l.mu.Unlock()
		return nil
	}
	return l.errorf("seal lost %d slots in a row to appenders", maxSealSlots)
}

// Close implements sharedlog.Loglet. Slot writes still running are
// abandoned; their appends fail with ErrClosed.
func (l *Loglet) Close() error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.closed = true
	l.wakeLocked()
	l.mu.Unlock()
	l.stop()
	l.writes.Wait()
	return nil
}
