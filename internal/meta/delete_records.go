package meta

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// DeleteRecords raises partitions' log start offsets (Kafka's
// DeleteRecords): records below the new log start are no longer readable,
// and the index entries that lie wholly below it are deleted. A log start
// never moves back, so asking for an offset below the current one
// succeeds and changes nothing.
// Result: Batches, one per partition in order: Code and LogStartOffset,
// the partition's log start offset (low watermark) after apply. Codes:
// UNKNOWN_TOPIC_OR_PARTITION, OFFSET_OUT_OF_RANGE (an offset above the
// high watermark, or below -1). A partition named twice is applied twice,
// in order.
type DeleteRecords struct {
	Partitions []DeleteRecordsPartition
}

// DeleteRecordsPartition asks for one partition's records below Offset to
// be deleted.
type DeleteRecordsPartition struct {
	TopicID   TopicID
	Partition int32
	// Offset is the new log start offset; DeleteRecordsHighWatermark
	// means the high watermark at apply, which deletes every record.
	Offset int64
}

// DeleteRecordsHighWatermark as an Offset deletes up to the high watermark
// as of apply, as Kafka's -1.
const DeleteRecordsHighWatermark = -1

// minDeleteRecordsPartitionBytes is the smallest encoded partition: the id
// and two one-byte varints.
const minDeleteRecordsPartitionBytes = 16 + 2

func (DeleteRecords) Type() CommandType { return TypeDeleteRecords }
func (DeleteRecords) version() uint16   { return 1 }

func (c DeleteRecords) appendPayload(b []byte) []byte {
	b = appendUvarint(b, uint64(len(c.Partitions)))
	for i := range c.Partitions {
		p := &c.Partitions[i]
		b = append(b, p.TopicID[:]...)
		b = appendVarint(b, int64(p.Partition))
		b = appendVarint(b, p.Offset)
	}
	return b
}

func decodeDeleteRecordsV1(p []byte) (DeleteRecords, error) {
	r := &reader{b: p}
	var c DeleteRecords
	n := r.count(minDeleteRecordsPartitionBytes)
	if n > 0 {
		c.Partitions = make([]DeleteRecordsPartition, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		p := &c.Partitions[i]
		r.fixed(p.TopicID[:])
		p.Partition = r.int32()
		p.Offset = r.varint()
	}
	return c, r.done()
}

// deleteRecords goes through the partition cache, so a CommitObject in
// the same batch sees the raised log start; index entries are deleted in
// the batch directly, which no cache holds.
func (a *Applier) deleteRecords(c DeleteRecords) (Result, error) {
	res := Result{Batches: make([]BatchResult, len(c.Partitions))}
	for i := range c.Partitions {
		dp := &c.Partitions[i]
		br := &res.Batches[i]
		if dp.Partition < 0 {
			br.Code = kerr.UnknownTopicOrPartition.Code
			continue
		}
		cp, err := a.part(partRef{dp.TopicID, dp.Partition})
		if err != nil {
			return Result{}, err
		}
		if !cp.exists {
			br.Code = kerr.UnknownTopicOrPartition.Code
			continue
		}
		offset := dp.Offset
		if offset == DeleteRecordsHighWatermark {
			offset = cp.st.HighWatermark()
		}
		if offset < 0 || offset > cp.st.HighWatermark() {
			br.Code = kerr.OffsetOutOfRange.Code
			br.LogStartOffset = cp.st.LogStartOffset
			continue
		}
		if offset > cp.st.LogStartOffset {
			cp.st.LogStartOffset = offset
			cp.dirty = true
			if err := a.trimIndex(dp.TopicID, dp.Partition, offset); err != nil {
				return Result{}, err
			}
		}
		br.LogStartOffset = cp.st.LogStartOffset
	}
	return res, nil
}

// trimIndex deletes a partition's index entries that end at or below
// logStart. Entries do not overlap and sort by base offset, so only the
// last entry starting below logStart can hold offsets at or above it:
// one range deletion covers the rest, whatever the index length.
func (a *Applier) trimIndex(id TopicID, partition int32, logStart int64) error {
	start, _ := indexSpan(id, partition)
	end := indexKey(nil, id, partition, logStart)
	it, err := a.b.NewIter(start, end)
	if err != nil {
		return err
	}
	var last IndexEntry
	found, more := it.Last(), false
	if found {
		last, err = decodeIndexEntry(it.Key(), it.Value())
		more = it.Prev()
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil || !found {
		return err
	}
	if last.BaseOffset+int64(last.Records) > logStart {
		// It straddles the new log start and stays: a fetch at the log
		// start reads it, and the client skips the records below.
		if !more {
			return nil
		}
		end = indexKey(nil, id, partition, last.BaseOffset)
	}
	return a.b.DeleteRange(start, end)
}
