package views

// What package viewsnap needs of the runner to snapshot a view's state:
// the views maintained here, how much each has written, and a Pebble
// checkpoint taken between two epochs.

import (
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/source"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
)

// Maintained returns the views this runner has a task for, by id.
func (r *Runner) Maintained() []meta.Relation {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]meta.Relation, 0, len(r.mu.tasks))
	for _, id := range slices.Sorted(maps.Keys(r.mu.tasks)) {
		out = append(out, r.mu.tasks[id].rel)
	}
	return out
}

// CheckpointInfo describes a checkpoint of a view's state.
type CheckpointInfo struct {
	// Epoch is the last epoch the checkpoint holds (this agent's
	// numbering).
	Epoch uint64
	// Inputs are the positions the checkpoint resumes from, per input
	// (in the graph's order), per partition: the same positions its
	// state records.
	Inputs []map[int32]source.Position
	// Offsets is the sum of Inputs' offsets: how far into its inputs
	// the state stands, which only grows as the view consumes.
	Offsets int64
	// WALBytes is what the state's database has written to its WAL
	// since it was opened (Written's value at the checkpoint).
	WALBytes uint64
}

// Written returns the bytes the view's state has written to its WAL
// since its database was opened on this agent: a measure of its changes
// (it falls back to a low value when the task restarts). ok is false
// while the view's state is not open.
func (r *Runner) Written(id uint64) (bytes uint64, epoch uint64, ok bool) {
	t, err := r.ready(id)
	if err != nil {
		return 0, 0, false
	}
	defer t.mu.Unlock()
	return t.mu.db.Metrics().WAL.BytesIn, t.mu.epochs, true
}

// Checkpoint writes a Pebble checkpoint of the view's state into dir
// (which must not exist; Pebble hard-links the SSTs) between two
// epochs: it holds the task's commit lock, so the checkpoint holds
// whole epochs and the input positions committed with them, and the
// view's next epoch waits for it (a memtable flush and the links). Only
// the "state" database is checkpointed: an upsert input's key store is
// rebuilt by its reader from the topic's start (emitting nothing
// before the checkpoint's positions). A view whose state is not open
// answers 55000.
func (r *Runner) Checkpoint(id uint64, dir string) (CheckpointInfo, error) {
	t, err := r.ready(id)
	if err != nil {
		return CheckpointInfo{}, err
	}
	// Held as a reader, the task's database stays open until release.
	t.mu.readers++
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.mu.readers--
		if t.mu.readers == 0 {
			t.mu.idle.Broadcast()
		}
		t.mu.Unlock()
	}()
	t.commitMu.Lock()
	defer t.commitMu.Unlock()
	t.mu.Lock()
	db := t.mu.db
	info := CheckpointInfo{Epoch: t.mu.epochs, Inputs: ClonePositions(t.mu.positions)}
	t.mu.Unlock()
	if db == nil {
		return CheckpointInfo{}, sqlerr.Errorf(sqlerr.ObjectNotInPrerequisiteState, "materialized view %q is not open", t.rel.Name)
	}
	for _, in := range info.Inputs {
		for _, p := range in {
			info.Offsets += p.Offset
		}
	}
	// Flushing first puts the memtable into an SST of the live store,
	// shared by later snapshots until a compaction rewrites it; the
	// checkpoint's WAL then holds nothing worth uploading.
	if err := db.Flush(); err != nil {
		return CheckpointInfo{}, err
	}
	if err := db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return CheckpointInfo{}, err
	}
	info.WALBytes = db.Metrics().WAL.BytesIn
	return info, nil
}
