package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAppendSpliced checks that a spliced answer, its pieces written in
// order, is byte for byte the answer encoded whole, for every Fetch
// version, after what the write buffer already holds, with records of
// every size around the splicing bound, and that it leaves the answer as
// it was.
func TestAppendSpliced(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{-1, 0, 1, spliceMinBytes - 1, spliceMinBytes, spliceMinBytes + 1, 300 << 10}
	for v := int16(4); v <= 16; v++ {
		for round := range 20 {
			resp := randomFetchResponse(rng, v, sizes)
			want := appendResponse([]byte("before"), 7, resp)
			got, splices := appendSpliced([]byte("before"), 7, resp, nil)
			if again := appendResponse([]byte("before"), 7, resp); !bytes.Equal(again, want) {
				t.Fatalf("v%d round %d: the answer changed while spliced", v, round)
			}
			var spliced int
			for _, p := range fetchPartitions(resp) {
				if len(p.RecordBatches) >= spliceMinBytes {
					spliced++
				}
			}
			if len(splices) != spliced {
				t.Fatalf("v%d round %d: %d splices, want %d", v, round, len(splices), spliced)
			}
			if w := writeSpliced(got, splices); !bytes.Equal(w, want) {
				t.Fatalf("v%d round %d: spliced answer of %d bytes differs from the %d encoded whole", v, round, len(w), len(want))
			}
		}
	}
}

// TestAppendSplicedNonceElsewhere checks that an answer whose other fields
// happen to hold the placeholder nonce is encoded whole, not spliced at
// the wrong place.
func TestAppendSplicedNonceElsewhere(t *testing.T) {
	for _, v := range []int16{11, 12} {
		resp := randomFetchResponse(rand.New(rand.NewPCG(3, 4)), v, []int{64 << 10})
		var nonce [16]byte
		binary.BigEndian.PutUint64(nonce[:], spliceNonce)
		// A topic name (encoded up to v12) holding what the first
		// placeholder is encoded as: its length, nonce and index 0.
		resp.Topics[0].Topic = "t" + string(recordsLength(nil, placeholderBytes, resp.IsFlexible())) + string(nonce[:])
		want := appendResponse(nil, 1, resp)
		got, splices := appendSpliced(nil, 1, resp, nil)
		if len(splices) != 0 {
			t.Fatalf("v%d: %d splices with the nonce in a topic name", v, len(splices))
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("v%d: answer encoded whole differs", v)
		}
	}
}

// writeSpliced is what the writer writes for buf and its splices.
func writeSpliced(buf []byte, splices []splice) []byte {
	var out []byte
	prev := 0
	for _, s := range splices {
		out = append(append(out, buf[prev:s.at]...), s.data...)
		prev = s.at
	}
	return append(out, buf[prev:]...)
}

// randomFetchResponse is an answer of version v with 1-3 topics of 1-4
// partitions whose records have sizes drawn from sizes (-1 is null).
func randomFetchResponse(rng *rand.Rand, v int16, sizes []int) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = v
	resp.ThrottleMillis = rng.Int32()
	resp.SessionID = rng.Int32()
	for i := range 1 + rng.IntN(3) {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = fmt.Sprintf("topic-%d", i)
		rt.TopicID[3] = byte(i + 1)
		for j := range 1 + rng.IntN(4) {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = int32(j)
			rp.HighWatermark = rng.Int64()
			rp.LastStableOffset = rng.Int64()
			rp.LogStartOffset = rng.Int64()
			if rng.IntN(3) == 0 {
				a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				a.ProducerID, a.FirstOffset = rng.Int64(), rng.Int64()
				rp.AbortedTransactions = append(rp.AbortedTransactions, a)
			}
			if n := sizes[rng.IntN(len(sizes))]; n >= 0 {
				rp.RecordBatches = make([]byte, n)
				for k := range rp.RecordBatches {
					rp.RecordBatches[k] = byte(rng.Uint32())
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// TestFetchRecordsNotCopied checks that the writer writes a Fetch answer's
// records from the answer's own bytes, not from a copy in its buffer: one
// of the writes to the connection is the records slice itself. The
// client decodes the answer as usual.
func TestFetchRecordsNotCopied(t *testing.T) {
	records := bytes.Repeat([]byte("record batch bytes "), 4<<10)
	handler := func(_ context.Context, r *Request) (kmsg.Response, error) {
		resp := r.Body.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.RecordBatches = records
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil
	}
	s, err := New(Config{Logger: discardLogger, Registry: withHandlers(t, registration{1, 4, 16, handler})})
	if err != nil {
		t.Fatal(err)
	}
	client, server := net.Pipe()
	rec := &recordingConn{Conn: server}
	done := make(chan error, 1)
	go func() { done <- s.ServeConn(context.Background(), rec) }()
	t.Cleanup(func() {
		client.Close()
		<-done
	})
	client.SetDeadline(time.Now().Add(guard))
	for _, v := range []int16{11, 16} {
		resp := roundTrip(t, client, int32(v), fetchReq(v, 0, 1, 1<<20, fetchPartReq{topic: "t", maxBytes: 1 << 20})).(*kmsg.FetchResponse)
		if got := fetchPartitions(resp)[0].RecordBatches; !bytes.Equal(got, records) {
			t.Fatalf("v%d: client read %d record bytes, want the %d the handler returned", v, len(got), len(records))
		}
		if !rec.wrote(records) {
			t.Fatalf("v%d: the records were not written from the answer's slice (writes: %v)", v, rec.sizes())
		}
	}
}

// recordingConn keeps every slice written to it.
type recordingConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *recordingConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, b)
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// wrote reports whether b itself, not a copy, was written.
func (c *recordingConn) wrote(b []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.writes {
		if len(w) == len(b) && &w[0] == &b[0] {
			return true
		}
	}
	return false
}

func (c *recordingConn) sizes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n []int
	for _, w := range c.writes {
		n = append(n, len(w))
	}
	return n
}
