package agent

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/cleaner"
	"github.com/strandkafka/strand/internal/clientmetrics"
	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/compact"
	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/gc"
	"github.com/strandkafka/strand/internal/kafka"
	"github.com/strandkafka/strand/internal/loglevel"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/objurl"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/share"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
)

// Config is everything one agent needs to run. Zero values mean the
// embedded defaults; call SetDefaults then Validate before Run.
type Config struct {
	// DataDir holds the local metadata database and, by default, the file
	// object store and the file log.
	DataDir string
	// KafkaListen is the address Kafka clients connect to; Advertise is
	// the host:port returned to them in Metadata (empty: the address the
	// Kafka listener actually bound, so port 0 works in tests).
	KafkaListen string
	Advertise   string
	// Listeners is Kafka's listeners, "NAME://host:port,..." (an empty
	// host binds every interface), in place of KafkaListen; a name is
	// its security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
	// unless ListenerSecurityProtocolMap, Kafka's
	// listener.security.protocol.map ("NAME:PROTOCOL,..."), maps it.
	// AdvertisedListeners is advertised.listeners, in place of
	// Advertise: the address each listener is given to clients at
	// (default: the one it bound). Clients are answered with the
	// addresses of the listener they connected on (listeners.go).
	Listeners                   string
	AdvertisedListeners         string
	ListenerSecurityProtocolMap string
	// Rack is Kafka's broker.rack: the zone this agent runs in, carried
	// in its heartbeat, shown by Metadata and DescribeCluster, and
	// what clients of the same zone are steered to (kafka/zones.go).
	// ListenerRacks, "NAME:zone,...", makes listeners per-zone: every
	// client of a named listener is taken to be in that zone.
	Rack          string
	ListenerRacks string
	// TLS listeners serve TLSCertFile and TLSKeyFile (PEM, reloaded
	// when they change) and, per TLSClientAuth (Kafka's
	// ssl.client.auth: none, requested, required), verify client
	// certificates against TLSClientCAFile; on an SSL listener a
	// client certificate's subject is the principal.
	TLSCertFile     string
	TLSKeyFile      string
	TLSClientCAFile string
	TLSClientAuth   string
	// HTTPListen serves /healthz, /readyz and /metrics. Empty disables it.
	HTTPListen string
	// HTTPTLS serves HTTP over TLS with TLSCertFile and TLSKeyFile,
	// asking for client certificates that chain to TLSClientCAFile;
	// such a certificate is the principal the Kafka SSL listener gives
	// it, and may do on the HTTP port what that principal may do over
	// Kafka (admin_auth.go).
	HTTPTLS bool
	// AdminToken, or the contents of AdminTokenFile (read at each call,
	// so it can be rotated), is the bearer token that makes an HTTP
	// caller a super user (admin_auth.go). With neither, and no HTTP
	// client certificates, a loopback-only HTTPListen takes calls
	// addressed to localhost, a loopback address or one of
	// HTTPAllowedHosts (comma-separated host names) as a super user's,
	// and any other HTTPListen takes none.
	AdminToken       string
	AdminTokenFile   string
	HTTPAllowedHosts string
	// NoConsole turns the web console (console.go) off.
	NoConsole bool
	// SchemaRegistryListen serves the schema registry, Confluent's REST
	// API, at this address (registry.go); empty, the zero value, is
	// off. `strand serve` defaults it to DefaultSchemaRegistryListen.
	SchemaRegistryListen string
	// ConnectListen serves Kafka Connect's REST API at this address
	// (connect.go); empty, the zero value, is off (the connectors run
	// all the same). `strand serve` defaults it to DefaultConnectListen.
	ConnectListen string
	// SQLListen serves PostgreSQL's wire protocol (sql.go); empty: off.
	// SQLTLS serves it TLS on TLSCertFile and TLSKeyFile.
	SQLListen string
	SQLTLS    bool
	// SQLViewSnapshotInterval is how often the agent snapshots the
	// materialized views it owns to the object store (sql_viewsnap.go);
	// SQLViewSnapshotBytes takes one sooner once a view's state wrote
	// that many bytes. Zero: viewsnap's defaults (5 min, 256 MiB);
	// a negative interval takes none (restores still happen).
	SQLViewSnapshotInterval time.Duration
	SQLViewSnapshotBytes    int64
	// SQLViewStepSlots bounds the views' epochs running at once
	// (views.Config.StepSlots: 0, no bound; negative, GOMAXPROCS-1).
	SQLViewStepSlots int
	// SASL listeners (SASL_PLAINTEXT, SASL_SSL), Kafka's broker configs
	// of the same names: SASLEnabledMechanisms is
	// sasl.enabled.mechanisms ("PLAIN,SCRAM-SHA-512"; empty: all three);
	// ConnectionsMaxReauth is connections.max.reauth.ms (KIP-368; zero:
	// sessions do not expire); ConnectionFailedAuthenticationDelay is
	// connection.failed.authentication.delay.ms (zero: the kafka
	// package's default; negative: none). SASLBootstrapUser is created
	// at startup with SASLBootstrapPassword (from
	// STRAND_SASL_BOOTSTRAP_PASSWORD) or the first line of
	// SASLBootstrapPasswordFile unless it has credentials (sasl.go).
	SASLEnabledMechanisms               string
	ConnectionsMaxReauth                time.Duration
	ConnectionFailedAuthenticationDelay time.Duration
	SASLBootstrapUser                   string
	SASLBootstrapPassword               string
	SASLBootstrapPasswordFile           string
	// ObjStore and Log are URLs; see objurl.Open and logurl.
	ObjStore string
	Log      string
	// LogPasswordFile holds the password of a postgres:// Log, read at
	// start, so it need not sit in the URL (where every log line and
	// ps would show it). The log chain never stores a password
	// (logurl/secrets.go); without this file or one in the URL, pgx
	// reads PGPASSWORD or a password file.
	LogPasswordFile string
	// ObjStoreLatency adds a simulated request latency in front of the
	// object store, so the S3 latency floor can be studied on one machine:
	// "" or "none" adds nothing, "s3-express" and "s3-standard" draw from
	// objstore.S3Express and objstore.S3Standard.
	ObjStoreLatency string
	// ObjStoreExpress turns on the low-latency tier (package express):
	// "name=URL,name=URL[,name=URL]", S3 Express One Zone directory
	// buckets (or any store URL) in two or three zones, in the same
	// order on every agent. Each flush is acknowledged once two zones
	// hold it; compaction moves it into ObjStore within minutes and the
	// gc deletes the zone copies. Needs Compaction. ObjStoreExpressZone
	// names the zone this agent runs in, read first ("": none).
	ObjStoreExpress     string
	ObjStoreExpressZone string
	// FlushInterval bounds how long a produced batch waits to be flushed;
	// FlushBytes cuts a flush early when this much is buffered.
	FlushInterval time.Duration
	FlushBytes    int
	// ObjStoreHedgePercentile, ObjStoreHedgeMaxRatio and
	// ObjStoreHedgeMinDelay hedge data object uploads: one still running
	// at that percentile of the agent's recent upload times (no sooner
	// than the min delay) gets a second attempt under a new key, at most
	// max-ratio of uploads (produce/hedge.go). 0 means the defaults;
	// HedgeOff (any negative percentile) turns hedging off.
	ObjStoreHedgePercentile float64
	ObjStoreHedgeMaxRatio   float64
	ObjStoreHedgeMinDelay   time.Duration
	// MaxPutsPerSec is the operator's budget of data object PUTs a
	// second, hedges included: flushes are paced to it, so objects grow
	// with ingest instead of the request rate (0: no budget;
	// PutBudgetAuto: DefaultRemotePutsPerSec on a remote store, none on
	// a local one). A paced flush also goes once it holds
	// PacedObjectBytes (0: DefaultPacedObjectBytes): an object every
	// 1/MaxPutsPerSec or per PacedObjectBytes, whichever comes first.
	MaxPutsPerSec    float64
	PacedObjectBytes int
	// AutoCreateTopics creates an unknown topic on Metadata or Produce,
	// with DefaultPartitions partitions.
	AutoCreateTopics  bool
	DefaultPartitions int32
	// TransactionVersion is the transaction.version feature level
	// clients are told (1 or 2; 0 means 2): 2 lets them use KIP-890 part
	// 2, which bumps the producer epoch with every transaction. It is the
	// level a new cluster starts at, finalized in the shared log, and
	// what the agent reports on a log of builds before feature levels;
	// once the log holds a level, UpdateFeatures (strand features)
	// changes it and this setting no longer matters.
	TransactionVersion int16
	// Group coordinator settings, Kafka's broker configs of the same
	// names; zero means the group package's default (Kafka's).
	//   GroupInitialRebalanceDelay: group.initial.rebalance.delay.ms
	//   (negative: none); GroupMin/MaxSessionTimeout:
	//   group.min/max.session.timeout.ms; GroupMaxSize: group.max.size;
	//   OffsetsRetention: offsets.retention.minutes;
	//   ConsumerGroupSessionTimeout/HeartbeatInterval:
	//   group.consumer.session.timeout.ms / heartbeat.interval.ms (KIP-848).
	GroupInitialRebalanceDelay     time.Duration
	GroupMinSessionTimeout         time.Duration
	GroupMaxSessionTimeout         time.Duration
	GroupMaxSize                   int
	OffsetsRetention               time.Duration
	ConsumerGroupSessionTimeout    time.Duration
	ConsumerGroupHeartbeatInterval time.Duration
	// Kafka connection limits, the broker configs of the same names;
	// zero means the kafka package's default.
	//   MaxConnections: max.connections; MaxConnectionsPerIP:
	//   max.connections.per.ip (kafka.NoConnsPerIP admits only the
	//   overrides); MaxConnectionsPerIPOverrides:
	//   max.connections.per.ip.overrides, "addr:n,addr:n" (IP addresses,
	//   not host names); ConnectionsMaxIdle: connections.max.idle.ms
	//   (negative: never).
	MaxConnections               int
	MaxConnectionsPerIP          int
	MaxConnectionsPerIPOverrides string
	ConnectionsMaxIdle           time.Duration
	// MaxIncrementalFetchSessionCacheSlots bounds the fetch sessions
	// (KIP-227) the agent keeps, Kafka's
	// max.incremental.fetch.session.cache.slots; zero means
	// kafka.DefaultFetchSessionSlots, kafka.NoFetchSessions none.
	MaxIncrementalFetchSessionCacheSlots int
	// ACLs. Authorizer is authorizer.class.name: "" (the default) checks
	// nothing, every client may do everything, as before ACLs existed;
	// "standard" checks every request against the ACLs in the log with
	// the semantics of Kafka's StandardAuthorizer (its class names are
	// accepted too). SuperUsers is super.users, "User:admin;User:bob";
	// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found.
	Authorizer                string
	SuperUsers                string
	AllowEveryoneIfNoACLFound bool
	// Client quota measurement, Kafka's quota.window.num (samples) and
	// quota.window.size.seconds; zero means Kafka's 11 and 1.
	QuotaWindowNum         int
	QuotaWindowSizeSeconds int
	// NodeID is this agent's Kafka broker id.
	NodeID int32
	// ShutdownTimeout bounds the graceful part of a shutdown: flushing
	// buffered batches and finishing in-flight commits.
	ShutdownTimeout time.Duration
	// SnapshotInterval is how often the agent uploads a snapshot of its
	// metadata copy to the object store, under SnapshotPrefix ("meta/"),
	// and trims the log below it. 0 means DefaultSnapshotInterval;
	// SnapshotsOff (any negative value) takes none on its own, though
	// POST /v1/snapshot still does. An agent started on an empty data dir
	// restores the newest snapshot found there.
	SnapshotInterval time.Duration
	// SnapshotKeep is how many of the newest snapshots stay in the
	// object store; after each snapshot this agent takes, older
	// manifests are deleted, then the files none of the kept ones (or a
	// snapshot in progress) names. Zero means DefaultSnapshotKeep.
	SnapshotKeep int
	// MemoryBudget is the memory the agent's caches and buffers are
	// sized from (memory.go); zero means DefaultMemoryBudget.
	MemoryBudget int64
	// MetricsMaxGroupPartitions bounds the per-partition consumer group
	// series (lag, committed offset) one scrape of /metrics reports:
	// groups past it are left out whole, and counted in
	// strand_consumer_group_partitions_omitted. Zero means
	// DefaultMetricsMaxGroupPartitions; negative, none.
	MetricsMaxGroupPartitions int
	// ClientTelemetryMetrics are the metric name prefixes Kafka clients
	// are asked to push (KIP-714), comma-separated, as Kafka's
	// client-metrics "metrics" config: "*" all, "none" none (clients
	// push nothing). Empty means DefaultClientTelemetryMetrics. The
	// pushed metrics are re-exported on /metrics (package clientmetrics).
	ClientTelemetryMetrics string
	// ClientTelemetryPushInterval is the interval clients are asked to
	// push at; zero means clientmetrics.DefaultPushInterval.
	ClientTelemetryPushInterval time.Duration
	// ClientTelemetryMaxClients and ClientTelemetryMaxSeries bound the
	// clients tracked and the series re-exported (the least recently
	// heard from client evicted first); zero means clientmetrics'
	// defaults.
	ClientTelemetryMaxClients int
	ClientTelemetryMaxSeries  int
	// MaxPartitionsPerTopic and MaxPartitions bound the partitions of one
	// topic and of the cluster that Kafka requests may create (KIP-578's
	// max.partitions); zero means the kafka package's defaults.
	MaxPartitionsPerTopic int32
	MaxPartitions         int64
	// MaxFetchBytesPerSec paces the record bytes this agent's Fetch
	// answers carry, all clients together; zero means no fixed cap
	// (the adaptive pace of kafka/fetch_yield.go still applies).
	MaxFetchBytesPerSec int64
	// NoProduceYieldToTail turns off Produce's yielding to tail
	// consumers that fall behind while the agent is short of CPU
	// (kafka/fetch_tail.go).
	NoProduceYieldToTail bool
	// FetchReadAheadBytes is how far ahead of a consumer catching up on
	// a partition (reading what the read cache does not hold) the agent
	// reads it, with at most FetchMaxParallelGets GETs in flight at once
	// over all partitions (fetch.ReadAhead). Zero means the defaults;
	// ReadAheadOff (any negative FetchReadAheadBytes) turns read-ahead
	// off. Its bytes in flight count against the read cache's share of
	// MemoryBudget and are at most a quarter of it.
	FetchReadAheadBytes  int64
	FetchMaxParallelGets int
	// Lease is how long this agent stays in the other agents' Metadata
	// after its last renewal; it renews every Lease/3 through the log.
	// A killed agent drops out within about Lease. NodeID must be unique
	// among the agents of one log: two agents with one node id take it
	// from each other at every renewal and log an error. Zero means
	// DefaultLease, or DefaultBilledLogLease on a log whose service
	// bills every request (logurl.BilledPerRequest).
	Lease time.Duration
	// CostPrices is --cost-prices: the price table GET /v1/cost uses
	// (package cost; "" is the shipped list prices).
	CostPrices string
	// MaxClockSkew is --max-clock-skew: how far this agent's clock may
	// be from the log clock before it stops deciding by time and goes
	// unready (clockskew.go). 0 means DefaultMaxClockSkew.
	MaxClockSkew time.Duration
	// Retention defaults and pace, Kafka's broker configs of the same
	// names: LogRetentionMs is log.retention.ms and LogRetentionBytes
	// log.retention.bytes, what a topic that sets no retention.ms or
	// retention.bytes keeps (-1: no limit; 0 means the default, 7 days
	// and no limit); LogRetentionCheckInterval is
	// log.retention.check.interval.ms, how often the agent proposes
	// retention for the partitions it owns (0: the default).
	LogRetentionMs            int64
	LogRetentionBytes         int64
	LogRetentionCheckInterval time.Duration
	// GCGrace is --gc-grace: how long after a data object's last index
	// entry goes (by the log clock) it is deleted, and how old an object
	// the database does not know must be (by the time in its key) to be
	// deleted as an orphan. 0 means gc.DefaultGrace; see
	// meta.DefaultGCGrace for why. At least meta.MinGCGraceMs. From
	// metadata level 5 it is a cluster-wide config in the log
	// (meta.GCGraceConfig), which the flag sets only where the log has
	// none (clusterflags.go).
	GCGrace time.Duration
	// GCDeleteDelay is --gc-delete-delay: from metadata level 5, how
	// long after a data object's last index entry goes (by the log
	// clock, and once every live agent applied that) it is deleted;
	// Kafka's log.segment.delete.delay.ms. 0 means
	// meta.DefaultDeleteDelayMs; see meta.DeleteDelayConfig for why it
	// may be shorter than the grace. At least meta.MinDeleteDelayMs. A
	// cluster-wide config in the log, which the flag sets only where the
	// log has none (clusterflags.go).
	GCDeleteDelay time.Duration
	// Key compaction of compacted topics (package cleaner), Kafka's
	// broker configs of the same names: LogCleanerDedupeBufferSize is
	// log.cleaner.dedupe.buffer.size, the memory of one round's offset
	// map; LogCleanerBackoff is log.cleaner.backoff.ms, the pause between
	// passes. 0 means the default.
	LogCleanerDedupeBufferSize int64
	LogCleanerBackoff          time.Duration
	// Compaction turns object compaction on (--compaction-enable;
	// Config's zero is off; the flag's default is RemoteObjStore): this agent merges
	// the level-0 entries of the partitions it owns into per-partition
	// objects (package compact). CompactionTargetBytes is an object's
	// batch bytes (0: compact.DefaultTargetBytes),
	// CompactionMaxBytesPerSec caps the pace of its reads (0: no cap;
	// each pass spreads what is due over its interval either way),
	// CompactionMinAge and CompactionMaxLag bound when a run is taken
	// (0: the package's defaults).
	Compaction               bool
	CompactionTargetBytes    int64
	CompactionMaxBytesPerSec int64
	CompactionMinAge         time.Duration
	CompactionMaxLag         time.Duration

	// MessageMaxBytes is message.max.bytes, the default of a topic's
	// max.message.bytes: the largest record batch a producer may send
	// (0: Kafka's default, DefaultMessageMaxBytes). It can also be
	// changed at runtime as a dynamic broker config.
	MessageMaxBytes int32

	// LogLevels are the live levels of the logger Run is given, when its
	// handler is LogLevels.Handler: the BROKER_LOGGER configs show and
	// change them. Nil: the agent has no broker loggers.
	LogLevels *loglevel.Levels
	// ShareConfigs gives share groups their configuration (package
	// share); nil reads the GROUP config resources in the metadata
	// (share.MetaConfigs). Not a flag: tests set it.
	ShareConfigs share.Configs

	// testing holds this package's test seams (failstop.go).
	testing testSeams
}

// Bounds on Config.Lease: a renewal every Lease/3 must not flood the log,
// and a dead agent must drop out in a time an operator can wait for.
const (
	minLease = 300 * time.Millisecond
	maxLease = time.Hour
)

// RemoteObjStore says whether the object store is remote: S3, or a
// latency profile that models it. Uploads are hedged by default only
// there, since only there do upload times have a long tail of their own
// (a local directory's is its disk's, which a second write only adds
// to), and objects are compacted by default only there: compaction
// saves a remote store's requests and round trips, while on a local
// disk its large writes and fsyncs delay the produce path's (produce
// p99 at 20 MB/s 14 ms without it, 60 ms with it, 2-core machine).
func (c *Config) RemoteObjStore() bool {
	if c.ObjStoreLatency != "" && c.ObjStoreLatency != "none" || c.ObjStoreExpress != "" {
		return true
	}
	u, err := objurl.Parse(c.ObjStore)
	return err == nil && u.Kind == objurl.KindS3
}

// HedgeOff is the Config.ObjStoreHedgePercentile that turns hedged
// uploads off.
const HedgeOff = -1.0

// The PUT budget's defaults. On a remote store requests are billed
// ($0.005 per 1,000 PUTs on S3 Standard): unpaced, an agent cuts an
// object per upload round trip, 46-62 a second (600-800 dollars an
// agent-month); paced, about 4 at low ingest and one per 5 MiB at high
// ingest. The latency it costs is in docs/performance.md's table (s3-standard,
// simulated and measured: produce p99 under 500 ms at 10 and 50 MB/s).
// 5 MiB and not 8: at 50 MB/s an 8 MiB object spends 100 ms more
// streaming, and produce p99 measured 488-543 ms against 402-418 ms
// (at 9 PUT/s instead of 6, $0.0003 more per GB).
const (
	// PutBudgetAuto is --max-puts-per-sec's default: the budget is
	// DefaultRemotePutsPerSec on a remote store, none on a local one.
	PutBudgetAuto           = -1.0
	DefaultRemotePutsPerSec = 4.0
	DefaultPacedObjectBytes = 5 << 20
)

// Hedged upload defaults: produce/hedge.go says why.
const (
	DefaultObjStoreHedgePercentile = produce.DefaultHedgePercentile
	DefaultObjStoreHedgeMaxRatio   = produce.DefaultHedgeMaxRatio
	DefaultObjStoreHedgeMinDelay   = produce.DefaultHedgeMinDelay
)

// ReadAheadOff is the Config.FetchReadAheadBytes that turns read-ahead
// off.
const ReadAheadOff int64 = -1

// Read-ahead defaults. A level-0 object holds a few tens of KiB of one
// partition, so a consumer catching up on it needs that many bytes per
// GET: at S3 Standard's ~30 ms mean GET, 64 at once read about 30 MB/s
// of it (`strand bench --cold-read`, 2-core machine: 32 GETs 10.6 MB/s,
// 64 26 MB/s, 256 62 MB/s). Their memory is bounded by bytes, not by
// this count. 32 MiB ahead covers the GETs of a few round trips: over
// compacted (per-partition) objects at S3 Standard's latency it read 105
// MB/s where 16 MiB read 67 (`strand bench --cold-read`, 8 x 64 MiB,
// 2-core machine).
const (
	DefaultFetchReadAheadBytes  int64 = 32 << 20
	DefaultFetchMaxParallelGets       = 64
	maxFetchReadAheadBytes      int64 = 1 << 30
	// MaxFetchMaxParallelGets bounds FetchMaxParallelGets.
	MaxFetchMaxParallelGets = 1024
)

// SnapshotsOff is the Config.SnapshotInterval that turns periodic
// snapshots off.
const SnapshotsOff time.Duration = -1

// Defaults for the embedded single-machine setup.
const (
	DefaultDataDir                = "./strand-data"
	DefaultKafkaListen            = "127.0.0.1:9092"
	DefaultHTTPListen             = "127.0.0.1:9644"
	DefaultFlushInterval          = 5 * time.Millisecond
	DefaultFlushBytes             = 4 << 20
	DefaultPartitions       int32 = 1
	DefaultShutdownTimeout        = 30 * time.Second
	DefaultSnapshotInterval       = 10 * time.Minute
	DefaultSnapshotKeep           = 3
	DefaultLease                  = 10 * time.Second
	// DefaultBilledLogLease is the lease on an s3 or dynamodb log: a
	// renewal every 12s, the idle log's poll period, which it replaces
	// (an append tells the tail as a probe does), so an idle agent
	// sends 5 renewals and at most one trim point read a minute. A
	// killed agent drops out within 36s instead of 10s.
	DefaultBilledLogLease = 36 * time.Second
	// DefaultLogRetentionMs is Kafka's log.retention.hours of 168.
	DefaultLogRetentionMs int64 = 7 * 24 * 60 * 60 * 1000
	// DefaultMessageMaxBytes is Kafka's message.max.bytes: 1 MiB and a
	// record batch header.
	DefaultMessageMaxBytes int32 = 1048588
	// DefaultLogRetentionCheckInterval is Kafka's, 5 minutes. A check
	// reads only the local copy (a seek per owned partition) and
	// proposes only what is due, so a shorter one would be cheap; but
	// data is kept up to one interval past retention.ms either way,
	// which costs only storage, and Kafka users size their buckets for
	// Kafka's lag. Tests and short retentions set it lower.
	DefaultLogRetentionCheckInterval = 5 * time.Minute
)

// SetDefaults fills unset fields. ObjStore and Log default to locations
// under DataDir, so they follow a --data-dir given alone.
func (c *Config) SetDefaults() {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.KafkaListen == "" && c.Listeners == "" {
		c.KafkaListen = DefaultKafkaListen
	}
	if c.ObjStore == "" {
		c.ObjStore = fileURL(filepath.Join(c.DataDir, "objects"))
	}
	if c.Log == "" {
		c.Log = fileURL(filepath.Join(c.DataDir, "log"))
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.FlushBytes == 0 {
		c.FlushBytes = DefaultFlushBytes
	}
	if c.MaxPutsPerSec == PutBudgetAuto {
		c.MaxPutsPerSec = 0
		if c.RemoteObjStore() {
			c.MaxPutsPerSec = DefaultRemotePutsPerSec
		}
		if c.ObjStoreExpress != "" {
			c.MaxPutsPerSec = DefaultExpressPutsPerSec
		}
	}
	if c.PacedObjectBytes == 0 {
		c.PacedObjectBytes = DefaultPacedObjectBytes
	}
	if c.ObjStoreHedgePercentile == 0 {
		c.ObjStoreHedgePercentile = HedgeOff
		if c.RemoteObjStore() {
			c.ObjStoreHedgePercentile = DefaultObjStoreHedgePercentile
		}
	}
	if c.ObjStoreHedgeMaxRatio == 0 {
		c.ObjStoreHedgeMaxRatio = DefaultObjStoreHedgeMaxRatio
	}
	if c.ObjStoreHedgeMinDelay == 0 {
		c.ObjStoreHedgeMinDelay = DefaultObjStoreHedgeMinDelay
	}
	if c.DefaultPartitions == 0 {
		c.DefaultPartitions = DefaultPartitions
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
		if logurl.BilledPerRequest(c.Log) {
			c.Lease = DefaultBilledLogLease
		}
	}
	if c.MaxClockSkew == 0 {
		c.MaxClockSkew = DefaultMaxClockSkew
	}
	if c.SnapshotKeep == 0 {
		c.SnapshotKeep = DefaultSnapshotKeep
	}
	if c.MetricsMaxGroupPartitions == 0 {
		c.MetricsMaxGroupPartitions = DefaultMetricsMaxGroupPartitions
	}
	if c.ClientTelemetryMetrics == "" {
		c.ClientTelemetryMetrics = DefaultClientTelemetryMetrics
	}
	if c.MemoryBudget == 0 {
		c.MemoryBudget = DefaultMemoryBudget
	}
	if c.FetchReadAheadBytes == 0 {
		c.FetchReadAheadBytes = DefaultFetchReadAheadBytes
	}
	if c.FetchMaxParallelGets == 0 {
		c.FetchMaxParallelGets = DefaultFetchMaxParallelGets
	}
	if c.MaxPartitionsPerTopic == 0 {
		c.MaxPartitionsPerTopic = kafka.DefaultMaxPartitionsPerTopic
	}
	if c.MaxPartitions == 0 {
		c.MaxPartitions = kafka.DefaultMaxPartitions
	}
	if c.MaxIncrementalFetchSessionCacheSlots == 0 {
		c.MaxIncrementalFetchSessionCacheSlots = kafka.DefaultFetchSessionSlots
	}
	if c.LogRetentionMs == 0 {
		c.LogRetentionMs = DefaultLogRetentionMs
	}
	if c.LogRetentionBytes == 0 {
		c.LogRetentionBytes = -1
	}
	if c.LogRetentionCheckInterval == 0 {
		c.LogRetentionCheckInterval = DefaultLogRetentionCheckInterval
	}
	if c.GCGrace == 0 {
		c.GCGrace = gc.DefaultGrace
	}
	if c.GCDeleteDelay == 0 {
		c.GCDeleteDelay = gc.DefaultDeleteDelay
	}
	if c.LogCleanerDedupeBufferSize == 0 {
		c.LogCleanerDedupeBufferSize = cleaner.DefaultMapBytes
	}
	if c.LogCleanerBackoff == 0 {
		c.LogCleanerBackoff = cleaner.DefaultInterval
	}
	if c.CompactionTargetBytes == 0 {
		c.CompactionTargetBytes = compact.DefaultTargetBytes
	}
	if c.CompactionMinAge == 0 {
		c.CompactionMinAge = compact.DefaultMinAge
	}
	if c.CompactionMaxLag == 0 {
		c.CompactionMaxLag = compact.DefaultMaxLag
	}
}

// fileURL turns a local path into a file:// URL, absolute so the URL means
// the same thing whatever the working directory of a later reader.
func fileURL(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return "file://" + filepath.ToSlash(path)
}

// readAhead is the fetch read-ahead the config asks for.
func (c *Config) readAhead() fetch.ReadAhead {
	if c.FetchReadAheadBytes <= 0 {
		return fetch.ReadAhead{}
	}
	return fetch.ReadAhead{Bytes: c.FetchReadAheadBytes, MaxGets: c.FetchMaxParallelGets}
}

// latencyProfile resolves ObjStoreLatency; nil means no added latency.
func (c *Config) latencyProfile() (*objstore.LatencyProfile, error) {
	switch c.ObjStoreLatency {
	case "", "none":
		return nil, nil
	case objstore.S3Express.Name:
		return &objstore.S3Express, nil
	case objstore.S3Standard.Name:
		return &objstore.S3Standard, nil
	}
	return nil, fmt.Errorf("objstore-latency %q: want none, %s or %s",
		c.ObjStoreLatency, objstore.S3Express.Name, objstore.S3Standard.Name)
}

// SnapshotIntervalFlag returns the pflag.Value of --snapshot-interval
// for *d: a duration where 0 turns periodic snapshots off, as operators
// expect of an interval flag, stored as SnapshotsOff since 0 in Config
// means the default. It sets *d to DefaultSnapshotInterval, the flag's
// default.
func SnapshotIntervalFlag(d *time.Duration) pflag.Value {
	*d = DefaultSnapshotInterval
	return snapshotIntervalFlag{d}
}

type snapshotIntervalFlag struct{ d *time.Duration }

func (f snapshotIntervalFlag) String() string {
	if *f.d < 0 {
		return "0s"
	}
	return f.d.String()
}

func (f snapshotIntervalFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return err
	case d < 0:
		return fmt.Errorf("%v: must not be negative (0 turns snapshots off)", d)
	case d == 0:
		d = SnapshotsOff
	}
	*f.d = d
	return nil
}

func (f snapshotIntervalFlag) Type() string { return "duration" }

// Authorizer names --authorizer accepts for Kafka's StandardAuthorizer:
// ours and Kafka's class names, so a server.properties value carries
// over.
var standardAuthorizerNames = []string{
	"standard",
	"StandardAuthorizer",
	"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	"kafka.security.authorizer.AclAuthorizer",
}

// aclConfig is the Kafka server's ACL configuration from c.
func (c *Config) aclConfig() (kafka.ACLConfig, error) {
	var ac kafka.ACLConfig
	switch {
	case c.Authorizer == "":
	case slices.Contains(standardAuthorizerNames, c.Authorizer):
		ac.Enabled = true
	default:
		return ac, fmt.Errorf("authorizer %q: want \"\" (none) or \"standard\"", c.Authorizer)
	}
	users, err := acl.ParseSuperUsers(c.SuperUsers)
	if err != nil {
		return ac, fmt.Errorf("super-users: %w", err)
	}
	ac.SuperUsers, ac.AllowIfNoACL = users, c.AllowEveryoneIfNoACLFound
	return ac, nil
}

// DefaultClientTelemetryMetrics asks clients for every metric they
// have: the re-export is bounded by the series cap, and an operator
// narrows it with --client-telemetry-metrics.
const DefaultClientTelemetryMetrics = "*"

// clientTelemetry is the clientmetrics configuration of the flags.
func (c *Config) clientTelemetry(clk clock.Clock) clientmetrics.Config {
	var prefixes []string
	if c.ClientTelemetryMetrics != "none" {
		for _, p := range strings.Split(c.ClientTelemetryMetrics, ",") {
			if p = strings.TrimSpace(p); p != "" {
				prefixes = append(prefixes, p)
			}
		}
	}
	return clientmetrics.Config{
		Metrics:      prefixes,
		PushInterval: c.ClientTelemetryPushInterval,
		MaxClients:   c.ClientTelemetryMaxClients,
		MaxSeries:    c.ClientTelemetryMaxSeries,
		Clock:        clk,
	}
}
