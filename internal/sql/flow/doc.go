// Package flow owns the incremental dataflow that maintains
// materialized views: operators over change streams, their state in an
// ordered key-value store, the driver that advances them epoch by
// epoch, and the view's consolidated contents that pull queries read.
// The SQL planner compiles a query into a Graph of these operators,
// with its compiled expressions as Expr functions.
//
// # The model
//
// A relation is a Z-set: rows with signed multiplicities. A change
// (types.Change) is a row and a diff: +1 inserts a copy, -1 deletes one,
// and an update is -old +new. Every operator maps input changes to
// output changes so that, at each epoch boundary, the output is the
// change of the query's answer over the inputs so far: retractions are
// data, not special cases (as in differential dataflow).
//
// Changes move in epochs. Driver.Step takes one epoch's changes on each
// input and a watermark, runs every operator once in the graph's order
// (each sees all of its inputs' changes for the epoch), applies the
// output to the view's index, and commits the operators' state, the
// index, the watermark and the caller's checkpoint (its input positions)
// in one batch. So the view's state and its output advance together, a
// crash leaves the store at an epoch boundary, and an operator emits
// one net change per epoch (a group changed ten times in an epoch
// yields one -old +new, a group whose result did not change yields
// nothing).
//
// # Operators
//
//   - Filter, Map, Project, Union: stateless.
//   - Tumble, Hop: window assignment on event time (window_start and
//     window_end appended; Hop emits a row per window).
//   - Session: session windows per key, merged and split as rows come
//     and go (stateful: a changed session's rows are re-emitted); with
//     Expire, closed sessions' rows freed by the watermark.
//   - Aggregate: GROUP BY with COUNT, SUM, AVG, MIN, MAX,
//     COUNT(DISTINCT), bool_and, bool_or, string_agg, the variance
//     family, all retractable; windowed
//     with a WindowPolicy (late records dropped and counted, closed
//     windows' state freed, optionally emitting once on close).
//   - Join: equi-join, inner and outer; ResidualJoin: an outer
//     equi-join with other ON terms. Both free the rows of an interval
//     join by the watermark (JoinExpiry).
//   - TopN: ROW_NUMBER() <= N per partition, exact under deletes.
//   - RowsWindow: an aggregate over a ROWS n PRECEDING frame.
//   - Distinct; SetOp: INTERSECT and EXCEPT [ALL].
//
// # State
//
// A Store is an ordered key-value store with epoch batches: MemStore
// (in memory, for tests) and PebbleStore (on disk, larger than memory;
// Pebble's caches and the store's own bounded write-through cache of
// hot values bound what it holds in memory). Operators keep no state
// in memory between epochs, only what one epoch touches (and reusable
// scratch memory, bounded, in their Context). Within an epoch an
// operator sums the changes of a key before touching the state (a
// Z-set consolidation: +1 and -1 of one row cancel unread), so each
// key is read and written once per epoch. Keys are
// types.AppendKey encodings (byte order is SQL order), values
// types.AppendValue/AppendRow encodings (lossless). The layout, which
// snapshots and changelogs ship:
//
//	'm' 'e'                     epoch count (uvarint)
//	'm' 'w'                     watermark (varint unix µs)
//	'm' 'c'                     the caller's checkpoint
//	'n' node(uint16 BE) ...     node's operator state; each operator
//	                            documents its own keys (Aggregate, Join,
//	                            ResidualJoin, TopN, RowsWindow, Session,
//	                            SetOp, Distinct)
//	'v' ...                     the view's index (IndexSpec)
//
// A counted row, the value of most keys, is a zigzag varint count then
// the row (types.AppendRow). Node numbers are the order nodes were
// added to the Graph, so a graph must be rebuilt identically to reopen
// its state.
//
// # Writes without reads
//
// A PebbleStore whose database merges with CountedMerger
// (SetCountedMerges) takes a view index's additions to rows that may
// repeat (an index over whole rows), in an epoch whose output retracts
// nothing, as merge operands, unread: the count is summed when the key
// is read or compacted. The operands wait in an unindexed batch until
// the epoch commits, or until a read or write may see them. Retractions, and a
// unique index's rows, still read the count first, so a count below
// zero or a second row for a unique key fails the epoch as before. A
// read of a key the epoch did not write (the store's cache holds every
// key the epoch wrote, until it drops one) goes to the database without
// searching the epoch's batch.
package flow
