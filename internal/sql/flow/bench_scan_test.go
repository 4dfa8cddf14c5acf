//go:build unix

package flow

import (
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sql/types"
)

func init() {
	processCPU = func(b *testing.B) time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
}

// benchExtra is the pool a bid's extra is cut from: the generator pads
// a bid to about 100 bytes with 54 to 81 characters of it.
var benchExtra = strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", 8)

// appendBids appends count new bids (never retracted) at epoch n's
// second, shaped as the generator's: Nexmark q0's and q1's input.
func appendBids(r *rand.Rand, e *Epoch, n, count int) {
	t := benchEpochStart.Add(time.Duration(n) * time.Second)
	for i := range count {
		off := r.IntN(len(benchExtra) - 81)
		row := types.Row{int64(1000 + r.IntN(10_000)), int64(1000 + r.IntN(100_000)), int64(r.IntN(10_000_000)),
			"channel-" + string(rune('A'+r.IntN(4))), "https://www.nexmark.com/item.htm?query=1",
			t.Add(time.Duration(i) * time.Millisecond), benchExtra[off : off+54+r.IntN(28)]}
		e.Inputs[0] = append(e.Inputs[0], types.Change{Row: row, Diff: 1})
	}
}

// BenchmarkNexmarkQ0: SELECT auction, bidder, price, date_time, extra
// FROM bid: every bid appended to the view's index, which only grows
// (the view of `strand bench --nexmark`'s q0; q1 adds a Map). Its
// pebble-merge store is a view's: the index's rows are merged unread.
//
//	go test -run '^$' -bench 'NexmarkQ0' -benchmem ./internal/sql/flow/
func BenchmarkNexmarkQ0(b *testing.B) {
	runBench(b, Options{}, func(g *Graph) {
		in := g.Input("bid")
		g.SetOutput(g.Add("project", &Project{Cols: []int{bAuction, bBidder, bPrice, bDateTime, bExtra}}, in))
	}, func() epochGen {
		n := 0
		return func(r *rand.Rand, e *Epoch) {
			appendBids(r, e, n, benchEpoch)
			n++
		}
	})
}
