package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// BenchmarkFirstErrorCodeMetadata measures the metrics' error-code walk
// over a Metadata answer of 65,536 partitions, which every such answer
// pays once it is written.
func BenchmarkFirstErrorCodeMetadata(b *testing.B) {
	resp := kmsg.NewPtrMetadataResponse()
	for range 16 {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr("t")
		m := metadataAnswer{d: &Deps{}}
		rt.Partitions = m.partitions(&meta.Topic{Partitions: 4096}, nil)
		resp.Topics = append(resp.Topics, rt)
	}
	b.ReportAllocs()
	for b.Loop() {
		if code := firstErrorCode(resp); code != 0 {
			b.Fatal(code)
		}
	}
}
