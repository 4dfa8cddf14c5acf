package produce_test

import (
	"context"
	"fmt"
	iofs "io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/fileobj"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// BenchmarkProduce: each op is one Produce call of one batch of 16 records
// of 1 KiB, to one of 8 partitions, from N concurrent producers.
//
//	go test -run '^$' -bench BenchmarkProduce -benchtime 2s ./internal/produce/
func BenchmarkProduce(b *testing.B) {
	backends := []struct {
		name string
		open func(b *testing.B) (objstore.Store, sharedlog.Log)
	}{
		{"mem", func(b *testing.B) (objstore.Store, sharedlog.Log) { return memobj.New(), memlog.New() }},
		{"file", func(b *testing.B) (objstore.Store, sharedlog.Log) { return openFileBackends(b) }},
	}
	for _, be := range backends {
		for _, producers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%s/producers=%d", be.name, producers), func(b *testing.B) {
				const partitions = 8
				store, log := be.open(b)
				counting := objstore.WithCounters(store)
				r, p, batches := benchPipeline(b, counting, log, partitions)
				b.SetBytes(int64(len(batches[0].Data)))
				b.ReportAllocs()
				ctx := testCtx(b)
				before := counting.Snapshot()
				applied := r.NextToApply()
				b.ResetTimer()

				var next atomic.Int64
				var wg sync.WaitGroup
				for range producers {
					wg.Go(func() {
						for {
							i := next.Add(1) - 1
							if i >= int64(b.N) {
								return
							}
							res, err := p.Produce(ctx, batches[i%int64(len(batches)):][:1])
							if err != nil || res[0].Code != 0 {
								b.Errorf("Produce: %v, %+v", err, res)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				puts := counting.Snapshot().Sub(before).Op(objstore.OpPut).Requests
				b.ReportMetric(float64(b.N)/float64(max(puts, 1)), "calls/object")
				b.ReportMetric(float64(b.N)/float64(max(r.NextToApply()-applied, 1)), "calls/entry")
			})
		}
	}
}

// BenchmarkProducePaced is goal 5b of issue 15 without Kafka, clients or
// a load generator: 20 MB/s of 16 KiB calls on a fixed schedule (as
// producers with linger 0 send them, several in flight) through the
// pipeline over the local file store and file log, the agent's embedded
// default. Each op is one call; it reports the calls' latency from their
// start, the store's PUT latency and the log's append latency, so what
// the disk's fsyncs leave of a 5 ms target is plain.
//
//	go test -run '^$' -bench BenchmarkProducePaced -benchtime 20000x ./internal/produce/
func BenchmarkProducePaced(b *testing.B) {
	b.Run("file", func(b *testing.B) {
		var syncs syncStats
		fs, fl := openFileBackendsFS(b, timedFS{FS: filelog.OS, s: &syncs})
		var appendLat latencies
		producePaced(b, fs, timedLog{Log: fl, waiter: fl, lat: &appendLat}, &appendLat)
		// The log's fsyncs alone (fdatasyncs too): what its appends wait
		// for on the disk. Full fsyncs commit the file system's journal,
		// fdatasyncs of preallocated blocks do not.
		b.ReportMetric(float64(syncs.lat.quantile(0.50))/float64(time.Millisecond), "logsync-p50-ms")
		b.ReportMetric(float64(syncs.lat.quantile(0.99))/float64(time.Millisecond), "logsync-p99-ms")
		b.ReportMetric(float64(syncs.full.Load())/float64(max(len(syncs.lat.lat), 1)), "logfullsyncs/sync")
	})
	// Nothing waits for a disk: what is left is the pipeline's own
	// hand-offs and the CPU. The store keeps nothing, so that a heap
	// growing by 20 MB/s does not put the collector in the numbers.
	b.Run("mem", func(b *testing.B) {
		ml := memlog.New()
		var appendLat latencies
		producePaced(b, discardStore{}, timedLog{Log: ml, waiter: ml, lat: &appendLat}, &appendLat)
	})
}

func producePaced(b *testing.B, fs objstore.Store, log sharedlog.Log, appendLat *latencies) {
	const (
		partitions  = 8
		bytesPerSec = 20e6
		maxInFlight = 16
	)
	var putLat latencies
	store := objstore.WithTiming(fs, func(op objstore.Op, d time.Duration, _ int64, _ error) {
		if op == objstore.OpPut {
			putLat.add(d, 1)
		}
	})
	var stages stageObserver
	_, p, batches := benchPipelineConfig(b, store, log, partitions, produce.Config{Observer: &stages})
	spacing := time.Duration(float64(time.Second) * float64(len(batches[0].Data)) / bytesPerSec)
	b.SetBytes(int64(len(batches[0].Data)))
	ctx := testCtx(b)
	var callLat latencies
	slots := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		due := start.Add(time.Duration(i) * spacing)
		time.Sleep(time.Until(due))
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			called := time.Now()
			res, err := p.Produce(ctx, batches[i%len(batches):][:1])
			if err != nil || res[0].Code != 0 {
				b.Errorf("Produce: %v, %+v", err, res)
				return
			}
			callLat.add(time.Since(called), 1)
		})
	}
	wg.Wait()
	b.StopTimer()
	report := func(l *latencies, name string) {
		b.ReportMetric(float64(l.quantile(0.50))/float64(time.Millisecond), name+"-p50-ms")
		b.ReportMetric(float64(l.quantile(0.99))/float64(time.Millisecond), name+"-p99-ms")
	}
	report(&callLat, "call")
	report(&putLat, "put")
	report(appendLat, "append")
	report(&stages.commit, "commit")
	report(&stages.flush, "flush")
	b.ReportMetric(float64(stages.commits.Load())/float64(max(stages.flushes.Load(), 1)), "commits/flush")
	b.ReportMetric(float64(stages.flushes.Load())/time.Since(start).Seconds(), "flushes/s")
	b.ReportMetric(float64(putLat.records)/time.Since(start).Seconds(), "puts/s")
}

// benchPipeline opens a replica of log holding a topic of partitions, a
// pipeline over store (closed at cleanup), and 64 batches of 16 records
// of 1 KiB, round-robin over the partitions.
func benchPipeline(b *testing.B, store objstore.Store, log sharedlog.Log, partitions int32) (*replica.Replica, *produce.Pipeline, []produce.Batch) {
	return benchPipelineConfig(b, store, log, partitions, produce.Config{})
}

// benchPipelineConfig is benchPipeline with cfg's other fields (an
// Observer, say) kept.
func benchPipelineConfig(b *testing.B, store objstore.Store, log sharedlog.Log, partitions int32, cfg produce.Config) (*replica.Replica, *produce.Pipeline, []produce.Batch) {
	r := openReplica(b, log, "bench")
	topic := createTopic(b, r, "t", partitions)
	cfg.Store, cfg.Replica, cfg.Logger = store, r, quietLogger()
	cfg.AgentID = fmt.Sprintf("bench-%d", r.Incarnation())
	p, err := produce.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close(testCtx(b)) })
	batches := make([]produce.Batch, 64)
	for i := range batches {
		data := batchtest.Build(b, batchtest.Options{Records: 16, ValueBytes: 1024, Seed: uint64(i)})
		if batches[i], err = produce.BatchFrom(topic, int32(i)%partitions, data); err != nil {
			b.Fatal(err)
		}
	}
	return r, p, batches
}

// openFileBackends opens a file store and a file log in a temp dir, the
// log closed at cleanup.
func openFileBackends(b *testing.B) (objstore.Store, *filelog.Loglet) {
	return openFileBackendsFS(b, filelog.OS)
}

// openFileBackendsFS is openFileBackends with the log writing through
// fsys.
func openFileBackendsFS(b *testing.B, fsys filelog.FS) (objstore.Store, *filelog.Loglet) {
	dir := b.TempDir()
	s, err := fileobj.Open(filepath.Join(dir, "objects"))
	if err != nil {
		b.Fatal(err)
	}
	l, err := filelog.Open(filepath.Join(dir, "log"), filelog.Options{Logger: quietLogger(), FS: fsys})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return s, l
}

// timedLog times the appends to a log, and waits for its tail as the log
// does (without it the replica's player would poll).
type timedLog struct {
	sharedlog.Log
	waiter sharedlog.TailWaiter
	lat    *latencies
}

func (t timedLog) WaitTail(ctx context.Context, after sharedlog.Pos) (sharedlog.Pos, error) {
	return t.waiter.WaitTail(ctx, after)
}

func (t timedLog) Append(ctx context.Context, data []byte) (sharedlog.Pos, error) {
	start := time.Now()
	pos, err := t.Log.Append(ctx, data)
	t.lat.add(time.Since(start), 1)
	return pos, err
}

// stageObserver times the pipeline's commits (one ProposeBatch: the log
// append and the apply) and whole flushes (first batch to answer).
type stageObserver struct {
	commit, flush    latencies
	commits, flushes atomic.Int64
}

func (o *stageObserver) FlushCut(int, int, int)                    {}
func (o *stageObserver) UploadDone(int, int, time.Duration, error) {}
func (o *stageObserver) CommitDone(_ int, d time.Duration, _ error) {
	o.commits.Add(1)
	o.commit.add(d, 1)
}
func (o *stageObserver) FlushDone(_ int, d time.Duration, _ error) {
	o.flushes.Add(1)
	o.flush.add(d, 1)
}

// syncStats times a loglet's fsyncs and fdatasyncs and counts the full
// ones.
type syncStats struct {
	lat  latencies
	full atomic.Int64
}

// timedFS times the fsyncs of the files a loglet opens.
type timedFS struct {
	filelog.FS
	s *syncStats
}

func (t timedFS) OpenFile(name string, flag int, perm iofs.FileMode) (filelog.File, error) {
	f, err := t.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return timedFile{File: f, s: t.s}, nil
}

type timedFile struct {
	filelog.File
	s *syncStats
}

func (t timedFile) Sync() error {
	start := time.Now()
	err := t.File.Sync()
	t.s.lat.add(time.Since(start), 1)
	t.s.full.Add(1)
	return err
}

// Datasync passes the loglet's fdatasync on (timed), which the embedded
// File would hide.
func (t timedFile) Datasync() error {
	d, ok := t.File.(filelog.Datasyncer)
	if !ok {
		return t.Sync()
	}
	start := time.Now()
	err := d.Datasync()
	t.s.lat.add(time.Since(start), 1)
	return err
}
