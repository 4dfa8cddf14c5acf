// Package viewsnap owns the snapshots of materialized views' state in
// object storage: taking them (one agent per view), restoring a missing
// state directory from the newest one, and collecting the old ones and
// a dropped view's.
//
// # Snapshot plus tail, and why the tail is the inputs
//
// Every agent with an SQL endpoint maintains every view (package views),
// so a new or wiped agent would rebuild each view by reading its input
// topics from their beginning. Instead it downloads the newest snapshot:
// a Pebble checkpoint of the view's "state" database, which holds the
// operators' state, the view's contents and the input positions those
// reflect, all committed in one batch per epoch. The runner opens it and
// resumes as after a restart: it reads the inputs from the checkpoint's
// positions on. That tail is the input topics themselves, not a
// changelog topic of the view's changes. A view is a deterministic
// function of its inputs (package flow), so the inputs after the
// positions, applied to the state at the positions, give what any agent
// holds; a changelog would be a second copy of every change, produced
// and stored once more (for a join, many times the input), paid on every
// epoch to save work only on a restore. The price is a restore's catch-up
// is the view's own processing of the tail rather than applying changes
// already computed; snapshots taken often enough bound that tail. Input
// retention must keep what lies after the newest snapshot's positions;
// what it has deleted is skipped (the reader starts a partition at its
// log start), as a rebuild from the beginning would skip it too.
//
// An upsert input's key store (its newest row per key) is not in the
// snapshot: its reader rebuilds it from the topic's start, emitting
// nothing before the checkpoint's positions, so a restore of a view over
// an upsert source still reads that topic from its start (not the other
// inputs), at the cost of decoding it, not of running the dataflow.
//
// # Who snapshots
//
// The agent placement gives the key "sql-view:<id>" (placement.Ring,
// over the live agents) takes the view's snapshots: every Interval (5
// minutes by default) or after MaxBytes of its WAL, whichever first, if
// an epoch committed since. Ownership is advice: while agents disagree on
// who is live two may snapshot one view, which the layout below makes
// harmless. Config.Key changes the key: the sinks' Snapshotter places
// a sink's snapshots on its owner (package sinks), the only agent with
// its state, under the same Root (relation ids are unique across kinds)
// and without sweeping (the views' Snapshotter sweeps every dropped id). The checkpoint is taken between two epochs (the task's
// commit lock), after a memtable flush, so it is whole epochs with their
// positions; Pebble hard-links its SSTs, so the view waits only for the
// flush.
//
// # Layout in the object store
//
//	views/<id>/snap/<offsets:020d>-<writer>.json   manifest (JSON: files, sizes, SHA-256, positions)
//	views/<id>/sst/<writer>/<file>.sst              SSTs and blob files
//	views/<id>/aux/<writer>/<offsets:020d>-<file>   MANIFEST-*, OPTIONS-*, markers: one set per snapshot
//	views/<id>/pending/<agent>/<run>.json           a snapshot in progress
//	views/<id>/gc/<agent>/<run>.json                a GC in progress
//
// <writer> is a random id kept in the view's state directory (made at
// its first snapshot, so a wiped or restored directory gets a new one).
// Pebble never reuses a file number within a database nor rewrites a
// file, so (writer, file name) names an SST's content for good and two
// agents' equal file numbers never meet: a snapshot uploads only the
// SSTs its writer's earlier manifests do not already name, nor those a
// restored directory still has from the snapshot it was restored from
// (origin.go: such a manifest names the other writer's objects). <offsets> is
// the sum of the input positions the snapshot resumes from; it only
// grows as a view consumes, so the newest snapshot is the last manifest
// by key, whichever agent took it. Files go first and the manifest last
// (PutIfAbsent): a snapshot exists once its manifest does.
//
// # Restore
//
// When a view's directory is missing, the runner calls Restore before
// opening it: the newest manifest's files are downloaded into a staging
// directory, checked (size, SHA-256, Pebble opens them) and renamed into
// place; a damaged or meanwhile collected snapshot falls back to the one
// before, and with none left the view is rebuilt from its inputs'
// beginning, logged and counted (strand_sql_view_restores_total).
//
// # Collection
//
// After each snapshot its taker keeps the newest Keep (2) manifests,
// deletes the older ones, then the objects no kept manifest names,
// unless another agent's snapshot is in progress; the markers and the
// rule for judging them dead without comparing clocks are in gc.go. A
// dropped view's prefix is deleted whole by its key's owner once its
// catalog copy shows the DROP (Sweep): the log decides, not a clock.
package viewsnap
