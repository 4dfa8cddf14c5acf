package e2e

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Isolation levels of Fetch and ListOffsets.
const (
	readUncommitted int8 = 0
	readCommitted   int8 = 1
)

// Record batch attribute bits.
const (
	batchTransactional = 0x10
	batchControl       = 0x20
)

// rawFetch sends one Fetch for partition of topic at offset with the
// isolation level and returns the partition's answer and its batches,
// decoded. MaxWait is 0: it answers with what is readable now.
func rawFetch(t *testing.T, addr, topic string, partition int32, offset int64, isolation int8) (kmsg.FetchResponseTopicPartition, []kmsg.RecordBatch) {
	t.Helper()
	// Capped at 2.8 so Fetch stays below v13, which names topics by id.
	cl := newClient(t, addr, kgo.MaxVersions(kversion.V2_8_0()))
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 0
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	req.IsolationLevel = isolation
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("raw fetch %s/%d at %d: %v", topic, partition, offset, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("raw fetch %s/%d at %d: %d topics in the answer", topic, partition, offset, len(resp.Topics))
	}
	got := resp.Topics[0].Partitions[0]
	if got.ErrorCode != 0 {
		t.Fatalf("raw fetch %s/%d at %d: error code %d", topic, partition, offset, got.ErrorCode)
	}
	var batches []kmsg.RecordBatch
	for rest := got.RecordBatches; len(rest) > 0; {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(rest); err != nil || 12+int(b.Length) > len(rest) {
			t.Fatalf("raw fetch %s/%d at %d: bad batch (length %d of %d bytes): %v", topic, partition, offset, b.Length, len(rest), err)
		}
		batches = append(batches, b)
		rest = rest[12+int(b.Length):]
	}
	return got, batches
}

// fetchCounter is a kgo hook counting the Fetch responses a client has
// read, so a test can wait for a consumer to have asked the agent again
// (and been answered) instead of sleeping.
type fetchCounter struct {
	mu struct {
		sync.Mutex
		n       int
		waiters []ackWaiter
	}
}

var _ kgo.HookBrokerRead = (*fetchCounter)(nil)

func (c *fetchCounter) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key != 1 || err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.n++
	kept := c.mu.waiters[:0]
	for _, w := range c.mu.waiters {
		if c.mu.n >= w.n {
			close(w.done)
		} else {
			kept = append(kept, w)
		}
	}
	c.mu.waiters = kept
}

// after returns a channel closed once n more Fetch responses than now
// have been read.
func (c *fetchCounter) after(n int) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	done := make(chan struct{})
	c.mu.waiters = append(c.mu.waiters, ackWaiter{c.mu.n + n, done})
	return done
}

// Control record types (the key's second int16).
const (
	markerAbort  = 0
	markerCommit = 1
)

// markerType returns the type of the transaction marker in control
// batch b: its one record's key is version int16, type int16.
func markerType(t *testing.T, b kmsg.RecordBatch) int16 {
	t.Helper()
	var r kmsg.Record
	if b.NumRecords != 1 || r.ReadFrom(b.Records) != nil || len(r.Key) < 4 {
		t.Fatalf("control batch at %d: %d records, key %x: not a transaction marker", b.FirstOffset, b.NumRecords, r.Key)
	}
	return int16(binary.BigEndian.Uint16(r.Key[2:4]))
}
