package agent

// SQL sinks (package sql/sinks): every agent runs the sinks the
// placement ring gives it, whether or not it serves SQL, so a sink is
// written as long as any agent lives. A sink is placed like a group's
// coordinator: by its key ("sql-sink:<id>") over the live agents of
// the membership table, moving when its agent's lease ends.

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/placement"
	"github.com/strandkafka/strand/internal/sql/sinks"
	"github.com/strandkafka/strand/internal/sql/viewsnap"
)

// newSinks makes the sinks' runner; startSinks runs it once the agent
// is ready (its clients are in-process clients of this agent).
func (a *Agent) newSinks() error {
	ring := func(key string) int32 {
		// Read at each call: the membership starts after this.
		return placement.Ring{Self: a.cfg.NodeID, Live: a.members.nodes}.Owner(key)
	}
	r, err := sinks.New(sinks.Config{Store: a.replica, Dir: filepath.Join(a.cfg.DataDir, "sinks"),
		Kafka: a.sqlKafka, Schemas: a.sqlSchemas, Owner: ring, Self: a.cfg.NodeID,
		Restore: a.restoreSink, Logger: a.logger.With("component", "sql-sinks")})
	if err != nil {
		return err
	}
	if err := a.newSinkSnapshotter(r); err != nil {
		return err
	}
	// Exported, as the views' metrics are, where SQL is served: the
	// sinks' series sit beside the views' they are computed like (an
	// agent without --sql-listen runs its sinks unmetered).
	if a.cfg.SQLListen != "" {
		a.metrics.reg.MustRegister(r.Metrics().Collectors()...)
	}
	a.sqlSinks = r
	return nil
}

// newSinkSnapshotter makes a.sinkSnaps: the sinks' state goes to the
// object store as the views' does (package viewsnap, under the same
// root: relation ids are unique across kinds), snapshotted by the
// sink's owner, the one agent with its state. The views' snapshotter
// sweeps dropped relations' prefixes, sinks' included; this one does
// not sweep.
func (a *Agent) newSinkSnapshotter(r *sinks.Runner) error {
	id, err := loadOrCreateID(filepath.Join(a.cfg.DataDir, "agent-id"))
	if err != nil {
		return err
	}
	a.sinkSnaps, err = viewsnap.New(viewsnap.Config{
		Store: a.store,
		Meta:  a.replica,
		Views: r,
		Key:   sinks.PlacementKey,
		Placement: placement.Ring{Self: a.cfg.NodeID,
			Live: func() []int32 { return a.members.nodes() },
			Hold: func() bool { return a.clock.hold() }},
		AgentID:       id + "-" + strconv.FormatUint(a.replica.Incarnation(), 10),
		Staging:       filepath.Join(a.cfg.DataDir, "sinks-staging"),
		Interval:      a.cfg.SQLViewSnapshotInterval,
		MaxBytes:      a.cfg.SQLViewSnapshotBytes,
		SweepInterval: -1,
		Metrics:       a.snapshotMetrics(),
		Clock:         clock.OrReal(a.cfg.testing.clock),
		Logger:        a.logger.With("component", "sql-sink-snapshots"),
	})
	return err
}

// restoreSink is sinks.Config.Restore.
func (a *Agent) restoreSink(ctx context.Context, rel meta.Relation, dir string) {
	if a.sinkSnaps != nil {
		a.sinkSnaps.Restore(ctx, rel, dir)
	}
}

// SnapshotSinks snapshots every sink this agent runs now (for tests).
func (a *Agent) SnapshotSinks(ctx context.Context) ([]viewsnap.Result, error) {
	var out []viewsnap.Result
	for _, rel := range a.sqlSinks.Maintained() {
		r, err := a.sinkSnaps.Snapshot(ctx, rel)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (a *Agent) startSinks() {
	if a.sqlSinks == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.sinksStop, a.sinksDone = cancel, make(chan struct{})
	go func() {
		defer close(a.sinksDone)
		var wg sync.WaitGroup
		if a.cfg.SQLViewSnapshotInterval >= 0 {
			wg.Go(func() { a.sinkSnaps.Run(ctx) })
		}
		a.sqlSinks.Run(ctx)
		wg.Wait()
	}()
}

// stopSinks stops the sinks' tasks, before the Kafka server their
// clients use: a transaction in flight is abandoned, and the next
// owner's start aborts it.
func (a *Agent) stopSinks() {
	if a.sinksStop != nil {
		a.sinksStop()
		<-a.sinksDone
	}
}
