package agent

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/strandkafka/strand/internal/kafka"
)

// The memory budget (Config.MemoryBudget, --memory-budget) is the one
// number an operator sets for an agent's memory. Every cache and buffer
// that grows with load is sized from it here, and nowhere else. Off the
// top come what the Go runtime does not manage and what it holds beyond
// its limit; the rest, the Go heap, is shared out:
//
//	Pebble block cache  64 MiB, fixed (meta), outside the Go heap
//	Pebble memtables    16 MiB, outside the Go heap
//	runtime slack       10% of the budget: pages not yet returned, the binary
//	Go heap             the rest, which is the Go memory limit:
//	  read cache        25%  fetch.Cache: objects just written, ranges read,
//	                         and read-ahead GETs in flight (a quarter of it
//	                         at most; fetch/readahead.go)
//	  request bytes     25%  kafka MaxQueuedRequestBytes (queued.max.request.bytes);
//	                         the largest request (socket.request.max.bytes)
//	                         is half of it, 100 MiB at most: frames still
//	                         arriving share what one largest request
//	                         leaves, and with no room left there every
//	                         frame is reserved whole at its header, so
//	                         clients trickling large frames would stall
//	                         the others (kafka/budget.go)
//	  produce buffer    12%  produce MaxBufferedBytes: accepted, not yet committed
//	  response budget   18%  kafka MaxHeldResponseBytes: Fetch and Metadata
//	                         answers from before they are built until written
//	  the rest          20%  GC headroom, connections, metadata structures,
//	                         goroutines
//
// `strand serve` sets the Go runtime's memory limit (debug.SetMemoryLimit)
// to the Go heap's share, so the collector works harder before the process
// passes the budget rather than after. The default, 512 MiB, is the
// performance goal's bound on an agent at saturation; the default
// partition limits are chosen to fit it (kafka/partition_limits.go).

// Bounds on Config.MemoryBudget.
const (
	DefaultMemoryBudget int64 = 512 << 20
	// minMemoryBudget leaves the Go heap room for its shares once
	// Pebble's fixed part is taken.
	minMemoryBudget int64 = 256 << 20
	// offHeapBytes is what Pebble holds outside the Go heap: its block
	// cache (meta's pebbleCacheBytes) and memtables.
	offHeapBytes int64 = 64<<20 + 16<<20
)

// MemorySplit is how a memory budget is shared out.
type MemorySplit struct {
	Budget             int64
	ReadCache          int64
	QueuedRequestBytes int64
	MaxRequestBytes    int32
	ProduceBuffer      int
	HeldResponses      int64
	// GoMemoryLimit is for debug.SetMemoryLimit.
	GoMemoryLimit int64
}

// SplitMemory shares out budget (at least minMemoryBudget).
func SplitMemory(budget int64) MemorySplit {
	heap := budget - offHeapBytes - budget/10
	requests := heap / 4
	return MemorySplit{
		Budget:             budget,
		ReadCache:          heap / 4,
		QueuedRequestBytes: requests,
		MaxRequestBytes:    int32(min(requests/2, kafka.DefaultMaxRequestBytes)),
		ProduceBuffer:      int(heap * 12 / 100),
		HeldResponses:      heap * 18 / 100,
		GoMemoryLimit:      heap,
	}
}

// BytesFlag returns the pflag.Value of a size in bytes for *n, which
// takes a number with an optional unit as GOMEMLIMIT does (B, KiB, MiB,
// GiB, TiB), for example 512MiB.
func BytesFlag(n *int64) pflag.Value { return bytesFlag{n} }

type bytesFlag struct{ n *int64 }

func (f bytesFlag) String() string { return FormatBytes(*f.n) }

func (f bytesFlag) Set(s string) error {
	n, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*f.n = n
	return nil
}

func (f bytesFlag) Type() string { return "bytes" }

var byteUnits = []struct {
	suffix string
	shift  uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

// ParseBytes reads a size as GOMEMLIMIT writes it: digits and an
// optional unit among B, KiB, MiB, GiB and TiB.
func ParseBytes(s string) (int64, error) {
	num, shift := strings.TrimSpace(s), uint(0)
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, shift = rest, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)>>shift {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit (B, KiB, MiB, GiB, TiB)", s)
	}
	return n << shift, nil
}

// FormatBytes writes n with the largest unit that divides it.
func FormatBytes(n int64) string {
	for _, u := range byteUnits {
		if u.shift > 0 && n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// peakRSS is the process's highest resident set size so far, from Linux's
// /proc/self/status (VmHWM), or 0 where that is not available.
func peakRSS() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return float64(kb << 10)
		}
	}
	return 0
}
