package replica

import (
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
)

// TestApplyLag holds a copy's reads at a gate while another writer
// appends, and reads its lag on a fake clock: zero while caught up, the
// time since the copy fell behind while a read is held (not counting the
// idle time before the entry came), zero again once it has applied.
func TestApplyLag(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	log := newFaultLog()
	a := openReplica(t, log, "", "a", withClock(clk))
	// b writes to the log below the gate; its clock is its own.
	b := openReplica(t, log.Log, "", "b")
	mustOK(t, b, meta.CreateTopic{Name: "t", Partitions: 1})
	mustSync(t, a)
	if lag := a.ApplyLag(); lag != 0 {
		t.Fatalf("caught-up lag %v, want 0", lag)
	}

	for round, idle := range []time.Duration{0, 10 * time.Second} {
		clk.Advance(idle) // caught up all along: not lag
		entered := log.readGate.arm()
		mustOK(t, b, meta.CreateTopic{Name: "t" + string(rune('a'+round)), Partitions: 1})
		recv(t, entered, "a's read of b's entry")
		clk.Advance(3 * time.Second)
		if lag := a.ApplyLag(); lag != 3*time.Second {
			t.Errorf("round %d: lag %v with a read held 3s, want 3s", round, lag)
		}
		log.readGate.release()
		mustSync(t, a)
		if lag := a.ApplyLag(); lag != 0 {
			t.Errorf("round %d: lag %v after catching up, want 0", round, lag)
		}
	}
}
