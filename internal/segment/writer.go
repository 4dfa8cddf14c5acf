package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/strandkafka/strand/internal/recordbatch"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Writer assembles one data object in memory. The flusher adds every
// buffered batch, uploads Finish's bytes, and then Resets the Writer for the
// next flush, so steady-state flushing reuses one buffer and allocates
// nothing per batch.
//
// A Writer is not safe for concurrent use. Concurrent uploads each need
// their own Writer.
type Writer struct {
	buf      []byte  // header and chunk bytes; the footer too once finished
	chunks   []Chunk // footer entries, in object order
	finished bool
}

// NewWriter returns an empty Writer.
func NewWriter() *Writer {
	w := &Writer{}
	w.Reset()
	return w
}

// NewWriterSize returns a Writer whose buffer starts with room for an
// object of size bytes, so filling it does not regrow and copy the buffer.
// Callers that hand each finished object away (and so cannot Reset and
// reuse a Writer) pass the size they expect.
func NewWriterSize(size int) *Writer {
	w := &Writer{buf: make([]byte, 0, max(size, HeaderSize))}
	w.Reset()
	return w
}

// Reset empties the Writer, keeping its buffers. The slice Finish returned
// must no longer be in use.
func (w *Writer) Reset() {
	w.buf = appendHeader(w.buf[:0])
	w.chunks = w.chunks[:0]
	w.finished = false
}

func appendHeader(b []byte) []byte {
	b = append(b, magic...)
	b = binary.BigEndian.AppendUint16(b, Version)
	return binary.BigEndian.AppendUint16(b, 0) // flags
}

// Add appends one or more whole v2 record batches of one partition, back to
// back, and returns where they landed in the object. Consecutive Adds for
// the same partition share one footer chunk.
//
// Add copies batches. It checks that they frame into whole v2 batches and
// reads their headers for the footer's counts and timestamps; it does not
// recheck CRCs, which the produce path has just verified (Verify does).
func (w *Writer) Add(topicID [16]byte, partition int32, batches []byte) (ChunkRef, error) {
	if w.finished {
		return ChunkRef{}, ErrFinished
	}
	st, err := batchStats(batches, false)
	if err != nil {
		return ChunkRef{}, fmt.Errorf("segment: add to partition %d: %w", partition, err)
	}
	// Bound the finished size, counting a possible new footer entry.
	if int64(w.Len())+int64(len(batches))+EntrySize > MaxObjectBytes {
		return ChunkRef{}, fmt.Errorf("%w: %d bytes plus %d", ErrObjectTooLarge, w.Len(), len(batches))
	}

	ref := ChunkRef{Offset: int64(len(w.buf)), Length: int64(len(batches))}
	if len(w.buf)+len(batches) > cap(w.buf) {
		// At least double: append grows a large buffer by a
		// quarter, copying all of it each time.
		w.buf = slices.Grow(w.buf, max(len(batches), cap(w.buf)))
	}
	w.buf = append(w.buf, batches...)

	if n := len(w.chunks); n > 0 {
		last := &w.chunks[n-1]
		if last.TopicID == topicID && last.Partition == partition &&
			last.Length+ref.Length <= math.MaxUint32 && int64(last.Batches)+int64(st.batches) <= math.MaxInt32 {
			last.Length += ref.Length
			last.Batches += st.batches
			last.Records += st.records
			last.FirstTimestamp = min(last.FirstTimestamp, st.firstTimestamp)
			last.MaxTimestamp = max(last.MaxTimestamp, st.maxTimestamp)
			return ref, nil
		}
	}
	w.chunks = append(w.chunks, Chunk{
		TopicID:        topicID,
		Partition:      partition,
		Offset:         ref.Offset,
		Length:         ref.Length,
		Batches:        st.batches,
		Records:        st.records,
		FirstTimestamp: st.firstTimestamp,
		MaxTimestamp:   st.maxTimestamp,
	})
	return ref, nil
}

type stats struct {
	batches        int32
	records        int64
	firstTimestamp int64
	maxTimestamp   int64
}

// batchStats walks whole v2 batches, optionally checking their CRCs, and
// sums what the footer records.
func batchStats(b []byte, checkCRC bool) (stats, error) {
	var st stats
	if len(b) == 0 {
		return st, recordbatch.ErrNoBatch
	}
	if len(b) > math.MaxUint32 {
		return st, fmt.Errorf("%w: %d bytes in one add", ErrObjectTooLarge, len(b))
	}
	for rest := b; len(rest) > 0; {
		batch, next, err := recordbatch.Next(rest)
		if err != nil {
			return st, err
		}
		h, err := recordbatch.ParseHeader(batch)
		if err != nil {
			return st, err
		}
		if checkCRC {
			if err := recordbatch.CheckCRC(batch); err != nil {
				return st, err
			}
		}
		if st.batches == 0 {
			st.firstTimestamp, st.maxTimestamp = h.FirstTimestamp, h.MaxTimestamp
		}
		st.firstTimestamp = min(st.firstTimestamp, h.FirstTimestamp)
		st.maxTimestamp = max(st.maxTimestamp, h.MaxTimestamp)
		st.records += int64(max(h.NumRecords, 0))
		st.batches++
		rest = next
	}
	return st, nil
}

// Len is the size in bytes the object would have if finished now.
func (w *Writer) Len() int {
	if w.finished {
		return len(w.buf)
	}
	return len(w.buf) + len(w.chunks)*EntrySize + TrailerSize
}

// DataLen is the number of batch bytes added so far, what a flush.bytes
// threshold compares with.
func (w *Writer) DataLen() int {
	if len(w.chunks) == 0 {
		return 0
	}
	return int(w.chunks[len(w.chunks)-1].End() - HeaderSize)
}

// Chunks returns the footer entries so far. The slice is owned by the
// Writer and valid until the next Add or Reset.
func (w *Writer) Chunks() []Chunk { return w.chunks }

// Finish appends the footer and trailer and returns the whole object. The
// slice is owned by the Writer and valid until Reset. Calling Finish again
// returns the same bytes.
func (w *Writer) Finish() []byte {
	if w.finished {
		return w.buf
	}
	if need := w.Len(); cap(w.buf) < need {
		grown := make([]byte, len(w.buf), need)
		copy(grown, w.buf)
		w.buf = grown
	}
	be := binary.BigEndian
	footerStart := len(w.buf)
	for i := range w.chunks {
		c := &w.chunks[i]
		w.buf = append(w.buf, c.TopicID[:]...)
		w.buf = be.AppendUint32(w.buf, uint32(c.Partition))
		w.buf = be.AppendUint64(w.buf, uint64(c.Offset))
		w.buf = be.AppendUint32(w.buf, uint32(c.Length))
		w.buf = be.AppendUint32(w.buf, uint32(c.Batches))
		w.buf = be.AppendUint64(w.buf, uint64(c.Records))
		w.buf = be.AppendUint64(w.buf, uint64(c.FirstTimestamp))
		w.buf = be.AppendUint64(w.buf, uint64(c.MaxTimestamp))
	}
	w.buf = be.AppendUint32(w.buf, uint32(len(w.chunks)*EntrySize))
	w.buf = be.AppendUint32(w.buf, uint32(len(w.chunks)))
	w.buf = be.AppendUint32(w.buf, crc32.Checksum(w.buf[footerStart:], castagnoli))
	w.buf = be.AppendUint16(w.buf, Version)
	w.buf = be.AppendUint16(w.buf, 0) // flags
	w.buf = append(w.buf, magic...)
	w.finished = true
	return w.buf
}
