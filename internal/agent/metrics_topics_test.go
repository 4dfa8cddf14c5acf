package agent

import (
	"testing"

	"github.com/strandkafka/strand/internal/meta"
)

// BenchmarkTopicTraffic measures what the produce and fetch paths pay per
// topic of a request for the per-topic metrics: a sync.Map load and two
// atomic adds, from every core at once over 64 topics.
//
//	go test -run '^$' -bench TopicTraffic ./internal/agent/
func BenchmarkTopicTraffic(b *testing.B) {
	tt := newTopicTraffic()
	ids := make([]meta.TopicID, 64)
	for i := range ids {
		ids[i][0], ids[i][15] = byte(i), 1
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			tt.produced(ids[i%len(ids)], 8192, 8)
			i++
		}
	})
	var records int64
	for _, id := range ids {
		records += tt.counts(id).recordsIn.Load()
	}
	if records != int64(b.N)*8 {
		b.Fatalf("%d records counted, want %d", records, b.N*8)
	}
}
