package fetch_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// testTimeout guards against deadlocks only.
const testTimeout = 60 * time.Second

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// env is one agent writing to store: a replica over a memory log, a
// topic, and a pipeline.
type env struct {
	replica *replica.Replica
	topic   meta.TopicID
	store   objstore.Store
	p       *produce.Pipeline
}

func newEnv(t testing.TB, store objstore.Store, partitions int32, cache produce.ObjectCache) *env {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	r, err := replica.Open(testCtx(t), replica.Config{Dir: t.TempDir(), Log: memlog.New(), WriterID: "agent-1", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	res, err := r.Propose(testCtx(t), meta.CreateTopic{Name: "t", Partitions: partitions})
	if err != nil || res.Code != 0 {
		t.Fatalf("CreateTopic = %v, %v", res.Err(), err)
	}
	p, err := produce.New(produce.Config{
		Store: store, Replica: r, AgentID: fmt.Sprintf("agent-1-%d", r.Incarnation()),
		Cache: cache, Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		p.Close(ctx)
	})
	return &env{replica: r, topic: res.TopicID, store: store, p: p}
}

// produceBatches produces one call holding one Batch per data, all for
// partition, and returns their base offsets.
func (e *env) produce(t testing.TB, partition int32, datas ...[]byte) []int64 {
	t.Helper()
	var batches []produce.Batch
	for _, d := range datas {
		b, err := produce.BatchFrom(e.topic, partition, d)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	return e.produceBatches(t, batches)
}

// produceBatches produces batches in one call and returns their base
// offsets.
func (e *env) produceBatches(t testing.TB, batches []produce.Batch) []int64 {
	t.Helper()
	res, err := e.p.Produce(testCtx(t), batches)
	if err != nil {
		t.Fatal(err)
	}
	bases := make([]int64, len(res))
	for i, r := range res {
		if r.Code != 0 {
			t.Fatalf("batch %d: code %d", i, r.Code)
		}
		bases[i] = r.BaseOffset
	}
	return bases
}

func (e *env) view(t testing.TB) *meta.View {
	t.Helper()
	v := e.replica.View()
	t.Cleanup(func() { v.Close() })
	return v
}

func build(t testing.TB, records, valueBytes int, seed uint64) []byte {
	t.Helper()
	return batchtest.Build(t, batchtest.Options{Records: records, ValueBytes: valueBytes, Seed: seed})
}

// batchOffsets returns the base offset and size of each batch in records.
func batchOffsets(t testing.TB, records []byte) (bases []int64, sizes []int) {
	t.Helper()
	for rest := records; len(rest) > 0; {
		b, next, err := recordbatch.Next(rest)
		if err != nil {
			t.Fatal(err)
		}
		h, err := recordbatch.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		bases = append(bases, h.BaseOffset)
		sizes = append(sizes, len(b))
		rest = next
	}
	return bases, sizes
}
