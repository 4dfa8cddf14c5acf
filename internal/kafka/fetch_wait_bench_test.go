package kafka

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// BenchmarkFetchLongPollWide measures what one apply costs while long
// polls wait on many partitions: fetches long-poll every partition of a
// wide topic with a MinBytes they never reach (as consumers with a large
// fetch.min.bytes do), and each op commits to a few of the partitions.
// cpu-ns/op is the process's CPU time (user and system) per commit: the
// apply, and every wake-up it causes. The commits name an object that
// is never read.
func BenchmarkFetchLongPollWide(b *testing.B) {
	for _, partitions := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			benchLongPollWide(b, partitions, 4, 2)
		})
	}
}

func benchLongPollWide(b *testing.B, partitions, fetches, perCommit int) {
	spy := &spyNotifier{calls: make(chan struct{}, 64)}
	a, _ := newDataAgent(b, nil, withSpy(spy))
	id := a.createTopic(b, "wide", int32(partitions), nil)
	parts := make([]fetchPartReq, partitions)
	for p := range parts {
		// A small PartitionMaxBytes bounds how much of each index a
		// wake-up counts as commits pile up.
		parts[p] = fetchPartReq{id: id, partition: int32(p), maxBytes: 1 << 10}
	}
	req := fetchReq(16, int32((10 * time.Minute).Milliseconds()), 1<<30, 1<<20, parts...)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for range fetches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &Request{Header: Header{Key: 1, Version: 16}, Body: req, Deps: a.Deps}
			if resp, err := handleFetch(ctx, r); err == nil {
				releaseResponse(resp)
			}
		}()
	}
	for range fetches {
		spy.waitCall(b)
	}

	const batchBytes = 100
	co := meta.CommitObject{ObjectKey: "data/never-read", ObjectSize: int64(perCommit) * batchBytes}
	for j := range perCommit {
		co.Batches = append(co.Batches, meta.CommitBatch{
			TopicID: id, Position: int64(j) * batchBytes, Length: batchBytes,
			Records: 1, BatchCount: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		})
	}
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.ResetTimer()
	for i := range b.N {
		for j := range co.Batches {
			co.Batches[j].Partition = int32((i*perCommit + j) % partitions)
		}
		if _, err := a.Replica.Propose(ctx, co); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time this process used so far, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFetchLongPollWake measures one long poll from request to
// answer over every partition of a wide topic, MinBytes 1, woken by a
// commit of one batch to one of the partitions: the first read of every
// partition, the wait, and what the wake-up and the read after it cost.
// cpu-ns/op is the process's CPU time per fetch, the commit included.
func BenchmarkFetchLongPollWake(b *testing.B) {
	for _, partitions := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			benchLongPollWake(b, partitions)
		})
	}
}

func benchLongPollWake(b *testing.B, partitions int) {
	spy := &spyNotifier{calls: make(chan struct{}, 64)}
	a, _ := newDataAgent(b, nil, withSpy(spy))
	id := a.createTopic(b, "wide", int32(partitions), nil)
	parts := make([]fetchPartReq, partitions)
	for p := range parts {
		parts[p] = fetchPartReq{id: id, partition: int32(p), maxBytes: 1 << 20}
	}
	req := fetchReq(16, int32((10 * time.Minute).Milliseconds()), 1, 1<<20, parts...)
	batch := batchtest.Build(b, batchtest.Options{Records: 1, ValueBytes: 100})
	ctx := context.Background()

	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.ResetTimer()
	for i := range b.N {
		done := make(chan error, 1)
		go func() {
			r := &Request{Header: Header{Key: 1, Version: 16}, Body: req, Deps: a.Deps}
			resp, err := handleFetch(ctx, r)
			if err == nil {
				if sp := fetchPartitions(unwrapResponse(resp).(*kmsg.FetchResponse))[i%partitions]; len(sp.RecordBatches) == 0 {
					err = fmt.Errorf("partition %d: code %d, no records", i%partitions, sp.ErrorCode)
				}
				releaseResponse(resp)
			}
			done <- err
		}()
		spy.waitCall(b)
		key := fmt.Sprintf("data/wake-%d", i)
		if err := a.Store.Put(ctx, key, batch); err != nil {
			b.Fatal(err)
		}
		p := int32(i % partitions)
		co := meta.CommitObject{ObjectKey: key, ObjectSize: int64(len(batch)), Batches: []meta.CommitBatch{{
			TopicID: id, Partition: p, Length: int64(len(batch)), Records: 1, BatchCount: 1,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		}}}
		if _, err := a.Replica.Propose(ctx, co); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		req.Topics[0].Partitions[p].FetchOffset++
		// Drain the signals of the wait's later rounds, if any.
		drainSignals(spy.calls)
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}
