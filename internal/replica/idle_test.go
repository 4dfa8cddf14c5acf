package replica

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// probedLoglet is a handle on a shared memlog that is no TailWaiter but
// a TailProber, as an S3 or DynamoDB loglet is: a VirtualLog over it
// polls, and while no reader is eager only every IdlePollInterval.
type probedLoglet struct{ l *memlog.Loglet }

var _ sharedlog.TailProber = probedLoglet{}

func (p probedLoglet) Append(ctx context.Context, e []byte) (sharedlog.Pos, error) {
	return p.l.Append(ctx, e)
}

func (p probedLoglet) CheckTail(ctx context.Context) (sharedlog.Pos, bool, error) {
	return p.l.CheckTail(ctx)
}

func (p probedLoglet) ReadNext(ctx context.Context, from, max sharedlog.Pos) ([]sharedlog.Entry, error) {
	return p.l.ReadNext(ctx, from, max)
}

func (p probedLoglet) Seal(ctx context.Context) error { return p.l.Seal(ctx) }

func (p probedLoglet) PrefixTrim(ctx context.Context, before sharedlog.Pos) error {
	return p.l.PrefixTrim(ctx, before)
}

func (p probedLoglet) Close() error { return nil }

func (p probedLoglet) TailMoved(ctx context.Context, tail sharedlog.Pos) (bool, error) {
	t, sealed, err := p.l.CheckTail(ctx)
	return sealed || t != tail, err
}

// idlePair opens two replicas on one probed log, each through its own
// VirtualLog as two agents do, all on one fake clock that the test never
// advances: whatever they see of each other comes from a wake-up, not
// from a poll timer.
func idlePair(t *testing.T) (a, b *Replica) {
	t.Helper()
	ctx := testCtx(t)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ms, ml := sharedlog.NewMemMetaStore(), memlog.New()
	open := func(context.Context, string) (sharedlog.Loglet, error) { return probedLoglet{ml}, nil }
	replica := func(writer string) *Replica {
		v, err := sharedlog.OpenVirtual(ctx, ms, open, sharedlog.VirtualOptions{InitialURL: "probed", Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Close() })
		return openReplica(t, v, "", writer, withClock(clk))
	}
	a, b = replica("a"), replica("b")
	// Both players asleep in their logs' idle polls.
	if err := clk.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// stuckCtx bounds a wait that only a missing wake-up would make long, so
// such a bug fails the test soon rather than at the test's timeout.
func stuckCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestIdleSyncWakesPlayer: a Sync on a copy whose log polls every few
// seconds returns once the copy plays to the tail the Sync read, without
// waiting for the next poll: the player's WaitTail is cut short.
func TestIdleSyncWakesPlayer(t *testing.T) {
	a, b := idlePair(t)
	mustOK(t, a, meta.CreateTopic{Name: "t", Partitions: 1})
	if err := b.Sync(stuckCtx(t)); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	topicID(t, b, "t")
}

// TestIdleWatchMakesEager: a long poll registered on an idle copy makes
// its log poll at once and then every PollInterval, so another agent's
// append reaches it without waiting out the idle poll.
func TestIdleWatchMakesEager(t *testing.T) {
	a, b := idlePair(t)
	mustOK(t, a, meta.CreateTopic{Name: "t", Partitions: 1})
	tail := a.NextToApply()
	w := b.Watch(nil)
	defer w.Close()
	if err := b.WaitApplied(stuckCtx(t), tail); err != nil {
		t.Fatalf("the watched copy did not play to %d: %v", tail, err)
	}
}

// gatedProber holds the first TailMoved after arm until release, and
// records whether its context was cancelled meanwhile.
type gatedProber struct {
	probedLoglet
	armed     atomic.Bool
	entered   chan struct{}
	release   chan struct{}
	cancelled atomic.Bool
}

func (g *gatedProber) TailMoved(ctx context.Context, tail sharedlog.Pos) (bool, error) {
	if g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		select {
		case <-g.release:
		case <-ctx.Done():
			g.cancelled.Store(true)
			return false, ctx.Err()
		}
	}
	return g.probedLoglet.TailMoved(ctx, tail)
}

// TestProposeLeavesPollInFlight: a Propose while the player's log has a
// probe in flight does not cancel it. Every Propose tells the player of
// its entry, and under a producer's load a player that cancelled its
// wait on each such kick sent a stream of requests abandoned mid-flight,
// billed all the same; dynalite died of them. The append wakes the log's
// waiter instead, once the probe has answered.
func TestProposeLeavesPollInFlight(t *testing.T) {
	ctx := testCtx(t)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ms, ml := sharedlog.NewMemMetaStore(), memlog.New()
	g := &gatedProber{probedLoglet: probedLoglet{ml}, entered: make(chan struct{}), release: make(chan struct{})}
	open := func(context.Context, string) (sharedlog.Loglet, error) { return g, nil }
	v, err := sharedlog.OpenVirtual(ctx, ms, open, sharedlog.VirtualOptions{InitialURL: "gated", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	r := openReplica(t, v, "", "a", withClock(clk))
	if err := clk.BlockUntil(ctx, 1); err != nil { // the player's idle poll
		t.Fatal(err)
	}
	// A watch makes the log eager, which wakes the player to probe.
	g.armed.Store(true)
	w := r.Watch(nil)
	defer w.Close()
	select {
	case <-g.entered:
	case <-stuckCtx(t).Done():
		t.Fatal("the player did not probe the log")
	}

	before, _, err := ml.CheckTail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Propose(ctx, meta.CreateTopic{Name: "t", Partitions: 1})
		done <- err
	}()
	for {
		tail, _, err := ml.CheckTail(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tail > before {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// The proposer tells the player of its entry right after the append:
	// give a kick that would cancel the probe the time to land.
	time.Sleep(100 * time.Millisecond)
	close(g.release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Propose: %v", err)
		}
	case <-stuckCtx(t).Done():
		t.Fatal("the Propose did not apply once the probe answered")
	}
	if g.cancelled.Load() {
		t.Fatal("the Propose cancelled the player's probe in flight")
	}
	topicID(t, r, "t")
}
