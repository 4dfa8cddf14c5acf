package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Bounds of one load phase.
const (
	// maxBufferedBytesPerProducer bounds what one producer client holds
	// unacknowledged. At an unlimited rate the buffer is always full, so
	// produce latency there is mostly this buffer draining; a target rate
	// below saturation keeps it nearly empty.
	maxBufferedBytesPerProducer = 32 << 20
	// drainTimeout bounds the wait, after the last record is sent, for
	// its acknowledgement and for the consumers to read up to it.
	drainTimeout = 30 * time.Second
	// setupTimeout bounds topic creation and the end-offset lookup.
	setupTimeout = 30 * time.Second
	// stampBytes is the send-time stamp at the head of every value.
	stampBytes = 8
)

// target is a running cluster to drive.
type target struct {
	name string
	// brokers are the seed addresses.
	brokers []string
	// metricsAddr is the agent's HTTP address ("" if unknown: the report
	// then has no agent section).
	metricsAddr string
	// cpuScope says whose CPU and memory the agent metrics describe.
	cpuScope string
	// cpu, if set, reads the server process's CPU seconds so far (a
	// child's, from /proc); else, with metricsServerCPU, the agent's
	// process_cpu_seconds_total is the server's alone.
	cpu              func() (float64, error)
	metricsServerCPU bool
	// security is the TLS and SASL options of its clients.
	security []kgo.Opt
}

// clientOpts are every client's options for t: its seeds, the bench's
// client id and the target's security, then extra.
func (t target) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := append([]kgo.Opt{kgo.SeedBrokers(t.brokers...), kgo.ClientID("strand-bench")}, t.security...)
	return append(opts, extra...)
}

// phase drives one target with the load of opts and measures it.
type phase struct {
	opts   *Options
	tgt    target
	stderr *progressWriter
	// epoch is the zero of every send stamp. Stamps are monotonic
	// nanoseconds since epoch, which producers and consumers share
	// because both run in this process.
	epoch time.Time

	// measureFrom is the stamp at which measurement starts (end of
	// warm-up); records sent earlier are not in the latency histograms.
	measureFrom atomic.Int64
	stopSending atomic.Bool

	produceLat, e2eLat *recorder
	// load, if set, runs beside the phase until its window ends
	// (stress.go); loadLabel names it in the progress lines.
	load      func(ctx context.Context)
	loadLabel string

	ackedRecords, ackedBytes   atomic.Int64
	produceErrs                atomic.Int64
	consumedRecords, consBytes atomic.Int64
	consumeErrs                atomic.Int64
	ackedPerPartition          []atomic.Int64

	mu struct {
		sync.Mutex
		firstErr error
	}
}

// consumer is one consuming client and what it has read per partition.
type consumer struct {
	cl    *kgo.Client
	parts []int32
	read  []atomic.Int64 // indexed by partition
}

func (p *phase) noteErr(err error) {
	p.mu.Lock()
	if p.mu.firstErr == nil {
		p.mu.firstErr = err
	}
	p.mu.Unlock()
}

func (p *phase) now() int64 { return int64(time.Since(p.epoch)) }

// run executes the phase: set up the topic, start consumers at the end
// of every partition, produce for warm-up plus duration, then drain.
func (p *phase) run(ctx context.Context) (*PhaseResult, error) {
	o := p.opts
	p.produceLat, p.e2eLat = newRecorder(), newRecorder()
	p.measureFrom.Store(math.MaxInt64)

	partitions, ends, err := p.setup(ctx)
	if err != nil {
		return nil, err
	}
	p.ackedPerPartition = make([]atomic.Int64, partitions)

	consumers, err := p.startConsumers(ctx, partitions, ends)
	defer func() {
		for _, c := range consumers {
			c.cl.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	var consWG sync.WaitGroup
	consCtx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	for _, c := range consumers {
		consWG.Go(func() { p.consume(consCtx, c) })
	}
	// A stress load runs from before the warm-up to the end of the
	// measured window.
	var loadWG sync.WaitGroup
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer func() {
		stopLoad()
		loadWG.Wait()
	}()
	if p.load != nil {
		loadWG.Go(func() { p.load(loadCtx) })
	}

	producers := make([]*kgo.Client, 0, o.Producers)
	defer func() {
		for _, cl := range producers {
			cl.Close()
		}
	}()
	for range o.Producers {
		cl, err := kgo.NewClient(p.producerOpts()...)
		if err != nil {
			return nil, fmt.Errorf("bench: producer client: %w", err)
		}
		producers = append(producers, cl)
	}

	payload := make([]byte, o.RecordSize)
	fillPayload(payload)
	if o.ValueFormat == FormatAvro {
		sctx, cancel := context.WithTimeout(ctx, setupTimeout)
		id, err := registerBenchSchema(sctx, o.SchemaRegistry, o.Topic)
		cancel()
		if err != nil {
			return nil, err
		}
		if payload, err = avroValue(id, o.RecordSize); err != nil {
			return nil, err
		}
	}
	var prodWG sync.WaitGroup
	start := time.Now()
	for _, cl := range producers {
		prodWG.Go(func() { p.produce(ctx, cl, payload, start) })
	}

	// The ticker loop: progress, timeline, warm-up end, stop.
	res := &PhaseResult{Target: p.tgt.name, CPUScope: p.tgt.cpuScope}
	var (
		before, after     AgentMetrics
		haveBefore        bool
		t0, t1            time.Time
		c0, c1            counters
		spareP, spareE    *Histogram
		prevCounters      counters
		prevTick          = start
		warmupEnd         = start.Add(o.Warmup)
		end               = warmupEnd.Add(o.Duration)
		measuring         = o.Warmup == 0
		tick              = time.NewTicker(time.Second)
		rssMax            float64
		scrape            = p.tgt.metricsAddr != ""
		scrapeErrReported bool
	)
	defer tick.Stop()
	scrapeNow := func() (AgentMetrics, bool) {
		if !scrape {
			return AgentMetrics{}, false
		}
		m, err := Scrape(ctx, p.tgt.metricsAddr)
		if err != nil {
			if !scrapeErrReported {
				p.stderr.note("metrics: %v", err)
				scrapeErrReported = true
			}
			return AgentMetrics{}, false
		}
		rssMax = max(rssMax, m.RSSBytes)
		return m, true
	}
	var cpu0, cpu1 float64
	var haveCPU bool
	readCPU := func() (float64, bool) {
		if p.tgt.cpu == nil {
			return 0, false
		}
		v, err := p.tgt.cpu()
		if err != nil {
			p.stderr.note("%s: reading the server's CPU: %v", p.tgt.name, err)
			return 0, false
		}
		return v, true
	}
	beginMeasuring := func(now time.Time) {
		t0 = now
		p.measureFrom.Store(int64(now.Sub(p.epoch)))
		p.produceLat.resetTotal()
		p.e2eLat.resetTotal()
		c0 = p.counters()
		before, haveBefore = scrapeNow()
		cpu0, haveCPU = readCPU()
	}
	if measuring {
		beginMeasuring(start)
	}
	timer := time.NewTimer(time.Until(end))
	defer timer.Stop()
	if !measuring {
		timer.Reset(time.Until(warmupEnd))
	}
loop:
	for {
		select {
		case <-ctx.Done():
			p.stopSending.Store(true)
			prodWG.Wait()
			return nil, ctx.Err()
		case now := <-timer.C:
			if !measuring {
				measuring = true
				beginMeasuring(now)
				timer.Reset(time.Until(end))
				continue
			}
			t1 = now
			c1 = p.counters()
			if haveCPU {
				cpu1, haveCPU = readCPU()
			}
			p.stopSending.Store(true)
			break loop
		case now := <-tick.C:
			c := p.counters()
			secs := now.Sub(prevTick).Seconds()
			ip := p.produceLat.takeInterval(spareP)
			ie := p.e2eLat.takeInterval(spareE)
			pt := TimelinePoint{
				T:               now.Sub(start).Seconds(),
				ProducedPerSec:  float64(c.acked-prevCounters.acked) / secs,
				ProducedMBps:    float64(c.ackedBytes-prevCounters.ackedBytes) / secs / 1e6,
				ConsumedPerSec:  float64(c.consumed-prevCounters.consumed) / secs,
				ProduceP50Ms:    ms(ip.Quantile(0.5)),
				ProduceP99Ms:    ms(ip.Quantile(0.99)),
				ProduceMaxMs:    ms(ip.Max()),
				E2EP50Ms:        ms(ie.Quantile(0.5)),
				E2EP99Ms:        ms(ie.Quantile(0.99)),
				ProduceLatCount: ip.Count(),
				E2ELatCount:     ie.Count(),
			}
			spareP, spareE = ip, ie
			res.Timeline = append(res.Timeline, pt)
			prevCounters, prevTick = c, now
			if scrape {
				scrapeNow()
			}
			label := p.tgt.name
			if p.loadLabel != "" {
				label += "+load"
			}
			if !measuring {
				label += " warmup"
			}
			p.stderr.progress(label, pt, o.Consumers > 0)
		}
	}
	p.stderr.endProgress()
	if scrape && haveBefore {
		var ok bool
		if after, ok = scrapeNow(); !ok {
			haveBefore = false
		}
	}
	stopLoad()
	loadWG.Wait()
	prodWG.Wait()

	// Drain: every sent record acknowledged, every consumer caught up.
	drainCtx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	for _, cl := range producers {
		if err := cl.Flush(drainCtx); err != nil {
			p.stderr.note("%s: flushing producers: %v", p.tgt.name, err)
			break
		}
	}
	if !p.waitConsumed(drainCtx, consumers) {
		p.stderr.note("%s: consumers did not catch up within %v", p.tgt.name, drainTimeout)
	}
	stopConsumers()
	consWG.Wait()

	window := t1.Sub(t0).Seconds()
	res.Seconds = window
	res.Produced = throughput(c1.acked-c0.acked, c1.ackedBytes-c0.ackedBytes, window)
	res.Produced.Errors = p.produceErrs.Load()
	if o.Consumers > 0 {
		c := throughput(c1.consumed-c0.consumed, c1.consumedBytes-c0.consumedBytes, window)
		c.Errors = p.consumeErrs.Load()
		res.Consumed = &c
	}
	res.ProduceLatency = latencyOf(p.produceLat.snapshotTotal())
	if o.Consumers > 0 {
		l := latencyOf(p.e2eLat.snapshotTotal())
		res.E2ELatency = &l
	}
	if haveBefore {
		res.Agent = agentStats(before, after, window, res.Produced, res.Consumed, rssMax, p.tgt.cpuScope)
	}
	switch {
	case haveCPU:
		res.ServerCPUSeconds, res.ServerCPUFrom = cpu1-cpu0, "/proc of the server's process"
	case haveBefore && p.tgt.metricsServerCPU:
		res.ServerCPUSeconds, res.ServerCPUFrom = after.CPUSeconds-before.CPUSeconds, "the agent's process_cpu_seconds_total"
	}
	moved := res.Produced.Bytes
	if res.Consumed != nil {
		moved += res.Consumed.Bytes
	}
	if res.ServerCPUSeconds > 0 && moved > 0 {
		res.CPUSecondsPerGB = res.ServerCPUSeconds / (float64(moved) / 1e9)
	}
	p.mu.Lock()
	firstErr := p.mu.firstErr
	p.mu.Unlock()
	if firstErr != nil {
		res.FirstError = firstErr.Error()
	}
	if res.Produced.Records == 0 {
		if firstErr != nil {
			return res, fmt.Errorf("bench: %s: nothing was produced: %w", p.tgt.name, firstErr)
		}
		return res, fmt.Errorf("bench: %s: nothing was produced", p.tgt.name)
	}
	return res, nil
}

type counters struct {
	acked, ackedBytes, consumed, consumedBytes int64
}

func (p *phase) counters() counters {
	return counters{
		acked:         p.ackedRecords.Load(),
		ackedBytes:    p.ackedBytes.Load(),
		consumed:      p.consumedRecords.Load(),
		consumedBytes: p.consBytes.Load(),
	}
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// setup creates the topic if it is missing and returns its partition
// count and every partition's end offset.
func (p *phase) setup(ctx context.Context) (int32, map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	cl, err := kgo.NewClient(p.tgt.clientOpts()...)
	if err != nil {
		return 0, nil, fmt.Errorf("bench: admin client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topic := p.opts.Topic
	resp, err := adm.CreateTopic(ctx, p.opts.Partitions, 1, p.opts.topicConfigs, topic)
	switch {
	case err == nil && resp.Err == nil:
	case errors.Is(err, kerr.TopicAlreadyExists) || errors.Is(resp.Err, kerr.TopicAlreadyExists):
		if err := p.alterTopicConfigs(ctx, adm); err != nil {
			return 0, nil, err
		}
	case err != nil:
		return 0, nil, fmt.Errorf("bench: create topic %s: %w", topic, err)
	default:
		return 0, nil, fmt.Errorf("bench: create topic %s: %w", topic, resp.Err)
	}
	// Metadata can trail CreateTopics on some brokers; retry the lookup
	// until every partition answers or the setup deadline passes.
	for {
		offs, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = offs.Error()
		}
		if err == nil {
			ends := map[int32]int64{}
			offs.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
			n := int32(len(ends))
			if n > 0 {
				for i := range n {
					if _, ok := ends[i]; !ok {
						return 0, nil, fmt.Errorf("bench: topic %s: partition %d missing from end offsets", topic, i)
					}
				}
				if n != p.opts.Partitions {
					p.stderr.note("topic %s exists with %d partitions; using them", topic, n)
				}
				return n, ends, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, nil, fmt.Errorf("bench: end offsets of %s: %w (last error: %v)", topic, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *phase) producerOpts() []kgo.Opt {
	o := p.opts
	opts := p.tgt.clientOpts(
		kgo.DefaultProduceTopic(o.Topic),
		kgo.ProducerLinger(o.Linger),
		kgo.ProducerBatchCompression(o.codec),
		kgo.MaxBufferedBytes(maxBufferedBytesPerProducer),
		kgo.MaxBufferedRecords(math.MaxInt32),
		kgo.RecordDeliveryTimeout(drainTimeout),
	)
	switch o.Acks {
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	}
	return opts
}

// fillPayload fills b with random hex digits: about 2:1 compressible, so
// --compression has something to do, unlike random bytes, and nothing
// like the flattering ratio of a repeated pattern.
func fillPayload(b []byte) {
	const hex = "0123456789abcdef"
	rand.Read(b)
	for i := range b {
		b[i] = hex[b[i]&15]
	}
}

// produce sends records until stopSending, paced to the per-producer
// share of opts.Rate. Pacing counts records due since start rather than
// sleeping a fixed gap, so timer granularity costs bursts, not rate.
func (p *phase) produce(ctx context.Context, cl *kgo.Client, payload []byte, start time.Time) {
	o := p.opts
	perSec := o.Rate / float64(o.Producers)
	pool := sync.Pool{New: func() any {
		v := make([]byte, len(payload))
		copy(v, payload)
		return &kgo.Record{Value: v}
	}}
	promise := func(r *kgo.Record, err error) {
		now := p.now()
		sent := int64(binary.BigEndian.Uint64(r.Value[o.stampAt:]))
		if err != nil {
			p.produceErrs.Add(1)
			p.noteErr(fmt.Errorf("produce: %w", err))
		} else {
			p.produceLat.record(now-sent, sent >= p.measureFrom.Load())
			p.ackedRecords.Add(1)
			p.ackedBytes.Add(int64(len(r.Value)))
			if int(r.Partition) < len(p.ackedPerPartition) {
				p.ackedPerPartition[r.Partition].Add(1)
			}
		}
		// kgo is done with r once its promise runs: reuse it.
		*r = kgo.Record{Value: r.Value}
		pool.Put(r)
	}
	var sent int64
	for !p.stopSending.Load() && ctx.Err() == nil {
		if perSec > 0 {
			elapsed := time.Since(start)
			due := int64(perSec*elapsed.Seconds()) + 1 - sent
			if due <= 0 {
				next := time.Duration(float64(sent) / perSec * float64(time.Second))
				time.Sleep(next - elapsed)
				continue
			}
		}
		r := pool.Get().(*kgo.Record)
		binary.BigEndian.PutUint64(r.Value[o.stampAt:], uint64(p.now()))
		cl.Produce(ctx, r, promise)
		sent++
	}
}

// startConsumers makes the consumer clients, each reading its share of
// the partitions from the end offsets taken before any record was sent,
// so that every record of the run is consumed and none from before.
// With more consumers than partitions, consumer i reads partition i mod
// partitions (fan-out reads of the same data).
func (p *phase) startConsumers(ctx context.Context, partitions int32, ends map[int32]int64) ([]*consumer, error) {
	var out []*consumer
	m := p.opts.Consumers
	for i := range m {
		var parts []int32
		if int32(m) <= partitions {
			for q := int32(i); q < partitions; q += int32(m) {
				parts = append(parts, q)
			}
		} else {
			parts = []int32{int32(i) % partitions}
		}
		at := map[int32]kgo.Offset{}
		for _, q := range parts {
			at[q] = kgo.NewOffset().At(ends[q])
		}
		cl, err := kgo.NewClient(p.tgt.clientOpts(
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{p.opts.Topic: at}),
			kgo.FetchMaxWait(500*time.Millisecond),
		)...)
		if err != nil {
			return out, fmt.Errorf("bench: consumer client: %w", err)
		}
		out = append(out, &consumer{cl: cl, parts: parts, read: make([]atomic.Int64, partitions)})
	}
	return out, nil
}

func (p *phase) consume(ctx context.Context, c *consumer) {
	for {
		fetches := c.cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		fetches.EachError(func(_ string, _ int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			p.consumeErrs.Add(1)
			p.noteErr(fmt.Errorf("consume: %w", err))
		})
		now := p.now()
		from := p.measureFrom.Load()
		var n, bytes int64
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			bytes += int64(len(r.Value))
			if at := p.opts.stampAt; len(r.Value) >= at+stampBytes {
				sent := int64(binary.BigEndian.Uint64(r.Value[at:]))
				p.e2eLat.record(now-sent, sent >= from)
			}
			if int(r.Partition) < len(c.read) {
				c.read[r.Partition].Add(1)
			}
		})
		p.consumedRecords.Add(n)
		p.consBytes.Add(bytes)
	}
}

// waitConsumed reports whether every consumer has read, on each of its
// partitions, as many records as were acknowledged there, before ctx ends.
func (p *phase) waitConsumed(ctx context.Context, consumers []*consumer) bool {
	caughtUp := func() bool {
		for _, c := range consumers {
			for _, q := range c.parts {
				if c.read[q].Load() < p.ackedPerPartition[q].Load() {
					return false
				}
			}
		}
		return true
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !caughtUp() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

func throughput(records, bytes int64, secs float64) Throughput {
	t := Throughput{Records: records, Bytes: bytes}
	if secs > 0 {
		t.RecordsPerSec = float64(records) / secs
		t.MBPerSec = float64(bytes) / secs / 1e6
	}
	return t
}

func latencyOf(h *Histogram) Latency {
	return Latency{
		Count:  h.Count(),
		MinMs:  ms(h.Min()),
		MeanMs: h.Mean() / 1e6,
		P50Ms:  ms(h.Quantile(0.50)),
		P90Ms:  ms(h.Quantile(0.90)),
		P99Ms:  ms(h.Quantile(0.99)),
		P999Ms: ms(h.Quantile(0.999)),
		MaxMs:  ms(h.Max()),
	}
}

func agentStats(before, after AgentMetrics, secs float64, prod Throughput, cons *Throughput, rssMax float64, scope string) *AgentStats {
	puts := after.Puts() - before.Puts()
	gets := after.ObjRequests["get"] - before.ObjRequests["get"]
	appends := after.LogAppends - before.LogAppends
	flushes := after.Flushes - before.Flushes
	a := &AgentStats{
		Puts:            puts,
		Gets:            gets,
		PutBytes:        after.PutBytes() - before.PutBytes(),
		GetBytes:        after.ObjBytes["get"] - before.ObjBytes["get"],
		LogAppends:      appends,
		Flushes:         flushes,
		ProduceRequests: after.ProduceRequests - before.ProduceRequests,
		CPUCores:        (after.CPUSeconds - before.CPUSeconds) / secs,
		CPUScope:        scope,
		RSSBytes:        after.RSSBytes,
		RSSMaxBytes:     rssMax,
		RSSPeakBytes:    after.RSSPeakBytes,
		Hedges:          after.Hedges["won"] + after.Hedges["lost"] - before.Hedges["won"] - before.Hedges["lost"],
		HedgesWon:       after.Hedges["won"] - before.Hedges["won"],
	}
	a.PutsPerSec = puts / secs
	for zone, n := range after.ExpressPuts {
		if a.ExpressPutsPerSec == nil {
			a.ExpressPutsPerSec = map[string]float64{}
		}
		a.ExpressPutsPerSec[zone] = (n - before.ExpressPuts[zone]) / secs
	}
	a.ExpressThirds = after.ExpressThirds - before.ExpressThirds
	for zone, n := range after.ExpressPuts {
		a.ExpressPuts += n - before.ExpressPuts[zone]
		a.ExpressPutBytes += after.ExpressPutBytes[zone] - before.ExpressPutBytes[zone]
	}
	a.GetsPerSec = gets / secs
	a.LogAppendsPerSec = appends / secs
	a.FlushesPerSec = flushes / secs
	if mb := float64(prod.Bytes) / 1e6; mb > 0 {
		a.PutsPerMB = puts / mb
	}
	if cons != nil {
		if mb := float64(cons.Bytes) / 1e6; mb > 0 {
			a.GetsPerMB = gets / mb
		}
	}
	if flushes > 0 {
		a.LogAppendsPerFlush = appends / flushes
		a.MeanFlushBytes = (after.FlushBytes - before.FlushBytes) / flushes
	}
	return a
}

// alterTopicConfigs sets --topic-config on a topic that already existed.
func (p *phase) alterTopicConfigs(ctx context.Context, adm *kadm.Client) error {
	if len(p.opts.topicConfigs) == 0 {
		return nil
	}
	var alters []kadm.AlterConfig
	for k, v := range p.opts.topicConfigs {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: v})
	}
	resps, err := adm.AlterTopicConfigs(ctx, alters, p.opts.Topic)
	if err == nil {
		var r kadm.AlterConfigsResponse
		r, err = resps.On(p.opts.Topic, nil)
		if err == nil {
			err = r.Err
		}
	}
	if err != nil {
		return fmt.Errorf("bench: topic %s exists; setting --topic-config: %w", p.opts.Topic, err)
	}
	p.stderr.note("topic %s exists; set its --topic-config", p.opts.Topic)
	return nil
}
