package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/clock"
)

// A cold read (--cold-read) measures a consumer catching up on one
// partition from an agent that did not write it, so nothing of it is in
// the agent's read cache: an embedded agent fills ColdReadBytes into
// each of the topic's partitions (records spread round-robin, so each
// data object holds every partition, as level-0 objects do under many
// producers), stops, and starts again on the same data directory with an
// empty cache (and --objstore-latency, which the fill runs without, so
// the objects are laid out alike whatever the latency). A franz-go
// consumer then reads partition 0 from offset 0 to its end with
// ColdReadFetchBytes per-partition fetches. The report gives MB/s and the
// object store GETs per MB the read took, from the agent's /metrics.

// Defaults of the cold read.
const (
	DefaultColdReadBytes      = 64 << 20
	DefaultColdReadFetchBytes = 1 << 20 // franz-go's max.partition.fetch.bytes
	// coldReadTimeout bounds the fill and the read each.
	coldReadTimeout = 30 * time.Minute
)

// ColdReadResult is a cold read's measurements. MB is 10^6 bytes of
// record values.
type ColdReadResult struct {
	Partitions int32 `json:"partitions"`
	FillBytes  int64 `json:"fill_bytes_per_partition"`
	// Reused: the data directory held the filled topic already.
	Reused          bool    `json:"reused_fill,omitempty"`
	FillSeconds     float64 `json:"fill_seconds"`
	Records         int64   `json:"records"`
	Bytes           int64   `json:"bytes"`
	Seconds         float64 `json:"seconds"`
	MBPerSec        float64 `json:"mb_per_sec"`
	Gets            float64 `json:"objstore_gets"`
	GetBytes        float64 `json:"objstore_get_bytes"`
	GetsPerMB       float64 `json:"objstore_gets_per_mb"`
	Objects         float64 `json:"objects_written"`
	FetchBytes      int32   `json:"fetch_partition_bytes"`
	ReadAheadBytes  int64   `json:"fetch_read_ahead_bytes"`
	MaxParallelGets int     `json:"fetch_max_parallel_gets"`
}

func (o *Options) validateColdRead(bad func(string, ...any)) {
	if !o.ColdRead {
		return
	}
	if !o.Embedded {
		bad("--cold-read restarts the agent: give --embedded")
	}
	if o.Stress != "" || o.CompareKfake {
		bad("--cold-read goes with neither --stress nor --compare-kfake")
	}
	if o.ColdReadBytes < 1 || o.ColdReadBytes > 1<<40 {
		bad("--cold-read-bytes %d: want 1 to 1 TiB", o.ColdReadBytes)
	}
	if o.ColdReadFetchBytes < 1 {
		bad("--cold-read-fetch-bytes must be positive")
	}
}

func (o *Options) setColdReadDefaults() {
	if o.ColdReadBytes == 0 {
		o.ColdReadBytes = DefaultColdReadBytes
	}
	if o.ColdReadFetchBytes == 0 {
		o.ColdReadFetchBytes = DefaultColdReadFetchBytes
	}
}

// runColdRead fills the topic through one embedded agent in dir, starts
// another on the same directory and times the read of partition 0.
func runColdRead(ctx context.Context, o *Options, dir string, pw *progressWriter, stderr io.Writer) (*ColdReadResult, error) {
	fillOpts := *o
	fillOpts.ObjStoreLatency = ""
	a, err := startEmbedded(ctx, &fillOpts, dir, stderr)
	if err != nil {
		return nil, err
	}
	res := &ColdReadResult{Partitions: o.Partitions, FillBytes: o.ColdReadBytes, FetchBytes: o.ColdReadFetchBytes}
	before, _ := Scrape(ctx, a.HTTPAddr())
	start := time.Now()
	end, err := partitionEnd(ctx, o.Topic, a.KafkaAddr())
	filled := err == nil && end >= o.ColdReadBytes/int64(o.RecordSize)
	var fillErr error
	if !filled {
		fillErr = fillColdRead(ctx, o, a.KafkaAddr())
	}
	res.FillSeconds = time.Since(start).Seconds()
	if after, err := Scrape(ctx, a.HTTPAddr()); err == nil {
		res.Objects = after.Flushes - before.Flushes
	}
	stopEmbedded(a, pw)
	switch {
	case fillErr != nil:
		return nil, fillErr
	case filled:
		res.Reused = true
		pw.note("%s in --data-dir holds %d records in partition 0 already: not filling it again; restarting the agent with an empty read cache", o.Topic, end)
	default:
		pw.note("filled %d partitions with %d MiB each in %.1f s (%.0f objects); restarting the agent with an empty read cache",
			o.Partitions, o.ColdReadBytes>>20, res.FillSeconds, res.Objects)
	}

	if a, err = startEmbedded(ctx, o, dir, stderr); err != nil {
		return nil, err
	}
	defer stopEmbedded(a, pw)
	cfg := embeddedConfig(o, dir)
	cfg.SetDefaults()
	res.ReadAheadBytes, res.MaxParallelGets = max(0, cfg.FetchReadAheadBytes), cfg.FetchMaxParallelGets
	before, err = Scrape(ctx, a.HTTPAddr())
	if err != nil {
		return nil, err
	}
	start = time.Now()
	if res.Records, res.Bytes, err = readColdPartition(ctx, o, a.KafkaAddr()); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	after, err := Scrape(ctx, a.HTTPAddr())
	if err != nil {
		return nil, err
	}
	res.Gets = after.ObjRequests["get"] - before.ObjRequests["get"]
	res.GetBytes = after.ObjBytes["get"] - before.ObjBytes["get"]
	mb := float64(res.Bytes) / 1e6
	if res.Seconds > 0 {
		res.MBPerSec = mb / res.Seconds
	}
	if mb > 0 {
		res.GetsPerMB = res.Gets / mb
	}
	return res, nil
}

func stopEmbedded(a *agent.Agent, pw *progressWriter) {
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Stop(sctx); err != nil {
		pw.note("stopping the embedded agent: %v", err)
	}
}

// fillColdRead produces ColdReadBytes of RecordSize records into each
// partition, round-robin.
func fillColdRead(ctx context.Context, o *Options, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, coldReadTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("strand-bench"),
		kgo.DefaultProduceTopic(o.Topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(o.Linger), kgo.ProducerBatchCompression(o.codec),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedBytes(64<<20))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, o.Partitions, 1, o.topicConfigs, o.Topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("bench: create %s: %w", o.Topic, err)
	} else if err == nil && resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("bench: create %s: %w", o.Topic, resp.Err)
	}
	value := make([]byte, o.RecordSize)
	fillPayload(value)
	var failed atomic.Pointer[error]
	total := o.ColdReadBytes * int64(o.Partitions)
	start := time.Now()
	for n, i := int64(0), 0; n < total; n, i = n+int64(len(value)), i+1 {
		if o.Rate > 0 && i%100 == 0 {
			// --rate shapes the objects: at 10 MB/s an agent cuts
			// about 47 objects a second of ~216 KB.
			due := start.Add(time.Duration(float64(i) / o.Rate * float64(time.Second)))
			if err := clock.Sleep(ctx, clock.Real, time.Until(due)); err != nil {
				return err
			}
		}
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
		if e := failed.Load(); e != nil {
			return fmt.Errorf("bench: filling %s: %w", o.Topic, *e)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("bench: filling %s: %w", o.Topic, err)
	}
	if e := failed.Load(); e != nil {
		return fmt.Errorf("bench: filling %s: %w", o.Topic, *e)
	}
	return nil
}

// readColdPartition reads partition 0 of the topic from its start to its
// end offset, returning the records and value bytes read.
func readColdPartition(ctx context.Context, o *Options, addr string) (records, bytes int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, coldReadTimeout)
	defer cancel()
	end, err := partitionEnd(ctx, o.Topic, addr)
	if err != nil {
		return 0, 0, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("strand-bench-cold-read"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.Topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxPartitionBytes(o.ColdReadFetchBytes))
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	for next := int64(0); next < end; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return records, bytes, fmt.Errorf("bench: cold read at offset %d of %d: %w", next, end, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return records, bytes, fmt.Errorf("bench: cold read at offset %d: %w", next, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			records++
			bytes += int64(len(r.Value))
			next = r.Offset + 1
		})
	}
	return records, bytes, nil
}

// partitionEnd is the end offset of partition 0 of topic.
func partitionEnd(ctx context.Context, topic, addr string) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("strand-bench"))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("bench: end offsets of %s: %w", topic, err)
	}
	end, ok := offs.Lookup(topic, 0)
	if !ok {
		return 0, fmt.Errorf("bench: no end offset for %s[0]", topic)
	}
	return end.Offset, nil
}

// writeColdRead prints a cold read's numbers.
func writeColdRead(b *strings.Builder, c *ColdReadResult, latency string) {
	if c.Reused {
		fmt.Fprintf(b, "\ncold read of partition 0 of a topic filled before, from a restarted agent, objstore-latency %s\n", latency)
	} else {
		fmt.Fprintf(b, "\ncold read of partition 0 of %d (filled with %d MiB each in %.1f s, %.0f objects) from a restarted agent, objstore-latency %s\n",
			c.Partitions, c.FillBytes>>20, c.FillSeconds, c.Objects, latency)
	}
	fmt.Fprintf(b, "  read-ahead %d B, %d parallel GETs; %d B per-partition fetches\n", c.ReadAheadBytes, c.MaxParallelGets, c.FetchBytes)
	fmt.Fprintf(b, "  %d records, %.1f MB in %.2f s: %.1f MB/s; %.0f GETs (%.1f per MB), %.1f MB read from the store\n",
		c.Records, float64(c.Bytes)/1e6, c.Seconds, c.MBPerSec, c.Gets, c.GetsPerMB, c.GetBytes/1e6)
}
