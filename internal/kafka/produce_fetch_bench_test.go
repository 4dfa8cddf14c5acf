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

// BenchmarkFetchServe measures Fetch answers through the whole served
// path, one at a time over one TCP connection: the handler reading 4
// partitions of 4 MiB from the read cache, the writer encoding and
// writing the answer, the client reading it. Bytes are response bytes.
// This is the per-byte CPU a catching-up consumer costs the agent.
//
//	go test -run '^$' -bench BenchmarkFetchServe ./internal/kafka/
func BenchmarkFetchServe(b *testing.B) {
	const (
		partitions = 4
		partBytes  = 4 << 20
	)
	a, _ := newDataAgent(b, nil)
	id := a.createTopic(b, "bench", partitions, nil)
	batch := batchtest.Build(b, batchtest.Options{Records: 16, ValueBytes: 4000})
	var parts []fetchPartReq
	for p := range int32(partitions) {
		for range partBytes / len(batch) {
			resp := a.request(b, produceReq(9, -1, nil, rawPart{"bench", p, batch})).(*kmsg.ProduceResponse)
			if code := producePartitions(resp)[0].ErrorCode; code != 0 {
				b.Fatalf("produce: code %d", code)
			}
		}
		parts = append(parts, fetchPartReq{id: id, partition: p, maxBytes: partBytes})
	}
	frame := frameFor(1, fetchReq(16, 0, 1, partitions*partBytes, parts...))
	c := dial(b, a.addr)
	var buf []byte
	roundTrip := func() int {
		if _, err := c.Write(frame); err != nil {
			b.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			b.Fatal(err)
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			b.Fatal(err)
		}
		return n
	}
	n := roundTrip()
	if n < partitions*(partBytes-len(batch)) {
		b.Fatalf("answer of %d bytes", n)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		roundTrip()
	}
}
