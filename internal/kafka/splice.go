package kafka

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Fetch answer's records go to the socket without being copied into
// the connection's write buffer: kmsg encodes the answer with each large
// partition's records replaced by a 16-byte placeholder, the writer cuts
// the placeholders out of the encoding, and the records are written from
// where the read left them, between the pieces of the encoding, with one
// writev (net.Buffers). Encoding them would copy every byte a consumer
// reads once more (a third of the agent's CPU under twenty catching-up
// consumers, with the zeroing of the grown buffer) and hold a second copy
// of every answer until it is written.
//
// A placeholder is spliceNonce (random per process) and the partition's
// index among those spliced. kmsg writes it as it writes records: a
// length (int32, or uvarint length+1 in flexible versions) and the bytes.
// appendSpliced finds every placeholder by its nonce and checks each one's
// index and length; anything unexpected (a nonce also found elsewhere in
// the encoding, which no client can arrange without knowing it) makes it
// encode the answer whole instead, so a splice is never put anywhere but
// where kmsg put the placeholder.

// spliceMinBytes is the least records a partition has for them to be
// spliced rather than encoded: below it the copy costs less than the
// iovec and the scan.
const spliceMinBytes = 16 << 10

const placeholderBytes = 16

var spliceNonce = rand.Uint64()

// splice is record bytes written at offset at of the write buffer.
type splice struct {
	at   int
	data []byte
}

// appendSpliced appends resp's frame to dst with the records of its
// partitions of at least spliceMinBytes left out, and appends them to
// splices, at their offsets in the returned dst. resp is left as it was.
func appendSpliced(dst []byte, correlationID int32, resp *kmsg.FetchResponse, splices []splice) ([]byte, []splice) {
	var records []*[]byte
	var spliced int
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if p := &resp.Topics[i].Partitions[j]; len(p.RecordBatches) >= spliceMinBytes {
				records = append(records, &p.RecordBatches)
				spliced += len(p.RecordBatches)
			}
		}
	}
	if len(records) == 0 {
		return appendResponse(dst, correlationID, resp), splices
	}
	saved := make([][]byte, len(records))
	placeholders := make([]byte, len(records)*placeholderBytes)
	for i, r := range records {
		saved[i] = *r
		ph := placeholders[i*placeholderBytes : (i+1)*placeholderBytes]
		binary.BigEndian.PutUint64(ph, spliceNonce)
		binary.BigEndian.PutUint64(ph[8:], uint64(i))
		*r = ph
	}
	restore := func() {
		for i, r := range records {
			*r = saved[i]
		}
	}
	start := len(dst)
	func() {
		// Also when kmsg panics: the writer recovers, and the
		// response still owns its records.
		defer restore()
		dst = appendResponse(dst, correlationID, resp)
	}()

	flexible := resp.IsFlexible()
	at, ok := findPlaceholders(dst[start:], len(records), flexible)
	if !ok {
		return appendResponse(dst[:start], correlationID, resp), splices
	}
	// Cut each placeholder and its length out, moving the encoding
	// between them left, and write the records' length in its place.
	// Each cut removes more than the longer length adds, so w stays
	// behind r and copy (a memmove) never overwrites what it has yet
	// to move.
	oldPrefix := recordsLength(nil, placeholderBytes, flexible)
	w, r := start, start
	var prefix [5]byte
	for i, pos := range at {
		end := start + pos - len(oldPrefix)
		w += copy(dst[w:], dst[r:end])
		w += copy(dst[w:], recordsLength(prefix[:0], len(saved[i]), flexible))
		splices = append(splices, splice{at: w, data: saved[i]})
		r = start + pos + placeholderBytes
	}
	w += copy(dst[w:], dst[r:])
	dst = dst[:w]
	binary.BigEndian.PutUint32(dst[start:], uint32(w-start-4+spliced))
	return dst, splices
}

// findPlaceholders returns the offsets in frame of the n placeholders, in
// order, or false unless frame holds exactly those: each nonce followed
// by its index and preceded by a placeholder's length.
func findPlaceholders(frame []byte, n int, flexible bool) ([]int, bool) {
	var nonce [8]byte
	binary.BigEndian.PutUint64(nonce[:], spliceNonce)
	prefix := recordsLength(nil, placeholderBytes, flexible)
	at := make([]int, 0, n)
	// One byte on from each find, so overlapping finds count too.
	for from := 0; ; {
		i := bytes.Index(frame[from:], nonce[:])
		if i < 0 {
			break
		}
		pos := from + i
		k := len(at)
		if k == n || pos < len(prefix) || pos+placeholderBytes > len(frame) ||
			binary.BigEndian.Uint64(frame[pos+8:]) != uint64(k) ||
			!bytes.Equal(frame[pos-len(prefix):pos], prefix) {
			return nil, false
		}
		at = append(at, pos)
		from = pos + 1
	}
	return at, len(at) == n
}

// recordsLength appends the length kmsg writes before n bytes of records
// (a non-null nullable bytes field).
func recordsLength(dst []byte, n int, flexible bool) []byte {
	if flexible {
		return kbin.AppendUvarint(dst, 1+uint32(n))
	}
	return kbin.AppendInt32(dst, int32(n))
}

// splicedBytes is what a fetch answer of n record bytes in one partition
// holds until it is written: the records, and the writer's copy of them
// unless they are spliced.
func splicedBytes(n int) int64 {
	if n >= spliceMinBytes {
		return int64(n)
	}
	return 2 * int64(n)
}
