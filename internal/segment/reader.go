package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Trailer is the decoded fixed end of an object.
type Trailer struct {
	FooterLength int64
	ChunkCount   int
	FooterCRC    uint32
	Version      uint16
}

// FooterStart is where the footer begins in an object of objSize bytes.
func (t Trailer) FooterStart(objSize int64) int64 { return objSize - TrailerSize - t.FooterLength }

// ParseTrailer decodes the trailer at the end of tail, the last bytes of an
// object of objSize bytes, and checks it against the object's size. It is
// the first step of ReadFooterFromTail, exposed for tools.
func ParseTrailer(tail []byte, objSize int64) (Trailer, error) {
	if objSize < minObjectBytes || objSize > MaxObjectBytes {
		return Trailer{}, fmt.Errorf("%w: object size %d", ErrCorrupt, objSize)
	}
	if int64(len(tail)) > objSize {
		return Trailer{}, fmt.Errorf("%w: %d tail bytes for a %d-byte object", ErrCorrupt, len(tail), objSize)
	}
	if len(tail) < TrailerSize {
		return Trailer{}, &ShortTailError{Need: TrailerSize, Have: len(tail)}
	}
	t := tail[len(tail)-TrailerSize:]
	be := binary.BigEndian
	if string(t[16:20]) != magic {
		return Trailer{}, fmt.Errorf("%w: bad trailing magic %q", ErrCorrupt, t[16:20])
	}
	tr := Trailer{
		FooterLength: int64(be.Uint32(t[0:])),
		ChunkCount:   int(be.Uint32(t[4:])),
		FooterCRC:    be.Uint32(t[8:]),
		Version:      be.Uint16(t[12:]),
	}
	if tr.Version != Version {
		return Trailer{}, fmt.Errorf("%w: %d", ErrVersion, tr.Version)
	}
	if flags := be.Uint16(t[14:]); flags != 0 {
		return Trailer{}, fmt.Errorf("%w: trailer flags %#x", ErrCorrupt, flags)
	}
	// Check the counts against each other and the object before anything
	// is sized by them.
	if tr.FooterLength != int64(tr.ChunkCount)*EntrySize {
		return Trailer{}, fmt.Errorf("%w: footer of %d bytes for %d chunks", ErrCorrupt, tr.FooterLength, tr.ChunkCount)
	}
	if HeaderSize+tr.FooterLength+TrailerSize > objSize {
		return Trailer{}, fmt.Errorf("%w: footer of %d bytes in a %d-byte object", ErrCorrupt, tr.FooterLength, objSize)
	}
	return tr, nil
}

// ReadFooterFromTail decodes the footer from tail, the last len(tail) bytes
// of an object of objSize bytes, so a reader can fetch only the object's
// end (DefaultTailBytes is a good first guess). If tail does not reach the
// footer's start, it returns a *ShortTailError (errors.Is ErrShortTail)
// whose Need says how many tail bytes to fetch.
//
// The chunks are checked to tile the object between header and footer; the
// chunk bytes themselves are not read (Verify does that).
func ReadFooterFromTail(tail []byte, objSize int64) ([]Chunk, error) {
	tr, err := ParseTrailer(tail, objSize)
	if err != nil {
		return nil, err
	}
	need := tr.FooterLength + TrailerSize
	if int64(len(tail)) < need {
		return nil, &ShortTailError{Need: need, Have: len(tail)}
	}
	footer := tail[int64(len(tail))-need : len(tail)-TrailerSize+8] // entries, footerLength, chunkCount
	if crc := crc32.Checksum(footer, castagnoli); crc != tr.FooterCRC {
		return nil, fmt.Errorf("%w: footer CRC stored %#08x, computed %#08x", ErrCorrupt, tr.FooterCRC, crc)
	}

	// Allocation is bounded: ChunkCount*EntrySize bytes of tail exist.
	chunks := make([]Chunk, tr.ChunkCount)
	be := binary.BigEndian
	next := int64(HeaderSize)
	for i := range chunks {
		e := footer[i*EntrySize : (i+1)*EntrySize]
		c := &chunks[i]
		copy(c.TopicID[:], e[0:16])
		c.Partition = int32(be.Uint32(e[16:]))
		off := be.Uint64(e[20:])
		c.Length = int64(be.Uint32(e[28:]))
		batches := be.Uint32(e[32:])
		records := be.Uint64(e[36:])
		c.FirstTimestamp = int64(be.Uint64(e[44:]))
		c.MaxTimestamp = int64(be.Uint64(e[52:]))
		if off != uint64(next) || c.Length == 0 {
			return nil, fmt.Errorf("%w: chunk %d at %d+%d, expected to start at %d", ErrCorrupt, i, off, c.Length, next)
		}
		if batches == 0 || batches > math.MaxInt32 || records > math.MaxInt64 {
			return nil, fmt.Errorf("%w: chunk %d claims %d batches, %d records", ErrCorrupt, i, batches, records)
		}
		c.Offset, c.Batches, c.Records = int64(off), int32(batches), int64(records)
		next = c.End()
	}
	if next != tr.FooterStart(objSize) {
		return nil, fmt.Errorf("%w: chunks end at %d, footer starts at %d", ErrCorrupt, next, tr.FooterStart(objSize))
	}
	return chunks, nil
}

// ReadFooter decodes the footer of a whole object, checking its header too.
func ReadFooter(obj []byte) ([]Chunk, error) {
	if len(obj) < minObjectBytes {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(obj))
	}
	if string(obj[:4]) != magic {
		return nil, fmt.Errorf("%w: bad leading magic %q", ErrCorrupt, obj[:4])
	}
	be := binary.BigEndian
	if v := be.Uint16(obj[4:]); v != Version {
		return nil, fmt.Errorf("%w: %d", ErrVersion, v)
	}
	if flags := be.Uint16(obj[6:]); flags != 0 {
		return nil, fmt.Errorf("%w: header flags %#x", ErrCorrupt, flags)
	}
	return ReadFooterFromTail(obj, int64(len(obj)))
}

// Verify checks a whole object: header, footer, and that every chunk is
// whole v2 batches with good CRCs whose counts and timestamps match the
// footer. It returns the chunks.
func Verify(obj []byte) ([]Chunk, error) {
	chunks, err := ReadFooter(obj)
	if err != nil {
		return nil, err
	}
	for i := range chunks {
		c := &chunks[i]
		got, err := batchStats(obj[c.Offset:c.End()], true)
		if err != nil {
			return nil, fmt.Errorf("%w: chunk %d (partition %d): %w", ErrCorrupt, i, c.Partition, err)
		}
		if got.batches != c.Batches || got.records != c.Records || got.firstTimestamp != c.FirstTimestamp || got.maxTimestamp != c.MaxTimestamp {
			return nil, fmt.Errorf("%w: chunk %d holds %d batches, %d records, timestamps [%d, %d]; footer says %d, %d, [%d, %d]",
				ErrCorrupt, i, got.batches, got.records, got.firstTimestamp, got.maxTimestamp,
				c.Batches, c.Records, c.FirstTimestamp, c.MaxTimestamp)
		}
	}
	return chunks, nil
}
