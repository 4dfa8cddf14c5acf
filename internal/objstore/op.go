package objstore

import "fmt"

// Op names one Store method. The wrappers in this package use it to key
// fault rules, latency tables and request counters.
type Op int

const (
	OpPut Op = iota
	OpPutIfAbsent
	OpGet
	OpDelete
	OpList

	// numOps sizes the per-op arrays; keep it last.
	numOps
)

// Ops lists every Op in declaration order.
var Ops = [...]Op{OpPut, OpPutIfAbsent, OpGet, OpDelete, OpList}

func (o Op) String() string {
	switch o {
	case OpPut:
		return "put"
	case OpPutIfAbsent:
		return "put-if-absent"
	case OpGet:
		return "get"
	case OpDelete:
		return "delete"
	case OpList:
		return "list"
	}
	return fmt.Sprintf("op(%d)", int(o))
}

func (o Op) valid() bool { return o >= 0 && o < numOps }
