package fetch_test

import (
	"runtime"
	"testing"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// BenchmarkFetch reads a partition of 16-record, 1 KiB-record batches
// from start to end in 1 MiB fetches, as a catching-up consumer does:
// "warm" through the cache the producer filled, "cold" with a cache that
// keeps nothing (every fetch GETs from a memory store): the hit path and
// the miss path. Besides MB/s it reports allocs/MB and B/MB, the
// allocations per MB of records returned; each answer is given back
// (Reader.Recycle) once read, as the Kafka handler gives it back once
// written.
//
//	go test -run '^$' -bench 'BenchmarkFetch$' -benchmem ./internal/fetch/
func BenchmarkFetch(b *testing.B) {
	const (
		partitions = 4
		calls      = 256 // per partition
		maxBytes   = 1 << 20
	)
	for _, tc := range []struct {
		name  string
		cache func() *fetch.Cache
	}{
		{"warm", func() *fetch.Cache { return fetch.NewCache(1 << 30) }},
		{"cold", func() *fetch.Cache { return fetch.NewCache(0) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cache := tc.cache()
			e := newEnv(b, memobj.New(), partitions, cache)
			// Several partitions per call, so objects interleave partitions
			// as a busy agent's do.
			for i := range calls {
				var batches []produce.Batch
				for p := range int32(partitions) {
					data := batchtest.Build(b, batchtest.Options{Records: 16, ValueBytes: 1024, Seed: uint64(i)})
					bt, err := produce.BatchFrom(e.topic, p, data)
					if err != nil {
						b.Fatal(err)
					}
					batches = append(batches, bt)
				}
				if _, err := e.p.Produce(testCtx(b), batches); err != nil {
					b.Fatal(err)
				}
			}
			v := e.view(b)
			r := fetch.NewReader(e.store, cache)
			ctx := testCtx(b)
			var total int64
			b.ReportAllocs()
			b.ResetTimer()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := 0; b.Loop(); i++ {
				p := int32(i % partitions)
				for off := int64(0); ; {
					res, err := r.Read(ctx, v, e.topic, p, off, maxBytes)
					if err != nil || res.Err != 0 {
						b.Fatalf("Read = %d, %v", res.Err, err)
					}
					if len(res.Records) == 0 {
						break
					}
					total += int64(len(res.Records))
					bases, _ := batchOffsets(b, res.Records)
					off = bases[len(bases)-1] + 16
					// As the Kafka handler does once the answer is
					// written.
					r.Recycle(res.Records)
				}
			}
			b.ReportMetric(float64(total)/1e6/b.Elapsed().Seconds(), "MB/s")
			reportPerMB(b, &before, total)
		})
	}
}

// reportPerMB reports the allocations since before per MB of total.
func reportPerMB(b *testing.B, before *runtime.MemStats, total int64) {
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	mb := float64(total) / 1e6
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/mb, "allocs/MB")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/mb, "B/MB")
}

// BenchmarkFetchTxn reads a partition of transactions, each one 16-record,
// 1 KiB-record batch and its marker, half committed and half aborted,
// from start to end in 1 MiB fetches through a warm cache: the cost of
// synthesizing markers among data batches.
//
//	go test -run '^$' -bench BenchmarkFetchTxn ./internal/fetch/
func BenchmarkFetchTxn(b *testing.B) {
	const (
		txns     = 256
		maxBytes = 1 << 20
	)
	cache := fetch.NewCache(1 << 30)
	e := newEnv(b, memobj.New(), 1, cache)
	p := e.initTxn(b, "bench")
	for i := range txns {
		e.addPartitions(b, p, 0)
		e.produceTxn(b, p, 0, 16, 1024)
		e.endTxn(b, p, i%2 == 0)
	}
	v := e.view(b)
	r := fetch.NewReader(e.store, cache)
	ctx := testCtx(b)
	var total int64
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for off := int64(0); ; {
			res, err := r.ReadUpTo(ctx, v, e.topic, 0, off, maxBytes, fetch.NoBound)
			if err != nil || res.Err != 0 {
				b.Fatalf("Read = %d, %v", res.Err, err)
			}
			if len(res.Records) == 0 {
				break
			}
			total += int64(len(res.Records))
			off = nextOffset(b, res.Records)
		}
	}
	b.ReportMetric(float64(total)/1e6/b.Elapsed().Seconds(), "MB/s")
}

// nextOffset returns the offset after the last batch of records.
func nextOffset(t testing.TB, records []byte) int64 {
	t.Helper()
	var last []byte
	for rest := records; len(rest) > 0; {
		var err error
		if last, rest, err = recordbatch.Next(rest); err != nil {
			t.Fatal(err)
		}
	}
	h, err := recordbatch.ParseHeader(last)
	if err != nil {
		t.Fatal(err)
	}
	return h.LastOffset() + 1
}
