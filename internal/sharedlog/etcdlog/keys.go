package etcdlog

import (
	"bytes"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// Key layout of the loglet at path P (a URL path: "/", no NUL byte):
//
//	P \x00 e <16 hex digits>   the entry at that position
//	P \x00 seal                present once the loglet is sealed
//	P \x00 trim                the trim point, 16 hex digits
//	P \x00 chain               a VirtualLog's chain, when P names a log
//
// The NUL byte cannot occur in a path, so no loglet's keys fall inside
// another's ranges, whatever their paths. Positions are fixed-width hex,
// so key order is position order and a Value compare on the trim key
// compares numbers.
type keys struct {
	entryPrefix    string
	entryEnd       string // the first key past every entry key
	seal, trim     string
	watch, watchTo string // every key of the loglet
}

func newKeys(path string) keys {
	p := path + "\x00"
	return keys{
		entryPrefix: p + "e",
		entryEnd:    clientv3.GetPrefixRangeEnd(p + "e"),
		seal:        p + "seal",
		trim:        p + "trim",
		watch:       p,
		watchTo:     clientv3.GetPrefixRangeEnd(p),
	}
}

func chainKey(path string) string { return path + "\x00chain" }

const posDigits = 16

func encodePos(p sharedlog.Pos) string { return fmt.Sprintf("%016x", uint64(p)) }

func decodePos(s string) (sharedlog.Pos, error) {
	if len(s) != posDigits {
		return 0, fmt.Errorf("%w: position %q", ErrCorrupt, s)
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: position %q", ErrCorrupt, s)
	}
	return sharedlog.Pos(v), nil
}

func (k keys) entry(p sharedlog.Pos) string { return k.entryPrefix + encodePos(p) }

// entryPos returns the position an entry key names.
func (k keys) entryPos(key []byte) (sharedlog.Pos, error) {
	if !bytes.HasPrefix(key, []byte(k.entryPrefix)) {
		return 0, fmt.Errorf("%w: key %q is not an entry key", ErrCorrupt, key)
	}
	return decodePos(string(key[len(k.entryPrefix):]))
}

// An entry's value is a header and the entry:
//
//	+------------+-----------------+-------+
//	| format u8  | batch id, 16 B  | entry |
//	+------------+-----------------+-------+
//
// The batch id is random per group commit; it tells a writer whose reply
// was lost whether the entry in its slot is its own.
const (
	valueFormat      = 1
	batchIDBytes     = 16
	valueHeaderBytes = 1 + batchIDBytes
)

func encodeValue(id []byte, entry []byte) string {
	b := make([]byte, 0, valueHeaderBytes+len(entry))
	b = append(b, valueFormat)
	b = append(b, id...)
	return string(append(b, entry...))
}

func decodeValue(v []byte) (id, entry []byte, err error) {
	if len(v) < valueHeaderBytes || v[0] != valueFormat {
		return nil, nil, fmt.Errorf("%w: entry value of %d bytes, format %v", ErrCorrupt, len(v), v[:min(len(v), 1)])
	}
	return v[1:valueHeaderBytes], v[valueHeaderBytes:], nil
}
