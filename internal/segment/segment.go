// Package segment owns the format of Strand's data objects: the
// multi-partition objects the produce path writes to the object store, one
// per flush, holding the clients' record batches verbatim. It provides the
// Writer that assembles an object in memory, the footer decoders a reader
// uses to find chunks (from the whole object or from only its tail), Verify,
// and the object key naming.
//
// The shared log's CommitObject command, not the footer, is the source of
// truth for where a partition's batches are: the footer makes an object
// self-describing for recovery, compaction and debugging tools.
//
// # Layout (integers big-endian)
//
//	 offset 0
//	+-----------------------------------------------------------+
//	| header (8 bytes)                                          |
//	|   magic "STRD" (4) | version u16 (1) | flags u16 (0)      |
//	+-----------------------------------------------------------+  HeaderSize
//	| chunk 0: record batches of one partition, back to back,   |
//	|          exactly as the clients sent them                 |
//	| chunk 1                                                   |
//	| ...                                                       |
//	+-----------------------------------------------------------+  footer start
//	| footer: chunkCount entries of EntrySize (60) bytes each   |
//	|   topic id       [16]byte                                 |
//	|   partition      i32                                      |
//	|   offset         u64   chunk start in the object          |
//	|   length         u32   chunk bytes                        |
//	|   batches        u32   record batches in the chunk (>= 1) |
//	|   records        u64   sum of the batches' numRecords     |
//	|   firstTimestamp i64   least batch firstTimestamp         |
//	|   maxTimestamp   i64   greatest batch maxTimestamp        |
//	+-----------------------------------------------------------+  size - TrailerSize
//	| trailer (20 bytes)                                        |
//	|   footerLength u32 (= chunkCount * EntrySize)             |
//	|   chunkCount   u32                                        |
//	|   footerCRC    u32   CRC-32C of the footer entries and    |
//	|                      the two fields above                 |
//	|   version u16 (1) | flags u16 (0) | magic "STRD" (4)      |
//	+-----------------------------------------------------------+  size
//
// Chunks tile the bytes between the header and the footer in footer order,
// with no gaps, so the footer fully accounts for the object. The trailer is
// fixed-size and last, so a reader can fetch only the object's tail (see
// ReadFooterFromTail), learn the footer's length, and fetch more if needed.
// Batches keep their own CRCs; the footer CRC covers only the footer, so
// decoding the footer never needs the chunk bytes.
package segment

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Format constants; see the package doc.
const (
	// HeaderSize is the size of the object header.
	HeaderSize = 8
	// EntrySize is the size of one footer entry.
	EntrySize = 60
	// TrailerSize is the size of the fixed trailer that ends every object.
	TrailerSize = 20
	// Version is the format version this package writes and reads.
	Version = 1

	// MaxObjectBytes bounds an object. Chunk lengths are 32-bit, and
	// objects beyond a few hundred MiB defeat the point of flushing often;
	// the bound keeps every offset computation far from overflow.
	MaxObjectBytes = 1 << 32

	// DefaultTailBytes is a reader's first guess at how much of an
	// object's end to fetch: the trailer and the footer of up to about a
	// thousand chunks.
	DefaultTailBytes = 64 << 10

	magic = "STRD"

	minObjectBytes = HeaderSize + TrailerSize
)

// Sentinel errors.
var (
	// ErrCorrupt: the bytes are not a well-formed data object (bad magic,
	// CRC mismatch, counts that do not add up, chunks that do not tile the
	// object, batches that disagree with the footer).
	ErrCorrupt = errors.New("segment: corrupt data object")
	// ErrVersion: a data object of a format version this code does not
	// read. A reader stops rather than guesses.
	ErrVersion = errors.New("segment: unsupported data object version")
	// ErrShortTail: the tail given to ReadFooterFromTail does not reach
	// back to the footer's start. The error is a *ShortTailError saying
	// how many tail bytes are needed.
	ErrShortTail = errors.New("segment: tail too short for the footer")
	// ErrFinished: Add after Finish without Reset.
	ErrFinished = errors.New("segment: writer already finished")
	// ErrObjectTooLarge: Add would grow the object past MaxObjectBytes.
	ErrObjectTooLarge = errors.New("segment: data object would exceed MaxObjectBytes")
)

// ShortTailError reports how many bytes of the object's end
// ReadFooterFromTail needs. It matches ErrShortTail with errors.Is.
type ShortTailError struct {
	Need int64 // tail bytes needed, at most the object size
	Have int
}

func (e *ShortTailError) Error() string {
	return fmt.Sprintf("%v: have %d bytes, need %d", ErrShortTail, e.Have, e.Need)
}

// Is makes errors.Is(err, ErrShortTail) true.
func (e *ShortTailError) Is(target error) bool { return target == ErrShortTail }

// Chunk is one footer entry: a run of one partition's batches in an object.
type Chunk struct {
	TopicID        [16]byte
	Partition      int32
	Offset         int64 // position of the chunk's first byte in the object
	Length         int64
	Batches        int32
	Records        int64
	FirstTimestamp int64 // least firstTimestamp of the chunk's batches
	MaxTimestamp   int64 // greatest maxTimestamp of the chunk's batches
}

// End is the object position just past the chunk.
func (c Chunk) End() int64 { return c.Offset + c.Length }

// ChunkRef locates bytes added by one Writer.Add call in the object.
type ChunkRef struct {
	Offset int64
	Length int64
}

// keyPrefix and keySuffix frame data object keys; snapshots and other
// objects live under other prefixes of the same store.
const (
	keyPrefix    = "data/"
	keySuffix    = ".strd"
	bucketDigits = 10 // unix minutes: enough until the year 20984
	msDigits     = 15 // unix ms: enough until the year 33658
	seqDigits    = 20 // math.MaxUint64 has 20 decimal digits
	// bucketMs is the width of a key's time bucket; meta.ObjectKeyTime
	// parses the same layout.
	bucketMs = 60 * 1000
)

// ObjectKey names the data object an agent writes as its seq-th flush,
// cut at ms (unix ms, the writer's time):
// "data/<ms/60000, 10 digits>/<ms, 15 digits>-<agent>-<seq, 20 digits>.strd".
//
//   - The time comes first, as a one-minute bucket and then exactly, both
//     zero-padded, so lexical order is time order and a bucket is one
//     key prefix (BucketPrefix; one directory in fileobj). The orphan
//     reconciler lists one old bucket at a time, never the whole store,
//     and apply refuses to commit an object whose key time is older than
//     the orphan horizon (meta.ObjectKeyTime), so a key's time alone
//     tells an object that may still be committed from one that never
//     will. ms must be no earlier than the writer's view of the log clock
//     (see produce.Config.KeyTime).
//   - (agentID, seq) must never repeat, even across restarts: a data
//     object is written once and never overwritten. The caller derives
//     them from durable state (for example, the incarnation in the agent
//     id).
//
// agentID must not be empty; it is path-escaped, so a "/" in it cannot add
// a key level.
func ObjectKey(agentID string, seq uint64, ms int64) string {
	var b strings.Builder
	agent := url.PathEscape(agentID)
	b.Grow(len(keyPrefix) + bucketDigits + 1 + msDigits + 1 + len(agent) + 1 + seqDigits + len(keySuffix))
	b.WriteString(BucketPrefix(ms))
	writePadded(&b, uint64(max(ms, 0)), msDigits)
	b.WriteByte('-')
	b.WriteString(agent)
	b.WriteByte('-')
	writePadded(&b, seq, seqDigits)
	b.WriteString(keySuffix)
	return b.String()
}

// BucketPrefix is the key prefix of the data objects cut in the minute
// that holds ms.
func BucketPrefix(ms int64) string {
	var b strings.Builder
	b.WriteString(keyPrefix)
	writePadded(&b, uint64(max(ms, 0)/bucketMs), bucketDigits)
	b.WriteByte('/')
	return b.String()
}

func writePadded(b *strings.Builder, v uint64, digits int) {
	var buf [seqDigits]byte
	s := strconv.AppendUint(buf[:0], v, 10)
	for range digits - len(s) {
		b.WriteByte('0')
	}
	b.Write(s)
}

// ParseObjectKey is the inverse of ObjectKey.
func ParseObjectKey(key string) (agentID string, seq uint64, ms int64, err error) {
	bad := func(why string) (string, uint64, int64, error) {
		return "", 0, 0, fmt.Errorf("segment: %q is not a data object key: %s", key, why)
	}
	rest, ok := strings.CutPrefix(key, keyPrefix)
	if !ok {
		return bad("prefix")
	}
	rest, ok = strings.CutSuffix(rest, keySuffix)
	if !ok || len(rest) < bucketDigits+1+msDigits+1+1+1+seqDigits || rest[bucketDigits] != '/' {
		return bad("layout")
	}
	bucket, err1 := strconv.ParseUint(rest[:bucketDigits], 10, 64)
	t, err2 := strconv.ParseUint(rest[bucketDigits+1:bucketDigits+1+msDigits], 10, 63)
	if err1 != nil || err2 != nil || t/bucketMs != bucket || rest[bucketDigits+1+msDigits] != '-' {
		return bad("time")
	}
	rest = rest[bucketDigits+1+msDigits+1:]
	agent, seqText := rest[:len(rest)-seqDigits-1], rest[len(rest)-seqDigits:]
	if rest[len(rest)-seqDigits-1] != '-' {
		return bad("sequence")
	}
	if agentID, err = url.PathUnescape(agent); err != nil || agentID == "" || url.PathEscape(agentID) != agent {
		return bad("agent id")
	}
	if seq, err = strconv.ParseUint(seqText, 10, 64); err != nil {
		return bad("sequence")
	}
	return agentID, seq, int64(t), nil
}
