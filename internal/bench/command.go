package bench

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/cli"
	"github.com/strandkafka/strand/internal/produce"

	"github.com/strandkafka/strand/internal/cost"
)

// NewCommand returns `strand bench`.
func NewCommand() *cobra.Command {
	var (
		o           Options
		brokers     string
		security    cli.SecurityOptions
		printPrices bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Drive a cluster (or an embedded agent) with producers and consumers and report latency, throughput and cost",
		Long: `Drive a running cluster (--brokers, with --http for its /metrics) or an
agent started in this process (--embedded) with franz-go producers and
consumers, then report produce and end-to-end latency percentiles,
throughput, object store requests, shared-log appends per flush, and the
agent's CPU and RSS. A progress line goes to stderr once a second; the
report goes to stdout (--json for scripts).

Produce latency runs from the produce call to its promise; end-to-end
latency from the same call to a consumer receiving the record (each
value's first 8 bytes carry the send time). MB is 10^6 bytes of record
values. --embedded starts the agent in a child process of this binary
(--in-process: in this one), so its CPU is the agent's alone, read from
/proc; against --brokers it is the agent's process_cpu_seconds_total at
--http. The report gives the server's CPU-seconds per GB moved (10^9
bytes of record values produced plus consumed).

--compare-kfake then drives franz-go's kfake (one broker, in a child
process too, on disk with an fsync per batch unless --kfake-memory) with
the same load and prints the ratios, CPU per GB included;
--disk-bandwidth measures fsync'd sequential writes in the data
directory and prints ingest as a fraction of it.

--nexmark instead creates the topics person, auction and bid, their JSON
sources and the Nexmark queries as materialized views nexmark_q0... (a
view of that name is dropped first) over the agent's SQL endpoint
(--sql; started with --embedded), produces seeded Nexmark events at
--rate, and reports each view's events/s and per agent core, and the
freshness of a marker bid from its produce call to a pull query seeing
it (p50/p99); --nexmark-replay adds each query alone over the topics.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if printPrices {
				_, err := cmd.OutOrStdout().Write(cost.DefaultPricesYAML())
				return err
			}
			if f := cmd.Flags().Lookup("fetch-read-ahead-bytes"); f.Changed && o.FetchReadAheadBytes == 0 {
				o.FetchReadAheadBytes = agent.ReadAheadOff // the flag's 0, as serve's
			}
			if f := cmd.Flags().Lookup("linger"); !f.Changed && o.Embedded {
				// The budget the embedded agent will have, its default
				// (on a remote store) included.
				cfg := embeddedConfig(&o, "")
				cfg.SetDefaults()
				if cfg.MaxPutsPerSec > 0 {
					puts := cfg.MaxPutsPerSec
					if o.ExpressZones > 0 {
						// The budget is each zone's, and a flush takes
						// two PUTs: the flushes come zones/2 times as
						// often as the budget.
						puts *= float64(o.ExpressZones) / 2
					}
					o.Linger = produce.PacedLinger(puts)
				}
			}
			if f := cmd.Flags().Lookup("objstore-hedge-percentile"); f.Changed && o.HedgePercentile == 0 {
				o.HedgePercentile = agent.HedgeOff
			}
			for s := range strings.SplitSeq(brokers, ",") {
				if s = strings.TrimSpace(s); s != "" {
					o.Brokers = append(o.Brokers, s)
				}
			}
			opts, err := security.Opts()
			if err != nil {
				return err
			}
			o.ClientOpts = opts
			_, err = Run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.Nexmark, "nexmark", false, "instead of the producer/consumer load: create topics person, auction and bid, their sources and the Nexmark queries as materialized views over --sql, produce generated events at --rate (default "+fmt.Sprint(DefaultNexmarkRate)+" events/s) for --duration with freshness markers, and report each view's events/s, events/s per agent core and produce-to-visible freshness")
	f.StringVar(&o.NexmarkQueries, "nexmark-queries", "", "--nexmark: the queries, comma separated (default all, q0-q8; those the view compiler refuses are reported and skipped)")
	f.BoolVar(&o.NexmarkReplay, "nexmark-replay", false, "--nexmark: after the load, create each query again alone and time it over every event the topics hold: events per CPU second for that query by itself")
	f.StringVar(&o.NexmarkProportions, "nexmark-proportions", "", "--nexmark: the generator's people, auctions and bids in every group of their sum, \"p,a,b\" (default the reference's 1,3,46; e.g. 10,30,10 gives q3's and q8's replays enough people and auctions to time)")
	f.StringVar(&o.NexmarkProfile, "nexmark-profile", "", "--nexmark --embedded --nexmark-replay: a directory to write each replay's CPU profile to (replay-<query>.pprof, for go tool pprof)")
	f.StringVar(&o.SQL, "sql", DefaultSQLAddr, "--nexmark: the agent's SQL endpoint, an address or a postgres:// URL (known with --embedded)")
	f.StringVar(&brokers, "brokers", "", "seed brokers of a running cluster, comma separated")
	security.Register(f)
	f.BoolVar(&o.Embedded, "embedded", false, "start an agent in this process, in --data-dir or a temporary directory")
	f.StringVar(&o.HTTP, "http", "", "the agent's HTTP address, for /metrics (known with --embedded)")
	f.StringVar(&o.DataDir, "data-dir", "", "directory for the embedded agent, kfake and the disk test (default: a temporary directory, removed afterwards)")
	f.BoolVar(&o.KeepData, "keep-data", false, "keep the temporary data directory")
	f.StringVar(&o.ObjStoreLatency, "objstore-latency", "", "embedded agent: simulated object store latency: none, s3-express or s3-standard")
	f.DurationVar(&o.FlushInterval, "flush-interval", 0, "embedded agent: flush interval (default "+agent.DefaultFlushInterval.String()+")")
	f.IntVar(&o.FlushBytes, "flush-bytes", 0, "embedded agent: flush size in bytes (default 4 MiB)")
	f.Float64Var(&o.HedgePercentile, "objstore-hedge-percentile", 0, fmt.Sprintf("embedded agent: hedge an upload still running at this percentile of recent upload times (default %g; 0: no hedging)", agent.DefaultObjStoreHedgePercentile))
	f.Float64Var(&o.HedgeMaxRatio, "objstore-hedge-max-ratio", 0, fmt.Sprintf("embedded agent: hedges at most this fraction of uploads (default %g)", agent.DefaultObjStoreHedgeMaxRatio))
	f.IntVar(&o.ExpressZones, "express-zones", 0, "embedded agent: write each flush to two of this many (2 or 3) zone buckets of the low-latency tier (serve's --objstore-express), local directories with the --objstore-latency profile each; --max-puts-per-sec then counts each bucket's PUTs")
	f.Float64Var(&o.MaxPutsPerSec, "max-puts-per-sec", agent.PutBudgetAuto, "embedded agent: budget of data object PUTs a second, hedges included (0: none; default: serve's, 4 with --objstore-latency)")
	f.BoolVar(&printPrices, "cost-print-prices", false, "print the shipped price table (YAML, us-east-1 list prices) to edit for --cost-prices, and exit")
	f.BoolVar(&o.Cost, "cost", false, "price the run: $ per GB ingested from the agent's counters, beside Kafka RF=3 for the same workload")
	f.StringVar(&o.CostPrices, "cost-prices", "", "with --cost: a price table (YAML; default: list prices, printed by --cost-print-prices)")
	f.Float64Var(&o.CostWorkload.FanOut, "cost-fan-out", 3, "with --cost: consumer groups reading every byte")
	f.Float64Var(&o.CostWorkload.RetentionDays, "cost-retention-days", 7, "with --cost: days data is kept")
	f.IntVar(&o.CostWorkload.Zones, "cost-zones", 3, "with --cost: availability zones")
	f.IntVar(&o.Producers, "producers", DefaultProducers, "producer clients")
	f.IntVar(&o.Consumers, "consumers", DefaultConsumers, "consumer clients, each reading its share of the partitions from their end at start")
	f.IntVar(&o.RecordSize, "record-size", DefaultRecordSize, "bytes per record value (at least 8: the send stamp)")
	f.Int32Var(&o.Partitions, "partitions", DefaultPartitions, "partitions of the topic if it is created")
	f.StringVar(&o.Topic, "topic", DefaultTopic, "topic, created if missing")
	f.StringVar(&o.Acks, "acks", DefaultAcks, "acks: all, 1 or 0 (anything but all disables idempotence)")
	f.StringVar(&o.Compression, "compression", DefaultCompression, "batch compression: none, gzip, snappy, lz4, zstd")
	f.DurationVar(&o.Linger, "linger", DefaultLinger, "producer linger (with --max-puts-per-sec: a fifth of the flush spacing unless given)")
	f.Float64Var(&o.Rate, "rate", 0, "target records per second over all producers (0: unlimited)")
	f.DurationVar(&o.Duration, "duration", DefaultDuration, "measured time")
	f.DurationVar(&o.Warmup, "warmup", DefaultWarmup, "load before measuring starts")
	f.BoolVar(&o.JSON, "json", false, "print the report as JSON")
	f.StringVar(&o.Plot, "plot", "", "write latency over time to this SVG file")
	f.BoolVar(&o.CompareKfake, "compare-kfake", false, "also drive a kfake broker (in a process of its own) with the same load and print the ratios, server CPU per GB moved included")
	f.BoolVar(&o.InProcess, "in-process", false, "run the --embedded agent and kfake in this process instead of child processes (their CPU then includes the load generator's)")
	f.StringVar(&o.ServerCPUProfile, "server-cpu-profile", "", "write the CPU profile of the --embedded agent's process to this file (kfake's to it plus .kfake), for go tool pprof")
	f.BoolVar(&o.KfakeMemory, "kfake-memory", false, "run kfake in memory instead of on disk with an fsync per batch")
	f.BoolVar(&o.DiskBandwidth, "disk-bandwidth", false, "measure fsync'd sequential write bandwidth and print ingest as a fraction of it")
	f.Int64Var(&o.DiskBytes, "disk-bytes", DefaultDiskBytes, "bytes written by --disk-bandwidth")
	f.IntVar(&o.DiskChunkBytes, "disk-chunk-bytes", DefaultDiskChunkBytes, "bytes per fsync'd write of --disk-bandwidth")
	f.StringVar(&o.Stress, "stress", "", "measure the producer alone, then beside a load that tries to exhaust the agent's memory: "+StressMetadataFlood+" or "+StressCatchUp+" (give --http for the agent's peak RSS)")
	f.IntVar(&o.StressConns, "stress-conns", DefaultStressConns, StressMetadataFlood+": connections asking for the metadata of every topic in a loop")
	f.IntVar(&o.StressTopics, "stress-topics", DefaultStressTopics, StressMetadataFlood+": topics to create")
	f.Int32Var(&o.StressPartitions, "stress-partitions", DefaultStressPartitions, StressMetadataFlood+": partitions of each topic")
	f.IntVar(&o.StressConsumers, "stress-consumers", DefaultStressConsumers, StressCatchUp+": consumers reading the backlog from the start, again and again")
	f.Int32Var(&o.StressFetchPartitionBytes, "stress-fetch-partition-bytes", DefaultStressFetchPartitionBytes, StressCatchUp+": the consumers' per-partition fetch size")
	f.Int64Var(&o.StressBacklogBytes, "stress-backlog-bytes", DefaultStressBacklogBytes, StressCatchUp+": bytes produced before the consumers start")
	f.BoolVar(&o.ColdRead, "cold-read", false, "instead of a producer run: fill every partition through an embedded agent (without --objstore-latency), restart it with an empty read cache, and time a consumer reading partition 0 from the start (MB/s, object store GETs per MB)")
	f.Int64Var(&o.ColdReadBytes, "cold-read-bytes", DefaultColdReadBytes, "--cold-read: bytes of record values each partition is filled with")
	f.Int32Var(&o.ColdReadFetchBytes, "cold-read-fetch-bytes", DefaultColdReadFetchBytes, "--cold-read: the consumer's per-partition fetch size")
	readAhead := agent.BytesFlag(&o.FetchReadAheadBytes)
	f.Var(readAhead, "fetch-read-ahead-bytes", "embedded agent: its --fetch-read-ahead-bytes (0: no read-ahead; default the agent's, "+agent.FormatBytes(agent.DefaultFetchReadAheadBytes)+")")
	f.IntVar(&o.SQLViewStepSlots, "sql-view-step-slots", 0, "embedded agent: its --sql-view-step-slots (0: no bound, the agent's default; negative: GOMAXPROCS-1), to compare pull-query latency and freshness with and without the views' step gate")
	f.IntVar(&o.FetchMaxParallelGets, "fetch-max-parallel-gets", 0, "embedded agent: its --fetch-max-parallel-gets (default the agent's, "+fmt.Sprint(agent.DefaultFetchMaxParallelGets)+")")
	f.StringVar(&o.ValueFormat, "value-format", FormatRaw, "record values: "+FormatRaw+" (the send stamp and filler) or "+FormatAvro+" (an Avro record in the schema registry's wire format, its schema registered under <topic>-value at --schema-registry)")
	f.StringVar(&o.SchemaRegistry, "schema-registry", DefaultSchemaRegistry, "--value-format avro: the schema registry's URL")
	f.StringArrayVar(&o.TopicConfigs, "topic-config", nil, "topic config key=value the topic is created with, or altered to if it exists (repeatable), e.g. retention.ms=60000")
	f.StringVar(&o.ObjStore, "objstore", "", "object store URL (or directory) to list while the load runs, printing stored bytes beside the agent's DELETE and LIST rate and CPU (with --embedded: the agent's store)")
	f.DurationVar(&o.StorageEvery, "storage-every", 0, "how often to list the object store (default 10s with --objstore; 0 without it: no listing)")
	return cmd
}
