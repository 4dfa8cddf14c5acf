package s3log_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog/s3log"
)

// BenchmarkAppend measures appends per second against in-process
// gofakes3 with 1, 8 and 64 goroutines appending 512-byte entries
// through one handle.
// The server shares this process, so this measures the client's
// pipelining and the fake's CPU, not S3.
func BenchmarkAppend(b *testing.B) {
	ctx := testCtx(b)
	endpoint := fakeS3(b)
	const entryBytes = 512
	for _, appenders := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("appenders=%d", appenders), func(b *testing.B) {
			l := open(b, config(endpoint, newPrefix(b)), s3log.Options{})
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
