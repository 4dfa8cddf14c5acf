package kafka

import (
	"context"
	"encoding/binary"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// TestRespBudget checks the budget's accounting: partial grants, waiters
// served in arrival order, bounded waits, and bytes added over the cap.
func TestRespBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := newRespBudget(100)
		if got := b.take(ctx, 60, 10, nil, nil); got != 60 {
			t.Fatalf("first take got %d, want 60", got)
		}
		if got := b.take(ctx, 60, 10, nil, nil); got != 40 {
			t.Fatalf("second take got %d, want the 40 left", got)
		}

		// Full: a take waits, and a later smaller one queues behind it.
		big, small := make(chan int64, 1), make(chan int64, 1)
		go func() { big <- b.take(ctx, 50, 50, nil, nil) }()
		synctest.Wait()
		go func() { small <- b.take(ctx, 5, 5, nil, nil) }()
		synctest.Wait()
		b.release(20)
		synctest.Wait()
		if len(big)+len(small) != 0 {
			t.Fatal("granted with 20 free behind a waiter needing 50")
		}
		b.release(40)
		if got := <-big; got != 50 {
			t.Fatalf("first waiter got %d, want 50", got)
		}
		if got := <-small; got != 5 {
			t.Fatalf("second waiter got %d, want 5", got)
		}
		if used := b.usedBytes(); used != 95 {
			t.Fatalf("used %d, want 95", used)
		}

		// A bounded wait ends with nothing, and leaves nothing queued.
		timer := time.NewTimer(time.Second)
		if got := b.take(ctx, 10, 10, timer.C, nil); got != 0 {
			t.Fatalf("take past its timeout got %d", got)
		}
		b.release(95)
		if got := b.take(ctx, 100, 100, nil, nil); got != 100 {
			t.Fatalf("take of everything after the timeout got %d", got)
		}

		// Bytes added without waiting put the budget over its cap;
		// takes wait until it is back under.
		b.add(30)
		done := make(chan int64, 1)
		go func() { done <- b.take(ctx, 10, 10, nil, nil) }()
		b.release(25)
		synctest.Wait()
		if len(done) != 0 {
			t.Fatal("granted while 105 of 100 were used")
		}
		b.release(15)
		if got := <-done; got != 10 {
			t.Fatalf("got %d after going back under the cap, want 10", got)
		}

		// A canceled wait gives up.
		b.add(10)
		cctx, cancel := context.WithCancel(ctx)
		go func() { done <- b.take(cctx, 10, 10, nil, nil) }()
		synctest.Wait()
		cancel()
		if got := <-done; got != 0 {
			t.Fatalf("canceled take got %d", got)
		}
	})
}

// produceBytes produces batches of about batchBytes to partition 0 of
// topic until it holds total bytes.
func produceBytes(t *testing.T, a *testAgent, topic string, batchBytes, total int) {
	t.Helper()
	produceCopies(t, a, topic, batchtest.Build(t, batchtest.Options{Records: 1, ValueBytes: batchBytes}), total)
}

// produceCopies produces batch to partition 0 of topic until it holds
// total bytes.
func produceCopies(t *testing.T, a *testAgent, topic string, batch []byte, total int) {
	t.Helper()
	for n := 0; n < total; n += len(batch) {
		resp := a.request(t, produceReq(9, -1, nil, rawPart{topic, 0, batch})).(*kmsg.ProduceResponse)
		if code := producePartitions(resp)[0].ErrorCode; code != 0 {
			t.Fatalf("produce: code %d", code)
		}
	}
}

// TestFetchShortOfBudget checks that a fetch never returns more records
// than the response budget has free: with none free after MaxWaitMillis
// it answers the partition's offsets and no records, with some free it
// returns that much (and at least one batch), and with all free what the
// request asks for.
func TestFetchShortOfBudget(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	a.createTopic(t, "t", 1, nil)
	const batchBytes = 100 << 10
	produceBytes(t, a, "t", batchBytes, 4<<20)
	budget := a.Deps.shared.responses
	fetchAll := func(maxWaitMs int32) kmsg.FetchResponseTopicPartition {
		t.Helper()
		resp := a.rawRequest(t, fetchReq(11, maxWaitMs, 1, 50<<20, fetchPartReq{topic: "t", maxBytes: 10 << 20})).(*kmsg.FetchResponse)
		p := fetchPartitions(resp)[0]
		if p.ErrorCode != 0 || p.HighWatermark < 40 {
			t.Fatalf("code %d, high watermark %d", p.ErrorCode, p.HighWatermark)
		}
		return p
	}

	budget.add(budget.capBytes)
	if p := fetchAll(50); len(p.RecordBatches) != 0 {
		t.Errorf("no budget free: %d record bytes returned", len(p.RecordBatches))
	}
	// 2 MiB free: 2 MiB of records, less what a partition small enough
	// to be copied by the writer would hold twice, rounded up to whole
	// batches.
	budget.release(2 << 20)
	if p, most := fetchAll(50), 2<<20-spliceMinBytes+batchBytes+1024; len(p.RecordBatches) == 0 || len(p.RecordBatches) > most {
		t.Errorf("2 MiB of budget free: %d record bytes returned, want 1 to %d", len(p.RecordBatches), most)
	}
	budget.release(budget.capBytes - 2<<20)
	if p := fetchAll(50); len(p.RecordBatches) < 4<<20-batchBytes {
		t.Errorf("all the budget free: %d record bytes returned, want the 4 MiB produced", len(p.RecordBatches))
	}
}

// TestResponsesHeldUntilWritten checks that a Fetch and a Metadata answer
// hold the response budget until the writer has written them: over a
// net.Pipe, whose writes wait for the reader, the budget is in use while
// the client has read only the answer's first bytes, and free once a
// later answer on the connection was written.
func TestResponsesHeldUntilWritten(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	a.createTopic(t, "t", 1, nil)
	a.createTopic(t, "wide", 1000, nil)
	produceBytes(t, a, "t", 100<<10, 1<<20)
	budget := a.Deps.shared.responses
	pc := servePipe(t, a.Server)

	tests := []struct {
		name string
		req  kmsg.Request
		// want is what the decoded answer holds of the budget.
		want func(kmsg.Response) int64
	}{
		{
			name: "fetch",
			req:  fetchReq(11, 0, 1, 50<<20, fetchPartReq{topic: "t", maxBytes: 10 << 20}),
			want: func(r kmsg.Response) int64 {
				return fetchPartOverheadBytes + splicedBytes(len(fetchPartitions(r.(*kmsg.FetchResponse))[0].RecordBatches))
			},
		},
		{
			name: "metadata",
			req:  metadataReq(12, []string{"wide"}),
			want: func(r kmsg.Response) int64 { return metadataHeldBytes(r.(*kmsg.MetadataResponse)) },
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc.c.SetDeadline(time.Now().Add(guard))
			if _, err := pc.c.Write(frameFor(int32(i), tt.req)); err != nil {
				t.Fatal(err)
			}
			var size [4]byte
			if _, err := io.ReadFull(pc.c, size[:]); err != nil {
				t.Fatal(err)
			}
			// The writer is writing: the handler has returned.
			held := budget.usedBytes()
			frame := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(pc.c, frame); err != nil {
				t.Fatal(err)
			}
			resp := tt.req.ResponseKind()
			decodeResponse(t, frame, resp, tt.req.GetVersion())
			if want := tt.want(resp); held != want || want < 1000 {
				t.Errorf("held %d bytes while being written, want %d (at least 1000)", held, want)
			}
			// The next answer is written after the first was
			// finished with.
			checkAPIVersions(t, pc.c, a.Server)
			if used := budget.usedBytes(); used != 0 {
				t.Errorf("%d bytes still held after the answer was written", used)
			}
		})
	}
}

// TestHeldResponseEncoding checks that a held answer encodes exactly as
// the answer it carries, after what the writer's buffer already holds,
// growing the buffer once.
func TestHeldResponseEncoding(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 11
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = make([]byte, 300<<10)
	for i := range rp.RecordBatches {
		rp.RecordBatches[i] = byte(i)
	}
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	want := resp.AppendTo([]byte("prefix"))

	held := heldResponse{Response: resp, release: func() {}, encodedBytes: int64(len(want))}
	got := held.AppendTo([]byte("prefix"))
	if string(got) != string(want) {
		t.Fatalf("held answer encodes to %d bytes unlike the answer's %d", len(got), len(want))
	}
	if cap(got) > len(want)+len("prefix")+4096 {
		t.Errorf("buffer grown to %d for %d bytes", cap(got), len(got))
	}
}

// TestFirstAllTopicsMetadataBesideOthers checks that the first Metadata
// listing every topic does not wait for the whole response budget to be
// free. It once reserved all of it before any such answer had been
// measured, so it waited behind a long-polling Fetch holding a little
// (until the Fetch's MaxWaitMillis), and a client that pipelined a named
// Metadata behind it on one connection waited until it timed out: the
// named answer held budget the first needed, and could not be written
// before the first.
func TestFirstAllTopicsMetadataBesideOthers(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	a.createTopic(t, "t", 4, nil)
	shared := a.Deps.shared
	budget := shared.responses

	// A long poll on an empty partition: it holds its partitions' slots
	// of the budget while it waits, for ten minutes.
	poll := dial(t, a.addr)
	write(t, poll, frameFor(1, fetchReq(11, 600_000, 1, 50<<20, fetchPartReq{topic: "t", maxBytes: 1 << 20})))
	for deadline := time.Now().Add(guard); budget.usedBytes() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the long poll never took budget")
		}
	}

	shared.allTopicsBytes.Store(0) // no all-topics answer measured yet
	if resp := a.rawRequest(t, metadataReq(12, nil)).(*kmsg.MetadataResponse); len(resp.Topics) != 1 {
		t.Fatalf("all-topics Metadata beside a long poll: %d topics, want 1", len(resp.Topics))
	}

	shared.allTopicsBytes.Store(0)
	c := dial(t, a.addr)
	write(t, c, append(frameFor(2, metadataReq(12, nil)), frameFor(3, metadataReq(12, []string{"t"}))...))
	for corr := int32(2); corr <= 3; corr++ {
		resp := new(kmsg.MetadataResponse)
		if got := decodeResponse(t, readFrame(t, c), resp, 12); got != corr || len(resp.Topics) != 1 {
			t.Fatalf("pipelined Metadata: correlation id %d with %d topics, want %d with 1", got, len(resp.Topics), corr)
		}
	}
}
