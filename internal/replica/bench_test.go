package replica

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore/fileobj"
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
		setup = append(setup, sharedlog.Entry{Pos: sharedlog.Pos(i), Data: meta.AppendEntry(nil, &meta.Entry{
			WriterID: "setup", Incarnation: 1, Seq: uint64(i + 1), Timestamp: 1,
			Commands: []meta.RawCommand{meta.EncodeCommand(meta.CreateTopic{Name: fmt.Sprintf("t%d", i), Partitions: benchPartitions})},
		})})
	}
	outs, next, poison, err := applyEntries(db, meta.NewApplier(nil), setup)
	if err != nil || poison != nil {
		b.Fatal(err, poison)
	}
	var parts []partRef
	for _, out := range outs {
		for p := range int32(benchPartitions) {
			parts = append(parts, partRef{out.Results[0].TopicID, p})
		}
	}
	return db, parts, next
}

func benchCommit(rng *rand.Rand, parts []partRef, seq int) meta.CommitObject {
	co := meta.CommitObject{ObjectKey: fmt.Sprintf("objects/%016x", seq), ObjectSize: benchBatchesPerCmd * 4096}
	for i := range benchBatchesPerCmd {
		p := parts[rng.IntN(len(parts))]
		co.Batches = append(co.Batches, meta.CommitBatch{
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
			b.SetBytes(int64(len(meta.EncodeCommand(benchCommit(rng, parts, 0)).Payload)))
			b.ResetTimer()
			b.StopTimer()
			seq, cmds := 0, 0
			chunk := make([]sharedlog.Entry, 0, applyBatchEntries)
			a := meta.NewApplier(nil) // reused, as the player does
			for cmds < b.N {
				// Encode a chunk untimed, then apply it timed.
				chunk = chunk[:0]
				for len(chunk) < applyBatchEntries && cmds < b.N {
					e := meta.Entry{WriterID: "bench", Incarnation: 1, Seq: uint64(len(chunk) + seq + 1), Timestamp: 1700000000000}
					for range min(perEntry, b.N-cmds) {
						e.Commands = append(e.Commands, meta.EncodeCommand(benchCommit(rng, parts, cmds)))
						cmds++
					}
					chunk = append(chunk, sharedlog.Entry{Pos: pos + sharedlog.Pos(len(chunk)), Data: meta.AppendEntry(nil, &e)})
				}
				seq += len(chunk)
				b.StartTimer()
				_, next, poison, err := applyEntries(db, a, chunk)
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
	id := func() meta.TopicID {
		res, err := r.Propose(ctx, meta.CreateTopic{Name: "t", Partitions: 64})
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
			co := meta.CommitObject{ObjectKey: fmt.Sprintf("bench/%d", n), ObjectSize: 4096, Batches: []meta.CommitBatch{{
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

// snapshotBenchIndexEntries is the state size of BenchmarkSnapshot1M.
const snapshotBenchIndexEntries = 1 << 20

// snapshotBenchReplica builds a replica holding indexEntries offset index
// entries (plus one object record per 16), applied from the log as a
// live replica would.
func snapshotBenchReplica(b *testing.B, indexEntries int) *Replica {
	b.Helper()
	ctx := context.Background()
	log := memlog.New()
	r, err := Open(ctx, Config{Dir: filepath.Join(b.TempDir(), "db"), Log: log, WriterID: "bench", Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	var parts []partRef
	for i := range benchTopics {
		res, err := r.Propose(ctx, meta.CreateTopic{Name: fmt.Sprintf("t%d", i), Partitions: benchPartitions})
		if err != nil || res.Code != 0 {
			b.Fatal(err, res.Err())
		}
		for p := range int32(benchPartitions) {
			parts = append(parts, partRef{res.TopicID, p})
		}
	}
	// Append big entries straight to the log, as another writer would,
	// and let the replica apply them.
	const cmdsPerEntry = 64
	rng := rand.New(rand.NewPCG(1, 2))
	cmds := (indexEntries + benchBatchesPerCmd - 1) / benchBatchesPerCmd
	for seq := 1; cmds > 0; seq++ {
		e := meta.Entry{WriterID: "loader", Incarnation: 1, Seq: uint64(seq), Timestamp: 1700000000000}
		for ; cmds > 0 && len(e.Commands) < cmdsPerEntry; cmds-- {
			e.Commands = append(e.Commands, meta.EncodeCommand(benchCommit(rng, parts, cmds)))
		}
		if _, err := log.Append(ctx, meta.AppendEntry(nil, &e)); err != nil {
			b.Fatal(err)
		}
	}
	if err := r.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	// Settle the LSM, so background compactions of the load do not
	// run into the timed snapshots.
	if err := r.db.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := r.db.Compact(ctx, []byte{0}, localStart(), true); err != nil {
		b.Fatal(err)
	}
	v := r.View()
	defer v.Close()
	var records int64
	for _, p := range parts {
		st, _, err := v.Partition(p.id, p.partition)
		if err != nil {
			b.Fatal(err)
		}
		records += st.NextOffset
	}
	if got := records / benchRecordsPerBatch; got < int64(indexEntries) {
		b.Fatalf("built %d index entries, want %d", got, indexEntries)
	}
	return r
}

// BenchmarkSnapshot1M measures snapshots and restores of a store of 1M
// offset index entries through the file object store (fsync per object):
// full is a snapshot into an empty store, incremental one after a few
// more commits into a store holding the previous snapshot, restore a
// restore into an empty directory. The state is built once (it takes a
// while) and is not timed.
func BenchmarkSnapshot1M(b *testing.B) {
	r := snapshotBenchReplica(b, snapshotBenchIndexEntries)
	ctx := context.Background()
	newStore := func(b *testing.B) *fileobj.Store {
		s, err := fileobj.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	report := func(b *testing.B, bytes, uploaded int64) {
		b.SetBytes(bytes)
		b.ReportMetric(float64(bytes)/1e6, "MB")
		b.ReportMetric(float64(uploaded)/1e6, "uploaded-MB/op")
	}
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		var info SnapshotInfo
		var uploaded, n int64
		for b.Loop() {
			b.StopTimer()
			store := newStore(b)
			b.StartTimer()
			var err error
			if info, err = r.Snapshot(ctx, store, "meta"); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := os.RemoveAll(store.Dir()); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			uploaded += info.UploadedBytes
			n++
		}
		report(b, info.Bytes, uploaded/n)
	})
	b.Run("incremental", func(b *testing.B) {
		b.ReportAllocs()
		store := newStore(b)
		info, err := r.Snapshot(ctx, store, "meta")
		if err != nil {
			b.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(3, 4))
		var parts []partRef
		for _, t := range []string{"t0", "t1"} {
			v := r.View()
			tp, _, err := v.Topic(t)
			v.Close()
			if err != nil {
				b.Fatal(err)
			}
			parts = append(parts, partRef{tp.ID, 0}, partRef{tp.ID, 1})
		}
		var uploaded, n int64
		for b.Loop() {
			b.StopTimer()
			for range 16 {
				seq := int(objectSeq.Add(1))
				co := benchCommit(rng, parts, seq)
				co.ObjectKey = fmt.Sprintf("incremental/%d", seq)
				if res, err := r.Propose(ctx, co); err != nil || res.Code != 0 {
					b.Fatal(err, res.Err())
				}
			}
			b.StartTimer()
			if info, err = r.Snapshot(ctx, store, "meta"); err != nil {
				b.Fatal(err)
			}
			uploaded += info.UploadedBytes
			n++
		}
		report(b, info.Bytes, uploaded/n)
	})
	b.Run("restore", func(b *testing.B) {
		b.ReportAllocs()
		store := newStore(b)
		info, err := r.Snapshot(ctx, store, "meta")
		if err != nil {
			b.Fatal(err)
		}
		parent := b.TempDir()
		i := 0
		for b.Loop() {
			dir := filepath.Join(parent, strconv.Itoa(i))
			i++
			if _, err := Restore(ctx, store, "meta", dir); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := os.RemoveAll(dir); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		report(b, info.Bytes, 0)
	})
}
