package kafka

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// BenchmarkFetchSessionWide measures a consumer caught up on every
// partition of a wide topic: each op produces one batch to the next
// partition and fetches it, without a session (the fetch names every
// partition and is answered with all of them, each read) or in one (the
// incremental fetch names the partition that moved, and only the
// partition with the new batch is read and answered). The answer is
// encoded, as the writer would; the produce is the same in both.
func BenchmarkFetchSessionWide(b *testing.B) {
	for _, partitions := range []int{1_000, 10_000} {
		for _, session := range []bool{false, true} {
			b.Run(fmt.Sprintf("partitions=%d/session=%v", partitions, session), func(b *testing.B) {
				benchFetchSessionWide(b, int32(partitions), session)
			})
		}
	}
}

func benchFetchSessionWide(b *testing.B, partitions int32, session bool) {
	a, _ := newDataAgent(b, nil)
	id := a.createTopic(b, "wide", partitions, nil)
	batch := batchtest.Build(b, batchtest.Options{Records: 1, ValueBytes: 100})
	offsets := make([]int64, partitions)
	ctx := context.Background()
	var buf []byte
	fetch := func(req *kmsg.FetchRequest) *kmsg.FetchResponse {
		r := &Request{Header: Header{Key: fetchKey, Version: req.Version}, Body: req, Deps: a.Deps}
		resp, err := handleFetch(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		defer releaseResponse(resp)
		buf = resp.AppendTo(buf[:0])
		if h, ok := resp.(heldResponse); ok {
			resp = h.Response
		}
		fr := resp.(*kmsg.FetchResponse)
		if fr.ErrorCode != 0 {
			b.Fatalf("fetch: code %d", fr.ErrorCode)
		}
		return fr
	}
	part := func(p int32) fetchPartReq {
		return fetchPartReq{id: id, partition: p, offset: offsets[p], maxBytes: 1 << 20}
	}
	all := func() []fetchPartReq {
		parts := make([]fetchPartReq, partitions)
		for p := range partitions {
			parts[p] = part(p)
		}
		return parts
	}
	var sid, epoch int32
	var moved []fetchPartReq
	if session {
		sid, epoch = fetch(sessionFetch(16, 0, 0, 0, all())).SessionID, 1
		if sid == 0 {
			b.Fatal("no session")
		}
		// The first incremental fetch reads every partition once.
		fetch(sessionFetch(16, sid, epoch, 0, nil))
		epoch++
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		p := int32(i) % partitions
		a.request(b, produceReq(9, -1, nil, rawPart{"wide", p, batch}))
		var req *kmsg.FetchRequest
		if session {
			req = sessionFetch(16, sid, epoch, 0, moved)
			epoch++
		} else {
			req = sessionFetch(16, 0, -1, 0, all())
		}
		resp := fetch(req)
		moved = moved[:0]
		got := false
		for _, sp := range fetchPartitions(resp) {
			if len(sp.RecordBatches) > 0 {
				offsets[sp.Partition] = sp.HighWatermark
				moved = append(moved, part(sp.Partition))
				got = got || sp.Partition == p
			}
		}
		if !got {
			b.Fatalf("op %d: partition %d not answered with its batch", i, p)
		}
	}
}
