// Package compact owns object compaction: on the partitions placement
// gives its agent, it reads the batches of level-0 index entries (ranges
// of the multi-partition objects the produce path writes, one per
// flush), writes them into per-partition objects of a target size, and
// proposes meta.SwapIndex to point the index at them. The swap is a
// compare-and-swap in apply (meta/compact.go): a retention trim,
// DeleteRecords, topic deletion or another compactor that changed the
// run first makes it lose, and the compactor plans again. The replaced
// objects die through garbage collection (package gc) after the grace
// period, so a fetch that planned from an older View still reads them;
// new objects whose swap never applied are orphans the reconciler
// deletes.
//
// Between reading a run and writing it sits a Rewriter: the identity for
// plain topics, key deduplication for compacted ones (cleanup.policy=
// compact).
package compact
