package meta

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

const (
	benchTopics          = 4
	benchPartitions      = 16 // per topic: 64 partitions in all
	benchBatchesPerCmd   = 16
	benchRecordsPerBatch = 10
)

// benchStore is a Pebble store with the bench topics created through apply.
func benchStore(b *testing.B) (*pebble.DB, []partRef, sharedlog.Pos) {
	b.Helper()
	db, err := pebble.Open(b.TempDir(), pebbleOptions(quietLogger()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	var setup []sharedlog.Entry
	for i := range benchTopics {
		setup = append(setup, sharedlog.Entry{Pos: sharedlog.Pos(i), Data: AppendEntry(nil, &Entry{
			WriterID: "setup", Incarnation: 1, Seq: uint64(i + 1), Timestamp: 1,
			Commands: []RawCommand{EncodeCommand(CreateTopic{Name: fmt.Sprintf("t%d", i), Partitions: benchPartitions})},
		})})
	}
	outs, next, poison, err := applyEntries(db, setup)
	if err != nil || poison != nil {
		b.Fatal(err, poison)
	}
	var parts []partRef
	for _, out := range outs {
		for p := range int32(benchPartitions) {
			parts = append(parts, partRef{out.results[0].TopicID, p})
		}
	}
	return db, parts, next
}

func benchCommit(rng *rand.Rand, parts []partRef, seq int) CommitObject {
	co := CommitObject{ObjectKey: fmt.Sprintf("objects/%016x", seq), ObjectSize: benchBatchesPerCmd * 4096}
	for i := range benchBatchesPerCmd {
		p := parts[rng.IntN(len(parts))]
		co.Batches = append(co.Batches, CommitBatch{
			TopicID: p.id, Partition: p.partition, Position: int64(i) * 4096, Length: 4096,
			Records: benchRecordsPerBatch, BatchCount: 1, FirstTimestamp: 1700000000000, MaxTimestamp: 1700000000100,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		})
	}
	return co
}

// BenchmarkApplyCommitObject measures apply alone (no log): CommitObject
// commands of 16 batches over 64 partitions, entries of 1 or 16 commands,
// applyBatchEntries entries per Pebble batch, as the replica's player does.
func BenchmarkApplyCommitObject(b *testing.B) {
	for _, perEntry := range []int{1, 16} {
		b.Run(fmt.Sprintf("cmds-per-entry=%d", perEntry), func(b *testing.B) {
			db, parts, pos := benchStore(b)
			rng := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			b.SetBytes(int64(len(EncodeCommand(benchCommit(rng, parts, 0)).Payload)))
			b.ResetTimer()
			b.StopTimer()
			seq, cmds := 0, 0
			chunk := make([]sharedlog.Entry, 0, applyBatchEntries)
			for cmds < b.N {
				// Encode a chunk untimed, then apply it timed.
				chunk = chunk[:0]
				for len(chunk) < applyBatchEntries && cmds < b.N {
					e := Entry{WriterID: "bench", Incarnation: 1, Seq: uint64(len(chunk) + seq + 1), Timestamp: 1700000000000}
					for range min(perEntry, b.N-cmds) {
						e.Commands = append(e.Commands, EncodeCommand(benchCommit(rng, parts, cmds)))
						cmds++
					}
					chunk = append(chunk, sharedlog.Entry{Pos: pos + sharedlog.Pos(len(chunk)), Data: AppendEntry(nil, &e)})
				}
				seq += len(chunk)
				b.StartTimer()
				_, next, poison, err := applyEntries(db, chunk)
				b.StopTimer()
				if err != nil || poison != nil || next != pos+sharedlog.Pos(len(chunk)) {
					b.Fatal(err, poison, next)
				}
				pos = next
			}
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N)/secs, "cmds/s")
			b.ReportMetric(float64(b.N*benchBatchesPerCmd)/secs, "index-entries/s")
		})
	}
}

// BenchmarkPropose measures Propose round trips on one replica over the
// in-memory log, with many concurrent proposers so group commit kicks in.
func BenchmarkPropose(b *testing.B) {
	log := memlog.New()
	r, err := Open(context.Background(), Config{Dir: b.TempDir(), Log: log, WriterID: "bench", Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	id := func() TopicID {
		res, err := r.Propose(ctx, CreateTopic{Name: "t", Partitions: 64})
		if err != nil || res.Code != 0 {
			b.Fatal(err, res.Err())
		}
		return res.TopicID
	}()
	var seq atomic.Uint64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			co := CommitObject{ObjectKey: fmt.Sprintf("bench/%d", n), ObjectSize: 4096, Batches: []CommitBatch{{
				TopicID: id, Partition: int32(n % 64), Length: 4096, Records: 10, BatchCount: 1,
			}}}
			res, err := r.Propose(ctx, co)
			if err != nil || res.Code != 0 || res.Batches[0].Code != 0 {
				b.Fatal(err, res.Err())
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proposals/s")
	tail, _, _ := log.CheckTail(ctx)
	b.ReportMetric(float64(b.N)/float64(tail), "cmds/entry")
}
