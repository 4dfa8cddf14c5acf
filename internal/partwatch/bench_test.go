package partwatch

import (
	"fmt"
	"testing"

	"github.com/strandkafka/strand/internal/meta"
)

func wideParts(n int) []meta.PartitionRef {
	parts := make([]meta.PartitionRef, n)
	for p := range parts {
		parts[p] = ref(topicA, int32(p))
	}
	return parts
}

// BenchmarkNotify is one apply's notification: two partitions changed,
// four watches over every partition, each then taking its marks.
func BenchmarkNotify(b *testing.B) {
	const partitions = 10_000
	r := New()
	parts := wideParts(partitions)
	var ws []*Watch
	for range 4 {
		ws = append(ws, r.Watch(parts))
	}
	var buf []int
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Notify(meta.Changes{Partitions: parts[(2*i)%partitions : (2*i)%partitions+2]})
		for _, w := range ws {
			<-w.Ready()
			buf, _ = w.Take(buf[:0])
		}
	}
}

// BenchmarkWatch registers and closes one watch, what each long poll
// pays.
func BenchmarkWatch(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			r := New()
			parts := wideParts(n)
			b.ReportAllocs()
			for b.Loop() {
				r.Watch(parts).Close()
			}
		})
	}
}
