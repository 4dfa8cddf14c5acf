// Package planted owns the bugs a test build can plant in the agent, so
// the history checker's tests can show that it finds what it looks for.
// Only a binary built with the strand_planted build tag has them, and
// only while STRAND_PLANTED_BUG selects one; in every other build
// DropAcked and ExposeAborted return false and the compiler drops the
// code behind them.
//
//	STRAND_PLANTED_BUG=drop-acked:TOPIC/PARTITION/OFFSET
//	    the fetch path leaves out the record at OFFSET: an acknowledged
//	    record no consumer can read.
//	STRAND_PLANTED_BUG=expose-aborted:TOPIC/PARTITION/OFFSET
//	    read_committed fetches of the partition leave the first aborted
//	    transaction whose abort marker is at or after OFFSET out of
//	    AbortedTransactions, so consumers deliver its records.
//
// Every agent of a cluster reads the variable and applies the same
// rule to the same replicated index, so the bug is the same whichever
// agent serves a fetch.
//
// The same builds take two faults that tests of the real binary need
// and no production binary may have:
//
//	STRAND_PLANTED_CLOCK_OFFSET=DURATION (e.g. 24h, -90s)
//	    the agent's clock runs this far from the wall clock: the history
//	    checker's clock-skew runs.
//	STRAND_PLANTED_GC_GRACE_FLOOR=DURATION
//	    the smallest garbage collection grace apply and the flags accept
//	    (meta.MinGCGraceMs otherwise), so the garbage collector's tests of
//	    the binary finish in seconds. Every agent of the cluster must
//	    have the same value, as apply reads it.
package planted

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// EnvBug names the environment variable that selects a bug.
const EnvBug = "STRAND_PLANTED_BUG"

// EnvClockOffset and EnvGCGraceFloor name the variables of the planted
// faults (see the package doc).
const (
	EnvClockOffset  = "STRAND_PLANTED_CLOCK_OFFSET"
	EnvGCGraceFloor = "STRAND_PLANTED_GC_GRACE_FLOOR"
)

// The bugs.
const (
	BugDropAcked     = "drop-acked"
	BugExposeAborted = "expose-aborted"
)

// Target is where a bug strikes.
type Target struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Parse reads a STRAND_PLANTED_BUG value: BUG:TOPIC/PARTITION/OFFSET.
func Parse(s string) (bug string, t Target, err error) {
	bug, where, ok := strings.Cut(s, ":")
	if !ok || (bug != BugDropAcked && bug != BugExposeAborted) {
		return "", Target{}, fmt.Errorf("planted: %q: want %s:TOPIC/PARTITION/OFFSET or %s:TOPIC/PARTITION/OFFSET", s, BugDropAcked, BugExposeAborted)
	}
	i := strings.LastIndexByte(where, '/')
	j := strings.LastIndexByte(where[:max(i, 0)], '/')
	if i < 0 || j < 0 {
		return "", Target{}, fmt.Errorf("planted: %q: want TOPIC/PARTITION/OFFSET after the colon", s)
	}
	part, err1 := strconv.ParseInt(where[j+1:i], 10, 32)
	off, err2 := strconv.ParseInt(where[i+1:], 10, 64)
	if err := errors.Join(err1, err2); err != nil || j == 0 || part < 0 || off < 0 {
		return "", Target{}, fmt.Errorf("planted: %q: bad TOPIC/PARTITION/OFFSET: %v", s, err)
	}
	return bug, Target{Topic: where[:j], Partition: int32(part), Offset: off}, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// DropRecord returns records (v2 batches with their offsets patched)
// without the record at off: a batch holding only it is left out, and a
// batch holding others too is rewritten without it (its offsets keep
// their gap, as log compaction leaves them, and its CRC is recomputed).
// A compressed batch holding off is left out whole.
func DropRecord(records []byte, off int64) []byte {
	out := make([]byte, 0, len(records))
	for rest := records; len(rest) >= 12; {
		size := 12 + int(binary.BigEndian.Uint32(rest[8:12]))
		if size > len(rest) {
			return append(out, rest...)
		}
		batch := rest[:size]
		rest = rest[size:]
		var b kmsg.RecordBatch
		if err := b.ReadFrom(batch); err != nil || off < b.FirstOffset || off > b.FirstOffset+int64(b.LastOffsetDelta) {
			out = append(out, batch...)
			continue
		}
		if b.NumRecords <= 1 || b.Attributes&0x07 != 0 {
			continue
		}
		out = append(out, withoutRecord(batch, &b, int32(off-b.FirstOffset))...)
	}
	return out
}

// withoutRecord re-encodes batch b without the record at delta.
func withoutRecord(batch []byte, b *kmsg.RecordBatch, delta int32) []byte {
	var kept []byte
	var n int32
	for rest := b.Records; len(rest) > 0; {
		length, ln := binary.Varint(rest)
		if ln <= 0 || int(length) > len(rest)-ln {
			return batch
		}
		rec := rest[:ln+int(length)]
		rest = rest[len(rec):]
		// attributes int8, timestampDelta varlong, offsetDelta varint
		body := rec[ln+1:]
		_, tn := binary.Varint(body)
		od, on := binary.Varint(body[max(tn, 0):])
		if tn <= 0 || on <= 0 {
			return batch
		}
		if int32(od) == delta {
			continue
		}
		kept = append(kept, rec...)
		n++
	}
	b.Records, b.NumRecords = kept, n
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:12], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:21], crc32.Checksum(out[21:], castagnoli))
	return out
}
