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
	cmds := make([]meta.Command, topics)
	for i := range cmds {
		cmds[i] = meta.CreateTopic{Name: fmt.Sprintf("bench-%03d", i), Partitions: partitions}
	}
	for _, o := range proposeAll(a.ctx(b), a.Replica, cmds) {
		if e, msg := o.code(); e != nil {
			b.Fatal(e, msg)
		}
	}
	req := metadataReq(12, nil)
	r := &Request{Header: Header{Key: 3, Version: 12}, Body: req, Deps: a.Deps}
	ctx := context.Background()
	var buf []byte
	resp, err := handleMetadata(ctx, r)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(resp.AppendTo(nil))))
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
		buf = resp.AppendTo(buf[:0])
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
// partitions), at v12, as a flood of Metadata requests asks for it.
// Allocated bytes per op are what each request costs on top of the
// encoded answer every connection writes.
func BenchmarkMetadataLargeTopics(b *testing.B) {
	const topics, partitions = 4, 16384
	a := newTestAgent(b)
	cmds := make([]meta.Command, topics)
	for i := range cmds {
		cmds[i] = meta.CreateTopic{Name: fmt.Sprintf("large-%d", i), Partitions: partitions}
	}
	for _, o := range proposeAll(a.ctx(b), a.Replica, cmds) {
		if e, msg := o.code(); e != nil {
			b.Fatal(e, msg)
		}
	}
	r := &Request{Header: Header{Key: 3, Version: 12}, Body: metadataReq(12, nil), Deps: a.Deps}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := handleMetadata(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		if n := len(unwrapResponse(resp).(*kmsg.MetadataResponse).Topics); n != topics {
			b.Fatalf("%d topics", n)
		}
		releaseResponse(resp)
	}
}
