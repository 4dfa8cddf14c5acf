package filelog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/strandkafka/strand/internal/sharedlog"
)

const (
	formatVersion = 1

	segmentMagic       = "STRNDSEG"
	segmentHeaderBytes = 24
	entryHeaderBytes   = 8

	stateMagic     = "STRNDSTA"
	stateFileBytes = 36

	// formatMaxEntryBytes is the largest entry the format admits, whatever
	// Options said when it was written; a larger length field is corrupt.
	formatMaxEntryBytes = 1 << 30

	// scanBufferBytes bounds the read buffer of the recovery scan, which
	// checksums payloads in chunks rather than loading them whole.
	scanBufferBytes = 256 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Reasons a scan stops before the end of a segment.
var (
	errTruncated = errors.New("entry runs past the end of the file")
	errLength    = errors.New("entry length beyond the format limit")
	errChecksum  = errors.New("entry checksum mismatch")
)

// entryCRC covers the length field too, so a zeroed or garbled header
// does not pass for an empty entry.
func entryCRC(lengthField, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(lengthField, castagnoli), castagnoli, payload)
}

// appendEntry appends payload, encoded as one entry, to dst.
func appendEntry(dst, payload []byte) []byte {
	var h [entryHeaderBytes]byte
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(h[4:8], entryCRC(h[0:4], payload))
	dst = append(dst, h[:]...)
	return append(dst, payload...)
}

// decodeEntry decodes the entry at the start of b and returns its payload,
// which aliases b with its capacity clipped, and its encoded size.
func decodeEntry(b []byte) (payload []byte, n int, err error) {
	if len(b) < entryHeaderBytes {
		return nil, 0, errTruncated
	}
	length := binary.LittleEndian.Uint32(b[0:4])
	if uint64(length) > formatMaxEntryBytes {
		return nil, 0, errLength
	}
	if uint64(length) > uint64(len(b)-entryHeaderBytes) {
		return nil, 0, errTruncated
	}
	n = entryHeaderBytes + int(length)
	payload = b[entryHeaderBytes:n:n]
	if entryCRC(b[0:4], payload) != binary.LittleEndian.Uint32(b[4:8]) {
		return nil, 0, errChecksum
	}
	return payload, n, nil
}

func encodeSegmentHeader(base sharedlog.Pos) []byte {
	b := make([]byte, segmentHeaderBytes)
	copy(b, segmentMagic)
	binary.LittleEndian.PutUint32(b[8:12], formatVersion)
	binary.LittleEndian.PutUint64(b[12:20], uint64(base))
	binary.LittleEndian.PutUint32(b[20:24], crc32.Checksum(b[:20], castagnoli))
	return b
}

func decodeSegmentHeader(b []byte) (sharedlog.Pos, error) {
	switch {
	case len(b) < segmentHeaderBytes:
		return 0, fmt.Errorf("%w: segment header: %d bytes", ErrCorrupt, len(b))
	case string(b[:8]) != segmentMagic:
		return 0, fmt.Errorf("%w: segment header: bad magic %q", ErrCorrupt, b[:8])
	case crc32.Checksum(b[:20], castagnoli) != binary.LittleEndian.Uint32(b[20:24]):
		return 0, fmt.Errorf("%w: segment header: checksum mismatch", ErrCorrupt)
	case binary.LittleEndian.Uint32(b[8:12]) != formatVersion:
		return 0, fmt.Errorf("%w: segment format version %d, this build reads %d", ErrCorrupt, binary.LittleEndian.Uint32(b[8:12]), formatVersion)
	}
	return sharedlog.Pos(binary.LittleEndian.Uint64(b[12:20])), nil
}

// state is what the STATE file holds: the seal bit and the trim point.
type state struct {
	sealed     bool
	trimmed    sharedlog.Pos
	sealedTail sharedlog.Pos // the tail when sealed, to check recovery against
}

const stateSealed = 1

func (s state) encode() []byte {
	b := make([]byte, stateFileBytes)
	copy(b, stateMagic)
	binary.LittleEndian.PutUint32(b[8:12], formatVersion)
	if s.sealed {
		binary.LittleEndian.PutUint32(b[12:16], stateSealed)
	}
	binary.LittleEndian.PutUint64(b[16:24], uint64(s.trimmed))
	binary.LittleEndian.PutUint64(b[24:32], uint64(s.sealedTail))
	binary.LittleEndian.PutUint32(b[32:36], crc32.Checksum(b[:32], castagnoli))
	return b
}

func decodeState(b []byte) (state, error) {
	switch {
	case len(b) != stateFileBytes:
		return state{}, fmt.Errorf("%w: state file: %d bytes", ErrCorrupt, len(b))
	case string(b[:8]) != stateMagic:
		return state{}, fmt.Errorf("%w: state file: bad magic %q", ErrCorrupt, b[:8])
	case crc32.Checksum(b[:32], castagnoli) != binary.LittleEndian.Uint32(b[32:36]):
		return state{}, fmt.Errorf("%w: state file: checksum mismatch", ErrCorrupt)
	case binary.LittleEndian.Uint32(b[8:12]) != formatVersion:
		return state{}, fmt.Errorf("%w: state format version %d, this build reads %d", ErrCorrupt, binary.LittleEndian.Uint32(b[8:12]), formatVersion)
	}
	flags := binary.LittleEndian.Uint32(b[12:16])
	if flags&^stateSealed != 0 {
		return state{}, fmt.Errorf("%w: state file: unknown flags %#x", ErrCorrupt, flags)
	}
	return state{
		sealed:     flags&stateSealed != 0,
		trimmed:    sharedlog.Pos(binary.LittleEndian.Uint64(b[16:24])),
		sealedTail: sharedlog.Pos(binary.LittleEndian.Uint64(b[24:32])),
	}, nil
}

// scanned is what scanSegment found in one segment file.
type scanned struct {
	base    sharedlog.Pos
	offsets []int64 // file offset of every intact entry, in order
	end     int64   // end of the last intact entry
	// torn says why the scan stopped before the end of the file; nil
	// when the file ends exactly after an intact entry, or in zeros
	// alone (preallocation).
	torn error
}

// allZero reports whether the next n bytes of br are all zero.
func allZero(br *bufio.Reader, n int64) (bool, error) {
	for n > 0 {
		chunk, err := br.Peek(int(min(n, int64(br.Size()))))
		if err != nil {
			return false, err
		}
		for _, c := range chunk {
			if c != 0 {
				return false, nil
			}
		}
		_, _ = br.Discard(len(chunk))
		n -= int64(len(chunk))
	}
	return true, nil
}

// scanSegment checks a segment file of size bytes: the header, then every
// entry's length and checksum, stopping at the first entry that does not
// check out. It allocates in proportion to the entries found (each takes
// at least entryHeaderBytes of the file) plus a fixed read buffer, never
// in proportion to a length field. err is for a bad header or a failed
// read; a bad entry is reported in torn.
func scanSegment(r io.ReaderAt, size int64) (scanned, error) {
	var s scanned
	if size < segmentHeaderBytes {
		return s, fmt.Errorf("%w: segment is %d bytes, shorter than its header", ErrCorrupt, size)
	}
	hdr := make([]byte, segmentHeaderBytes)
	if _, err := r.ReadAt(hdr, 0); err != nil {
		return s, err
	}
	base, err := decodeSegmentHeader(hdr)
	if err != nil {
		return s, err
	}
	s.base = base
	bufBytes := int(min(max(size-segmentHeaderBytes, 16), scanBufferBytes))
	br := bufio.NewReaderSize(io.NewSectionReader(r, segmentHeaderBytes, size-segmentHeaderBytes), bufBytes)
	off := int64(segmentHeaderBytes)
	var h [entryHeaderBytes]byte
	for off < size {
		if size-off < entryHeaderBytes {
			// Too short for an entry: a torn one, or the last bytes
			// of a preallocation that ended short of a header.
			zero, err := allZero(br, size-off)
			if err != nil {
				return s, err
			}
			if !zero {
				s.torn = errTruncated
			}
			break
		}
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return s, err
		}
		if h == ([entryHeaderBytes]byte{}) {
			// No entry has a zero header (its CRC covers the length):
			// zeros to the end of the file are the writer's
			// preallocation, anything else after them is damage.
			zero, err := allZero(br, size-off-entryHeaderBytes)
			if err != nil {
				return s, err
			}
			if !zero {
				s.torn = errChecksum
			}
			break
		}
		length := int64(binary.LittleEndian.Uint32(h[0:4]))
		if length > formatMaxEntryBytes {
			s.torn = errLength
			break
		}
		if length > size-off-entryHeaderBytes {
			s.torn = errTruncated
			break
		}
		crc := crc32.Checksum(h[0:4], castagnoli)
		for left := int(length); left > 0; {
			chunk, err := br.Peek(min(left, bufBytes))
			if err != nil {
				return s, err
			}
			crc = crc32.Update(crc, castagnoli, chunk)
			_, _ = br.Discard(len(chunk))
			left -= len(chunk)
		}
		if crc != binary.LittleEndian.Uint32(h[4:8]) {
			s.torn = errChecksum
			break
		}
		s.offsets = append(s.offsets, off)
		off += entryHeaderBytes + length
	}
	s.end = off
	return s, nil
}
