package agent

// Snapshots of the materialized views' state (package sql/viewsnap):
// the agent placed on a view's key uploads its state to the object
// store every --sql-view-snapshot-interval, and a view whose state
// directory is missing (a new or wiped agent) is restored from its
// newest snapshot before its task opens it.

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/placement"
	"github.com/strandkafka/strand/internal/sql/viewsnap"
)

// newViewSnapshotter makes a.viewSnaps over a.sqlViews.
func (a *Agent) newViewSnapshotter() error {
	id, err := loadOrCreateID(filepath.Join(a.cfg.DataDir, "agent-id"))
	if err != nil {
		return err
	}
	m := a.snapshotMetrics()
	a.viewSnaps, err = viewsnap.New(viewsnap.Config{
		Store: a.store,
		Meta:  a.replica,
		Views: a.sqlViews,
		// Deleting is decided by time (stale markers): held while this
		// agent's clock disagrees with the log's, as the GC is. Late
		// bound: the SQL endpoint starts before the membership, the
		// snapshot loop after it.
		Placement: placement.Ring{Self: a.cfg.NodeID,
			Live: func() []int32 { return a.members.nodes() },
			Hold: func() bool { return a.clock.hold() }},
		AgentID:  id + "-" + strconv.FormatUint(a.replica.Incarnation(), 10),
		Staging:  filepath.Join(a.cfg.DataDir, "views-staging"),
		Interval: a.cfg.SQLViewSnapshotInterval,
		MaxBytes: a.cfg.SQLViewSnapshotBytes,
		Metrics:  m,
		// Elapsed time only (intervals, markers' staleness), never a
		// reading compared with another agent's.
		Clock:  clock.OrReal(a.cfg.testing.clock),
		Logger: a.logger.With("component", "sql-view-snapshots"),
	})
	return err
}

// snapshotMetrics are the snapshots' series, made and registered once
// (the sinks' snapshotter shares them, by relation name).
func (a *Agent) snapshotMetrics() *viewsnap.Metrics {
	if a.snapMetrics == nil {
		a.snapMetrics = viewsnap.NewMetrics()
		a.metrics.reg.MustRegister(a.snapMetrics.Collectors()...)
	}
	return a.snapMetrics
}

// restoreView is views.Config.Restore.
func (a *Agent) restoreView(ctx context.Context, rel meta.Relation, dir string) {
	if a.viewSnaps != nil {
		a.viewSnaps.Restore(ctx, rel, dir)
	}
}

// runViewSnapshots runs the snapshot loop until ctx ends (not at all
// with a negative interval); the returned func waits for it.
func (a *Agent) runViewSnapshots(ctx context.Context) (wait func()) {
	var wg sync.WaitGroup
	if a.viewSnaps != nil && a.cfg.SQLViewSnapshotInterval >= 0 {
		wg.Go(func() { a.viewSnaps.Run(ctx) })
	}
	return wg.Wait
}

// SnapshotViews snapshots every materialized view this agent maintains
// now, whoever owns it (for tests and benchmarks), and returns what it
// took.
func (a *Agent) SnapshotViews(ctx context.Context) ([]viewsnap.Result, error) {
	if a.viewSnaps == nil {
		return nil, nil
	}
	var out []viewsnap.Result
	for _, rel := range a.sqlViews.Maintained() {
		r, err := a.viewSnaps.Snapshot(ctx, rel)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// SweepViewSnapshots deletes the snapshots of dropped views whose key
// this agent owns now (the loop does it every 10 minutes), and returns
// how many objects it deleted.
func (a *Agent) SweepViewSnapshots(ctx context.Context) (int, error) {
	if a.viewSnaps == nil {
		return 0, nil
	}
	return a.viewSnaps.Sweep(ctx)
}
