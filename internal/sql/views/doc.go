// Package views owns the maintenance of materialized views inside an
// agent: a Runner watches the replicated catalog, runs a task for each
// materialized view (its query compiled by package viewplan, its
// dataflow driven by package flow over a Pebble database of its own,
// its inputs followed by package source's Readers), stops a dropped
// view's task and deletes its local state, and lets the SQL endpoint
// read each view's committed contents.
//
// # Where state lives, and exactly-once
//
// Every agent maintains every materialized view itself, from the input
// topics: a view is a deterministic function of its inputs, so each
// agent's copy converges to the same contents and reads are local. A
// view's state is the directory <Dir>/<relation id>: its Pebble
// database ("state", the operators' state, the view's index and the
// checkpoint) and an upsert source's key store per input ("upsert-N").
// The checkpoint, the next offset and greatest event time of every
// input partition, commits in the same Pebble batch as the epoch's
// state (flow.Epoch.Checkpoint), so a restarted agent resumes each view
// exactly after what its state holds: no change lost or applied twice.
// A missing directory is first offered to Config.Restore (package
// viewsnap puts the view's newest snapshot there, checkpoint included),
// else rebuilt from the inputs' beginning (agents hold no hard state);
// a directory whose view no longer exists is deleted. Checkpoint takes
// a Pebble checkpoint between two epochs for such snapshots
// (snapshot.go).
//
// # Late records
//
// A view whose windows close by the watermark, or whose interval joins
// or SESSION windows free state by it (viewplan.View.Windowed),
// drops the records its sources mark late (source.PartitionBatch.Late:
// earlier than their own partition's watermark), and counts them with
// what its aggregates dropped in strand_sql_view_late_records_total.
// The judgement is each partition's alone and its greatest event time
// is in the checkpoint, so every agent's copy drops the same records.
// Other views keep late records (their sources count them).
//
// # Consistency of reads
//
// A read sees the view's last committed epoch: each answer reflects a
// prefix of every input partition (per agent; two agents may stand at
// different prefixes). A view still catching up answers what it has.
//
// # Subscriptions
//
// Subscribe streams a view's changes (SUBSCRIBE): its snapshot at one
// epoch, then each later epoch's output as flow.Driver.Step returns it.
// The task holds a commit lock from an epoch's Step until its changes
// are handed to the subscribers, and Subscribe reads its snapshot under
// the same lock, so a subscription starts exactly between two epochs.
// Handing changes out never blocks the task: each subscriber's queue is
// bounded in changes, and one that would overflow ends (53400) instead
// of slowing the view. A subscription survives its task's retry after a
// failure (the epochs resume from the checkpoint, numbered on); it ends
// when the view is dropped or the runner stops.
//
// # Failures
//
// A view that fails to compile or to run (an input unreadable, a
// corrupt state) does not stop the agent or other views: its task logs
// the error, shows it in Status (and SHOW MATERIALIZED VIEWS' status
// column through the catalog), and retries from its last checkpoint
// after a backoff.
//
// # Views over views
//
// A view reading other views compiles their queries in as WITH
// queries: one dataflow per dependency chain, reading only sources.
// Feeding a downstream driver from the upstream's output per epoch
// would keep the upstream's state once, but couple two tasks'
// checkpoints (the downstream's input positions would be the
// upstream's epochs, which differ per agent and restart); inlining
// keeps each view's exactly-once its own, at the cost of keeping an
// upstream's operator state again in each view over it.
//
// # Operating
//
// Each view's series on /metrics (metrics.go) are labelled by its name
// alone: epochs, input and output changes, lag in records and in time,
// state size on disk, late, late-dropped and bad input records; Status
// carries the same numbers for the console. Explain prints a view's
// dataflow with its operators' counters (EXPLAIN).
//
// A partition the checkpoint has no position for (none of its records
// read before the restart, or added to the topic since) is read from
// the log's start. Not yet: a source with scan.startup = 'latest' whose
// input had no records at all before a restart starts again at the
// end, skipping what was produced while the agent was down.
package views
