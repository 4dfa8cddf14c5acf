package backendtest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// AppendBench describes BenchmarkAppend's runs on one backend.
type AppendBench struct {
	EntryBytes int
	// Open returns a fresh loglet for one run, which the benchmark
	// closes. commits, if not nil, returns the writer's running counts
	// of entries and of commits (group commits, transactions), whose
	// ratio over the run is reported as CommitUnit.
	Open       func(b *testing.B) (l sharedlog.Loglet, commits func() (entries, commits int64))
	CommitUnit string
}

// BenchmarkAppend measures appends of EntryBytes-byte entries from 1, 8
// and 64 concurrent appenders through one handle.
func BenchmarkAppend(b *testing.B, ab AppendBench) {
	for _, appenders := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("appenders=%d", appenders), func(b *testing.B) {
			l, commits := ab.Open(b)
			defer l.Close()
			entry := make([]byte, ab.EntryBytes)
			b.SetBytes(int64(ab.EntryBytes))
			b.ReportAllocs()
			var entriesBefore, commitsBefore int64
			if commits != nil {
				entriesBefore, commitsBefore = commits()
			}
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
			if commits != nil {
				entries, n := commits()
				b.ReportMetric(float64(entries-entriesBefore)/float64(max(n-commitsBefore, 1)), ab.CommitUnit)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}
