package kafka

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// BenchmarkMetadataAllTopics measures the Metadata handler (no network)
// answering every topic of a cluster of 200 topics with 16 partitions
// each, at v12, and encoding the answer. Bytes are the encoded response.
func BenchmarkMetadataAllTopics(b *testing.B) {
	const topics, partitions = 200, 16
	a := newTestAgent(b)
	createBenchTopics(b, a, "bench-%03d", topics, partitions)
	var buf []byte
	benchMetadata(b, a, topics, true, func(resp kmsg.Response) { buf = resp.AppendTo(buf[:0]) })
}

// benchMetadata runs the Metadata handler for every topic of a (which has
// topics topics) b.N times, handing each answer to use. With encodes,
// bytes are the encoded answer. Pacing is off: it would measure the pace.
func benchMetadata(b *testing.B, a *testAgent, topics int, encodes bool, use func(kmsg.Response)) {
	b.Helper()
	a.Deps.shared.metadataPacer = nil
	r := &Request{Header: Header{Key: 3, Version: 12}, Body: metadataReq(12, nil), Deps: a.Deps}
	ctx := context.Background()
	resp, err := handleMetadata(ctx, r)
	if err != nil {
		b.Fatal(err)
	}
	if encodes {
		b.SetBytes(int64(len(resp.AppendTo(nil))))
	}
	releaseResponse(resp)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := handleMetadata(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		if n := len(unwrapResponse(resp).(*kmsg.MetadataResponse).Topics); n != topics {
			b.Fatalf("%d topics", n)
		}
		use(resp)
		releaseResponse(resp)
	}
}

// BenchmarkListOffsetsLatest measures the ListOffsets handler answering
// the high watermark of 16 partitions, as a consumer's startup does.
func BenchmarkListOffsetsLatest(b *testing.B) {
	a := newTestAgent(b)
	a.createTopic(b, "bench", 16, nil)
	var parts []kmsg.ListOffsetsRequestTopicPartition
	for p := range int32(16) {
		a.commit(b, "bench", p, testBatch{records: 10, firstTs: 1, maxTsMs: 2})
		parts = append(parts, listPart(p, -1, 0, 0))
	}
	req := listOffsetsReq(8, "bench", parts...)
	r := &Request{Header: Header{Key: 2, Version: 8}, Body: req, Deps: a.Deps}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := handleListOffsets(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		if got := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[15].Offset; got != 10 {
			b.Fatalf("offset %d", got)
		}
	}
}

// BenchmarkMetadataLargeTopics measures the Metadata handler answering
// every topic of a cluster of 4 topics with 16,384 partitions each (65,536
// partitions), at v12, as a flood of Metadata requests asks for it, not
// encoding it. Allocated bytes per op are what each request costs on top
// of the encoded answer every connection writes.
func BenchmarkMetadataLargeTopics(b *testing.B) {
	const topics, partitions = 4, 16384
	a := newTestAgent(b)
	createBenchTopics(b, a, "large-%d", topics, partitions)
	benchMetadata(b, a, topics, false, func(kmsg.Response) {})
}

// createBenchTopics creates topics named by format and an index straight
// through the replica, past the Kafka layer's partition limits.
func createBenchTopics(b *testing.B, a *testAgent, format string, topics int, partitions int32) {
	b.Helper()
	cmds := make([]meta.Command, topics)
	for i := range cmds {
		cmds[i] = meta.CreateTopic{Name: fmt.Sprintf(format, i), Partitions: partitions}
	}
	for _, o := range proposeAll(a.ctx(b), a.Replica, cmds) {
		if e, msg := o.code(); e != nil {
			b.Fatal(e, msg)
		}
	}
}
