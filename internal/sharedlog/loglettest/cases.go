package loglettest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog"
)

func testEmpty(e *env) {
	e.wantTail(0, false)
	e.wantEmptyRead(0, 0)
	e.wantEmptyRead(0, 1)
	e.wantEmptyRead(0, maxPos)
	e.wantEmptyRead(7, 100)
}

// testAppendReadBack: sequential appends get 0..N-1 in order, each is
// visible as soon as Append returns, and reading back gives the bytes.
func testAppendReadBack(e *env) {
	n := e.o.Entries
	want := make([][]byte, n)
	for i := range want {
		want[i] = payload("seq", i)
		pos := e.append(want[i])
		if pos != sharedlog.Pos(i) {
			e.t.Fatalf("append %d landed at %d", i, pos)
		}
		// Durable and visible when Append returns: the tail covers it.
		e.wantTail(pos+1, false)
	}
	got := e.readRange(0, sharedlog.Pos(n))
	for i, en := range got {
		if !bytes.Equal(en.Data, want[i]) {
			e.t.Fatalf("entry %d = %q, want %q", i, clip(en.Data), clip(want[i]))
		}
	}
	e.wantEmptyRead(sharedlog.Pos(n), maxPos)
	e.wantEmptyRead(sharedlog.Pos(n)+10, maxPos)
}

func testReadNextBounds(e *env) {
	n := sharedlog.Pos(min(e.o.Entries, 30))
	want := e.appendN("bounds", int(n))
	for _, tc := range []struct {
		name      string
		from, max sharedlog.Pos
	}{
		{"first", 0, 1},
		{"middle", 3, 7},
		{"last", n - 1, n},
		{"max past tail", n - 5, n + 100},
		{"unbounded", 0, maxPos},
	} {
		es, err := readNext(e.ctx, e.l, tc.from, tc.max)
		if err != nil {
			e.t.Fatalf("%s: %v", tc.name, err)
		}
		if len(es) == 0 {
			e.t.Fatalf("%s: ReadNext(%d, %d) returned nothing below the tail", tc.name, tc.from, tc.max)
		}
		for _, en := range es {
			if en.Pos >= n {
				e.t.Fatalf("%s: returned position %d at or past the tail %d", tc.name, en.Pos, n)
			}
			if !bytes.Equal(en.Data, want[en.Pos]) {
				e.t.Fatalf("%s: entry %d = %q, want %q", tc.name, en.Pos, clip(en.Data), clip(want[en.Pos]))
			}
		}
	}
	e.wantEmptyRead(5, 5)
	e.wantEmptyRead(6, 5)
	e.wantEmptyRead(n, n+10)
}

// testNoAliasing: the loglet keeps no reference to an appended buffer and
// hands out slices the caller owns.
func testNoAliasing(e *env) {
	buf := []byte("original")
	pos := e.append(buf)
	copy(buf, "CHANGED!")
	e.wantEntries(pos, [][]byte{[]byte("original")})

	es := e.readRange(pos, pos+1)
	copy(es[0].Data, "scribble")
	e.wantEntries(pos, [][]byte{[]byte("original")})
}

func testEntrySizes(e *env) {
	large := func(seed byte) []byte {
		b := make([]byte, e.o.MaxEntryBytes)
		for i := range b {
			b[i] = seed + byte(i*7)
		}
		return b
	}
	want := [][]byte{{}, nil, {0}, large(1), large(2), []byte("small after large")}
	for i, w := range want {
		if pos := e.append(w); pos != sharedlog.Pos(i) {
			e.t.Fatalf("append %d landed at %d", i, pos)
		}
	}
	got := e.readRange(0, sharedlog.Pos(len(want)))
	for i, en := range got {
		if len(en.Data) != len(want[i]) || !bytes.Equal(en.Data, want[i]) {
			e.t.Fatalf("entry %d: got %d bytes, want %d", i, len(en.Data), len(want[i]))
		}
	}
}

// testConcurrentAppends: appenders racing each other get distinct, dense
// positions; each appender's own appends are in increasing order; every
// acknowledged entry is readable at once and reads back exactly.
func testConcurrentAppends(e *env) {
	g, per := e.o.Appenders, e.o.AppendsPerAppender
	positions := make([][]sharedlog.Pos, g)
	var wg sync.WaitGroup
	for a := range g {
		wg.Go(func() {
			for i := range per {
				data := payload(fmt.Sprintf("conc%d", a), i)
				pos, err := e.l.Append(e.ctx, data)
				if err != nil {
					e.t.Errorf("appender %d: Append %d: %v", a, i, err)
					return
				}
				if n := len(positions[a]); n > 0 && pos <= positions[a][n-1] {
					e.t.Errorf("appender %d: append %d at %d, not after its previous at %d", a, i, pos, positions[a][n-1])
				}
				positions[a] = append(positions[a], pos)
				// Read-your-writes: acknowledged means visible.
				es, err := readNext(e.ctx, e.l, pos, pos+1)
				if err != nil || len(es) != 1 || !bytes.Equal(es[0].Data, data) {
					e.t.Errorf("appender %d: reading back %d right after its append: %d entries, %v", a, pos, len(es), err)
				}
			}
		})
	}
	wg.Wait()
	if e.t.Failed() {
		return
	}
	total := sharedlog.Pos(g * per)
	e.wantTail(total, false)
	owner := make(map[sharedlog.Pos][]byte, total)
	for a := range positions {
		for i, pos := range positions[a] {
			if _, dup := owner[pos]; dup {
				e.t.Fatalf("position %d handed out twice", pos)
			}
			owner[pos] = payload(fmt.Sprintf("conc%d", a), i)
		}
	}
	for _, en := range e.readRange(0, total) {
		want, ok := owner[en.Pos]
		if !ok {
			e.t.Fatalf("position %d was not handed to any appender", en.Pos)
		}
		if !bytes.Equal(en.Data, want) {
			e.t.Fatalf("entry %d = %q, want %q", en.Pos, clip(en.Data), clip(want))
		}
	}
}

func testSeal(e *env) {
	want := e.appendN("seal", 5)
	e.seal()
	e.seal() // idempotent
	e.wantTail(5, true)
	e.wantAppendSealed()
	e.wantTail(5, true)
	e.wantEntries(0, want)
	e.wantEmptyRead(5, maxPos)

	// A sealed segment of a VirtualLog is still trimmed.
	e.trim(2)
	e.wantTrimmed(1)
	e.wantEntries(2, want[2:])
	e.wantTail(5, true)
	e.seal()
	e.wantTail(5, true)
}

func testSealEmpty(e *env) {
	e.seal()
	e.wantTail(0, true)
	e.wantAppendSealed()
	e.wantEmptyRead(0, maxPos)
	e.wantTail(0, true)
}

// testAppendRacingSeal: appenders run until a Seal issued in the middle of
// their appends stops them. Every acknowledged append is below the final
// tail and reads back; every position below the tail holds an entry some
// appender sent and that was not refused with ErrSealed; no append begun
// after Seal returned succeeds.
func testAppendRacingSeal(e *env) {
	g := e.o.Appenders
	// Appenders stop at ErrSealed; the cap only bounds a backend whose Seal
	// never takes effect.
	capPerAppender := 20 * e.o.AppendsPerAppender
	sealAfter := int64(max(1, g*e.o.AppendsPerAppender/4))

	type attempt struct {
		data       []byte
		pos        sharedlog.Pos
		err        error
		afterSeal  bool // began after Seal returned nil
		capReached bool
	}
	attempts := make([][]attempt, g)
	var (
		acked        atomic.Int64
		sealReturned atomic.Bool
		trigger      = make(chan struct{})
		triggerOnce  sync.Once
		wg           sync.WaitGroup
	)
	for a := range g {
		wg.Go(func() {
			for i := range capPerAppender {
				at := attempt{data: payload(fmt.Sprintf("race%d", a), i), afterSeal: sealReturned.Load()}
				at.pos, at.err = e.l.Append(e.ctx, at.data)
				attempts[a] = append(attempts[a], at)
				if at.err != nil {
					if !errors.Is(at.err, sharedlog.ErrSealed) {
						e.t.Errorf("appender %d: Append: %v", a, at.err)
					}
					return
				}
				if acked.Add(1) == sealAfter {
					triggerOnce.Do(func() { close(trigger) })
				}
			}
			attempts[a][len(attempts[a])-1].capReached = true
			triggerOnce.Do(func() { close(trigger) })
		})
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	select {
	case <-trigger:
	case <-allDone: // every appender failed before the trigger
	}
	if e.t.Failed() {
		<-allDone
		return
	}
	e.seal()
	sealReturned.Store(true)
	wg.Wait()
	if e.t.Failed() {
		return
	}
	e.wantAppendSealed()
	tail, sealed := e.checkTail()
	if !sealed {
		e.t.Fatalf("CheckTail after Seal: not sealed")
	}

	sent := make(map[string]attempt)
	ackedAt := make(map[sharedlog.Pos]bool)
	for a := range attempts {
		last := attempts[a][len(attempts[a])-1]
		if !last.capReached && !errors.Is(last.err, sharedlog.ErrSealed) {
			e.t.Fatalf("appender %d stopped without ErrSealed: %v", a, last.err)
		}
		for _, at := range attempts[a] {
			sent[string(at.data)] = at
			if at.afterSeal && !errors.Is(at.err, sharedlog.ErrSealed) {
				e.t.Fatalf("append begun after Seal returned got (%d, %v), want ErrSealed", at.pos, at.err)
			}
			if at.err != nil {
				continue
			}
			if at.pos >= tail {
				e.t.Fatalf("acknowledged append at %d is not below the sealed tail %d", at.pos, tail)
			}
			if ackedAt[at.pos] {
				e.t.Fatalf("position %d acknowledged twice", at.pos)
			}
			ackedAt[at.pos] = true
		}
	}
	if int64(len(ackedAt)) != acked.Load() {
		e.t.Fatalf("%d distinct acknowledged positions, %d acknowledgements", len(ackedAt), acked.Load())
	}
	seen := make(map[string]bool)
	for _, en := range e.readRange(0, tail) {
		at, ok := sent[string(en.Data)]
		switch {
		case !ok:
			e.t.Fatalf("entry %d = %q was never appended", en.Pos, clip(en.Data))
		case seen[string(en.Data)]:
			e.t.Fatalf("entry %d = %q appears twice", en.Pos, clip(en.Data))
		case errors.Is(at.err, sharedlog.ErrSealed):
			e.t.Fatalf("entry %d = %q was refused with ErrSealed yet written", en.Pos, clip(en.Data))
		case at.err == nil && at.pos != en.Pos:
			e.t.Fatalf("entry %q acknowledged at %d but read at %d", clip(en.Data), at.pos, en.Pos)
		}
		seen[string(en.Data)] = true
	}
	e.wantTail(tail, true)
}

func testPrefixTrim(e *env) {
	n := sharedlog.Pos(20)
	want := e.appendN("trim", int(n))

	e.trim(0)
	e.wantEntries(0, want)

	e.trim(5)
	for p := range sharedlog.Pos(5) {
		e.wantTrimmed(p)
	}
	e.wantEntries(5, want[5:])
	e.wantTail(n, false)

	e.trim(5) // idempotent
	e.trim(3) // below the trim point: nothing
	e.wantTrimmed(4)
	e.wantEntries(5, want[5:])

	e.trim(12)
	e.wantTrimmed(11)
	e.wantEntries(12, want[12:])

	if pos := e.append([]byte("after trim")); pos != n {
		e.t.Fatalf("append after trim landed at %d, want %d", pos, n)
	}
	e.wantEntries(n, [][]byte{[]byte("after trim")})

	// Past the tail clamps to the tail: later appends stay readable.
	e.trim(n + 1000)
	e.wantTail(n+1, false)
	e.wantTrimmed(n)
	e.wantEmptyRead(n+1, maxPos)
	if pos := e.append([]byte("after full trim")); pos != n+1 {
		e.t.Fatalf("append after trimming past the tail landed at %d, want %d", pos, n+1)
	}
	e.wantEntries(n+1, [][]byte{[]byte("after full trim")})
	e.wantTrimmed(n)
	e.wantTail(n+2, false)
}

// testTailingReader: a reader following writers never sees a hole: what
// it reads starts where it asked, is dense, and lies below the tail it
// observes next; CheckTail never moves backwards; every position below a
// tail it saw is readable.
func testTailingReader(e *env) {
	total := e.o.Entries
	writers := min(e.o.Appenders, 4)
	var (
		mu    sync.Mutex
		acked = make(map[sharedlog.Pos][]byte, total)
		next  atomic.Int64
		wg    sync.WaitGroup
	)
	// A failed writer cancels the reader, which may be waiting for entries
	// that will never come.
	rctx, rcancel := context.WithCancel(e.ctx)
	defer rcancel()
	for range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				data := payload("tail", i)
				pos, err := e.l.Append(e.ctx, data)
				if err != nil {
					e.t.Errorf("Append: %v", err)
					rcancel()
					return
				}
				mu.Lock()
				acked[pos] = data
				mu.Unlock()
			}
		})
	}
	tw, _ := e.l.(sharedlog.TailWaiter)
	got := make([][]byte, 0, total)
	var from, lastTail sharedlog.Pos
	for round := 0; from < sharedlog.Pos(total); round++ {
		if e.t.Failed() {
			break
		}
		if tw != nil && round%2 == 0 {
			if _, err := tw.WaitTail(rctx, from); err != nil {
				if e.t.Failed() {
					break
				}
				e.t.Fatalf("WaitTail(%d): %v", from, err)
			}
		}
		tail, _ := e.checkTail()
		if tail < lastTail {
			e.t.Fatalf("CheckTail went back from %d to %d", lastTail, tail)
		}
		lastTail = tail
		var es []sharedlog.Entry
		var err error
		if round%3 == 0 {
			// Bounded by an observed tail: everything below it is readable.
			if from < tail {
				es, err = readNext(e.ctx, e.l, from, tail)
				if err == nil && len(es) == 0 {
					e.t.Fatalf("ReadNext(%d, %d) returned nothing below the tail", from, tail)
				}
			}
		} else {
			es, err = readNext(e.ctx, e.l, from, maxPos)
		}
		if err != nil {
			e.t.Fatal(err)
		}
		for _, en := range es {
			got = append(got, en.Data)
		}
		from += sharedlog.Pos(len(es))
		if after, _ := e.checkTail(); after < from {
			e.t.Fatalf("read up to %d but CheckTail then reported %d", from, after)
		}
		if len(es) == 0 && tw == nil {
			// No notifications from this backend: a poll interval, not a
			// correctness assumption.
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
	if e.t.Failed() {
		return
	}
	for p, data := range got {
		if !bytes.Equal(data, acked[sharedlog.Pos(p)]) {
			e.t.Fatalf("reader saw %q at %d, the writer acknowledged %q", clip(data), p, clip(acked[sharedlog.Pos(p)]))
		}
	}
}

func testWaitTail(e *env) {
	tw, ok := e.l.(sharedlog.TailWaiter)
	if !ok {
		e.t.Skip("backend does not implement sharedlog.TailWaiter")
	}
	type result struct {
		tail sharedlog.Pos
		err  error
	}
	wait := func(ctx context.Context, after sharedlog.Pos) <-chan result {
		ch := make(chan result, 1)
		go func() {
			tail, err := tw.WaitTail(ctx, after)
			ch <- result{tail, err}
		}()
		return ch
	}
	notYet := func(ch <-chan result, what string) {
		e.t.Helper()
		select {
		case r := <-ch:
			e.t.Fatalf("WaitTail returned (%d, %v) before %s", r.tail, r.err, what)
		default:
		}
	}

	e.appendN("wait", 2)
	for _, after := range []sharedlog.Pos{0, 1} {
		if tail, err := tw.WaitTail(e.ctx, after); err != nil || tail != 2 {
			e.t.Fatalf("WaitTail(%d) with tail 2 = (%d, %v), want (2, nil)", after, tail, err)
		}
	}

	// Does not return while nothing happens: a correct WaitTail always
	// runs into this deadline, so it is no timing assumption.
	dctx, dcancel := context.WithTimeout(e.ctx, 20*time.Millisecond)
	tail, err := tw.WaitTail(dctx, 2)
	dcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		e.t.Fatalf("WaitTail(2) with tail 2 returned (%d, %v) though the tail did not move", tail, err)
	}

	// Wakes every waiter on an append.
	waiters := []<-chan result{wait(e.ctx, 2), wait(e.ctx, 2), wait(e.ctx, 2)}
	for _, w := range waiters {
		notYet(w, "the append")
	}
	e.append([]byte("wake"))
	for _, w := range waiters {
		if r := <-w; r.err != nil || r.tail < 3 {
			e.t.Fatalf("WaitTail(2) woken by an append = (%d, %v), want tail >= 3", r.tail, r.err)
		}
	}

	// Honours ctx.
	cctx, cancel := context.WithCancel(e.ctx)
	w := wait(cctx, 3)
	notYet(w, "ctx was canceled")
	cancel()
	if r := <-w; !errors.Is(r.err, context.Canceled) {
		e.t.Fatalf("WaitTail with a canceled ctx = (%d, %v), want context.Canceled", r.tail, r.err)
	}

	// Wakes on seal, and returns at once on a sealed loglet.
	w = wait(e.ctx, 3)
	notYet(w, "the seal")
	e.seal()
	if r := <-w; r.err != nil || r.tail != 3 {
		e.t.Fatalf("WaitTail(3) woken by Seal = (%d, %v), want (3, nil)", r.tail, r.err)
	}
	if tail, err := tw.WaitTail(e.ctx, 100); err != nil || tail != 3 {
		e.t.Fatalf("WaitTail(100) on a sealed loglet = (%d, %v), want (3, nil)", tail, err)
	}
}

// testCanceledContext: every method fails with the context's error when
// called with a canceled context, and the loglet is usable afterwards. A
// canceled Append is ambiguous, so it may or may not have landed.
func testCanceledContext(e *env) {
	canceled, cancel := context.WithCancel(e.ctx)
	cancel()
	wantCanceled := func(op string, err error) {
		e.t.Helper()
		if !errors.Is(err, context.Canceled) {
			e.t.Fatalf("%s with a canceled ctx: %v, want context.Canceled", op, err)
		}
	}
	_, err := e.l.Append(canceled, []byte("canceled"))
	wantCanceled("Append", err)
	_, _, err = e.l.CheckTail(canceled)
	wantCanceled("CheckTail", err)
	_, err = e.l.ReadNext(canceled, 0, maxPos)
	wantCanceled("ReadNext", err)
	wantCanceled("PrefixTrim", e.l.PrefixTrim(canceled, 0))
	if tw, ok := e.l.(sharedlog.TailWaiter); ok {
		_, err = tw.WaitTail(canceled, 100)
		wantCanceled("WaitTail", err)
	}

	pos := e.append([]byte("live"))
	if pos > 1 {
		e.t.Fatalf("append after one canceled append landed at %d", pos)
	}
	tail, _ := e.checkTail()
	if tail != pos+1 {
		e.t.Fatalf("tail %d after the append at %d", tail, pos)
	}
	for _, en := range e.readRange(0, tail) {
		want := "canceled"
		if en.Pos == pos {
			want = "live"
		}
		if string(en.Data) != want {
			e.t.Fatalf("entry %d = %q, want %q", en.Pos, clip(en.Data), want)
		}
	}
	wantCanceled("Seal", e.l.Seal(canceled))
	e.seal()
	e.wantTail(tail, true)
}

// testClose: after Close every method fails with ErrClosed, and Close wakes
// WaitTail callers.
func testClose(e *env) {
	e.append([]byte("before close"))
	tw, _ := e.l.(sharedlog.TailWaiter)
	waitErr := make(chan error, 1)
	if tw != nil {
		go func() {
			_, err := tw.WaitTail(e.ctx, 5)
			waitErr <- err
		}()
	}
	if err := e.l.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	wantClosed := func(op string, err error) {
		e.t.Helper()
		if !errors.Is(err, sharedlog.ErrClosed) {
			e.t.Fatalf("%s after Close: %v, want ErrClosed", op, err)
		}
	}
	_, err := e.l.Append(e.ctx, []byte("after close"))
	wantClosed("Append", err)
	_, _, err = e.l.CheckTail(e.ctx)
	wantClosed("CheckTail", err)
	_, err = e.l.ReadNext(e.ctx, 0, maxPos)
	wantClosed("ReadNext", err)
	wantClosed("Seal", e.l.Seal(e.ctx))
	wantClosed("PrefixTrim", e.l.PrefixTrim(e.ctx, 1))
	if tw != nil {
		wantClosed("WaitTail blocked across Close", <-waitErr)
		_, err = tw.WaitTail(e.ctx, 0)
		wantClosed("WaitTail", err)
	}
}

// testRandomOps runs a seeded random mix of operations against a model.
func testRandomOps(e *env) {
	seed := e.o.Seed
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	defer func() {
		if e.t.Failed() {
			e.t.Logf("RandomOps seed %d (set Options.Seed to replay)", seed)
		}
	}()
	var model [][]byte // model[p] for p >= trimmed
	var trimmed sharedlog.Pos
	tail := func() sharedlog.Pos { return sharedlog.Pos(len(model)) }
	for op := range 200 {
		switch k := rng.IntN(10); {
		case k < 5:
			data := payload(fmt.Sprintf("rnd%d", seed), op)
			if pos := e.append(data); pos != tail() {
				e.t.Fatalf("op %d: append landed at %d, want %d", op, pos, tail())
			}
			model = append(model, data)
		case k < 6:
			before := sharedlog.Pos(rng.IntN(int(tail()) + 3))
			e.trim(before)
			trimmed = max(trimmed, min(before, tail()))
		case k < 9:
			from := sharedlog.Pos(rng.IntN(int(tail()) + 3))
			limit := from + sharedlog.Pos(rng.IntN(8))
			es, err := readNext(e.ctx, e.l, from, limit)
			if from < trimmed {
				if !errors.Is(err, sharedlog.ErrTrimmed) {
					e.t.Fatalf("op %d: ReadNext(%d, %d) below trim point %d = (%d entries, %v), want ErrTrimmed", op, from, limit, trimmed, len(es), err)
				}
				continue
			}
			if err != nil {
				e.t.Fatalf("op %d: %v", op, err)
			}
			if from < min(limit, tail()) && len(es) == 0 {
				e.t.Fatalf("op %d: ReadNext(%d, %d) with tail %d returned nothing", op, from, limit, tail())
			}
			for _, en := range es {
				if en.Pos >= tail() || !bytes.Equal(en.Data, model[en.Pos]) {
					e.t.Fatalf("op %d: ReadNext(%d, %d) returned %q at %d", op, from, limit, clip(en.Data), en.Pos)
				}
			}
		default:
			e.wantTail(tail(), false)
		}
	}
}
