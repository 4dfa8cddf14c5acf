package dynamolog_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog/dynamolog"
	"github.com/strandkafka/strand/internal/testservers/dynalitetest"
)

// BenchmarkAppend measures appends per second against dynalite with 1,
// 8 and 64 goroutines appending 512-byte entries through one handle.
// dynalite runs on the same machine, so this measures the client's
// pipelining and the server's CPU, not DynamoDB.
func BenchmarkAppend(b *testing.B) {
	ctx := testCtx(b)
	db := connect(b, config(dynalitetest.Start(b)))
	const entryBytes = 512
	for _, appenders := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("appenders=%d", appenders), func(b *testing.B) {
			l := openLoglet(b, db, newLogID(b), dynamolog.Options{})
			data := make([]byte, entryBytes)
			b.SetBytes(entryBytes)
			b.ReportAllocs()
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range appenders {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if _, err := l.Append(ctx, data); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "appends/s")
		})
	}
}
