package filelog_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
)

// BenchmarkAppend measures durable appends of 256-byte entries from 1, 8
// and 64 concurrent appenders; entries/fsync shows how well group commit
// gathers them.
func BenchmarkAppend(b *testing.B) {
	const entryBytes = 256
	for _, appenders := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("appenders=%d", appenders), func(b *testing.B) {
			var syncs atomic.Int64
			l := open(b, b.TempDir(), filelog.Options{
				FS: hookFS{filelog.OS, func(string) { syncs.Add(1) }},
			})
			defer l.Close()
			entry := make([]byte, entryBytes)
			b.SetBytes(entryBytes)
			b.ReportAllocs()
			syncs.Store(0)
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
			b.ReportMetric(float64(b.N)/float64(max(syncs.Load(), 1)), "entries/fsync")
		})
	}
}

// BenchmarkReadNext measures reading back 256-byte entries in pages.
func BenchmarkReadNext(b *testing.B) {
	const entryBytes, entries = 256, 4096
	l := open(b, b.TempDir(), filelog.Options{})
	defer l.Close()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 64 {
		wg.Go(func() {
			for next.Add(1) <= entries {
				if _, err := l.Append(b.Context(), make([]byte, entryBytes)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportAllocs()
	b.SetBytes(entries * entryBytes)
	b.ResetTimer()
	for b.Loop() {
		for p := sharedlog.Pos(0); p < entries; {
			es, err := l.ReadNext(b.Context(), p, entries)
			if err != nil || len(es) == 0 {
				b.Fatalf("ReadNext(%d): %d, %v", p, len(es), err)
			}
			p += sharedlog.Pos(len(es))
		}
	}
}
