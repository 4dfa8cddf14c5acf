package compact_test

import (
	"context"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/compact"
)

// A pass spreads the bytes due over three quarters of the interval: it
// waits on the clock between reads instead of compacting everything at
// once, ends within the interval, and compacts all that was due.
func TestPassSpreadsItsWorkOverTheInterval(t *testing.T) {
	e := newEnv(t)
	a := e.topic("a", 2)
	parts := []tp{{a, 0}, {a, 1}}
	for i := range 24 {
		e.produce(uint64(i), 1000, parts...) // about 110 KB a partition
	}
	const interval = time.Second
	c := e.compactor(compact.Config{TargetBytes: 1 << 20, Interval: interval})
	e.advance(compact.DefaultMaxLag)

	st, waited := e.passOnClock(c, time.Millisecond, nil)
	if st.Swaps == 0 || st.BytesRead < 5<<20 {
		t.Fatalf("pass: %+v, want all of about 5 MB compacted", st)
	}
	for _, p := range parts {
		if l0, _ := e.levels(p); l0 != 0 {
			t.Fatalf("%v: %d level-0 entries left", p, l0)
		}
	}
	// Everything was due: the pace is what spreads it over 3/4 of the
	// interval.
	if want := int64(float64(st.BytesRead) / (0.75 * interval.Seconds())); st.Pace < want*99/100 || st.Pace > want*101/100 {
		t.Fatalf("pace %d B/s for %d bytes due, want about %d", st.Pace, st.BytesRead, want)
	}
	// The first MiB goes at once (the burst saved up), the last read's
	// share is paid after it: the rest waited, within the interval.
	if min := time.Duration(float64(st.BytesRead-2<<20) / float64(st.Pace) * float64(time.Second)); waited < min || waited > 3*interval/4 {
		t.Fatalf("the pass waited %v on the clock, want between %v and %v", waited, min, 3*interval/4)
	}
}

// --compaction-max-bytes-per-sec caps the pace; with nothing due the
// pace is the floor, and an unpaced compactor reports none.
func TestPaceCappedAndFloored(t *testing.T) {
	e := newEnv(t)
	a := e.topic("a", 1)
	for i := range 24 {
		e.produce(uint64(i), 1000, tp{a, 0})
	}
	idle := e.compactor(compact.Config{TargetBytes: 1 << 20})
	if st := e.pass(idle); st.Swaps != 0 || st.Pace != 4<<20 {
		t.Fatalf("pass with nothing due: %+v, want no swap at the floor pace of 4 MiB/s", st)
	}
	e.advance(compact.DefaultMaxLag)
	capped := e.compactor(compact.Config{TargetBytes: 1 << 20, Interval: time.Millisecond, MaxBytesPerSec: 5 << 20})
	st, _ := e.passOnClock(capped, 10*time.Millisecond, nil)
	if st.Swaps == 0 {
		t.Fatalf("capped pass: %+v", st)
	}
	if st.Pace != 5<<20 {
		t.Fatalf("pace %d, want the cap %d", st.Pace, 5<<20)
	}
	if st := e.pass(e.compactor(compact.Config{Unpaced: true})); st.Pace != 0 {
		t.Fatalf("unpaced pass: pace %d", st.Pace)
	}
}

// passOnClock runs a pass, advancing the clock by step while the pass
// waits on it, and returns the pass's stats and the time advanced.
// during, if not nil, runs once the pass first waits.
func (e *env) passOnClock(c *compact.Compactor, step time.Duration, during func()) (compact.PassStats, time.Duration) {
	e.t.Helper()
	ctx := testCtx(e.t)
	passCtx, passDone := context.WithCancel(ctx)
	var st compact.PassStats
	var err error
	go func() {
		defer passDone()
		st, err = c.Pass(ctx)
	}()
	var waited time.Duration
	for e.clk.BlockUntil(passCtx, 1) == nil {
		if during != nil {
			during()
			during = nil
		}
		e.clk.Advance(step)
		waited += step
	}
	if ctx.Err() != nil {
		e.t.Fatal("the pass did not end")
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return st, waited
}

// A pass compacts what was due when it began, at the pace it set for
// that: runs that become due while it waits are the next pass's, so a
// pass paced for less than what keeps arriving still ends.
func TestPassCompactsOnlyWhatWasDueWhenItBegan(t *testing.T) {
	e := newEnv(t)
	a := e.topic("a", 1)
	p := tp{a, 0}
	for i := range 24 {
		e.produce(uint64(i), 1000, p) // about 110 KB each, 2.6 MB in all
	}
	var due int64
	for _, en := range e.entries(p) {
		due += en.Length
	}
	const minAge = time.Millisecond
	c := e.compactor(compact.Config{TargetBytes: 1 << 20, MinAge: minAge})
	e.advance(time.Second)

	// While the pass waits on the clock, the same again arrives and
	// ages past MinAge.
	arrived := false
	st, _ := e.passOnClock(c, 10*time.Millisecond, func() {
		arrived = true
		for i := range 24 {
			e.produce(uint64(100+i), 1000, p)
		}
		e.advance(minAge)
	})
	if !arrived {
		t.Fatal("the pass never waited on the clock")
	}
	// What was due, and the rest of the run that took its last bytes:
	// not the more than 4 MiB of full runs due by the end.
	if st.BytesRead < due || st.BytesRead >= due+1<<20 {
		t.Fatalf("pass: %+v, want the %d bytes due when it began and at most a run more", st, due)
	}
	if st, _ := e.passOnClock(c, 10*time.Millisecond, nil); st.Swaps == 0 {
		t.Fatal("the next pass compacted nothing")
	}
}
