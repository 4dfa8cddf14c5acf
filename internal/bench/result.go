package bench

import "github.com/strandkafka/strand/internal/cost"

// The result of a run: what Run returns and --json prints.

// Report is the result of a run; --json prints it as is.
type Report struct {
	Options   ReportOptions `json:"options"`
	CPUs      int           `json:"cpus"`
	LoadStart []float64     `json:"load_average_start,omitempty"`
	LoadEnd   []float64     `json:"load_average_end,omitempty"`
	// Strand is the run against --brokers or the embedded agent.
	Strand *PhaseResult `json:"strand"`
	// Kfake and Ratios are there with --compare-kfake.
	Kfake  *PhaseResult `json:"kfake,omitempty"`
	Ratios *Ratios      `json:"strand_over_kfake,omitempty"`
	// Disk is there with --disk-bandwidth.
	Disk *DiskResult `json:"disk,omitempty"`
	// Stress is there with --stress; Strand is then the loaded phase.
	Stress *StressResult `json:"stress,omitempty"`
	// Storage is there with --storage-every or --objstore.
	Storage *StorageResult `json:"storage,omitempty"`
	// ColdRead is there with --cold-read, and Strand is not.
	ColdRead *ColdReadResult `json:"cold_read,omitempty"`
	// Cost is there with --cost.
	Cost *CostResult `json:"cost,omitempty"`
	// Nexmark is there with --nexmark, and Strand is not.
	Nexmark *NexmarkResult `json:"nexmark,omitempty"`
}

// CostResult is the run priced, beside Kafka RF=3 for its workload.
type CostResult struct {
	Region                string        `json:"region"`
	Workload              cost.Workload `json:"workload"`
	Strand                cost.Report   `json:"strand"`
	Kafka                 cost.Report   `json:"kafka"`
	KafkaFollowerFetching cost.Report   `json:"kafka_follower_fetching"`
}

// ReportOptions echoes the options that shaped the numbers.
type ReportOptions struct {
	Target          string `json:"target"`
	ObjStoreLatency string `json:"objstore_latency,omitempty"`
	FlushInterval   string `json:"flush_interval,omitempty"`
	FlushBytes      int    `json:"flush_bytes,omitempty"`
	// HedgePercentile is 0 when hedging is off.
	HedgePercentile float64 `json:"objstore_hedge_percentile,omitempty"`
	HedgeMaxRatio   float64 `json:"objstore_hedge_max_ratio,omitempty"`
	MaxPutsPerSec   float64 `json:"max_puts_per_sec,omitempty"`
	ExpressZones    int     `json:"express_zones,omitempty"`
	Producers       int     `json:"producers"`
	Consumers       int     `json:"consumers"`
	RecordSize      int     `json:"record_size"`
	Partitions      int32   `json:"partitions"`
	Topic           string  `json:"topic"`
	Acks            string  `json:"acks"`
	Compression     string  `json:"compression"`
	Linger          string  `json:"linger"`
	Rate            float64 `json:"rate"`
	Duration        string  `json:"duration"`
	Warmup          string  `json:"warmup"`
	KfakeMode       string  `json:"kfake_mode,omitempty"`
}

// PhaseResult is one target's measurements over the measured window
// (after warm-up). MB is 10^6 bytes of record values.
type PhaseResult struct {
	Target         string      `json:"target"`
	Seconds        float64     `json:"seconds"`
	Produced       Throughput  `json:"produced"`
	Consumed       *Throughput `json:"consumed,omitempty"`
	ProduceLatency Latency     `json:"produce_latency"`
	E2ELatency     *Latency    `json:"e2e_latency,omitempty"`
	Agent          *AgentStats `json:"agent,omitempty"`
	CPUScope       string      `json:"-"`
	// ServerCPUSeconds is the server process's CPU (user plus system)
	// over the window, and CPUSecondsPerGB that per GB (10^9 bytes of
	// record values) produced plus consumed: 0 when the bench cannot see
	// the server's CPU alone (--embedded --in-process, or --brokers
	// without --http). ServerCPUFrom says where it was read.
	ServerCPUSeconds float64 `json:"server_cpu_seconds,omitempty"`
	CPUSecondsPerGB  float64 `json:"server_cpu_seconds_per_gb,omitempty"`
	ServerCPUFrom    string  `json:"server_cpu_from,omitempty"`
	FirstError       string  `json:"first_error,omitempty"`
	// Timeline has one point per second, warm-up included.
	Timeline []TimelinePoint `json:"timeline,omitempty"`
}

// Throughput counts records acknowledged (produced) or received
// (consumed) inside the window.
type Throughput struct {
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	Errors        int64   `json:"errors"`
}

// Latency is a histogram summary in milliseconds; percentiles are within
// MaxRelativeError of exact, max is exact.
type Latency struct {
	Count  uint64  `json:"count"`
	MinMs  float64 `json:"min_ms"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p99_9_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// AgentStats are deltas of the agent's /metrics over the window.
type AgentStats struct {
	Puts               float64 `json:"objstore_puts"`
	Gets               float64 `json:"objstore_gets"`
	PutsPerSec         float64 `json:"objstore_puts_per_sec"`
	GetsPerSec         float64 `json:"objstore_gets_per_sec"`
	PutsPerMB          float64 `json:"objstore_puts_per_mb_produced"`
	GetsPerMB          float64 `json:"objstore_gets_per_mb_consumed"`
	PutBytes           float64 `json:"objstore_put_bytes"`
	GetBytes           float64 `json:"objstore_get_bytes"`
	LogAppends         float64 `json:"log_appends"`
	LogAppendsPerSec   float64 `json:"log_appends_per_sec"`
	Flushes            float64 `json:"flushes"`
	FlushesPerSec      float64 `json:"flushes_per_sec"`
	LogAppendsPerFlush float64 `json:"log_appends_per_flush"`
	MeanFlushBytes     float64 `json:"mean_flush_bytes"`
	// Hedges counts uploads hedged, HedgesWon those the hedge won.
	Hedges    float64 `json:"objstore_hedges"`
	HedgesWon float64 `json:"objstore_hedges_won"`
	// ExpressPutsPerSec is the low-latency tier's writes a second by
	// zone bucket; ExpressThirds the flushes written to a third zone.
	ExpressPutsPerSec map[string]float64 `json:"express_puts_per_sec,omitempty"`
	ExpressThirds     float64            `json:"express_third_writes,omitempty"`
	// ExpressPuts and ExpressPutBytes sum the zones' writes over the
	// window: the cost report prices them as S3 Express, the rest of
	// Puts as S3 Standard.
	ExpressPuts     float64 `json:"express_puts,omitempty"`
	ExpressPutBytes float64 `json:"express_put_bytes,omitempty"`
	ProduceRequests float64 `json:"produce_requests"`
	// CPUCores is CPU seconds per wall second; CPUScope says whose (the
	// embedded agent shares its process with the load generator).
	CPUCores    float64 `json:"cpu_cores"`
	CPUScope    string  `json:"cpu_scope"`
	RSSBytes    float64 `json:"rss_bytes"`
	RSSMaxBytes float64 `json:"rss_max_bytes"`
	// RSSPeakBytes is the agent process's highest RSS since it started
	// (strand_process_resident_memory_peak_bytes), 0 if unknown.
	RSSPeakBytes float64 `json:"rss_peak_bytes,omitempty"`
}

// TimelinePoint is one second of a phase; latencies are of the records
// whose acknowledgement or receipt fell in that second.
type TimelinePoint struct {
	T               float64 `json:"t"`
	ProducedPerSec  float64 `json:"produced_per_sec"`
	ProducedMBps    float64 `json:"produced_mb_per_sec"`
	ConsumedPerSec  float64 `json:"consumed_per_sec"`
	ProduceP50Ms    float64 `json:"produce_p50_ms"`
	ProduceP99Ms    float64 `json:"produce_p99_ms"`
	ProduceMaxMs    float64 `json:"produce_max_ms"`
	E2EP50Ms        float64 `json:"e2e_p50_ms"`
	E2EP99Ms        float64 `json:"e2e_p99_ms"`
	ProduceLatCount uint64  `json:"-"`
	E2ELatCount     uint64  `json:"-"`
}

// Ratios are Strand's numbers divided by kfake's (throughput above 1 and
// latency below 1 mean Strand did better).
type Ratios struct {
	Throughput float64 `json:"throughput"`
	ProduceP50 float64 `json:"produce_p50"`
	ProduceP99 float64 `json:"produce_p99"`
	E2EP50     float64 `json:"e2e_p50,omitempty"`
	E2EP99     float64 `json:"e2e_p99,omitempty"`
	// CPUPerGB is 0 when either side's server CPU is unknown.
	CPUPerGB float64 `json:"cpu_seconds_per_gb,omitempty"`
}
