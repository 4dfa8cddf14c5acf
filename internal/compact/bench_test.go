package compact_test

import (
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/compact"
	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/objstore"
)

// BenchmarkColdCatchUp measures what object compaction buys a consumer
// catching up on one partition from an agent that did not write it (no
// cache): GET requests per MB of records, and MB/s with S3 Standard's
// simulated latency, before and after compaction; and the bytes
// compaction reads and writes per byte produced, and the bytes the
// catch-up GETs per byte it returns (read-amp). 8 partitions share
// every flush of about 216 KB (what the issue measured at 10 MB/s), 100
// flushes; each fetch asks for 1 MiB (max.partition.fetch.bytes). Run it
// once:
//
//	go test -run '^$' -bench BenchmarkColdCatchUp -benchtime 1x ./internal/compact/
func BenchmarkColdCatchUp(b *testing.B) {
	for range b.N {
		e := newEnv(b)
		id := e.topic("a", 8)
		var parts []tp
		for p := range int32(8) {
			parts = append(parts, tp{id, p})
		}
		for i := range 100 {
			e.produce(uint64(i), 260, parts...) // 260 records of 100 bytes: ~27 KB a partition
		}
		produced := e.store.Snapshot()
		latency, err := objstore.NewLatency(objstore.S3Standard, 1)
		if err != nil {
			b.Fatal(err)
		}
		slow := objstore.WithLatency(e.mem, latency)

		bytes, gets, _ := e.catchUp(e.mem, parts[0])
		_, _, tookSlow := e.catchUp(slow, parts[0])
		b.ReportMetric(float64(gets.Requests)/(float64(bytes)/1e6), "GETs/MB-before")
		b.ReportMetric(float64(gets.Bytes)/float64(bytes), "read-amp-before")
		b.ReportMetric(float64(bytes)/1e6/tookSlow.Seconds(), "MB/s-s3std-before")

		c := e.compactor(compact.Config{Unpaced: true})
		e.advance(compact.DefaultMaxLag)
		st := e.pass(c)
		if st.Swaps != len(parts) {
			b.Fatalf("pass: %+v", st)
		}
		after, gets, _ := e.catchUp(e.mem, parts[0])
		_, _, tookSlow = e.catchUp(slow, parts[0])
		if after != bytes {
			b.Fatalf("read %d bytes after compaction, %d before", after, bytes)
		}
		b.ReportMetric(float64(gets.Requests)/(float64(bytes)/1e6), "GETs/MB-after")
		b.ReportMetric(float64(gets.Bytes)/float64(bytes), "read-amp-after")
		b.ReportMetric(float64(bytes)/1e6/tookSlow.Seconds(), "MB/s-s3std-after")
		// Write amplification: bytes PUT to the store per byte the
		// produce path PUT (1 without compaction).
		in := float64(produced.BytesIn())
		b.ReportMetric((in+float64(st.BytesWritten))/in, "write-amp")
		b.ReportMetric(float64(st.BytesRead)/in, "compaction-read/produced")
	}
}

// catchUp reads partition p from offset 0 with 1 MiB fetches, cold,
// through store, and returns the record bytes, the GETs it made and
// how long it took.
func (e *env) catchUp(store objstore.Store, p tp) (bytes int64, gets objstore.OpCounts, took time.Duration) {
	counting := objstore.WithCounters(store)
	r := fetch.NewReader(counting, nil)
	v := e.db.View()
	defer v.Close()
	start := time.Now()
	for off := int64(0); ; {
		res, err := r.Read(testCtx(e.t), v, p.id, p.partition, off, 1<<20)
		if err != nil || res.Err != 0 {
			e.t.Fatalf("read at %d: %v, %d", off, err, res.Err)
		}
		if len(res.Records) == 0 {
			break
		}
		bytes += int64(len(res.Records))
		off = nextOffset(e.t, res.Records)
	}
	return bytes, counting.Snapshot().Op(objstore.OpGet), time.Since(start)
}
