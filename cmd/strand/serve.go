package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/cleaner"
	"github.com/strandkafka/strand/internal/clientmetrics"
	"github.com/strandkafka/strand/internal/compact"
	"github.com/strandkafka/strand/internal/gc"
	"github.com/strandkafka/strand/internal/group"
	"github.com/strandkafka/strand/internal/kafka"
	"github.com/strandkafka/strand/internal/loglevel"
	"github.com/strandkafka/strand/internal/quota"
)

func newServeCmd() *cobra.Command {
	cmd, _ := newServe()
	return cmd
}

// resolvedServe is what serve runs with.
type resolvedServe struct {
	cfg           agent.Config
	logger        *slog.Logger
	goMemLimitSet bool
}

// newServe returns the serve command and its resolve function (see
// there), which reads the command's flags.
func newServe() (*cobra.Command, func(fs *pflag.FlagSet, logOut io.Writer) (resolvedServe, error)) {
	var (
		cfg       agent.Config
		logLevel  string
		logFormat string
		// retentionCheckMs is --log-retention-check-interval-ms, in
		// Kafka's unit.
		retentionCheckMs int64
		// cleanerBackoffMs is --log-cleaner-backoff-ms, in ms as
		// Kafka's log.cleaner.backoff.ms.
		cleanerBackoffMs int64
		// reauthMs and failedAuthDelayMs are Kafka's ms settings of
		// the SASL session lifetime and failure delay.
		reauthMs, failedAuthDelayMs int64
		// nodeIDFromHost is --node-id-from-hostname (nodeid.go).
		nodeIDFromHost bool
		// console is --console, Config.NoConsole's opposite, so that
		// the embedded default serves it and a Config from Go does too.
		console bool
		// resolve is set below the flags.
		resolve func(fs *pflag.FlagSet, logOut io.Writer) (resolvedServe, error)
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run an agent: a Kafka-compatible broker on the embedded defaults or shared backends",
		Long: `Run an agent. With no flags it serves Kafka on 127.0.0.1:9092 and HTTP
(/healthz, /readyz, /metrics) on 127.0.0.1:9644 and the schema registry on
127.0.0.1:8081, keeping everything under ./strand-data. Every flag can also be set by an environment variable
STRAND_<FLAG_NAME>, e.g. STRAND_DATA_DIR or STRAND_KAFKA_LISTEN, or as a
key of the YAML file of --config (data-dir: ./d); a flag on the command
line wins over the environment, which wins over the file.
` + "`strand config print`" + ` shows what each setting comes to.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := layerConfig(cmd.Flags()); err != nil {
				return err
			}
			r, err := resolve(cmd.Flags(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if !r.goMemLimitSet {
				// The collector works for the budget: it collects
				// harder as the heap nears it instead of letting the
				// process pass it (agent/memory.go).
				debug.SetMemoryLimit(agent.SplitMemory(r.cfg.MemoryBudget).GoMemoryLimit)
			}
			return agent.Run(cmd.Context(), r.cfg, r.logger)
		},
	}
	cmd.SetFlagErrorFunc(suggestFlag)
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", agent.DefaultDataDir, "directory for the local metadata database (and the default object store and log)")
	f.StringVar(&cfg.KafkaListen, "kafka-listen", agent.DefaultKafkaListen, "address for Kafka clients")
	f.StringVar(&cfg.Rack, "rack", "", "zone of this agent (Kafka's broker.rack), e.g. us-east-1a: clients of a known zone are served by agents of theirs")
	f.StringVar(&cfg.ListenerRacks, "listener-racks", "", "per-zone listeners as NAME:zone,...: every client of a named listener is in that zone, e.g. CLIENT_A:us-east-1a,CLIENT_B:us-east-1b")
	f.StringVar(&cfg.Advertise, "advertise", "", "host:port given to clients in Metadata (default: the Kafka listen address)")
	f.StringVar(&cfg.Listeners, "listeners", "", "Kafka listeners as NAME://host:port,... (Kafka's listeners), e.g. PLAINTEXT://127.0.0.1:9092,SSL://:9093; replaces --kafka-listen")
	f.StringVar(&cfg.AdvertisedListeners, "advertised-listeners", "", "address given to clients per listener, NAME://host:port,... (Kafka's advertised.listeners; default: each listener's bound address); replaces --advertise")
	f.StringVar(&cfg.ListenerSecurityProtocolMap, "listener-security-protocol-map", "", "security protocol of listener names that are not protocol names, NAME:PROTOCOL,... (Kafka's listener.security.protocol.map), e.g. INTERNAL:SSL")
	f.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "PEM certificate chain of the TLS listeners (SSL, SASL_SSL); reloaded when it changes")
	f.StringVar(&cfg.TLSKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file; reloaded when it changes")
	f.StringVar(&cfg.TLSClientCAFile, "tls-client-ca-file", "", "PEM CAs that client certificates must chain to")
	f.StringVar(&cfg.TLSClientAuth, "tls-client-auth", "none", "client certificates on TLS listeners (Kafka's ssl.client.auth): none, requested or required; on SSL listeners the certificate's subject is the principal")
	f.BoolVar(&cfg.HTTPTLS, "http-tls", false, "serve HTTP over TLS with --tls-cert-file and --tls-key-file; a client certificate chaining to --tls-client-ca-file is the principal the Kafka SSL listener would name it, and may do what that principal may: admin calls and pprof need ALTER on the cluster, the console a super user")
	f.StringVar(&cfg.SASLEnabledMechanisms, "sasl-enabled-mechanisms", strings.Join(kafka.DefaultSASLMechanisms, ","), "SASL mechanisms SASL listeners offer (Kafka's sasl.enabled.mechanisms)")
	f.Int64Var(&reauthMs, "connections-max-reauth-ms", 0, "SASL session lifetime in ms: a connection that does not re-authenticate within it is closed at its next request (Kafka's connections.max.reauth.ms, KIP-368; 0: never)")
	f.Int64Var(&failedAuthDelayMs, "connection-failed-authentication-delay-ms", kafka.DefaultFailedAuthDelay.Milliseconds(), "wait before answering a failed SASL attempt and closing the connection, doubled per further failure from the address within a minute, up to 5s (Kafka's connection.failed.authentication.delay.ms)")
	f.StringVar(&cfg.SASLBootstrapUser, "sasl-bootstrap-user", "", "SCRAM user created at startup if it has no credentials, with the password of STRAND_SASL_BOOTSTRAP_PASSWORD or --sasl-bootstrap-password-file")
	f.StringVar(&cfg.SASLBootstrapPasswordFile, "sasl-bootstrap-password-file", "", "file holding the --sasl-bootstrap-user password (first line)")
	f.StringVar(&cfg.AdminTokenFile, "admin-token-file", "", "file holding the bearer token that makes an HTTP caller (admin API, console, pprof) a super user; the token may instead come from STRAND_ADMIN_TOKEN, never a flag. Without either (or --http-tls client certificates) only a loopback --http-listen takes such calls, and only addressed to localhost, a loopback address or --http-allowed-hosts")
	f.StringVar(&cfg.SQLListen, "sql-listen", "", "address for the SQL endpoint, PostgreSQL's wire protocol (psql, pgx, JDBC); empty: off. Port 6875 by convention. Clients log in as a SCRAM user when SASL is on or any user exists; with no authentication configured only a loopback address takes connections")
	f.DurationVar(&cfg.SQLViewSnapshotInterval, "sql-view-snapshot-interval", 0, "how often each materialized view's state is snapshotted to the object store by the one agent placed to (0: 5m; negative: never), so a new or wiped agent restores it instead of replaying its inputs")
	f.IntVar(&cfg.SQLViewStepSlots, "sql-view-step-slots", 0, "materialized views' epochs that run at once, so a processor stays free for pull queries; one more once an epoch waited 50 ms, and no bound for one that waited 200 ms (0: no bound; negative: GOMAXPROCS-1, at least 1)")
	f.Int64Var(&cfg.SQLViewSnapshotBytes, "sql-view-snapshot-bytes", 0, "snapshot a view sooner once its state has written this many bytes (0: 256 MiB; negative: never by size)")
	f.BoolVar(&cfg.SQLTLS, "sql-tls", false, "serve the SQL endpoint's SSLRequest with TLS on --tls-cert-file and --tls-key-file")
	f.StringVar(&cfg.HTTPListen, "http-listen", agent.DefaultHTTPListen, "address for /healthz, /readyz and /metrics (open to all), the admin API, the console and pprof (empty: off)")
	f.StringVar(&cfg.HTTPAllowedHosts, "http-allowed-hosts", "", "host names, comma-separated, besides localhost and loopback addresses, that a loopback --http-listen without a token takes calls addressed to (the Host header)")
	f.StringVar(&cfg.SchemaRegistryListen, "schema-registry-listen", agent.DefaultSchemaRegistryListen, "address of the schema registry, Confluent Schema Registry's REST API (empty: off); TLS with --http-tls. Callers: HTTP basic auth as a SASL (SCRAM) user, the admin token, a client certificate, or on a loopback address without those, this machine's own programs as a super user. With --authorizer, subjects need ACLs of resource type SUBJECT (strand acl create --subject): READ to read, WRITE to register, DELETE to delete, ALTER for a subject's config and mode; global config and mode need ALTER on the cluster")
	f.StringVar(&cfg.ConnectListen, "connect-listen", agent.DefaultConnectListen, "address of Kafka Connect's REST API, served by every agent over the connectors in the metadata (empty: off; the connectors run all the same); TLS with --http-tls. Callers as on --schema-registry-listen; with --authorizer, connectors need ACLs of resource type CONNECTOR (strand acl create --connector): CREATE (or CREATE on the cluster) to create, DESCRIBE to see, ALTER to change, pause, resume or restart, DELETE to delete")
	f.BoolVar(&console, "console", true, "serve the web console under /console/ on the HTTP port (super users only)")
	f.StringVar(&cfg.ObjStore, "objstore", "", "object store URL: file:///dir or s3://bucket/prefix?endpoint=...&region=... (default file://<data-dir>/objects)")
	f.StringVar(&cfg.Log, "log", "", "shared log URL (default file://<data-dir>/log); never with a password in it, as a command line is visible to every user of the machine: use --log-password-file or PGPASSWORD")
	f.StringVar(&cfg.LogPasswordFile, "log-password-file", "", "file holding the password of a postgres:// --log, kept out of the URL, the logs and the log chain (default: the URL's, else PGPASSWORD or a password file)")
	f.StringVar(&cfg.ObjStoreLatency, "objstore-latency", "none", "simulated object store latency: none, s3-express or s3-standard")
	f.StringVar(&cfg.ObjStoreExpress, "objstore-express", "", "low-latency tier: name=URL,name=URL[,name=URL], S3 Express One Zone directory buckets in two or three zones (same order on every agent); each flush is acknowledged once two zones hold it, compaction moves it into --objstore within minutes and the gc deletes the zone copies (needs compaction; the --objstore-latency profile applies to every zone; --max-puts-per-sec counts each zone's PUTs, default 20)")
	f.StringVar(&cfg.ObjStoreExpressZone, "objstore-express-zone", "", "the --objstore-express zone this agent runs in, read first")
	f.DurationVar(&cfg.FlushInterval, "flush-interval", agent.DefaultFlushInterval, "longest time a produced batch waits before its data object is written")
	f.IntVar(&cfg.FlushBytes, "flush-bytes", agent.DefaultFlushBytes, "buffered bytes that cut a data object early")
	f.Float64Var(&cfg.ObjStoreHedgePercentile, "objstore-hedge-percentile", 0, fmt.Sprintf("hedge a data object upload still running at this percentile (0 to 1) of the agent's recent upload times: a second PUT of the same bytes under a new key, the first to finish is committed (0: no hedging; default %v for an S3 store or with --objstore-latency, none for a local directory)", agent.DefaultObjStoreHedgePercentile))
	f.Float64Var(&cfg.ObjStoreHedgeMaxRatio, "objstore-hedge-max-ratio", agent.DefaultObjStoreHedgeMaxRatio, "hedged PUTs at most this fraction of data object uploads")
	f.DurationVar(&cfg.ObjStoreHedgeMinDelay, "objstore-hedge-min-delay", agent.DefaultObjStoreHedgeMinDelay, "never hedge an upload sooner than this")
	f.Float64Var(&cfg.MaxPutsPerSec, "max-puts-per-sec", agent.PutBudgetAuto, "budget of data object PUTs a second, hedges included: flushes are paced so objects grow with ingest instead of the PUT rate (0: no budget; default: 4 on an S3 store or --objstore-latency profile, none on a local directory)")
	f.IntVar(&cfg.PacedObjectBytes, "paced-object-bytes", agent.DefaultPacedObjectBytes, "under a PUT budget, a flush holding this many bytes goes before its turn: an object per turn or per this many bytes, whichever comes first")
	f.BoolVar(&cfg.AutoCreateTopics, "auto-create-topics", true, "create unknown topics on Metadata and Produce requests")
	f.Int32Var(&cfg.DefaultPartitions, "default-partitions", agent.DefaultPartitions, "partitions of auto-created topics and of CreateTopics with -1")
	f.Int16Var(&cfg.TransactionVersion, "transaction-version", 2, "transaction.version feature level a new cluster starts at: 2 (KIP-890 part 2, an epoch bump per transaction) or 1; later `strand features` changes it")
	f.DurationVar(&cfg.GroupInitialRebalanceDelay, "group-initial-rebalance-delay", group.DefaultInitialRebalanceDelay, "how long the first rebalance of an empty group waits for more members (0: none)")
	f.DurationVar(&cfg.GroupMinSessionTimeout, "group-min-session-timeout", group.DefaultMinSessionTimeout, "shortest session timeout a classic group member may ask for")
	f.DurationVar(&cfg.GroupMaxSessionTimeout, "group-max-session-timeout", group.DefaultMaxSessionTimeout, "longest session timeout a classic group member may ask for")
	f.IntVar(&cfg.GroupMaxSize, "group-max-size", group.DefaultMaxGroupSize, "most members in one group")
	f.DurationVar(&cfg.OffsetsRetention, "offsets-retention", group.DefaultOffsetRetention, "how long committed offsets of an empty group (or of a topic it no longer reads) are kept")
	f.DurationVar(&cfg.ConsumerGroupSessionTimeout, "consumer-group-session-timeout", group.DefaultConsumerSessionTimeout, "session timeout of KIP-848 consumer group members")
	f.DurationVar(&cfg.ConsumerGroupHeartbeatInterval, "consumer-group-heartbeat-interval", group.DefaultConsumerHeartbeatInterval, "heartbeat interval of KIP-848 consumer group members")
	f.IntVar(&cfg.MaxConnections, "max-connections", kafka.DefaultMaxConns, "most open Kafka client connections; one more is closed at accept")
	f.IntVar(&cfg.MaxConnectionsPerIP, "max-connections-per-ip", kafka.DefaultMaxConnsPerIP, "most open Kafka connections from one client address (0: only the addresses in --max-connections-per-ip-overrides)")
	f.IntVar(&cfg.MaxIncrementalFetchSessionCacheSlots, "max-incremental-fetch-session-cache-slots", kafka.DefaultFetchSessionSlots, "most fetch sessions (KIP-227) the agent keeps, each a consumer's partitions and offsets so its fetches send only what changed (0: none, every fetch is a full one)")
	f.StringVar(&cfg.MaxConnectionsPerIPOverrides, "max-connections-per-ip-overrides", "", "per-address exceptions to --max-connections-per-ip, as addr:n,addr:n (IP addresses)")
	f.StringVar(&cfg.Authorizer, "authorizer", "", "authorizer.class.name: \"standard\" checks every request against the ACLs (strand acl); empty (the default) lets every client do everything")
	f.StringVar(&cfg.SuperUsers, "super-users", "", "principals the authorizer lets do anything, as User:admin;User:bob (super.users)")
	f.BoolVar(&cfg.AllowEveryoneIfNoACLFound, "allow-everyone-if-no-acl-found", false, "let the authorizer allow what no ACL speaks of (allow.everyone.if.no.acl.found)")
	f.IntVar(&cfg.QuotaWindowNum, "quota-window-num", quota.DefaultSamples, "samples a client's byte and request rates are measured over, for quotas (Kafka's quota.window.num)")
	f.IntVar(&cfg.QuotaWindowSizeSeconds, "quota-window-size-seconds", int(quota.DefaultWindowSize/time.Second), "seconds each quota sample spans (Kafka's quota.window.size.seconds)")
	f.DurationVar(&cfg.ConnectionsMaxIdle, "connections-max-idle", kafka.DefaultIdleTimeout, "close a Kafka connection that has sent nothing and is owed nothing for this long (0: never)")
	f.Int32Var(&cfg.NodeID, "node-id", 0, "Kafka broker id of this agent; must be unique among the agents sharing one --log")
	f.BoolVar(&nodeIDFromHost, "node-id-from-hostname", false, "take --node-id from the host name's trailing -N, as a Kubernetes StatefulSet's pod ordinal (strand-2: 2)")
	f.DurationVar(&cfg.Lease, "lease", 0, "how long a silent agent stays in the others' Metadata; renewed through the log every lease/3 (default 10s, or 36s on an s3:// or dynamodb:// --log, where every renewal is billed)")
	f.StringVar(&cfg.CostPrices, "cost-prices", "", "price table (YAML) of GET /v1/cost; default: the shipped us-east-1 list prices (strand bench --cost-print-prices prints them)")
	f.DurationVar(&cfg.MaxClockSkew, "max-clock-skew", agent.DefaultMaxClockSkew, "how far this agent's clock may be from the log clock (the live agents' vote) before it stops deciding by time (retention, GC, transaction timeouts, offset expiry, tombstones) and /readyz answers 503")
	f.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", agent.DefaultShutdownTimeout, "bound on flushing and finishing commits at shutdown")
	f.Var(agent.SnapshotIntervalFlag(&cfg.SnapshotInterval), "snapshot-interval", "how often to snapshot the metadata into the object store (under "+agent.SnapshotPrefix+") and trim the log below it (0: never)")
	f.IntVar(&cfg.SnapshotKeep, "snapshot-keep", agent.DefaultSnapshotKeep, "metadata snapshots kept in the object store; after each snapshot, older manifests and the files only they name are deleted")
	f.IntVar(&cfg.MetricsMaxGroupPartitions, "metrics-max-group-partitions", agent.DefaultMetricsMaxGroupPartitions, "most per-partition consumer group series (lag, committed offset) one scrape of /metrics reports; groups past it are left out whole and counted in strand_consumer_group_partitions_omitted (-1: none)")
	f.StringVar(&cfg.ClientTelemetryMetrics, "client-telemetry-metrics", agent.DefaultClientTelemetryMetrics, "metric name prefixes Kafka clients are asked to push (KIP-714 client telemetry), comma-separated, e.g. org.apache.kafka.producer.; re-exported on /metrics with client_instance_id and client_id labels (*: all, none: none)")
	f.DurationVar(&cfg.ClientTelemetryPushInterval, "client-telemetry-push-interval", clientmetrics.DefaultPushInterval, "interval Kafka clients are asked to push their metrics at (KIP-714)")
	f.IntVar(&cfg.ClientTelemetryMaxClients, "client-telemetry-max-clients", clientmetrics.DefaultMaxClients, "most clients whose pushed metrics are tracked; past it the least recently heard from is forgotten")
	f.IntVar(&cfg.ClientTelemetryMaxSeries, "client-telemetry-max-series", clientmetrics.DefaultMaxSeries, "most series re-exported from clients' pushed metrics, all clients together; past it the least recently heard from client is forgotten")
	cfg.MemoryBudget = agent.DefaultMemoryBudget
	f.Var(agent.BytesFlag(&cfg.MemoryBudget), "memory-budget", "memory the agent's caches and buffers are sized from, e.g. 512MiB; the Go memory limit follows it (default: GOMEMLIMIT when set, else 512MiB)")
	f.Int32Var(&cfg.MaxPartitionsPerTopic, "max-partitions-per-topic", kafka.DefaultMaxPartitionsPerTopic, "most partitions one topic may have; more is POLICY_VIOLATION")
	f.Int64Var(&cfg.MaxPartitions, "max-partitions", kafka.DefaultMaxPartitions, "most partitions in the cluster (KIP-578 max.partitions); more is POLICY_VIOLATION")
	f.Var(notFlag{&cfg.NoProduceYieldToTail}, "produce-yields-to-tail", "while the agent is short of CPU, throttle Produce to the rate of consumers reading the tail when they fall over 24 MiB behind, so the tail stays in the read cache (false: producers never wait for consumers)")
	f.Lookup("produce-yields-to-tail").NoOptDefVal = "true"
	f.Var(agent.BytesFlag(&cfg.MaxFetchBytesPerSec), "max-fetch-bytes-per-sec", "pace the record bytes Fetch answers carry, all clients together, e.g. 200MiB (0: no fixed cap; Fetch still yields to other requests when the CPU is short)")
	cfg.FetchReadAheadBytes = agent.DefaultFetchReadAheadBytes
	f.Var(agent.BytesFlag(&cfg.FetchReadAheadBytes), "fetch-read-ahead-bytes", "how far ahead of a consumer catching up on a partition (reading what the read cache does not hold) to read it, e.g. 32MiB (0: no read-ahead); its bytes in flight come out of the read cache's share of --memory-budget")
	f.IntVar(&cfg.FetchMaxParallelGets, "fetch-max-parallel-gets", agent.DefaultFetchMaxParallelGets, "most object store GETs read-ahead has in flight at once, over all partitions")
	f.Int64Var(&cfg.LogRetentionMs, "log-retention-ms", agent.DefaultLogRetentionMs, "how long a topic that sets no retention.ms keeps data, in ms (Kafka's log.retention.ms; -1: no limit)")
	f.Int64Var(&cfg.LogRetentionBytes, "log-retention-bytes", -1, "bytes a partition of a topic that sets no retention.bytes keeps (Kafka's log.retention.bytes; -1: no limit)")
	f.Int32Var(&cfg.MessageMaxBytes, "message-max-bytes", agent.DefaultMessageMaxBytes, "largest record batch a producer may send to a topic that sets no max.message.bytes (Kafka's message.max.bytes; also a dynamic broker config)")
	f.Int64Var(&retentionCheckMs, "log-retention-check-interval-ms", agent.DefaultLogRetentionCheckInterval.Milliseconds(), "how often each agent proposes retention for the partitions it owns, in ms (Kafka's log.retention.check.interval.ms)")
	f.Int64Var(&cfg.LogCleanerDedupeBufferSize, "log-cleaner-dedupe-buffer-size", cleaner.DefaultMapBytes, "memory of the key map of one compaction round of a compacted topic, in bytes (Kafka's log.cleaner.dedupe.buffer.size)")
	f.Int64Var(&cleanerBackoffMs, "log-cleaner-backoff-ms", cleaner.DefaultInterval.Milliseconds(), "pause between passes over the compacted topics' partitions an agent owns, in ms (Kafka's log.cleaner.backoff.ms)")
	f.DurationVar(&cfg.GCGrace, "gc-grace", gc.DefaultGrace, "how old an uploaded but never committed object must be before the reconciler deletes it, and (below metadata level 5, or when shorter than --gc-delete-delay) how long a data object no index entry points into is kept before deletion; must exceed the longest upload")
	f.DurationVar(&cfg.GCDeleteDelay, "gc-delete-delay", gc.DefaultDeleteDelay, "how long a data object no index entry points into is kept before deletion once every live agent has applied that (Kafka's log.segment.delete.delay.ms; from metadata level 5, never more than --gc-grace); must exceed the longest object read of a fetch")
	f.BoolVar(&cfg.Compaction, "compaction-enable", false, "merge the level-0 (multi-partition) objects of the partitions this agent owns into per-partition objects, so a cold read of a partition is a few large GETs (default: on for an S3 store or with --objstore-latency, off for a local directory, where its writes delay produce's)")
	cfg.CompactionTargetBytes = compact.DefaultTargetBytes
	f.Var(agent.BytesFlag(&cfg.CompactionTargetBytes), "compaction-target-bytes", "record bytes of one per-partition object compaction writes, e.g. 16MiB")
	f.Var(agent.BytesFlag(&cfg.CompactionMaxBytesPerSec), "compaction-max-bytes-per-sec", "cap the bytes per second compaction reads, e.g. 50MiB (0: no cap; each pass spreads the bytes due over its interval either way)")
	f.DurationVar(&cfg.CompactionMinAge, "compaction-min-age", compact.DefaultMinAge, "how old data must be before compaction merges it")
	f.DurationVar(&cfg.CompactionMaxLag, "compaction-max-lag", compact.DefaultMaxLag, "how long data smaller than --compaction-target-bytes waits before it is merged anyway")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error; changed at runtime through the agent's BROKER_LOGGER configs (kafka-configs.sh --entity-type broker-loggers)")
	f.StringVar(&logFormat, "log-format", "text", "text (logfmt) or json, one object a line")
	f.String(configFlag, "", "YAML file of serve settings, its keys the flag names (data-dir: ./d); a flag or STRAND_<FLAG_NAME> wins over it (strand config print shows the result)")
	// resolve turns the flags (already layered) into the Config serve
	// runs with: the checks Config cannot make (a flag's 0 that Config
	// reads as "default"), the values derived from others, defaults and
	// Validate. serve and config print both call it, so config print
	// rejects what serve would, with the same message.
	resolve = func(fs *pflag.FlagSet, logOut io.Writer) (resolvedServe, error) {
		fail := func(err error) (resolvedServe, error) { return resolvedServe{}, err }
		cfg := cfg // the flags' values stay as given
		if nodeIDFromHost {
			if fs.Changed("node-id") {
				return fail(fmt.Errorf("node-id-from-hostname and node-id: give one"))
			}
			host, err := hostname()
			if err != nil {
				return fail(fmt.Errorf("node-id-from-hostname: %w", err))
			}
			if cfg.NodeID, err = nodeIDFromHostname(host); err != nil {
				return fail(err)
			}
		}
		logger, levels, err := newLogger(logOut, logFormat, logLevel)
		if err != nil {
			return fail(err)
		}
		cfg.LogLevels = levels
		if cfg.GroupInitialRebalanceDelay == 0 {
			cfg.GroupInitialRebalanceDelay = -1 // the flag's 0 is "none", Config's is "default"
		}
		goMemLimit, goMemLimitSet := os.LookupEnv("GOMEMLIMIT")
		goMemLimitSet = goMemLimitSet && goMemLimit != "off"
		if goMemLimitSet && !fs.Changed("memory-budget") {
			n, err := agent.ParseBytes(goMemLimit)
			if err != nil {
				return fail(fmt.Errorf("GOMEMLIMIT as the memory budget: %w", err))
			}
			cfg.MemoryBudget = n
		}
		// Kafka's 0s, which Config spells differently since its 0 is
		// "default".
		switch {
		case cfg.MaxConnectionsPerIP < 0:
			return fail(fmt.Errorf("max-connections-per-ip %d: must not be negative", cfg.MaxConnectionsPerIP))
		case cfg.MaxConnectionsPerIP == 0:
			cfg.MaxConnectionsPerIP = kafka.NoConnsPerIP
		}
		if cfg.ConnectionsMaxIdle == 0 {
			cfg.ConnectionsMaxIdle = -1
		}
		switch {
		case cfg.MaxIncrementalFetchSessionCacheSlots < 0:
			return fail(fmt.Errorf("max-incremental-fetch-session-cache-slots %d: must not be negative", cfg.MaxIncrementalFetchSessionCacheSlots))
		case cfg.MaxIncrementalFetchSessionCacheSlots == 0:
			cfg.MaxIncrementalFetchSessionCacheSlots = kafka.NoFetchSessions
		}
		if cfg.FetchReadAheadBytes == 0 {
			cfg.FetchReadAheadBytes = agent.ReadAheadOff
		}
		if !fs.Changed("compaction-enable") {
			cfg.Compaction = cfg.RemoteObjStore()
		}
		if cfg.ObjStoreHedgePercentile == 0 && fs.Changed("objstore-hedge-percentile") {
			cfg.ObjStoreHedgePercentile = agent.HedgeOff
		}
		if cfg.FetchMaxParallelGets < 1 {
			// Config's 0 is "default"; the flag's is a mistake.
			return fail(fmt.Errorf("fetch-max-parallel-gets %d: must be between 1 and %d", cfg.FetchMaxParallelGets, agent.MaxFetchMaxParallelGets))
		}
		// 0 in Config means the default: refuse it here rather
		// than keep 7 days (or everything) for an operator who
		// asked for nothing.
		if cfg.LogRetentionMs == 0 || cfg.LogRetentionBytes == 0 {
			return fail(fmt.Errorf("log-retention-ms and log-retention-bytes: must be -1 (no limit) or positive"))
		}
		if cfg.MessageMaxBytes <= 0 {
			return fail(fmt.Errorf("message-max-bytes %d: must be positive", cfg.MessageMaxBytes))
		}
		if retentionCheckMs <= 0 {
			return fail(fmt.Errorf("log-retention-check-interval-ms %d: must be positive", retentionCheckMs))
		}
		cfg.LogRetentionCheckInterval = time.Duration(retentionCheckMs) * time.Millisecond
		if cleanerBackoffMs <= 0 {
			return fail(fmt.Errorf("log-cleaner-backoff-ms %d: must be positive", cleanerBackoffMs))
		}
		cfg.LogCleanerBackoff = time.Duration(cleanerBackoffMs) * time.Millisecond
		if cfg.MaxConnections < 1 {
			return fail(fmt.Errorf("max-connections %d: must be at least 1", cfg.MaxConnections))
		}
		if cfg.SnapshotKeep < 1 {
			// Config's 0 is "default"; the flag's is a mistake.
			return fail(fmt.Errorf("snapshot-keep %d: must be at least 1 (the newest snapshot is what a wiped agent restores)", cfg.SnapshotKeep))
		}
		if cfg.Listeners != "" && !fs.Changed("kafka-listen") {
			cfg.KafkaListen = "" // --listeners replaces its default
		}
		// The token itself is never a flag: a command line is
		// visible to every user of the machine.
		cfg.AdminToken = os.Getenv("STRAND_ADMIN_TOKEN")
		cfg.SASLBootstrapPassword = os.Getenv("STRAND_SASL_BOOTSTRAP_PASSWORD")
		cfg.ConnectionsMaxReauth = time.Duration(reauthMs) * time.Millisecond
		cfg.ConnectionFailedAuthenticationDelay = time.Duration(failedAuthDelayMs) * time.Millisecond
		if failedAuthDelayMs == 0 {
			cfg.ConnectionFailedAuthenticationDelay = -1 // the flag's 0 is none
		}
		cfg.NoConsole = !console
		cfg.SetDefaults()
		if err := cfg.Validate(); err != nil {
			return fail(err)
		}
		return resolvedServe{cfg: cfg, logger: logger, goMemLimitSet: goMemLimitSet}, nil
	}
	return cmd, resolve
}

// newLogger is the agent's logger writing to w in format, at level
// until the agent's BROKER_LOGGER configs change it.
func newLogger(w io.Writer, format, level string) (*slog.Logger, *loglevel.Levels, error) {
	levels := loglevel.New()
	if err := levels.SetRootText(level); err != nil {
		return nil, nil, fmt.Errorf("log-level: %w", err)
	}
	// The handler passes everything; levels filters.
	opts := &slog.HandlerOptions{Level: loglevel.Lowest}
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, nil, fmt.Errorf("log-format %q: want text or json", format)
	}
	return slog.New(levels.Handler(h)), levels, nil
}

// applyEnv sets every flag not given on the command line from
// STRAND_<FLAG_NAME> when that variable is set.
func applyEnv(fs *pflag.FlagSet) error {
	var errs []string
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Changed {
			return
		}
		name := "STRAND_" + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		v, ok := os.LookupEnv(name)
		if !ok {
			return
		}
		if err := fs.Set(fl.Name, v); err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q: %v", name, v, err))
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("environment: %s", strings.Join(errs, "; "))
	}
	return nil
}

// notFlag is a boolean flag that sets *p to its negation, for a
// behaviour on by default whose Config field is its off switch.
type notFlag struct{ p *bool }

func (f notFlag) String() string {
	if f.p == nil {
		return "true"
	}
	return strconv.FormatBool(!*f.p)
}

func (f notFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*f.p = !v
	return nil
}

func (notFlag) Type() string     { return "bool" }
func (notFlag) IsBoolFlag() bool { return true }
