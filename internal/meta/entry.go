package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
)

// EntryFormatV1 is the only log entry format so far. A replica that reads
// any other version halts.
const EntryFormatV1 = 1

// MaxWriterIDBytes bounds a writer id. The id is repeated in every entry and
// in the writers table.
const MaxWriterIDBytes = 255

var (
	// ErrCorrupt: bytes that do not decode as an entry, a command or a
	// stored record.
	ErrCorrupt = errors.New("meta: corrupt encoding")
	// ErrUnknownCommand: a command type or version this build cannot
	// decode. A replica that meets one halts: a newer build wrote it.
	ErrUnknownCommand = errors.New("meta: unknown command type or version")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Entry is one log entry: a group of commands from one writer, applied
// together at one log position.
type Entry struct {
	// WriterID, Incarnation and Seq identify the entry so apply can drop
	// copies: an ambiguous append is retried with identical bytes, and
	// both copies may land.
	WriterID    string
	Incarnation uint64
	Seq         uint64
	// Timestamp is the proposer's clock (unix milliseconds) when the entry
	// was cut. Apply never reads a clock; this is its only time source.
	Timestamp int64
	Commands  []RawCommand
}

// RawCommand is a command envelope whose payload has not been decoded.
type RawCommand struct {
	Type    CommandType
	Version uint16
	Payload []byte
}

// EntryHeaderMaxBytes bounds everything in an entry but its commands:
// version, writer id, incarnation, seq, timestamp, count and checksum.
const EntryHeaderMaxBytes = 1 + binary.MaxVarintLen16 + MaxWriterIDBytes + 4*binary.MaxVarintLen64 + 4

// RawCommandSize is the number of bytes c takes inside an entry.
func RawCommandSize(c RawCommand) int {
	return uvarintLen(uint64(c.Type)) + uvarintLen(uint64(c.Version)) +
		uvarintLen(uint64(len(c.Payload))) + len(c.Payload)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// AppendEntry appends the encoding of e to dst. The layout is drawn in the
// package doc.
func AppendEntry(dst []byte, e *Entry) []byte {
	start := len(dst)
	dst = append(dst, EntryFormatV1)
	dst = appendString(dst, e.WriterID)
	dst = appendUvarint(dst, e.Incarnation)
	dst = appendUvarint(dst, e.Seq)
	dst = appendVarint(dst, e.Timestamp)
	dst = appendUvarint(dst, uint64(len(e.Commands)))
	for _, c := range e.Commands {
		dst = appendUvarint(dst, uint64(c.Type))
		dst = appendUvarint(dst, uint64(c.Version))
		dst = appendBytes(dst, c.Payload)
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// minRawCommandBytes is the smallest encoded command: type, version and an
// empty payload.
const minRawCommandBytes = 3

// DecodeEntry decodes one log entry. Payloads alias b. It checks the
// checksum first, so a bit flip halts a replica instead of, say, moving an
// offset.
func DecodeEntry(b []byte) (Entry, error) {
	body, err := checkEntry(b)
	if err != nil {
		return Entry{}, err
	}
	return decodeEntryBody(body)
}

// checkEntry verifies the checksum and returns the entry without it. The
// body is at least the format version byte.
func checkEntry(b []byte) ([]byte, error) {
	if len(b) < 5 {
		return nil, corrupt("entry", errShort)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, fmt.Errorf("%w: entry checksum %08x, want %08x", ErrCorrupt, got, sum)
	}
	return body, nil
}

// decodeEntryHeader decodes everything but the commands, so apply can drop
// a duplicate without decoding (or halting on) its commands. It returns the
// reader positioned at the command count.
func decodeEntryHeader(body []byte) (Entry, *reader, error) {
	if body[0] != EntryFormatV1 {
		return Entry{}, nil, fmt.Errorf("%w: entry format version %d", ErrUnknownCommand, body[0])
	}
	r := &reader{b: body[1:]}
	var e Entry
	id := r.bytes()
	if len(id) > MaxWriterIDBytes {
		r.fail(errRange)
	}
	e.WriterID = string(id)
	e.Incarnation = r.uvarint()
	e.Seq = r.uvarint()
	e.Timestamp = r.varint()
	if r.err != nil {
		return Entry{}, nil, corrupt("entry header", r.err)
	}
	return e, r, nil
}

func decodeEntryBody(body []byte) (Entry, error) {
	if len(body) == 0 {
		return Entry{}, corrupt("entry", errShort)
	}
	e, r, err := decodeEntryHeader(body)
	if err != nil {
		return Entry{}, err
	}
	if err := decodeEntryCommands(r, &e); err != nil {
		return Entry{}, err
	}
	return e, nil
}

func decodeEntryCommands(r *reader, e *Entry) error {
	n := r.count(minRawCommandBytes)
	if n > 0 {
		e.Commands = make([]RawCommand, 0, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		var c RawCommand
		c.Type = CommandType(r.uint16())
		c.Version = r.uint16()
		c.Payload = r.bytes()
		e.Commands = append(e.Commands, c)
	}
	if err := r.done(); err != nil {
		return corrupt("entry commands", err)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
