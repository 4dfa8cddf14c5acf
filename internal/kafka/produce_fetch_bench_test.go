package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// BenchmarkProducePipelined measures Produce (acks=all) through one TCP
// connection with requests written ahead, one 8 KiB batch each, into the
// in-memory store: the handler, the pipeline's group commit and the local
// apply. Bytes are batch bytes.
func BenchmarkProducePipelined(b *testing.B) {
	a, _ := newDataAgent(b, nil)
	a.createTopic(b, "bench", 1, nil)
	batch := batchtest.Build(b, batchtest.Options{Records: 8, ValueBytes: 1000})
	frame := frameFor(1, produceReq(9, -1, nil, rawPart{"bench", 0, batch}))
	c := dial(b, a.addr)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReaderSize(c, 64<<10)
		var size [4]byte
		for range b.N {
			if _, err := io.ReadFull(r, size[:]); err != nil {
				b.Error(err)
				return
			}
			frame := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(r, frame); err != nil {
				b.Error(err)
				return
			}
			resp := kmsg.NewPtrProduceResponse()
			if _, err := decodeResponseErr(frame, resp, 9); err != nil || producePartitions(resp)[0].ErrorCode != 0 {
				b.Errorf("response: %v %+v", err, resp)
				return
			}
		}
	}()
	w := bufio.NewWriterSize(c, 64<<10)
	for range b.N {
		w.Write(frame)
	}
	w.Flush()
	<-done
}

// BenchmarkFetchHandler measures the Fetch handler (no network) reading
// 1 MiB from one partition of 8 KiB batches held in the read cache, as a
// consumer catching up does. Bytes are record bytes returned.
func BenchmarkFetchHandler(b *testing.B) {
	a, _ := newDataAgent(b, nil)
	a.createTopic(b, "bench", 1, nil)
	batch := batchtest.Build(b, batchtest.Options{Records: 8, ValueBytes: 1000})
	for range 256 {
		resp := a.request(b, produceReq(9, -1, nil, rawPart{"bench", 0, batch})).(*kmsg.ProduceResponse)
		if code := producePartitions(resp)[0].ErrorCode; code != 0 {
			b.Fatalf("produce: code %d", code)
		}
	}
	req := fetchReq(16, 0, 1, 1<<20, fetchPartReq{id: a.topicID(b, "bench"), maxBytes: 1 << 20})
	r := &Request{Header: Header{Key: 1, Version: 16}, Body: req, Deps: a.Deps}
	ctx := context.Background()
	resp, err := handleFetch(ctx, r)
	if err != nil {
		b.Fatal(err)
	}
	releaseResponse(resp)
	n := len(fetchPartitions(unwrapResponse(resp).(*kmsg.FetchResponse))[0].RecordBatches)
	if n < 1<<20-len(batch) {
		b.Fatalf("fetched %d bytes", n)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := handleFetch(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		releaseResponse(resp)
	}
}
