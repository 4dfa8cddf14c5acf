// Package sinks owns running SQL sinks (CREATE SINK): for each sink
// in the replicated catalog, the one agent that placement gives it
// computes its SELECT incrementally (the views' compiler and dataflow:
// views.Compile, package flow, package source's readers) and writes
// each epoch's changes into the sink's topic, exactly once.
//
// # Placement
//
// A sink runs on the agent placement.Ring names for the key
// "sql-sink:<id>" over the live agents (the membership table the group
// and transaction coordinators use), on every agent whether or not it
// serves SQL. When that agent's lease ends the sink's key moves to
// another agent, whose Runner (re-checking every second and at every
// catalog change) starts it. While agents disagree on who is live two
// may run a sink for a while; fencing below keeps that correct.
//
// # What is written
//
// Records are JSON, values as PostgreSQL's to_json writes them
// (AppendJSON). The key is the row's key columns as a JSON object: the
// view's unique key (a GROUP BY's columns) or, without one, every
// column. EnvelopeUpsert writes, per epoch, one record per key the
// epoch changed: the key's row as it stands after the epoch, or a
// tombstone when it is gone. EnvelopeChangelog writes every change as
// Debezium's {"before", "after", "op"}: "c" (before null), "d" (after
// null), and with a unique key an update as one "u" record carrying
// both; without one, each copy added or removed is its own record.
// A key's records always go to one partition (the default key hash),
// in epoch order.
//
// # Exactly once
//
// A sink's state is its own Pebble database under <Dir>/<id> (the
// operators' state, the view's index, the checkpoint: per input
// partition the next offset and greatest event time). Each epoch:
//
//  1. the dataflow steps over the epoch's input changes;
//  2. flow.Epoch.BeforeCommit writes the epoch's records and one
//     progress record (the epoch's checkpoint, to the sink's progress
//     topic, ProgressTopic) in one Kafka transaction, with the
//     transactional id TransactionalID(id), and commits it;
//  3. only then the epoch's state commits to Pebble, the same
//     checkpoint in it. A failed or unknown transaction rolls the epoch
//     back and the task starts again.
//
// On start (a new owner, a restart, after kill -9) the task first
// initializes its producer (InitProducerID with the sink's
// transactional id: any earlier owner's producer is fenced and its
// open transaction aborted), then reads the last committed progress
// record (read_committed). Its local state is never ahead of that
// progress: it commits an epoch only after that epoch's transaction
// committed, a transaction commits only while its producer is the
// newest (a fenced producer's EndTxn fails, and then its state does
// not commit), and each owner starts from the newest committed
// progress, so the progress only grows and every state any agent
// committed is one of its values. A local state behind it is brought
// to exactly it without writing (the inputs read up to those offsets
// and not one record further, source.ReaderConfig.Until); no local
// state is rebuilt the same way from the inputs' beginning. Then it
// writes from there. So each epoch's changes are in the topic once:
// neither lost (the progress moves only with them) nor repeated (the
// next epoch starts where the committed progress says).
//
// # Snapshots
//
// The Runner is a viewsnap.Views: the sink's owner snapshots its state
// into the object store as views are, and a new owner without local
// state restores one (Config.Restore) before catching up; snapshot.go
// says why a snapshot is never ahead of the committed progress and
// what happens if one is.
//
// # Dropping
//
// A dropped sink's task stops and its directory goes on every agent
// at the next reconcile. Its progress topic goes by a sweep (sweep.go)
// on the one agent placed for "sql-sink-sweep": every progress topic
// of an id below the catalog's next relation id that names no sink.
//
// A progress record rather than TxnOffsetCommit to a group: a sink may
// read one topic through two sources (a self-join), each with its own
// position, and its positions carry event times (watermarks) that a
// group's offset has no room for.
//
// Caught-up state equals what the previous owner had because the
// dataflow is a function of the input prefix, windows included: a
// record is judged late by its own partition's watermark alone (whose
// greatest event time is in the checkpoint), late records are dropped
// before a windowed dataflow sees them (views.DropLate, as in a view),
// and a window the watermark closed never receives a record the source
// passed. So a new owner drops exactly the records the old one did,
// however the records fell into epochs.
package sinks
