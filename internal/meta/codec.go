package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The codec is canonical: every value has exactly one encoding, and the
// decoder rejects the others (overlong varints, unsorted or repeated map
// keys, bools other than 0 and 1). That makes decode(b) == x imply
// encode(x) == b, which the fuzz tests check, and it means two replicas can
// never read one entry two ways.

// errShort and friends are wrapped into ErrCorrupt by the decoders.
var (
	errShort     = errors.New("truncated")
	errOverlong  = errors.New("non-canonical varint")
	errRange     = errors.New("value out of range")
	errTrailing  = errors.New("trailing bytes")
	errUnsorted  = errors.New("map keys not strictly increasing")
	errBadBool   = errors.New("bool is neither 0 nor 1")
	errTooMany   = errors.New("count exceeds remaining bytes")
	errBadLength = errors.New("length exceeds remaining bytes")
)

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
func appendVarint(b []byte, v int64) []byte   { return binary.AppendVarint(b, v) }

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// reader decodes from a byte slice. The first error sticks: later reads
// return zero values, so decoders check r.err once at the end. Every length
// and count is checked against the remaining bytes before anything is
// allocated, which bounds a decoder's allocation by its input size.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		if n == 0 {
			r.fail(errShort)
		} else {
			r.fail(errRange)
		}
		return 0
	}
	// A last byte of zero after the first means the value had a shorter
	// encoding.
	if n > 1 && r.b[n-1] == 0 {
		r.fail(errOverlong)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	ux := r.uvarint() // zigzag, so canonical uvarint means canonical varint
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

func (r *reader) int32() int32 {
	v := r.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail(errRange)
		return 0
	}
	return int32(v)
}

func (r *reader) int16() int16 {
	v := r.varint()
	if v < math.MinInt16 || v > math.MaxInt16 {
		r.fail(errRange)
		return 0
	}
	return int16(v)
}

func (r *reader) uint16() uint16 {
	v := r.uvarint()
	if v > math.MaxUint16 {
		r.fail(errRange)
		return 0
	}
	return uint16(v)
}

func (r *reader) bool() bool {
	if r.err != nil {
		return false
	}
	if len(r.b) < 1 {
		r.fail(errShort)
		return false
	}
	v := r.b[0]
	if v > 1 {
		r.fail(errBadBool)
		return false
	}
	r.b = r.b[1:]
	return v == 1
}

// bytes returns a sub-slice of the input, not a copy.
func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail(errBadLength)
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) string() string { return string(r.bytes()) }

func (r *reader) fixed(dst []byte) {
	if r.err != nil {
		return
	}
	if len(r.b) < len(dst) {
		r.fail(errShort)
		return
	}
	copy(dst, r.b)
	r.b = r.b[len(dst):]
}

// count reads an element count and checks that count elements of at least
// minBytes each fit in what is left, so the caller may allocate count.
func (r *reader) count(minBytes int) int {
	n := r.uvarint()
	if r.err != nil {
		return 0
	}
	if n > uint64(len(r.b)/minBytes) {
		r.fail(errTooMany)
		return 0
	}
	return int(n)
}

// done reports the first error, or errTrailing if input is left over.
func (r *reader) done() error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return errTrailing
	}
	return nil
}

// appendStringMap encodes m sorted by key, the only order the decoder
// accepts.
func appendStringMap(b []byte, m map[string]string) []byte {
	keys := sortedKeys(m)
	b = appendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
		b = appendString(b, m[k])
	}
	return b
}

// stringMap decodes what appendStringMap wrote. An empty map decodes as nil.
func (r *reader) stringMap() map[string]string {
	n := r.count(2) // two empty strings
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	var prev string
	for i := 0; i < n && r.err == nil; i++ {
		k, v := r.string(), r.string()
		if i > 0 && k <= prev {
			r.fail(errUnsorted)
		}
		prev = k
		m[k] = v
	}
	return m
}

func appendStringList(b []byte, l []string) []byte {
	b = appendUvarint(b, uint64(len(l)))
	for _, s := range l {
		b = appendString(b, s)
	}
	return b
}

func (r *reader) stringList() []string {
	n := r.count(1)
	if n == 0 {
		return nil
	}
	l := make([]string, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		l = append(l, r.string())
	}
	return l
}

func corrupt(what string, err error) error {
	return fmt.Errorf("%w: %s: %v", ErrCorrupt, what, err)
}
