package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/faultlog"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
)

// trimTestTimeout guards against deadlocks only.
const trimTestTimeout = 30 * time.Second

// logClock is the proposer clock of the test's replicas, moved by hand,
// so that leases run out when the test says. Their waits (append
// retries, tail polls) stay on the wall clock.
type logClock struct{ ms atomic.Int64 }

func (c *logClock) Now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *logClock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

func (c *logClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return clock.Real.AfterFunc(d, f)
}

// trimCluster is two agents' metadata machinery on one shared file log:
// replicas, lease renewals (membership) and agent a's snapshotter, driven
// step by step instead of by tickers.
type trimCluster struct {
	clock  logClock
	log    *sharedlog.VirtualLog
	a, b   *replica.Replica
	bLog   *faultlog.PausedLog
	ma, mb *membership
	snaps  *snapshotter
}

const trimTestLease = 10 * time.Second

func newTrimCluster(t *testing.T) *trimCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), trimTestTimeout)
	defer cancel()
	c := &trimCluster{}
	c.clock.ms.Store(1_000_000)
	logger := slog.New(slog.DiscardHandler)
	var err error
	c.log, err = logurl.OpenVirtual(ctx, "file://"+filepath.ToSlash(t.TempDir()), sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.log.Close() })
	open := func(id string, log sharedlog.Log) *replica.Replica {
		r, err := replica.Open(ctx, replica.Config{
			Dir: filepath.Join(t.TempDir(), "meta"), Log: log, WriterID: id, Clock: &c.clock, Logger: logger,
		})
		if err != nil {
			t.Fatalf("replica.Open(%s): %v", id, err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	c.a = open("agent-a", c.log)
	c.bLog = faultlog.Paused(c.log)
	c.b = open("agent-b", c.bLog)
	// Resumed before b closes (cleanups run last first), so that Close
	// does not wait on a paused read.
	t.Cleanup(c.bLog.Resume)
	lease := trimTestLease.Milliseconds()
	c.ma = newMembership(c.a, meta.AgentHeartbeat{NodeID: 1, AgentID: "agent-a", LeaseMs: lease}, logger)
	c.mb = newMembership(c.b, meta.AgentHeartbeat{NodeID: 2, AgentID: "agent-b", LeaseMs: lease}, logger)
	c.snaps = newSnapshotter(c.a, c.log, memobj.New(), "agent-a", 0, DefaultSnapshotKeep, newMetrics(), logger)
	t.Cleanup(c.snaps.stop)
	return c
}

func trimCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), trimTestTimeout)
	t.Cleanup(cancel)
	return ctx
}

func (c *trimCluster) renew(t *testing.T, m *membership) {
	t.Helper()
	if err := m.heartbeat(trimCtx(t)); err != nil {
		t.Fatalf("heartbeat of node %d: %v", m.self.NodeID, err)
	}
}

// reported returns the applied position agent b last reported, as a's
// copy holds it after a sync.
func (c *trimCluster) reported(t *testing.T) sharedlog.Pos {
	t.Helper()
	if err := c.a.Sync(trimCtx(t)); err != nil {
		t.Fatal(err)
	}
	v := c.a.View()
	defer v.Close()
	as, err := v.Agents()
	if err != nil {
		t.Fatal(err)
	}
	for _, ag := range as {
		if ag.NodeID == 2 {
			return sharedlog.Pos(ag.Applied)
		}
	}
	t.Fatal("agent b is not in the agent table")
	return 0
}

// work proposes a few commands through a, so that its snapshots move.
func (c *trimCluster) work(t *testing.T, round int) {
	t.Helper()
	for i := range 3 {
		res, err := c.a.Propose(trimCtx(t), meta.CreateTopic{Name: fmt.Sprintf("t-%d-%d", round, i), Partitions: 1})
		if err != nil || res.Err() != nil {
			t.Fatalf("CreateTopic: %v, %v", err, res.Err())
		}
	}
}

func (c *trimCluster) snapshot(t *testing.T) SnapshotResult {
	t.Helper()
	res, err := c.snaps.run(trimCtx(t))
	if err != nil {
		t.Fatalf("snapshot and trim: %v", err)
	}
	if res.TrimPoint != c.log.Chain().TrimPoint {
		t.Fatalf("result's trim point %d, the log's %d", res.TrimPoint, c.log.Chain().TrimPoint)
	}
	return res
}

// TestTrimWaitsForLiveAgent: agent a snapshots repeatedly while agent b,
// live but stalled, applies nothing. a's trims stay at the applied
// position b's heartbeat reported, so b catches up without ErrTrimmed;
// b's renewals then let the trim point move on. Once b stops renewing
// and its lease runs out by the log clock (moved by a's renewals), a
// trims up to its snapshot, past b.
func TestTrimWaitsForLiveAgent(t *testing.T) {
	c := newTrimCluster(t)
	c.renew(t, c.ma)
	if err := c.b.Sync(trimCtx(t)); err != nil {
		t.Fatal(err)
	}
	// The renewal carries the position applied when it was proposed.
	bAt := c.b.NextToApply()
	c.renew(t, c.mb)
	if got := c.reported(t); got != bAt || bAt == 0 {
		t.Fatalf("b's heartbeat reported applied %d, want its position %d", got, bAt)
	}

	c.bLog.Pause()
	for round := range 3 {
		c.clock.advance(time.Second) // well within b's lease
		c.work(t, round)
		c.renew(t, c.ma)
		res := c.snapshot(t)
		switch {
		case res.Snapshot.Pos <= bAt:
			t.Fatalf("round %d: snapshot at %d, not past b's %d: the test shows nothing", round, res.Snapshot.Pos, bAt)
		case res.TrimPoint != bAt:
			t.Fatalf("round %d: snapshot at %d, log trimmed at %d; want b's applied %d", round, res.Snapshot.Pos, res.TrimPoint, bAt)
		case res.HeldBy == nil || res.HeldBy.NodeID != 2 || sharedlog.Pos(res.HeldBy.Applied) != bAt:
			t.Fatalf("round %d: trim held by %+v, want node 2 at %d", round, res.HeldBy, bAt)
		case c.b.NextToApply() >= res.Snapshot.Pos:
			t.Fatalf("round %d: b applied up to %d, past the snapshot at %d: it was not stalled", round, c.b.NextToApply(), res.Snapshot.Pos)
		}
	}
	c.bLog.Resume()
	if err := c.b.Sync(trimCtx(t)); err != nil {
		t.Fatalf("b catching up: %v", err)
	}
	if err := c.a.Sync(trimCtx(t)); err != nil {
		t.Fatal(err)
	}
	da, errA := c.a.Digest()
	db, errB := c.b.Digest()
	if errA != nil || errB != nil || da != db {
		t.Fatalf("after b caught up: digests %x (%v) and %x (%v)", da, errA, db, errB)
	}

	// b's next renewal reports where it is now, and the trim follows.
	c.renew(t, c.mb)
	bAt = c.reported(t)
	c.renew(t, c.ma)
	if res := c.snapshot(t); res.TrimPoint != bAt || res.Snapshot.Pos <= bAt {
		t.Fatalf("after b's renewal at %d: snapshot at %d, trim point %d; want %d", bAt, res.Snapshot.Pos, res.TrimPoint, bAt)
	}

	// b stalls again and stops renewing; a's renewals carry the log
	// clock past the end of b's lease.
	c.bLog.Pause()
	c.clock.advance(trimTestLease)
	c.work(t, 99)
	c.renew(t, c.ma)
	res := c.snapshot(t)
	if res.HeldBy != nil || res.TrimPoint != res.Snapshot.Pos || res.TrimPoint <= c.b.NextToApply() {
		t.Fatalf("after b's lease ran out: snapshot at %d, trim point %d, held by %+v; want the snapshot's position, past b at %d",
			res.Snapshot.Pos, res.TrimPoint, res.HeldBy, c.b.NextToApply())
	}
	c.bLog.Resume()
	if err := c.b.Sync(trimCtx(t)); !errors.Is(err, sharedlog.ErrTrimmed) {
		t.Fatalf("b resuming below the trim point: %v, want ErrTrimmed", err)
	}
}
