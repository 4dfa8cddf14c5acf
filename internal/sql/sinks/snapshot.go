package sinks

// A sink's state in object storage (package viewsnap): the sink's
// owner snapshots its "state" database as the views' snapshotter does
// a view's (the Runner is its viewsnap.Views), and a new owner without
// local state restores the newest snapshot (Config.Restore) before it
// catches up to the committed progress.
//
// A snapshot is a checkpoint of committed epochs, and a sink commits
// an epoch's state only after the epoch's transaction committed, so a
// snapshot never stands past the committed progress of the moment it
// was taken, and the progress only grows. runOnce still checks it (a
// snapshot of another sink of the same id, a progress topic deleted):
// a restored state ahead of the committed progress is deleted and the
// sink rebuilt from its inputs' beginning, logged.

import (
	"fmt"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/views"
)

// Maintained are the sinks with a task on this agent.
func (r *Runner) Maintained() []meta.Relation {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]meta.Relation, 0, len(r.mu.tasks))
	for _, id := range slices.Sorted(maps.Keys(r.mu.tasks)) {
		out = append(out, r.mu.tasks[id].rel)
	}
	return out
}

func (r *Runner) task(id uint64) *task {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.tasks[id]
}

// Written is the bytes the sink's state wrote to its WAL since it was
// opened, and the epochs it committed; ok false while the sink is not
// running here (starting, catching up, failed).
func (r *Runner) Written(id uint64) (bytes, epoch uint64, ok bool) {
	t := r.task(id)
	if t == nil {
		return 0, 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.state == nil {
		return 0, 0, false
	}
	return t.mu.state.db.Metrics().WAL.BytesIn, t.mu.epochs, true
}

// Checkpoint writes a Pebble checkpoint of the sink's state into dir
// between two epochs (the task's commit lock: whole epochs, each
// committed to Kafka before it was to Pebble). The upsert inputs' key
// stores are not in it, as with views.
func (r *Runner) Checkpoint(id uint64, dir string) (views.CheckpointInfo, error) {
	t := r.task(id)
	if t == nil {
		return views.CheckpointInfo{}, fmt.Errorf("sink %d does not run here", id)
	}
	t.commitMu.Lock()
	defer t.commitMu.Unlock()
	t.mu.Lock()
	s := t.mu.state
	info := views.CheckpointInfo{Epoch: t.mu.epochs, Inputs: views.ClonePositions(t.mu.positions)}
	t.mu.Unlock()
	if s == nil {
		return views.CheckpointInfo{}, fmt.Errorf("sink %q is not running", t.rel.Name)
	}
	for _, in := range info.Inputs {
		for _, p := range in {
			info.Offsets += p.Offset
		}
	}
	if err := s.db.Flush(); err != nil {
		return views.CheckpointInfo{}, err
	}
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return views.CheckpointInfo{}, err
	}
	info.WALBytes = s.db.Metrics().WAL.BytesIn
	return info, nil
}
