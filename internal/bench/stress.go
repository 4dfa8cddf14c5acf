package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/clock"
)

// Stress loads (--stress) try to exhaust an agent's memory while the
// usual producer runs, to check that the agent stays within its memory
// budget and that other clients are not starved. The run measures the
// producer twice, first alone and then under the load, and reports both
// produce p99s and the agent's peak RSS (/metrics; give --http).
//
//   - metadata-flood: StressTopics topics of StressPartitions partitions
//     (as many as the agent's partition limits allow), then StressConns
//     connections each asking for the metadata of every topic in a loop,
//     reading and dropping the answers.
//   - catch-up: a backlog of StressBacklogBytes in its own topic, then
//     StressConsumers consumers (raw Fetch loops: see catchUp) each
//     reading it from the start with StressFetchPartitionBytes
//     per-partition fetches, again and again.
const (
	StressMetadataFlood = "metadata-flood"
	StressCatchUp       = "catch-up"
)

// Defaults of the stress loads: the sizes of issue 19's reproductions.
const (
	DefaultStressConns               = 10
	DefaultStressTopics              = 20
	DefaultStressPartitions          = 1 << 16
	DefaultStressConsumers           = 20
	DefaultStressFetchPartitionBytes = 10 << 20
	DefaultStressBacklogBytes        = 1 << 30
)

const (
	// stressSetupTimeout bounds creating the flood's topics or producing
	// the backlog.
	stressSetupTimeout = 10 * time.Minute
	// stressIOTimeout bounds one flood request's round trip.
	stressIOTimeout = time.Minute
	// backlogPartitions and backlogRecordBytes shape the catch-up topic.
	backlogPartitions  = 8
	backlogRecordBytes = 16 << 10
	stressTopicPrefix  = "strand-stress-"
)

// StressResult is a stress run's own measurements; the loaded phase is
// Report.Strand.
type StressResult struct {
	Mode string `json:"mode"`
	// Setup says what the load works on (partitions created, backlog).
	Setup string `json:"setup"`
	// Unloaded is the same producer alone, before the load.
	Unloaded *PhaseResult `json:"unloaded"`
	// P99Ratio is the loaded produce p99 over the unloaded one.
	P99Ratio float64 `json:"produce_p99_loaded_over_unloaded"`
	// Requests are the load's answered requests (Metadata or Fetch),
	// Bytes what they carried (whole answers, or record bytes), Errors
	// the failures seen, over the loaded phase.
	Requests int64  `json:"requests"`
	Bytes    int64  `json:"bytes"`
	Errors   int64  `json:"errors"`
	LastErr  string `json:"last_error,omitempty"`
}

// stressLoad is a load made ready and then run beside a phase.
type stressLoad struct {
	setup    string
	run      func(ctx context.Context)
	requests atomic.Int64
	bytes    atomic.Int64
	errs     atomic.Int64
	mu       struct {
		sync.Mutex
		lastErr error
	}
}

func (l *stressLoad) fail(err error) {
	l.errs.Add(1)
	l.mu.Lock()
	l.mu.lastErr = err
	l.mu.Unlock()
}

// runStress measures the producer alone, prepares the load, then
// measures the producer again with the load running.
func runStress(ctx context.Context, o *Options, tgt target, pw *progressWriter, epoch time.Time) (loaded *PhaseResult, sr *StressResult, err error) {
	unloaded, err := (&phase{opts: o, tgt: tgt, stderr: pw, epoch: epoch}).run(ctx)
	if err != nil {
		return nil, nil, err
	}
	pw.note("%s: preparing the load", o.Stress)
	var l *stressLoad
	switch o.Stress {
	case StressMetadataFlood:
		l, err = prepareMetadataFlood(ctx, o, tgt, pw)
	case StressCatchUp:
		l, err = prepareCatchUp(ctx, o, tgt, pw)
	}
	if err != nil {
		return nil, nil, err
	}
	pw.note("%s: %s; measuring the producer under it", o.Stress, l.setup)
	loaded, err = (&phase{opts: o, tgt: tgt, stderr: pw, epoch: epoch, load: l.run, loadLabel: o.Stress}).run(ctx)
	if err != nil {
		return nil, nil, err
	}
	sr = &StressResult{
		Mode: o.Stress, Setup: l.setup, Unloaded: unloaded,
		Requests: l.requests.Load(), Bytes: l.bytes.Load(), Errors: l.errs.Load(),
	}
	if u := unloaded.ProduceLatency.P99Ms; u > 0 {
		sr.P99Ratio = loaded.ProduceLatency.P99Ms / u
	}
	l.mu.Lock()
	if l.mu.lastErr != nil {
		sr.LastErr = l.mu.lastErr.Error()
	}
	l.mu.Unlock()
	return loaded, sr, nil
}

// prepareMetadataFlood creates the flood's topics, as many partitions as
// the cluster accepts.
func prepareMetadataFlood(ctx context.Context, o *Options, tgt target, pw *progressWriter) (*stressLoad, error) {
	ctx, cancel := context.WithTimeout(ctx, stressSetupTimeout)
	defer cancel()
	cl, err := kgo.NewClient(tgt.clientOpts()...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(stressSetupTimeout / time.Millisecond))
	var created int64
	var refused []string
	for i := range o.StressTopics {
		name := fmt.Sprintf("%s%02d", stressTopicPrefix, i)
		resp, err := adm.CreateTopic(ctx, o.StressPartitions, 1, nil, name)
		if err == nil {
			err = resp.Err
		}
		var kafkaErr *kerr.Error
		switch {
		case err == nil, errors.Is(err, kerr.TopicAlreadyExists):
			created += int64(o.StressPartitions)
		case errors.As(err, &kafkaErr):
			// The partition limits: the flood runs on what there is.
			refused = append(refused, fmt.Sprintf("%s: %v (%s)", name, err, resp.ErrMessage))
		default:
			return nil, fmt.Errorf("bench: create %s: %w", name, err)
		}
	}
	if len(refused) > 0 {
		pw.note("%d of %d topics refused; first: %s", len(refused), o.StressTopics, refused[0])
	}
	l := &stressLoad{setup: fmt.Sprintf("%d topics of %d partitions asked for, %d partitions there; %d connections asking for all of them",
		o.StressTopics, o.StressPartitions, created, o.StressConns)}
	l.run = func(ctx context.Context) {
		var wg sync.WaitGroup
		for range o.StressConns {
			wg.Go(func() { floodMetadata(ctx, tgt.brokers[0], l) })
		}
		wg.Wait()
	}
	return l, nil
}

// floodMetadata asks addr for the metadata of every topic over one
// connection until ctx ends, reading and dropping each answer, and
// reconnects after an error.
func floodMetadata(ctx context.Context, addr string, l *stressLoad) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("strand-bench-flood")).AppendRequest(nil, req, 1)
	l.connLoop(ctx, addr, func(c net.Conn) error {
		n, err := metadataRoundTrip(c, frame)
		if err == nil {
			l.requests.Add(1)
			l.bytes.Add(n)
		}
		return err
	})
}

// connLoop runs round on a connection to addr until it fails, then on a
// new one, until ctx ends; it counts the failures.
func (l *stressLoad) connLoop(ctx context.Context, addr string, round func(net.Conn) error) {
	var d net.Dialer
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			if ctx.Err() == nil {
				l.fail(err)
				_ = clock.Sleep(ctx, clock.Real, 100*time.Millisecond) // ctx ends the loop
			}
			continue
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		for ctx.Err() == nil {
			if err := round(c); err != nil {
				if ctx.Err() == nil {
					l.fail(err)
				}
				break
			}
		}
		stop()
		c.Close()
	}
}

func metadataRoundTrip(c net.Conn, frame []byte) (int64, error) {
	c.SetDeadline(time.Now().Add(stressIOTimeout))
	if _, err := c.Write(frame); err != nil {
		return 0, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return 0, err
	}
	n := int64(binary.BigEndian.Uint32(size[:]))
	if _, err := io.CopyN(io.Discard, c, n); err != nil {
		return 0, err
	}
	return n, nil
}

// prepareCatchUp produces the backlog the consumers will read.
func prepareCatchUp(ctx context.Context, o *Options, tgt target, pw *progressWriter) (*stressLoad, error) {
	ctx, cancel := context.WithTimeout(ctx, stressSetupTimeout)
	defer cancel()
	topic := stressTopicPrefix + "backlog"
	cl, err := kgo.NewClient(tgt.clientOpts(
		kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond),
		// Every backlog record has the same value: with the client's
		// default (snappy) the backlog would be stored, and read back,
		// at a small fraction of StressBacklogBytes.
		kgo.ProducerBatchCompression(o.codec),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.MaxBufferedBytes(64<<20))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, backlogPartitions, 1, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return nil, fmt.Errorf("bench: create %s: %w", topic, err)
	} else if err == nil && resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		return nil, fmt.Errorf("bench: create %s: %w", topic, resp.Err)
	}
	value := make([]byte, backlogRecordBytes)
	fillPayload(value)
	var failed atomic.Pointer[error]
	start := time.Now()
	for n := int64(0); n < o.StressBacklogBytes; n += int64(len(value)) {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
		if e := failed.Load(); e != nil {
			return nil, fmt.Errorf("bench: producing the backlog: %w", *e)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, fmt.Errorf("bench: producing the backlog: %w", err)
	}
	if e := failed.Load(); e != nil {
		return nil, fmt.Errorf("bench: producing the backlog: %w", *e)
	}
	pw.note("backlog of %d MiB produced in %.1f s", o.StressBacklogBytes>>20, time.Since(start).Seconds())
	offs, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("bench: end offsets of %s: %w", topic, err)
	}
	ends := map[int32]int64{}
	offs.Each(func(lo kadm.ListedOffset) { ends[lo.Partition] = lo.Offset })

	l := &stressLoad{setup: fmt.Sprintf("%d MiB backlog in %d partitions; %d consumers reading it from the start with %d MiB per-partition fetches (50 MiB per fetch)",
		o.StressBacklogBytes>>20, len(ends), o.StressConsumers, o.StressFetchPartitionBytes>>20)}
	l.run = func(ctx context.Context) {
		var wg sync.WaitGroup
		for range o.StressConsumers {
			wg.Go(func() { catchUp(ctx, o, tgt, topic, ends, l) })
		}
		wg.Wait()
	}
	return l, nil
}

// catchUp reads topic from the start to ends, over and over, until ctx
// ends, as a consumer does: Fetch requests over one connection, each
// partition from where the last answer ended, PartitionMaxBytes
// StressFetchPartitionBytes and MaxBytes 50 MiB (the clients' default
// fetch.max.bytes). It parses batch headers only, so the load generator
// spends little CPU beside the producer it measures.
func catchUp(ctx context.Context, o *Options, tgt target, topic string, ends map[int32]int64, l *stressLoad) {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("strand-bench-catch-up"))
	next := make(map[int32]int64, len(ends))
	l.connLoop(ctx, tgt.brokers[0], func(c net.Conn) error {
		if len(next) == 0 {
			// A new start, or read to the end: from the start again.
			for p := range ends {
				next[p] = 0
			}
		}
		return fetchRound(c, f, o, topic, ends, next, l)
	})
}

// fetchRound sends one Fetch for the partitions in next and moves each
// past the batches returned, dropping those that reached their end.
func fetchRound(c net.Conn, f *kmsg.RequestFormatter, o *Options, topic string, ends, next map[int32]int64, l *stressLoad) error {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxWaitMillis = 500
	req.MinBytes = 1
	req.MaxBytes = 50 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for p, off := range next {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, o.StressFetchPartitionBytes
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	c.SetDeadline(time.Now().Add(stressIOTimeout))
	if _, err := c.Write(f.AppendRequest(nil, req, 1)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, frame); err != nil {
		return err
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.Version = req.Version
	if len(frame) < 4 {
		return fmt.Errorf("fetch: %d-byte answer", len(frame))
	}
	if err := resp.ReadFrom(frame[4:]); err != nil { // past the correlation id
		return fmt.Errorf("fetch: %w", err)
	}
	l.requests.Add(1)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("fetch %s/%d: %w", topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
			l.bytes.Add(int64(len(p.RecordBatches)))
			for rest := p.RecordBatches; len(rest) >= 27; {
				// baseOffset int64, batchLength int32, ...,
				// lastOffsetDelta int32 at 23.
				n := 12 + int(binary.BigEndian.Uint32(rest[8:]))
				if n > len(rest) {
					break
				}
				next[p.Partition] = int64(binary.BigEndian.Uint64(rest)) + int64(int32(binary.BigEndian.Uint32(rest[23:]))) + 1
				rest = rest[n:]
			}
			if next[p.Partition] >= ends[p.Partition] {
				delete(next, p.Partition)
			}
		}
	}
	return nil
}

// validateStress adds the stress options' problems to bad.
func (o *Options) validateStress(bad func(string, ...any)) {
	switch o.Stress {
	case "":
		return
	case StressMetadataFlood, StressCatchUp:
	default:
		bad("--stress %q: want %s or %s", o.Stress, StressMetadataFlood, StressCatchUp)
	}
	if o.CompareKfake {
		bad("--stress and --compare-kfake do not go together")
	}
	if o.StressConns < 1 || o.StressConns > maxClients {
		bad("--stress-conns %d: want 1 to %d", o.StressConns, maxClients)
	}
	if o.StressTopics < 1 || o.StressTopics > 1000 {
		bad("--stress-topics %d: want 1 to 1000", o.StressTopics)
	}
	if o.StressPartitions < 1 || o.StressPartitions > maxPartitions {
		bad("--stress-partitions %d: want 1 to %d", o.StressPartitions, maxPartitions)
	}
	if o.StressConsumers < 1 || o.StressConsumers > maxClients {
		bad("--stress-consumers %d: want 1 to %d", o.StressConsumers, maxClients)
	}
	if o.StressFetchPartitionBytes < 1 {
		bad("--stress-fetch-partition-bytes must be positive")
	}
	if o.StressBacklogBytes < backlogRecordBytes {
		bad("--stress-backlog-bytes %d: want at least %d", o.StressBacklogBytes, backlogRecordBytes)
	}
}

func (o *Options) setStressDefaults() {
	if o.StressConns == 0 {
		o.StressConns = DefaultStressConns
	}
	if o.StressTopics == 0 {
		o.StressTopics = DefaultStressTopics
	}
	if o.StressPartitions == 0 {
		o.StressPartitions = DefaultStressPartitions
	}
	if o.StressConsumers == 0 {
		o.StressConsumers = DefaultStressConsumers
	}
	if o.StressFetchPartitionBytes == 0 {
		o.StressFetchPartitionBytes = DefaultStressFetchPartitionBytes
	}
	if o.StressBacklogBytes == 0 {
		o.StressBacklogBytes = DefaultStressBacklogBytes
	}
}

// writeStress prints a stress run's comparison.
func writeStress(b *strings.Builder, r *Report) {
	s := r.Stress
	if s == nil {
		return
	}
	fmt.Fprintf(b, "\nstress %s: %s\n", s.Mode, s.Setup)
	fmt.Fprintf(b, "  produce p99 %.2f ms alone, %.2f ms under the load (%.2fx)\n",
		s.Unloaded.ProduceLatency.P99Ms, r.Strand.ProduceLatency.P99Ms, s.P99Ratio)
	if a := r.Strand.Agent; a != nil {
		fmt.Fprintf(b, "  agent RSS peak %.0f MiB (sampled max %.0f MiB) [%s]\n", a.RSSPeakBytes/(1<<20), a.RSSMaxBytes/(1<<20), a.CPUScope)
	}
	fmt.Fprintf(b, "  load: %d answers, %.1f MB, %d errors", s.Requests, float64(s.Bytes)/1e6, s.Errors)
	if s.LastErr != "" {
		fmt.Fprintf(b, " (last: %s)", s.LastErr)
	}
	b.WriteString("\n")
}
