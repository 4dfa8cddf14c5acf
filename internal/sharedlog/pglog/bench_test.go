package pglog_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog/pglog"
)

// BenchmarkAppend measures durable appends of 256-byte entries from 1, 8
// and 64 concurrent appenders against the local server; entries/commit
// shows how well group commit gathers them.
func BenchmarkAppend(b *testing.B) {
	const entryBytes = 256
	for _, appenders := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("appenders=%d", appenders), func(b *testing.B) {
			l, err := pglog.OpenURL(b.Context(), logURL(b, "log", newID(b)), pglog.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			entry := make([]byte, entryBytes)
			b.SetBytes(entryBytes)
			b.ReportAllocs()
			before := l.Stats()
			b.ResetTimer()
			var next atomic.Int64
			var wg sync.WaitGroup
			for range appenders {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if _, err := l.Append(b.Context(), entry); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			st := l.Stats()
			b.ReportMetric(float64(st.Entries-before.Entries)/float64(max(st.Batches-before.Batches, 1)), "entries/commit")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}
