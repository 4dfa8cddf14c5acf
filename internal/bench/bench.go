// Package bench owns `strand bench`: a load generator that drives a
// running cluster, or an agent it starts in process, with franz-go
// producers and consumers, and reports what the run cost. It measures
// produce latency (promise callback minus produce call) and end-to-end
// latency (consumer receipt minus the send stamp in each value's first 8
// bytes) in log-linear histograms, throughput, and, from the agent's
// /metrics, object store requests, shared-log appends per flush, CPU and
// RSS. It can drive franz-go's kfake with the same load in the same run
// and measure the disk's fsync'd write bandwidth, to put the numbers in
// proportion.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/compact"
	"github.com/strandkafka/strand/internal/cost"
	"github.com/strandkafka/strand/internal/gc"
	"github.com/strandkafka/strand/internal/objstore"
)

// Options is one benchmark run. Zero values mean the defaults of
// SetDefaults, except Warmup, Rate and Consumers, where zero means none;
// Run calls SetDefaults and Validate.
type Options struct {
	// Nexmark runs the Nexmark mode (nexmarkrun.go) instead of the
	// producer/consumer load: NexmarkQueries ("" for all) as views over
	// the SQL endpoint at SQL, events at Rate for Duration.
	Nexmark        bool
	NexmarkQueries string
	NexmarkReplay  bool
	// NexmarkProfile, with Embedded and NexmarkReplay, is a directory
	// where each replay writes this process's CPU profile
	// (replay-<query>.pprof): the agent runs in it, so that is the
	// query's cost by function.
	NexmarkProfile string
	// NexmarkProportions is the generator's people, auctions and bids in
	// every group of their sum ("p,a,b"; "" is the reference's 1,3,46).
	// A replay of q3 or q8 reads only people and auctions, about 4K a
	// second of load at the reference's mix: too few to time, so
	// e.g. 10,30,10 gives them a population worth replaying.
	NexmarkProportions string
	SQL                string
	// afterNexmark, a test's, checks the load's views before the
	// replays drop them.
	afterNexmark func(ctx context.Context, sqlAddr string, brokers []string, r *NexmarkResult) error
	// Brokers is a running cluster's seed list; Embedded starts an agent
	// in this process instead. Exactly one must be set.
	Brokers []string
	// ClientOpts are the TLS and SASL options of the clients driving
	// Brokers (the --tls and --sasl flags). The --stress floods speak
	// plaintext Kafka on raw connections and do not use them.
	ClientOpts []kgo.Opt
	Embedded   bool
	// HTTP is the agent's HTTP address, for /metrics. Embedded knows it.
	HTTP string
	// DataDir is the embedded agent's directory (and where the disk
	// bandwidth is measured); empty means a fresh temporary directory,
	// removed afterwards unless KeepData.
	DataDir  string
	KeepData bool
	// ObjStoreLatency, FlushInterval and FlushBytes configure the
	// embedded agent (see agent.Config); zero means its defaults.
	ObjStoreLatency string
	FlushInterval   time.Duration
	FlushBytes      int
	// FetchReadAheadBytes and FetchMaxParallelGets configure the
	// embedded agent's read-ahead as agent.Config's fields do (0: the
	// defaults; agent.ReadAheadOff: none).
	FetchReadAheadBytes  int64
	FetchMaxParallelGets int
	// SQLViewStepSlots is the embedded agent's --sql-view-step-slots
	// (0: no bound on the views' epochs; negative: GOMAXPROCS-1).
	SQLViewStepSlots int
	// HedgePercentile, HedgeMaxRatio and MaxPutsPerSec configure the
	// embedded agent's hedged uploads and PUT budget as agent.Config's
	// ObjStoreHedge* and MaxPutsPerSec do (0: the defaults;
	// agent.HedgeOff: no hedging).
	HedgePercentile float64
	HedgeMaxRatio   float64
	MaxPutsPerSec   float64
	// ExpressZones, if 2 or 3, puts the embedded agent's low-latency
	// tier (agent.Config.ObjStoreExpress) on that many local
	// directories under its data dir, the latency profile on each, and
	// turns compaction on, which the tier needs.
	ExpressZones int

	// Cost prices the run (package cost) with the table in CostPrices
	// ("" is the shipped list prices) for the workload the Cost* fields
	// describe.
	Cost         bool
	CostPrices   string
	CostWorkload cost.Workload

	Producers, Consumers int
	RecordSize           int
	Partitions           int32
	Topic                string
	// Acks is all, 1 or 0; anything but all disables idempotence.
	Acks        string
	Compression string
	// Linger is the producers' linger (franz-go's default is 10ms).
	Linger time.Duration
	// Rate is the target records per second over all producers; 0 is
	// as fast as the cluster acknowledges.
	Rate             float64
	Duration, Warmup time.Duration

	JSON bool
	// Plot, if set, is a file to write latency over time to, as SVG.
	Plot string
	// CompareKfake drives an in-process kfake cluster with the same load
	// after the main run; KfakeMemory keeps it in memory instead of the
	// default DataDir plus SyncWrites (a durable write per batch, which
	// is what Strand's acknowledgement means).
	CompareKfake bool
	KfakeMemory  bool
	// InProcess runs the Embedded agent and kfake in this process, as
	// before the bench measured CPU per GB: their CPU is then the load
	// generator's too. By default each runs in a child process of this
	// binary (server.go) and its CPU alone is read from /proc.
	InProcess bool
	// ServerCPUProfile, if set, is a file each child server writes its
	// CPU profile to (the kfake child's gets ".kfake" appended).
	ServerCPUProfile string
	// DiskBandwidth measures fsync'd sequential writes of DiskBytes in
	// DiskChunkBytes chunks in the data directory.
	DiskBandwidth  bool
	DiskBytes      int64
	DiskChunkBytes int

	// Stress is a load run beside the producer (stress.go): "",
	// StressMetadataFlood or StressCatchUp; the Stress* fields shape it,
	// zero meaning their defaults.
	Stress                    string
	StressConns               int
	StressTopics              int
	StressPartitions          int32
	StressConsumers           int
	StressFetchPartitionBytes int32
	StressBacklogBytes        int64

	// ColdRead measures a cold catch-up read of one partition
	// (coldread.go) instead of a producer run; ColdReadBytes is what
	// each partition is filled with, ColdReadFetchBytes the consumer's
	// per-partition fetch size, zero meaning their defaults.
	ColdRead           bool
	ColdReadBytes      int64
	ColdReadFetchBytes int32

	// ValueFormat is FormatRaw ("" too) or FormatAvro (format.go): Avro
	// values need a schema registered at SchemaRegistry, the registry's
	// REST URL (DefaultSchemaRegistry when empty).
	ValueFormat    string
	SchemaRegistry string

	// TopicConfigs are key=value topic configs the topic is created
	// with (or altered to, if it exists), e.g. retention.ms=60000.
	TopicConfigs []string
	// ObjStore is an object store URL to list every StorageEvery while
	// the load runs (storage.go); with Embedded it defaults to the
	// agent's. StorageEvery defaults to DefaultStorageEvery when
	// ObjStore is given; zero otherwise means no sampling.
	ObjStore     string
	StorageEvery time.Duration

	codec kgo.CompressionCodec
	// stampAt is where the send stamp sits in a value (format.go).
	stampAt      int
	topicConfigs map[string]*string
	// store, if set, is listed instead of opening ObjStore (tests).
	store objstore.Store
}

// Defaults.
const (
	DefaultProducers      = 1
	DefaultConsumers      = 1
	DefaultRecordSize     = 1024
	DefaultPartitions     = 8
	DefaultTopic          = "strand-bench"
	DefaultAcks           = "all"
	DefaultCompression    = "none"
	DefaultLinger         = 10 * time.Millisecond
	DefaultDuration       = 30 * time.Second
	DefaultWarmup         = 2 * time.Second
	DefaultDiskBytes      = 1 << 30
	DefaultDiskChunkBytes = 1 << 20
)

// Bounds on the options: beyond these a run measures the generator.
const (
	maxClients    = 1024
	maxPartitions = 1 << 16
	maxRecordSize = 16 << 20
)

// ErrUsage marks a problem with the options.
var ErrUsage = errors.New("bench: usage")

// SetDefaults fills unset fields.
func (o *Options) SetDefaults() {
	if o.Producers == 0 {
		o.Producers = DefaultProducers
	}
	if o.RecordSize == 0 {
		o.RecordSize = DefaultRecordSize
	}
	if o.Partitions == 0 {
		o.Partitions = DefaultPartitions
	}
	if o.Topic == "" {
		o.Topic = DefaultTopic
	}
	if o.Acks == "" {
		o.Acks = DefaultAcks
	}
	if o.Compression == "" {
		o.Compression = DefaultCompression
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.DiskBytes == 0 {
		o.DiskBytes = DefaultDiskBytes
	}
	if o.DiskChunkBytes == 0 {
		o.DiskChunkBytes = DefaultDiskChunkBytes
	}
	if o.ObjStore != "" && o.StorageEvery == 0 {
		o.StorageEvery = DefaultStorageEvery
	}
	if o.SQL == "" {
		o.SQL = DefaultSQLAddr
	}
	o.setStressDefaults()
	o.setColdReadDefaults()
}

// Validate reports every problem with o.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrUsage}, args...)...))
	}
	if o.Embedded == (len(o.Brokers) > 0) {
		bad("give exactly one of --brokers and --embedded")
	}
	if o.Nexmark {
		if !o.Embedded && o.HTTP == "" {
			bad("--nexmark reads the views' metrics: give --http with --brokers")
		}
		if o.Stress != "" || o.ColdRead || o.CompareKfake {
			bad("--nexmark runs alone: not with --stress, --cold-read or --compare-kfake")
		}
		if _, err := nexmarkQueries(o.NexmarkQueries); err != nil {
			errs = append(errs, err)
		}
		if _, err := nexmarkConfig(o.NexmarkProportions); err != nil {
			errs = append(errs, err)
		}
		if o.NexmarkProfile != "" && (!o.Embedded || !o.NexmarkReplay) {
			bad("--nexmark-profile profiles this process during the replays: give it with --embedded and --nexmark-replay")
		}
	}
	if o.Cost {
		if err := o.CostWorkload.Validate(); err != nil {
			bad("--cost-*: %v", err)
		}
		if _, err := cost.LoadPrices(o.CostPrices); err != nil {
			bad("--cost-prices: %v", err)
		}
	}
	if o.Producers < 1 || o.Producers > maxClients {
		bad("--producers %d: want 1 to %d", o.Producers, maxClients)
	}
	if o.Consumers < 0 || o.Consumers > maxClients {
		bad("--consumers %d: want 0 to %d", o.Consumers, maxClients)
	}
	if o.RecordSize < stampBytes || o.RecordSize > maxRecordSize {
		bad("--record-size %d: want %d to %d", o.RecordSize, stampBytes, maxRecordSize)
	}
	switch o.ValueFormat {
	case "", FormatRaw:
	case FormatAvro:
		if o.RecordSize < minAvroRecordSize {
			bad("--record-size %d: Avro values need at least %d", o.RecordSize, minAvroRecordSize)
		}
		if o.SchemaRegistry == "" {
			o.SchemaRegistry = DefaultSchemaRegistry
		}
	default:
		bad("--value-format %q: want %s or %s", o.ValueFormat, FormatRaw, FormatAvro)
	}
	o.stampAt = stampAt(o.ValueFormat)
	if o.Partitions < 1 || o.Partitions > maxPartitions {
		bad("--partitions %d: want 1 to %d", o.Partitions, maxPartitions)
	}
	switch o.Acks {
	case "all", "1", "0":
	case "-1":
		o.Acks = "all"
	default:
		bad("--acks %q: want all, 1 or 0", o.Acks)
	}
	codec, err := parseCompression(o.Compression)
	if err != nil {
		bad("%v", err)
	}
	o.codec = codec
	if o.Linger < 0 || o.Linger > time.Minute {
		bad("--linger %v: want 0 to 1m", o.Linger)
	}
	if o.Rate < 0 {
		bad("--rate must not be negative")
	}
	if o.Duration <= 0 {
		bad("--duration must be positive")
	}
	if o.Warmup < 0 {
		bad("--warmup must not be negative")
	}
	if !o.Embedded && o.ExpressZones != 0 {
		bad("--express-zones configures --embedded only")
	}
	if o.ExpressZones != 0 && (o.ExpressZones < 2 || o.ExpressZones > 3) {
		bad("--express-zones must be 2 or 3")
	}
	if !o.Embedded && (o.ObjStoreLatency != "" || o.FlushInterval != 0 || o.FlushBytes != 0 || o.FetchReadAheadBytes != 0 || o.FetchMaxParallelGets != 0 || o.SQLViewStepSlots != 0 ||
		o.HedgePercentile != 0 || o.HedgeMaxRatio != 0 || (o.MaxPutsPerSec != 0 && o.MaxPutsPerSec != agent.PutBudgetAuto)) {
		bad("--objstore-latency, --flush-interval, --flush-bytes, --objstore-hedge-*, --max-puts-per-sec, --sql-view-step-slots and the --fetch-* read-ahead flags configure --embedded only")
	}
	if o.DiskBytes <= 0 || o.DiskChunkBytes <= 0 || o.DiskBytes < int64(o.DiskChunkBytes) {
		bad("--disk-bandwidth sizes: want positive, total at least one chunk")
	}
	o.topicConfigs = nil
	for _, kv := range o.TopicConfigs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			bad("--topic-config %q: want key=value", kv)
			continue
		}
		if o.topicConfigs == nil {
			o.topicConfigs = make(map[string]*string)
		}
		o.topicConfigs[k] = &v
	}
	if o.StorageEvery < 0 {
		bad("--storage-every must not be negative")
	}
	if o.StorageEvery > 0 && o.ObjStore == "" && !o.Embedded && o.store == nil {
		bad("--storage-every needs --objstore (or --embedded, which lists the agent's store)")
	}
	o.validateStress(bad)
	o.validateColdRead(bad)
	return errors.Join(errs...)
}

func parseCompression(name string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(name) {
	case "none", "":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("--compression %q: want none, gzip, snappy, lz4 or zstd", name)
}

// Run executes the benchmark described by o, printing progress to stderr
// and the report (text, or JSON with o.JSON) to stdout.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) (*Report, error) {
	o.SetDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{Options: reportOptions(&o), CPUs: runtime.NumCPU(), LoadStart: loadAverage()}
	pw := newProgressWriter(stderr)
	epoch := time.Now()

	dataDir := o.DataDir
	if dataDir == "" && (o.Embedded || o.CompareKfake || o.DiskBandwidth) {
		d, err := os.MkdirTemp("", "strand-bench-")
		if err != nil {
			return nil, err
		}
		dataDir = d
		if !o.KeepData {
			defer os.RemoveAll(d)
		} else {
			pw.note("data kept in %s", d)
		}
	}

	// The disk goes first, while no load phase's writeback competes
	// with it: the number is the disk's, not the disk's leftovers.
	if o.DiskBandwidth {
		pw.note("measuring fsync'd sequential write bandwidth: %d MiB in %d KiB chunks", o.DiskBytes>>20, o.DiskChunkBytes>>10)
		d, err := DiskBandwidth(ctx, dataDir, o.DiskBytes, o.DiskChunkBytes)
		if err != nil {
			return nil, err
		}
		rep.Disk = &d
	}

	if o.ColdRead {
		var err error
		if rep.ColdRead, err = runColdRead(ctx, &o, filepath.Join(dataDir, "agent"), pw, stderr); err != nil {
			return nil, err
		}
		rep.LoadEnd = loadAverage()
		if o.JSON {
			return rep, writeJSON(stdout, rep)
		}
		return rep, writeText(stdout, rep)
	}

	tgt := target{name: "strand", brokers: o.Brokers, metricsAddr: o.HTTP, cpuScope: "agent process", metricsServerCPU: true, security: o.ClientOpts}
	var stopAgent func()
	if o.Embedded && !o.InProcess && !o.Nexmark {
		// --nexmark keeps its agent in process: --nexmark-profile
		// profiles this process.
		c, err := startChildServer(ctx, specOf(&o, "strand", filepath.Join(dataDir, "agent")), stderr)
		if err != nil {
			return nil, err
		}
		stopAgent = func() {
			if err := c.stop(30 * time.Second); err != nil {
				pw.note("stopping the agent's process: %v", err)
			}
		}
		tgt.brokers = []string{c.addrs.Kafka}
		tgt.metricsAddr = c.addrs.HTTP
		tgt.cpu = c.cpuSeconds
		tgt.metricsServerCPU = false
		tgt.cpuScope = "agent process (a child of the bench)"
	} else if o.Embedded {
		a, err := startEmbedded(ctx, &o, filepath.Join(dataDir, "agent"), stderr)
		if err != nil {
			return nil, err
		}
		stopAgent = func() {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := a.Stop(sctx); err != nil {
				pw.note("stopping the embedded agent: %v", err)
			}
		}
		tgt.brokers = []string{a.KafkaAddr()}
		tgt.metricsAddr = a.HTTPAddr()
		if o.Nexmark {
			o.SQL = a.SQLAddr()
		}
		tgt.cpuScope = "bench process: embedded agent plus load generator"
		tgt.metricsServerCPU = false
	}
	var sampler *storageSampler
	if o.StorageEvery > 0 {
		store, name := o.store, o.ObjStore
		if store == nil {
			if name == "" {
				name = embeddedStoreURL(filepath.Join(dataDir, "agent"))
			}
			var err error
			if store, err = openSampledStore(ctx, name); err != nil {
				if stopAgent != nil {
					stopAgent()
				}
				return nil, err
			}
		}
		sampler = startStorageSampler(ctx, store, name, tgt.metricsAddr, o.StorageEvery, epoch, pw)
	}
	var res *PhaseResult
	var err error
	switch {
	case o.Nexmark:
		rep.Nexmark, err = runNexmark(ctx, &o, tgt, o.SQL, pw)
	case o.Stress != "":
		res, rep.Stress, err = runStress(ctx, &o, tgt, pw, epoch)
	default:
		res, err = (&phase{opts: &o, tgt: tgt, stderr: pw, epoch: epoch}).run(ctx)
	}
	if sampler != nil {
		rep.Storage = sampler.finish(ctx)
	}
	if stopAgent != nil {
		stopAgent()
	}
	if err != nil {
		return nil, err
	}
	rep.Strand = res
	if o.Nexmark {
		rep.LoadEnd = loadAverage()
		if o.JSON {
			return rep, writeJSON(stdout, rep)
		}
		return rep, writeText(stdout, rep)
	}

	if o.CompareKfake {
		kres, err := runKfake(ctx, &o, filepath.Join(dataDir, "kfake"), pw, epoch)
		if err != nil {
			return nil, err
		}
		rep.Kfake = kres
		rep.Ratios = ratios(res, kres)
	}
	if d := rep.Disk; d != nil && d.BytesPerSec > 0 {
		d.IngestPercent = 100 * res.Produced.MBPerSec * 1e6 / d.BytesPerSec
	}
	rep.LoadEnd = loadAverage()
	if o.Cost {
		if rep.Cost, err = priceRun(&o, res); err != nil {
			return nil, err
		}
	}

	if o.Plot != "" {
		if err := writePlot(o.Plot, rep); err != nil {
			return nil, err
		}
	}
	if o.JSON {
		err = writeJSON(stdout, rep)
	} else {
		err = writeText(stdout, rep)
	}
	return rep, err
}

// priceRun prices what the agent counted over the measured window. The
// bench drives one agent, so nothing crosses zones it could count; the
// embedded agent's log is the file log, which the machine bills.
func priceRun(o *Options, res *PhaseResult) (*CostResult, error) {
	a := res.Agent
	if a == nil {
		return nil, errors.New("--cost needs the agent's metrics: give --http")
	}
	prices, err := cost.LoadPrices(o.CostPrices)
	if err != nil {
		return nil, err
	}
	backend := "file"
	if !o.Embedded {
		backend = "unknown"
	}
	m := cost.Measured{
		IngestBytes: float64(res.Produced.Bytes), Puts: a.Puts - a.ExpressPuts, Gets: a.Gets,
		ExpressPuts: a.ExpressPuts, ExpressPutBytes: a.ExpressPutBytes, ExpressHeldMinutes: expressHeldMinutes(),
		LogBackend: backend, LogWrites: a.LogAppends, LogCounter: "strand_log_appends_total",
	}
	c := &CostResult{Region: prices.Region, Workload: o.CostWorkload}
	if c.Strand, err = cost.Strand(prices, o.CostWorkload, m); err != nil {
		return nil, err
	}
	if c.Kafka, err = cost.Kafka(prices, o.CostWorkload, false); err != nil {
		return nil, err
	}
	c.KafkaFollowerFetching, err = cost.Kafka(prices, o.CostWorkload, true)
	return c, err
}

func reportOptions(o *Options) ReportOptions {
	r := ReportOptions{
		Target:      "brokers " + strings.Join(o.Brokers, ","),
		Producers:   o.Producers,
		Consumers:   o.Consumers,
		RecordSize:  o.RecordSize,
		Partitions:  o.Partitions,
		Topic:       o.Topic,
		Acks:        o.Acks,
		Compression: o.Compression,
		Linger:      o.Linger.String(),
		Rate:        o.Rate,
		Duration:    o.Duration.String(),
		Warmup:      o.Warmup.String(),
	}
	if o.Embedded {
		r.Target = "embedded"
		r.ObjStoreLatency = o.ObjStoreLatency
		if r.ObjStoreLatency == "" {
			r.ObjStoreLatency = "none"
		}
		fi, fb := o.FlushInterval, o.FlushBytes
		if fi == 0 {
			fi = agent.DefaultFlushInterval
		}
		if fb == 0 {
			fb = agent.DefaultFlushBytes
		}
		r.FlushInterval, r.FlushBytes = fi.String(), fb
		cfg := embeddedConfig(o, "")
		cfg.SetDefaults()
		r.HedgePercentile, r.HedgeMaxRatio, r.MaxPutsPerSec = max(cfg.ObjStoreHedgePercentile, 0), cfg.ObjStoreHedgeMaxRatio, cfg.MaxPutsPerSec
		r.ExpressZones = o.ExpressZones
	}
	if o.CompareKfake {
		r.KfakeMode = kfakeMode(o)
	}
	return r
}

func kfakeMode(o *Options) string {
	if o.KfakeMemory {
		return "memory"
	}
	return "durable (DataDir + SyncWrites)"
}

// embeddedStoreURL is the object store of an agent started in dir with
// the defaults.
func embeddedStoreURL(dir string) string {
	cfg := agent.Config{DataDir: dir}
	cfg.SetDefaults()
	return cfg.ObjStore
}

// startEmbedded starts an agent in this process on loopback ports chosen
// by the kernel, logging warnings and errors only.
func startEmbedded(ctx context.Context, o *Options, dir string, stderr io.Writer) (*agent.Agent, error) {
	cfg := embeddedConfig(o, dir)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := agent.Start(ctx, cfg, logger)
	if err != nil {
		return nil, fmt.Errorf("bench: embedded agent: %w", err)
	}
	return a, nil
}

// embeddedConfig is the config of an agent startEmbedded starts in dir.
func embeddedConfig(o *Options, dir string) agent.Config {
	sqlListen := ""
	if o.Nexmark {
		sqlListen = "127.0.0.1:0"
	}
	// The agent runs in the first zone, so it reads from there.
	var xz []string
	local := ""
	if o.ExpressZones > 0 {
		local = "a"
	}
	for i := range o.ExpressZones {
		name := string(rune('a' + i))
		xz = append(xz, name+"="+filepath.Join(dir, "express-"+name))
	}
	return agent.Config{
		ObjStoreExpress:         strings.Join(xz, ","),
		ObjStoreExpressZone:     local,
		Compaction:              o.ExpressZones > 0,
		DataDir:                 dir,
		KafkaListen:             "127.0.0.1:0",
		HTTPListen:              "127.0.0.1:0",
		ObjStoreLatency:         o.ObjStoreLatency,
		FlushInterval:           o.FlushInterval,
		FlushBytes:              o.FlushBytes,
		ObjStoreHedgePercentile: o.HedgePercentile,
		ObjStoreHedgeMaxRatio:   o.HedgeMaxRatio,
		MaxPutsPerSec:           o.MaxPutsPerSec,
		AutoCreateTopics:        true,
		FetchReadAheadBytes:     o.FetchReadAheadBytes,
		FetchMaxParallelGets:    o.FetchMaxParallelGets,
		SQLListen:               sqlListen,
		SQLViewStepSlots:        o.SQLViewStepSlots,
	}
}

// runKfake drives a kfake cluster of one broker, in a child process
// unless o.InProcess, with the same load.
func runKfake(ctx context.Context, o *Options, dir string, pw *progressWriter, epoch time.Time) (*PhaseResult, error) {
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.AllowAutoTopicCreation()}
	if !o.KfakeMemory && o.InProcess {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		opts = append(opts, kfake.DataDir(dir), kfake.SyncWrites())
	}
	if !o.InProcess {
		spec := specOf(o, "kfake", dir)
		if spec.CPUProfile != "" {
			spec.CPUProfile += ".kfake"
		}
		c, err := startChildServer(ctx, spec, pw.w)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := c.stop(30 * time.Second); err != nil {
				pw.note("stopping kfake's process: %v", err)
			}
		}()
		tgt := target{name: "kfake", brokers: []string{c.addrs.Kafka}, cpu: c.cpuSeconds, cpuScope: "kfake process (a child of the bench)"}
		return (&phase{opts: o, tgt: tgt, stderr: pw, epoch: epoch}).run(ctx)
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("bench: kfake: %w", err)
	}
	defer c.Close()
	ph := &phase{opts: o, tgt: target{name: "kfake", brokers: c.ListenAddrs()}, stderr: pw, epoch: epoch}
	return ph.run(ctx)
}

func ratios(s, k *PhaseResult) *Ratios {
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	r := &Ratios{
		Throughput: div(s.Produced.MBPerSec, k.Produced.MBPerSec),
		ProduceP50: div(s.ProduceLatency.P50Ms, k.ProduceLatency.P50Ms),
		ProduceP99: div(s.ProduceLatency.P99Ms, k.ProduceLatency.P99Ms),
		CPUPerGB:   div(s.CPUSecondsPerGB, k.CPUSecondsPerGB),
	}
	if s.E2ELatency != nil && k.E2ELatency != nil {
		r.E2EP50 = div(s.E2ELatency.P50Ms, k.E2ELatency.P50Ms)
		r.E2EP99 = div(s.E2ELatency.P99Ms, k.E2ELatency.P99Ms)
	}
	return r
}

// loadAverage reads the 1, 5 and 15 minute load averages where the
// system exposes them (Linux), nil elsewhere: on a shared machine the
// numbers mean little without it.
func loadAverage() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	var l1, l5, l15 float64
	if _, err := fmt.Sscanf(string(b), "%f %f %f", &l1, &l5, &l15); err != nil {
		return nil
	}
	return []float64{l1, l5, l15}
}

// expressHeldMinutes is how long the tier's zones hold a flush with the
// embedded agent's defaults: compaction moves it after ExpressMaxLag (at
// the next pass, an interval later at most), and the gc deletes the zone
// copies the delete delay after that (at its next step).
func expressHeldMinutes() float64 {
	held := compact.DefaultExpressMaxLag + compact.DefaultInterval + gc.DefaultDeleteDelay + gc.DefaultInterval
	return held.Minutes()
}
