// Package agent wires one Strand agent together: the object store, the
// shared log, the local metadata replica, the produce and fetch paths, the
// Kafka listener, the HTTP endpoints (/healthz, /readyz, /metrics and the
// admin API of admin_http.go) and the metadata snapshots. It owns start-up
// order and graceful shutdown, nothing else: every piece it starts lives
// in its own package.
//
// # Time
//
// The agent has one clock (package clock): the wall clock, unless a test
// sets another (SetClock in export_test.go). It hands it to every piece
// that keeps time: the VirtualLog, the replica (whose entry stamps are
// all the time apply sees), the produce pipeline, the group coordinator,
// the retention checker and the Kafka handlers. The agent's own periodic work (lease renewals,
// snapshots, the transaction sweep) ticks on the wall clock: the tests
// that need it drive those steps by hand instead.
package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/authzlog"
	"github.com/strandkafka/strand/internal/certs"
	"github.com/strandkafka/strand/internal/cleaner"
	"github.com/strandkafka/strand/internal/clientmetrics"
	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/compact"
	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/console"
	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/gc"
	"github.com/strandkafka/strand/internal/group"
	"github.com/strandkafka/strand/internal/kafka"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/express"
	"github.com/strandkafka/strand/internal/objstore/objurl"
	"github.com/strandkafka/strand/internal/offsetstopic"
	"github.com/strandkafka/strand/internal/placement"
	"github.com/strandkafka/strand/internal/planted"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/quota"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/retention"
	"github.com/strandkafka/strand/internal/schemareg"
	"github.com/strandkafka/strand/internal/schemareg/avroschema"
	"github.com/strandkafka/strand/internal/schemareg/jsonschema"
	"github.com/strandkafka/strand/internal/schemareg/protoschema"
	"github.com/strandkafka/strand/internal/schemareg/validate"
	"github.com/strandkafka/strand/internal/share"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
	"github.com/strandkafka/strand/internal/sql/catalog"
	"github.com/strandkafka/strand/internal/sql/pgwire"
	"github.com/strandkafka/strand/internal/sql/sinks"
	"github.com/strandkafka/strand/internal/sql/source"
	"github.com/strandkafka/strand/internal/sql/views"
	"github.com/strandkafka/strand/internal/sql/viewsnap"
	"github.com/strandkafka/strand/internal/txn"
)

// A test build may lower the garbage collection grace's floor, for
// every agent of the process (package planted); every other build keeps
// meta's.
func init() {
	meta.MinGCGraceMs = planted.GCGraceFloor(meta.MinGCGraceMs)
	meta.MinDeleteDelayMs = planted.GCGraceFloor(meta.MinDeleteDelayMs)
}

// Agent is one running agent. Start returns it serving; Stop shuts it down.
type Agent struct {
	// dirLock holds the data directory (datadir_lock.go) until closeAll.
	dirLock *os.File
	cfg     Config
	logger  *slog.Logger

	metrics *metrics
	// denials is the authorization log (authz_log.go).
	denials *authzlog.Log
	store   objstore.Store
	// express is the low-latency tier in front of the main store
	// (--objstore-express), store itself; nil when off.
	express  *express.Store
	log      *sharedlog.VirtualLog
	replica  *replica.Replica
	pipeline *produce.Pipeline
	groups   *group.Coordinator
	server   *kafka.Server
	// shares serves ShareFetch and ShareAcknowledge (package share).
	shares *share.Server
	// members keeps this agent's lease in the agent table (cluster.go).
	members *membership
	// clock compares this agent's clock with the log's after each
	// renewal (clockskew.go).
	clock *clockGuard

	// listeners are the Kafka listeners (listeners.go), kafkaLn the
	// first one's socket.
	listeners []*boundListener
	kafkaLn   net.Listener
	httpLn    net.Listener
	httpSrv   *http.Server
	// httpTLS serves the HTTP port's and the registry's certificate
	// with --http-tls (httpTLSConfig).
	httpTLS *certs.Server
	sqlLn   net.Listener
	// sqlSchemaCache is the SQL endpoint's schema cache (sqlSchemas).
	sqlSchemaOnce  sync.Once
	sqlSchemaCache *source.Schemas
	// sqlSourceMetrics count what the SQL endpoint's scans read.
	sqlSourceMetrics *source.Metrics
	sqlSrv           *pgwire.Server
	// sqlViews maintains the materialized views when the SQL endpoint
	// is on (sql.go); viewsStop ends its Run, viewsDone when it has.
	sqlViews  *views.Runner
	viewSnaps *viewsnap.Snapshotter // nil unless sqlViews (sql_viewsnap.go)
	// sinkSnaps snapshots the sinks' state (sql_sinks.go); snapMetrics
	// are the snapshots' series, views' and sinks' alike.
	sinkSnaps   *viewsnap.Snapshotter
	snapMetrics *viewsnap.Metrics
	viewsStop   context.CancelFunc
	viewsDone   chan struct{}
	// sqlSinks runs the SQL sinks this agent owns (sql_sinks.go).
	sqlSinks  *sinks.Runner
	sinksStop context.CancelFunc
	sinksDone chan struct{}
	// connectRunner runs the connectors this agent owns; connectSrv
	// serves Kafka Connect's REST API on connectLn (connect.go).
	connectRunner  *connect.Runner
	connectClasses *connect.ClassSet
	connectSecrets *connect.Secrets
	connectMetrics *connect.Metrics
	connectLn      net.Listener
	connectSrv     *http.Server
	connectStop    context.CancelFunc
	connectDone    chan struct{}
	serveErr       chan error
	ready          atomic.Bool

	// sqlCatalog is the SQL endpoint's catalog engine, which the
	// console's SQL page runs its queries through too (console_sql.go).
	sqlCatalog *catalog.Engine

	// appends says whether the shared log takes appends (failstop.go).
	appends appendHealth

	// snapshots takes the metadata snapshots (snapshot.go).
	snapshots *snapshotter
	// collector deletes dead and orphaned data objects while placement
	// names this agent the janitor.
	collector *gc.Collector
	// compactor merges the level-0 entries of the partitions this agent
	// owns into per-partition objects; nil when compaction is off.
	compactor *compact.Compactor
	// txns is the transaction coordinator; its sweep aborts timed-out
	// transactions.
	txns *txn.Coordinator
	// retention proposes retention for the partitions this agent owns.
	retention *retention.Checker
	// cleaner compacts the compacted topics' partitions this agent
	// owns by key.
	cleaner *cleaner.Cleaner
	// damage records the damaged data objects reads and storage
	// verification meet.
	damage *fetch.DamageLog
	// verify is the running storage verification (admin_verify.go).
	verify verifyJob
	// offsets writes the __consumer_offsets records of the offset and
	// group changes this agent proposes; nil until the produce pipeline
	// is up (the replica's Applied hook reads it).
	offsets atomic.Pointer[offsetstopic.Writer]
	// offsetsResynced is closed when the writer has rewritten the
	// records of the groups this agent coordinated at start.
	offsetsResynced <-chan struct{}
	// console is the web console (console.go); nil without HTTP.
	console *console.Console
	// registry is the schema registry over the replica, served on
	// registryLn by registrySrv (registry.go) when --schema-registry-listen
	// names an address, and read by the console and validation on produce.
	registry    *schemareg.Registry
	registryLn  net.Listener
	registrySrv *http.Server
	// registryPasswords are the basic-auth passwords verified lately.
	registryPasswords verifiedPasswords
}

// Run starts an agent and serves until ctx is done, then shuts down
// gracefully within cfg.ShutdownTimeout.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	a, err := Start(ctx, cfg, logger)
	if err != nil {
		return err
	}
	var serveErr error
	select {
	case <-ctx.Done():
		// The cause names the signal (signal.NotifyContext), so an
		// agent stopped by someone else's kill says so.
		logger.Info("strand agent stopping", "reason", context.Cause(ctx))
	case serveErr = <-a.serveErr:
		logger.Error("kafka listener failed", "err", serveErr)
	case <-a.replica.Halted():
		// A halted copy serves nothing right again in this process: exit
		// (fail-stop) rather than limp, up and never ready. A copy that
		// woke below the log's trim point (this agent was stopped past
		// its lease while another trimmed) restores the newest snapshot
		// when started again (Start).
		serveErr = fmt.Errorf("metadata replica halted; exiting so a restart can recover: %w", a.replica.Err())
		logger.Error("metadata replica halted; exiting", "err", a.replica.Err())
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	return errors.Join(serveErr, a.Stop(stopCtx))
}

// ensureInternalTopics creates __consumer_offsets on a new cluster
// (kafka/internal_topics.go). Every agent checks at start; when two race,
// one gets TOPIC_ALREADY_EXISTS, which is fine.
func ensureInternalTopics(ctx context.Context, r *replica.Replica) error {
	v := r.View()
	_, ok, err := v.Topic(kafka.ConsumerOffsetsTopic)
	v.Close()
	if err != nil || ok {
		return err
	}
	res, err := r.ProposeBatch(ctx, []meta.Command{kafka.ConsumerOffsetsCommand()})
	if err != nil {
		return fmt.Errorf("creating %s: %w", kafka.ConsumerOffsetsTopic, err)
	}
	if err := res[0].Err(); err != nil && res[0].Code != kerr.TopicAlreadyExists.Code {
		return fmt.Errorf("creating %s: %w", kafka.ConsumerOffsetsTopic, err)
	}
	return nil
}

// Start opens every piece in dependency order and starts serving. On error
// it closes what it opened.
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (_ *Agent, err error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	a := &Agent{cfg: cfg, logger: logger, metrics: newMetrics(), serveErr: make(chan error, 1)}
	defer func() {
		if err != nil {
			a.closeAll(context.Background())
		}
	}()

	// The Kafka listeners are bound before anything else, so a port in
	// use is found before the data dir is created and the log replayed
	// (minutes on a long log), with a message that names the port and
	// the flag. Clients that connect meanwhile wait in the accept queue
	// until the server starts.
	if err := a.openListeners(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if a.dirLock, err = lockDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	agentID, err := loadOrCreateID(filepath.Join(cfg.DataDir, "agent-id"))
	if err != nil {
		return nil, err
	}

	// The HTTP endpoints come up first so /healthz answers while the
	// replica replays the log; /readyz turns true once serving.
	if cfg.HTTPListen != "" {
		if err := a.startHTTP(); err != nil {
			return nil, err
		}
	}

	if err := a.openStore(ctx); err != nil {
		return nil, err
	}
	// A test build may run the agent on a skewed clock (package
	// planted); every other build's offset is 0.
	clk := clock.Shifted(clock.OrReal(cfg.testing.clock), planted.ClockOffset())
	logPassword, err := readSecretFile(cfg.LogPasswordFile)
	if err != nil {
		return nil, fmt.Errorf("log-password-file: %w", err)
	}
	vlog, err := logurl.OpenVirtualWith(ctx, cfg.Log, sharedlog.VirtualOptions{Clock: clk}, logurl.Options{
		File:     filelog.Options{Logger: logger.With("component", "log"), FS: cfg.testing.logFS},
		Password: logPassword,
		Count:    a.metrics.countLogRequest,
	})
	if err != nil {
		return nil, fmt.Errorf("shared log %s: %s", RedactURL(cfg.Log), redactURLsIn(err.Error(), cfg.Log))
	}
	a.log = vlog
	metaDir := filepath.Join(cfg.DataDir, "meta")
	if err := restoreIfEmpty(ctx, metaDir, a.store, vlog, logger); err != nil {
		return nil, err
	}
	metaCfg := replica.Config{
		Dir:      metaDir,
		Log:      timedLog{VirtualLog: vlog, m: a.metrics, health: &a.appends},
		WriterID: agentID,
		Logger:   logger.With("component", "meta"),
		FS:       cfg.testing.metaFS,
		FailStop: a.failStop,
		Clock:    clk,
		Applied: func(results []meta.Result) {
			if w := a.offsets.Load(); w != nil {
				w.Note(results)
			}
			if h := cfg.testing.applied; h != nil {
				h()
			}
		},
	}
	a.replica, err = replica.Open(ctx, metaCfg)
	if errors.Is(err, sharedlog.ErrTrimmed) {
		// This copy stopped below the log's trim point (it was down
		// while other agents snapshotted and trimmed the shared log):
		// replaying cannot catch it up, a snapshot can. The old copy
		// is kept aside, not deleted, for whoever wants to look.
		aside := metaDir + ".trimmed-" + strconv.FormatInt(time.Now().Unix(), 10)
		logger.Warn("local metadata copy is below the log's trim point; restoring the newest snapshot",
			"err", err, "moved_to", aside)
		if err := os.Rename(metaDir, aside); err != nil {
			return nil, fmt.Errorf("moving the trimmed-out metadata copy aside: %w", err)
		}
		if err := restoreIfEmpty(ctx, metaDir, a.store, vlog, logger); err != nil {
			return nil, err
		}
		a.replica, err = replica.Open(ctx, metaCfg)
	}
	if errors.Is(err, filelog.ErrLocked) {
		return nil, fmt.Errorf("shared log %s is in use by another agent: a file log serves one agent; "+
			"for several agents on one log use PostgreSQL, etcd, DynamoDB or S3 (--log): %w", RedactURL(cfg.Log), err)
	}
	if err != nil {
		return nil, fmt.Errorf("metadata replica: %w", err)
	}
	if err := checkFeatures(a.replica); err != nil {
		return nil, err
	}
	a.registerReplicaMetrics()
	a.snapshots = newSnapshotter(a.replica, vlog, a.store, agentID, cfg.SnapshotInterval, cfg.SnapshotKeep, a.metrics, logger.With("component", "snapshot"))

	// The read cache takes the agent's own objects as they are written,
	// so consumers that keep up never touch the object store.
	mem := SplitMemory(cfg.MemoryBudget)
	cache := fetch.NewCache(mem.ReadCache)
	a.damage = fetch.NewDamageLog(logger.With("component", "fetch"))
	a.metrics.reg.MustRegister(newDamageCollector(a.damage))
	a.metrics.reg.MustRegister(newCacheCollector(cache))
	a.pipeline, err = produce.New(produce.Config{
		MaxBufferedBytes: mem.ProduceBuffer,
		Store:            a.store,
		Express:          a.express,
		Replica:          a.replica,
		AgentID:          agentID + "-" + strconv.FormatUint(a.replica.Incarnation(), 10),
		KeyTime:          func() int64 { return a.keyTime(clk) },
		FlushInterval:    cfg.FlushInterval,
		FlushBytes:       cfg.FlushBytes,
		HedgePercentile:  max(cfg.ObjStoreHedgePercentile, 0),
		HedgeMaxRatio:    cfg.ObjStoreHedgeMaxRatio,
		HedgeMinDelay:    cfg.ObjStoreHedgeMinDelay,
		MaxPutsPerSec:    cfg.MaxPutsPerSec,
		PacedCutBytes:    cfg.PacedObjectBytes,
		Cache:            cache,
		Logger:           logger.With("component", "produce"),
		Observer:         produceObserver{m: a.metrics},
		Clock:            clk,
	})
	if err != nil {
		return nil, fmt.Errorf("produce pipeline: %w", err)
	}
	offsetsMetrics := offsetstopic.NewMetrics()
	a.metrics.reg.MustRegister(offsetsMetrics.Collectors()...)
	var offsetsProducer offsetstopic.Producer = a.pipeline
	if wrap := cfg.testing.offsetsProducer; wrap != nil {
		offsetsProducer = wrap(offsetsProducer)
	}
	offsets, err := offsetstopic.New(offsetstopic.Config{
		Meta:     a.replica,
		Producer: offsetsProducer,
		Metrics:  offsetsMetrics,
		Clock:    clk,
		Logger:   logger.With("component", "offsetstopic"),
	})
	if err != nil {
		return nil, fmt.Errorf("__consumer_offsets writer: %w", err)
	}
	a.offsets.Store(offsets)

	a.metrics.registerZones(cfg.Rack, a.cfg.listenerZones())
	if err := a.newSinks(); err != nil {
		return nil, err
	}
	if err := a.newConnect(); err != nil {
		return nil, err
	}
	if err := a.startSQL(); err != nil {
		return nil, err
	}
	a.kafkaLn = a.listeners[0].ln
	host, port := a.listeners[0].endpoint.Host, a.listeners[0].endpoint.Port
	kafkaListeners, err := a.kafkaListeners(logger.With("component", "tls"))
	if err != nil {
		return nil, err
	}

	// A new cluster starts at this build's highest feature levels,
	// before anyone registers; then registering fixes the cluster id on
	// a new log and puts this agent in every agent's Metadata; the lease
	// is renewed until Stop. The heartbeat carries this build's ranges
	// from strand.metadata.version 2 on.
	if err := bootstrapFeatures(ctx, a.replica, cfg.TransactionVersion, logger); err != nil {
		return nil, err
	}
	a.members = newMembership(a.replica, meta.AgentHeartbeat{
		NodeID: cfg.NodeID, AgentID: agentID, Host: host, Port: port, Rack: cfg.Rack, LeaseMs: cfg.Lease.Milliseconds(),
		Features: meta.SupportedFeatures(), Endpoints: a.agentEndpoints(),
	}, logger.With("component", "membership"))
	a.members.clk = clk
	a.clock = newClockGuard(clk, a.replica.View, cfg.MaxClockSkew, cfg.Lease/3, logger.With("component", "clock"))
	a.members.renewed = func() {
		a.clock.check()
		a.metrics.zones.learn(a.members.racks())
	}
	a.registerClockMetrics()
	if err := a.members.register(ctx); err != nil {
		return nil, fmt.Errorf("registering in the agent table: %w", err)
	}
	a.members.start()
	if err := ensureInternalTopics(ctx, a.replica); err != nil {
		return nil, err
	}
	if err := ensureBootstrapUser(ctx, a.replica, &cfg, logger.With("component", "sasl")); err != nil {
		return nil, err
	}
	if err := a.reconcileClusterFlags(ctx); err != nil {
		return nil, err
	}
	clusterID, err := a.members.clusterID()
	if err != nil {
		return nil, fmt.Errorf("cluster id: %w", err)
	}

	a.groups, err = group.New(ctx, group.Config{
		Meta:                      a.replica,
		NodeID:                    cfg.NodeID,
		Nodes:                     a.members.nodes,
		InitialRebalanceDelay:     cfg.GroupInitialRebalanceDelay,
		MinSessionTimeout:         cfg.GroupMinSessionTimeout,
		MaxSessionTimeout:         cfg.GroupMaxSessionTimeout,
		MaxGroupSize:              cfg.GroupMaxSize,
		OffsetRetention:           cfg.OffsetsRetention,
		HoldExpiry:                a.clock.hold,
		ConsumerSessionTimeout:    cfg.ConsumerGroupSessionTimeout,
		ConsumerHeartbeatInterval: cfg.ConsumerGroupHeartbeatInterval,
		// DeleteGroups of a share group deletes its share partitions'
		// state too (meta.ShareStateDelete of every topic).
		DeleteShareState: func(ctx context.Context, g string) error {
			res, err := a.replica.ProposeBatch(ctx, []meta.Command{meta.ShareStateDelete{Group: g}})
			if err == nil {
				err = res[0].Err()
			}
			return err
		},
		Logger: logger.With("component", "group"),
		Clock:  clk,
	})
	if err != nil {
		return nil, fmt.Errorf("group coordinator: %w", err)
	}
	telemetry := clientmetrics.New(cfg.clientTelemetry(clk))
	a.metrics.reg.MustRegister(telemetry)
	a.metrics.reg.MustRegister(telemetry.Collectors()...)
	a.metrics.reg.MustRegister(newGroupCollector(a.replica.View,
		a.groups.Owns,
		cfg.MetricsMaxGroupPartitions, logger.With("component", "metrics")))
	// Records a crash lost (applied, never written) of the groups this
	// agent coordinates are written again (offsetstopic.Resync).
	a.offsetsResynced = offsets.Resync(a.groups.Owns)
	a.txns, err = txn.New(txn.Config{
		Meta:      a.replica,
		NodeID:    cfg.NodeID,
		Placement: placement.Ring{Self: cfg.NodeID, Live: a.members.nodes},
		ClockOff:  a.clock.hold,
		Clock:     clk,
		Logger:    logger.With("component", "txn"),
	})
	if err != nil {
		return nil, fmt.Errorf("transaction coordinator: %w", err)
	}
	// What is decided by time is placed on a ring that holds while this
	// agent's clock disagrees with the log's.
	timeRing := placement.Ring{Self: cfg.NodeID, Live: a.members.nodes, Hold: a.clock.hold}
	a.retention, err = retention.Start(retention.Config{
		Meta:      a.replica,
		Placement: timeRing,
		Interval:  cfg.LogRetentionCheckInterval,
		DefaultMs: cfg.LogRetentionMs, DefaultBytes: cfg.LogRetentionBytes,
		Clock:  clk,
		Logger: logger.With("component", "retention"),
	})
	if err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	cleanerMetrics := cleaner.NewMetrics()
	a.metrics.reg.MustRegister(cleanerMetrics.Collectors()...)
	a.cleaner, err = cleaner.New(cleaner.Config{
		Store:     a.store,
		Meta:      a.replica,
		Placement: timeRing,
		AgentID:   agentID + "-" + strconv.FormatUint(a.replica.Incarnation(), 10),
		MapBytes:  cfg.LogCleanerDedupeBufferSize,
		Interval:  cfg.LogCleanerBackoff,
		Metrics:   cleanerMetrics,
		Clock:     clk,
		Logger:    logger.With("component", "cleaner"),
	})
	if err != nil {
		return nil, fmt.Errorf("cleaner: %w", err)
	}
	a.cleaner.Start()
	a.collector, err = gc.New(gc.Config{
		Store:     a.store,
		Meta:      a.replica,
		Placement: timeRing,
		Grace:     cfg.GCGrace,
		Clock:     clk,
		Logger:    logger.With("component", "gc"),
	})
	if err != nil {
		return nil, fmt.Errorf("garbage collector: %w", err)
	}
	a.collector.Start()
	a.metrics.reg.MustRegister(gc.NewMetrics(a.replica))
	if cfg.Compaction {
		m := compact.NewMetrics()
		a.metrics.reg.MustRegister(m.Collectors()...)
		a.compactor, err = compact.New(compact.Config{
			Store:          a.store,
			Meta:           a.replica,
			Placement:      placement.Ring{Self: cfg.NodeID, Live: a.members.nodes},
			AgentID:        agentID + "-" + strconv.FormatUint(a.replica.Incarnation(), 10),
			KeyTime:        func() int64 { return a.keyTime(clk) },
			TargetBytes:    cfg.CompactionTargetBytes,
			MaxBytesPerSec: cfg.CompactionMaxBytesPerSec,
			MinAge:         cfg.CompactionMinAge,
			MaxLag:         cfg.CompactionMaxLag,
			Metrics:        m,
			Clock:          clk,
			Logger:         logger.With("component", "compact"),
		})
		if err != nil {
			return nil, fmt.Errorf("compactor: %w", err)
		}
		a.compactor.Start()
	}
	aclCfg, err := cfg.aclConfig()
	if err != nil {
		return nil, err
	}
	// The in-process connections of the web console (console.go), the
	// SQL endpoint (sql.go) and the connectors' tasks (connect.go).
	aclCfg.SuperUsers = append(aclCfg.SuperUsers, consolePrincipal, sqlPrincipal, connectPrincipal)
	a.denials = a.newDenialLog(clk)
	aclCfg.Denials = a.denials
	perIPOverrides, err := kafka.ParseConnsPerIPOverrides(cfg.MaxConnectionsPerIPOverrides)
	if err != nil {
		return nil, fmt.Errorf("max-connections-per-ip-overrides: %w", err)
	}
	// One schema registry over the replica: served on
	// --schema-registry-listen (registry.go), shown by the console and
	// read by validation on produce, whether or not it is served.
	a.registry = schemareg.New(a.replica, avroschema.Format{}, protoschema.Format{}, jsonschema.Format{})
	reader := fetch.NewReader(a.store, cache).WithDamageLog(a.damage).WithReadAhead(cfg.readAhead())
	shareMetrics := share.NewMetrics(a.replica.View)
	a.metrics.reg.MustRegister(shareMetrics.Collectors()...)
	a.shares = share.NewServer(share.Options{Meta: a.replica, Fetch: reader, Changes: a.replica, Configs: shareConfigs(cfg, a.replica),
		Clock: clk, Metrics: shareMetrics, Log: logger.With("component", "share")})
	a.server, err = kafka.New(kafka.Config{
		Logger:                 logger.With("component", "kafka"),
		Observer:               kafkaObserver{m: a.metrics},
		MaxConns:               cfg.MaxConnections,
		MaxConnsPerIP:          cfg.MaxConnectionsPerIP,
		MaxConnsPerIPOverrides: perIPOverrides,
		IdleTimeout:            cfg.ConnectionsMaxIdle,
		MaxRequestBytes:        mem.MaxRequestBytes,
		MaxQueuedRequestBytes:  mem.QueuedRequestBytes,
		MaxHeldResponseBytes:   mem.HeldResponses,
		FetchSessionSlots:      cfg.MaxIncrementalFetchSessionCacheSlots,
		Quota: quota.Config{
			Window: quota.Window{Samples: cfg.QuotaWindowNum, Size: time.Duration(cfg.QuotaWindowSizeSeconds) * time.Second},
			Clock:  clk,
		},
		SASL: cfg.saslConfig(),
		Deps: kafka.Deps{
			MaxPartitionsPerTopic:      cfg.MaxPartitionsPerTopic,
			MaxPartitions:              cfg.MaxPartitions,
			MaxFetchBytesPerSec:        cfg.MaxFetchBytesPerSec,
			NoTailPace:                 cfg.NoProduceYieldToTail,
			BrokerDefaults:             brokerDefaults(cfg),
			RetentionCheckIntervalMs:   cfg.LogRetentionCheckInterval.Milliseconds(),
			Loggers:                    cfg.LogLevels,
			LogCleanerBackoffMs:        cfg.LogCleanerBackoff.Milliseconds(),
			LogCleanerDedupeBufferSize: cfg.LogCleanerDedupeBufferSize,
			GCGraceMs:                  cfg.GCGrace.Milliseconds(),
			GCDeleteDelayMs:            cfg.GCDeleteDelay.Milliseconds(),
			DeadBytes:                  deadBytesOf(gc.NewDeadBytes(a.store)),
			Telemetry:                  telemetry,
			Meta:                       a.replica,
			Cluster:                    kafka.ClusterInfo{ClusterID: clusterID, NodeID: cfg.NodeID, Host: host, Port: port, Rack: cfg.Rack, Endpoints: a.endpoints(), Brokers: a.members.brokers},
			AutoCreateTopics:           cfg.AutoCreateTopics,
			DefaultPartitions:          cfg.DefaultPartitions,
			TransactionVersion:         cfg.TransactionVersion,
			Features:                   featureProber{},
			Produce:                    a.pipeline,
			Fetch:                      reader,
			Shares:                     a.shares,
			ShareGroups:                a.groups,
			Groups:                     a.groups,
			Now:                        clk.Now,
			Txns:                       a.txns,
			// Schema validation on produce reads the registry's
			// schemas from this replica.
			Schemas: validate.New(a.replica, a.registry, 0, 0),
			ACL:     aclCfg,
		},
	})
	if err != nil {
		return nil, err
	}
	a.registerConnMetrics()
	for i, l := range a.listeners {
		go func() {
			if err := a.server.ServeListener(context.Background(), l.ln, kafkaListeners[i]); err != nil && !errors.Is(err, kafka.ErrServerClosed) {
				select {
				case a.serveErr <- fmt.Errorf("listener %s: %w", l.name, err):
				default: // one failure is enough to stop the agent
				}
			}
		}()
	}
	if a.httpLn != nil && !cfg.NoConsole {
		if err := a.startConsole(); err != nil {
			return nil, err
		}
	}
	if cfg.SchemaRegistryListen != "" {
		if err := a.startRegistry(); err != nil {
			return nil, err
		}
	}
	a.ready.Store(true)
	a.startViews()
	a.startSinks()
	if err := a.startConnect(); err != nil {
		return nil, err
	}
	logger.Info("strand agent serving",
		"kafka", a.kafkaLn.Addr().String(), "advertise", net.JoinHostPort(host, strconv.Itoa(int(port))),
		"listeners", a.listenerSummary(),
		"http", a.HTTPAddr(), "schema_registry", a.RegistryAddr(), "connect", a.ConnectAddr(), "data_dir", cfg.DataDir, "objstore", RedactURL(cfg.ObjStore), "log", RedactURL(cfg.Log),
		"node_id", cfg.NodeID, "agent_id", agentID, "incarnation", a.replica.Incarnation(), "applied", a.replica.NextToApply(),
		"memory_budget", FormatBytes(mem.Budget), "read_cache", FormatBytes(mem.ReadCache),
		"request_bytes", FormatBytes(mem.QueuedRequestBytes), "produce_buffer", FormatBytes(int64(mem.ProduceBuffer)),
		"response_budget", FormatBytes(mem.HeldResponses),
		"compaction", cfg.Compaction, "hedged_uploads", cfg.ObjStoreHedgePercentile > 0, "express_zones", a.expressZones())
	return a, nil
}

// offsetsCloseTimeout bounds how long a shutdown waits for the pending
// __consumer_offsets records (package offsetstopic).
const offsetsCloseTimeout = 5 * time.Second

// brokerDefaults are the topic config defaults cfg's flags change, by
// topic config name, for DescribeConfigs.
func brokerDefaults(cfg Config) map[string]string {
	m := map[string]string{}
	if cfg.LogRetentionMs != DefaultLogRetentionMs {
		m["retention.ms"] = strconv.FormatInt(cfg.LogRetentionMs, 10)
	}
	if cfg.LogRetentionBytes != -1 {
		m["retention.bytes"] = strconv.FormatInt(cfg.LogRetentionBytes, 10)
	}
	if cfg.MessageMaxBytes != 0 && cfg.MessageMaxBytes != DefaultMessageMaxBytes {
		m["max.message.bytes"] = strconv.Itoa(int(cfg.MessageMaxBytes))
	}
	return m
}

func (a *Agent) openStore(ctx context.Context) error {
	store, err := objurl.Open(ctx, a.cfg.ObjStore)
	if err != nil {
		return fmt.Errorf("object store %s: %w", a.cfg.ObjStore, err)
	}
	profile, err := a.cfg.latencyProfile()
	if err != nil {
		return err
	}
	if profile != nil {
		// A fixed seed: two runs with the same load see the same delays.
		dist, err := objstore.NewLatency(*profile, 1)
		if err != nil {
			return err
		}
		store = objstore.WithLatency(store, dist)
	}
	store = objstore.WithTiming(store, a.metrics.objstoreDone)
	if store, err = a.openExpress(ctx, store, profile); err != nil {
		return err
	}
	a.store = store
	return nil
}

// keyTime is the time new data object keys carry: the later of the
// agent's clock and its copy's log clock, so that a clock running behind
// the log's does not give fresh objects keys that the garbage collector's
// orphan horizon (log clock minus grace) has already passed.
func (a *Agent) keyTime(clk clock.Clock) int64 {
	now := clk.Now().UnixMilli()
	v := a.replica.View()
	defer v.Close()
	if lc, err := v.LogClock(); err == nil && lc > now {
		return lc
	}
	return now
}

// KafkaAddr is the address the Kafka listener bound.
func (a *Agent) KafkaAddr() string { return a.kafkaLn.Addr().String() }

// HTTPAddr is the address the HTTP listener bound, or "" if it is off.
func (a *Agent) HTTPAddr() string {
	if a.httpLn == nil {
		return ""
	}
	return a.httpLn.Addr().String()
}

// Replica is the agent's metadata replica (for tests and tools).
func (a *Agent) Replica() *replica.Replica { return a.replica }

// CleanCompacted runs a cleaning pass over the compacted topics'
// partitions this agent owns now, without waiting for the next one
// (log.cleaner.backoff.ms): for tests and tools that need compaction
// done at a known point.
func (a *Agent) CleanCompacted(ctx context.Context) (cleaner.RoundStats, error) {
	return a.cleaner.Pass(ctx)
}

func (a *Agent) startHTTP() error {
	ln, err := net.Listen("tcp", a.cfg.HTTPListen)
	if err != nil {
		return fmt.Errorf("http listen: %w", err)
	}
	a.httpLn = ln
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !a.ready.Load() {
			http.Error(w, "not ready: replaying the log", http.StatusServiceUnavailable)
			return
		}
		if err := a.replica.Err(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if err := a.appends.failing(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if err := a.clock.err(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("/metrics", promhttp.HandlerFor(a.metrics.reg, promhttp.HandlerOpts{}))
	a.mountAdmin(mux)
	a.mountPprof(mux)
	a.mountConsole(mux)
	a.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if a.cfg.HTTPTLS {
		if err := a.serveHTTPOverTLS(); err != nil {
			ln.Close()
			return err
		}
		ln = a.httpLn
	}
	go func() {
		if err := a.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.logger.Error("http server", "err", err)
		}
	}()
	return nil
}

// advertised resolves the host and port given to clients: the configured
// address, or the one the listener bound. A wildcard bind address is not
// reachable, so it is advertised as an empty host, which the Kafka layer
// replaces with the address each client connected to.
func advertised(configured string, bound net.Addr) (string, int32, error) {
	addr := configured
	if addr == "" {
		addr = bound.String()
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("advertise %q: %w", addr, err)
	}
	port, err := strconv.ParseInt(portStr, 10, 32)
	if err != nil {
		return "", 0, fmt.Errorf("advertise %q: bad port", addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = ""
	}
	return host, int32(port), nil
}

// loadOrCreateID reads a random identifier kept in path, creating it on
// first start. The agent id must survive restarts: it names this agent's
// writer in the log, whose dedupe state is keyed by it.
func loadOrCreateID(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if id == "" {
			return "", fmt.Errorf("%s is empty", path)
		}
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(raw[:])
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", err
	}
	f, err := os.Open(tmp)
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	return id, nil
}

// shareConfigs is cfg.ShareConfigs, else the GROUP config resources held
// in the metadata.
func shareConfigs(cfg Config, m meta.Viewer) share.Configs {
	if cfg.ShareConfigs != nil {
		return cfg.ShareConfigs
	}
	return share.MetaConfigs(m)
}
