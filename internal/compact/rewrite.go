package compact

import (
	"context"

	"github.com/strandkafka/strand/internal/meta"
)

// Batch is one item of a run the compactor rewrites: a record batch's
// bytes, or a transaction marker, which is an index entry with no bytes
// (the fetch path synthesizes its control batch).
type Batch struct {
	// BaseOffset and LastOffset are the offsets of the item's first and
	// last record, as apply gave them.
	BaseOffset, LastOffset int64
	// Data is one whole v2 record batch whose baseOffset field holds
	// BaseOffset; nil for a marker. It is the compactor's buffer: a
	// Rewriter may return it, or a slice of it, as it is, and must not
	// change it in place.
	Data []byte
	// Marker is the marker's index entry (Control is set); the zero
	// entry for a record batch.
	Marker meta.IndexEntry
	// Transactional: the batch is a transaction's (its index entry said
	// so). A Rewriter that builds a new batch from transactional ones
	// keeps it.
	Transactional bool
	// FirstTimestamp and MaxTimestamp are what the index keeps of the
	// batch's times (those of the entry it came from, which retention
	// and timestamp lookups read); the new entries take the least and
	// the greatest of their batches'.
	FirstTimestamp, MaxTimestamp int64
}

// IsMarker reports whether b is a transaction marker.
func (b *Batch) IsMarker() bool { return b.Marker.Control }

// Run names what a Rewriter is given: the partition, its topic (configs
// included) and the offsets the run covers, [First, Last].
type Run struct {
	Topic       meta.Topic
	Partition   int32
	First, Last int64
}

// Rewriter is the step between reading a run's batches and writing them
// into a new object. The compactor calls it once per run, with the run's
// batches and markers in offset order, and writes what it returns.
//
// What it returns must be in ascending offset order, inside [First,
// Last], each item whole: a v2 batch whose baseOffset field is its
// BaseOffset (a batch it builds anew carries its own CRC), or a marker
// copied from in. Apply refuses a swap that drops or adds offsets of a
// topic whose cleanup.policy does not include compact: for those, only
// the identity is accepted. For compacted topics it may leave offsets
// out, within batches and between them (key deduplication, tombstone and
// marker removal); the new index entries then carry their own offsets
// (meta.IndexEntry.OwnOffsets).
//
// Memory: in holds at most the compactor's target bytes; a Rewriter
// should not hold much more.
type Rewriter interface {
	Rewrite(ctx context.Context, run Run, in []Batch) ([]Batch, error)
}

// Identity is the Rewriter of topics that are not compacted: every batch
// and marker as it is, byte for byte.
type Identity struct{}

// Rewrite returns in.
func (Identity) Rewrite(_ context.Context, _ Run, in []Batch) ([]Batch, error) { return in, nil }
