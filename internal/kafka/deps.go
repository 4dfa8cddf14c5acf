package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/strandkafka/strand/internal/clientmetrics"
	"github.com/strandkafka/strand/internal/loglevel"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
)

// Deps is what handlers reach outside this package: the metadata database,
// the produce pipeline, the group and transaction coordinators. Each
// handler file adds the narrow interface it needs as a field, so a test
// wires only what the handlers under test use. A handler whose
// dependency is nil closes the connection with ErrMissingDeps: that is a
// wiring bug, not a client's.
type Deps struct {
	// Meta is this agent's copy of the metadata database. Admin requests
	// propose commands through it; every handler reads its local View,
	// which already holds what this agent proposed (Propose returns after
	// the local apply), so a topic is visible right after CreateTopics.
	Meta MetaDB
	// Cluster is this agent and its peers as clients see them.
	Cluster ClusterInfo
	// AutoCreateTopics is auto.create.topics.enable: Metadata creates a
	// topic it is asked about that does not exist, when the request
	// allows it.
	AutoCreateTopics bool
	// DefaultPartitions is num.partitions: the partition count of
	// auto-created topics and of CreateTopics asking for -1. Zero means 1.
	DefaultPartitions int32
	// Produce takes the batches Produce accepts (*produce.Pipeline).
	Produce Appender
	// Fetch reads committed batches for Fetch (*fetch.Reader).
	Fetch Fetcher
	// Changes wakes long-polling Fetches on their partitions; nil means
	// Meta, which must then be a Notifier (*replica.Replica is).
	Changes Notifier
	// Groups is the group coordinator (*group.Coordinator); the group
	// API handlers and FindCoordinator need it.
	Groups GroupCoordinator
	// Schemas checks the records of batches produced to topics with
	// schema validation on (schema_validation.go; *validate.Validator).
	Schemas SchemaValidator
	// Txns is the transaction coordinator (*txn.Coordinator); the
	// transaction API handlers, FindCoordinator and Produce v12 need it.
	Txns TxnCoordinator
	// Shares serves ShareFetch and ShareAcknowledge (*share.Server);
	// ShareGroups tells the share-offset admin requests about a group's
	// membership (nil: the metadata alone, shares.go).
	Shares      ShareServer
	ShareGroups ShareGroupInfo
	// Now is the agent's clock; nil means time.Now.
	Now func() time.Time
	// TransactionVersion is the transaction.version feature level
	// ApiVersions reports while the shared log finalized none (a log of
	// builds before feature levels), and the level a new cluster
	// starts at: 2 (also for 0) has clients use KIP-890 part 2, 1 keeps
	// them on the older protocol.
	TransactionVersion int16
	// Features asks agents registered without their supported feature
	// ranges which ones they support, for UpdateFeatures
	// (FeatureProber); nil refuses an update while such an agent is
	// live.
	Features FeatureProber
	// MaxPartitionsPerTopic and MaxPartitions bound the partitions of one
	// topic and of the cluster (KIP-578's max.partitions) that
	// CreateTopics, CreatePartitions and auto-creation may make
	// (partition_limits.go); zero means the defaults.
	MaxPartitionsPerTopic int32
	MaxPartitions         int64
	// MaxFetchBytesPerSec paces the record bytes Fetch answers carry,
	// across the agent, like a consumer byte-rate quota that every
	// client shares; zero means no fixed cap (the adaptive pace of
	// fetch_yield.go still applies).
	MaxFetchBytesPerSec int64
	// NoTailPace turns off fetch_tail.go's pace: Produce no longer
	// yields to tail consumers falling behind for want of CPU.
	NoTailPace bool
	// BrokerDefaults holds, by topic config name, the defaults this
	// agent's flags set where they differ from Kafka's (retention.ms
	// from --log-retention-ms): DescribeConfigs reports them as
	// STATIC_BROKER_CONFIG, as Kafka reports server.properties.
	BrokerDefaults map[string]string
	// ACL turns authorization on (authz.go); off by default, when every
	// client may do everything.
	ACL ACLConfig
	// LogCleanerBackoffMs and LogCleanerDedupeBufferSize are the
	// cleaner's flag values, shown by DescribeConfigs under their
	// dynamic configs (broker_limits.go); zero is the default.
	LogCleanerBackoffMs        int64
	LogCleanerDedupeBufferSize int64
	// GCGraceMs is --gc-grace, shown as meta.GCGraceConfig's static
	// value (0: the default).
	GCGraceMs int64
	// DeadBytes, if set, returns the bytes dead objects still hold in the
	// store by topic and partition as of v's dead-object queue
	// (gc.DeadBytes): DescribeLogDirs' second dir.
	DeadBytes func(ctx context.Context, v *meta.View) (map[meta.TopicID]map[int32]int64, error)
	// GCDeleteDelayMs is --gc-delete-delay, shown as
	// meta.DeleteDelayConfig's static value (0: the default).
	GCDeleteDelayMs int64
	// Loggers are this agent's live log levels, its BROKER_LOGGER
	// resource (broker_loggers.go); nil: none can be changed.
	Loggers *loglevel.Levels
	// RetentionCheckIntervalMs is log.retention.check.interval.ms, shown
	// by DescribeConfigs; zero is Kafka's default.
	RetentionCheckIntervalMs int64
	// Telemetry holds KIP-714 client telemetry (GetTelemetrySubscriptions,
	// PushTelemetry); nil requests no metrics from clients.
	Telemetry *clientmetrics.Manager

	// shared is what handlers share across connections (shared.go), set
	// by New; nil in handler tests that build Deps by hand.
	shared *sharedState
	// longPollWaiting, a test seam, is called each time a long-polling
	// Fetch is about to wait: its partitions watched and read.
	longPollWaiting func()
	// quotaUser, a test seam until SASL sets principals, names the user
	// quotas see for a client id; "" keeps the connection's principal.
	quotaUser func(clientID string) string
}

// ErrMissingDeps: a handler ran without a dependency it needs in Deps.
var ErrMissingDeps = errors.New("kafka: handler dependency missing from Deps")

// MetaDB is what handlers need of the metadata database. *replica.Replica
// implements it; metatest.DB does in memory, so a handler test needs no
// Pebble; tests may wrap either to inject faults.
type MetaDB interface {
	// View (meta.Viewer) returns a snapshot of the local copy; the
	// caller closes it.
	meta.Viewer
	// ProposeBatch proposes commands that land in one log entry and
	// returns their results once applied locally.
	ProposeBatch(ctx context.Context, cmds []meta.Command) ([]meta.Result, error)
	// Sync returns once the local copy has applied everything appended
	// to the log before the call: a View taken after it is a
	// linearizable read.
	Sync(ctx context.Context) error
}

var _ MetaDB = (*replica.Replica)(nil)

// ClusterInfo describes the cluster to clients.
type ClusterInfo struct {
	// ClusterID is reported by Metadata (null when empty) and
	// DescribeCluster.
	ClusterID string
	// NodeID is this agent's broker id.
	NodeID int32
	// Host and Port are the address advertised for this agent. An empty
	// Host or a zero Port is taken from the local address of the client's
	// connection, which is right for a single agent on one interface.
	Host string
	Port int32
	// Rack is broker.rack; empty is null.
	Rack string
	// Endpoints are this agent's advertised listeners (Kafka's
	// advertised.listeners), Host and Port being the first one's. A
	// client is answered with the endpoint of the listener it
	// connected on (Conn.Listener), defaulted like Host/Port. Empty
	// means Host/Port serve every listener.
	Endpoints []Endpoint
	// Brokers lists the live agents, this one included, sorted by node
	// id. Nil means this agent alone. An entry with this agent's NodeID gets the same
	// Host/Port defaulting as above.
	Brokers func() []Broker
}

// Endpoint is the address one listener is advertised at.
type Endpoint struct {
	Listener string
	Host     string
	Port     int32
}

// Broker is one agent as Metadata and DescribeCluster list it.
type Broker struct {
	NodeID int32
	Host   string
	Port   int32
	// Rack is empty for null.
	Rack string
	// Endpoints are the agent's advertised listeners; brokers resolves
	// Host and Port from them for each connection's listener. Empty
	// (an agent that registered without them: a build before
	// listeners, or a cluster below metadata level 4) means Host/Port
	// is its first listener's address, taken to be the same listener
	// as this agent's first.
	Endpoints []Endpoint
}

func (d *Deps) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Deps) transactionVersion() int16 {
	if d.TransactionVersion <= 0 || d.TransactionVersion > maxTransactionVersion {
		return maxTransactionVersion
	}
	return d.TransactionVersion
}

func (d *Deps) defaultPartitions() int32 {
	if d.DefaultPartitions > 0 {
		return d.DefaultPartitions
	}
	return 1
}

// meta returns Deps.Meta, or ErrMissingDeps.
func (d *Deps) meta() (MetaDB, error) {
	if d == nil || d.Meta == nil {
		return nil, ErrMissingDeps
	}
	return d.Meta, nil
}

// brokers returns the live agents with their addresses for the listener
// of connection c, this agent's resolved for c. As in Kafka, an agent
// without that listener is left out.
func (d *Deps) brokers(c *Conn) []Broker {
	var bs []Broker
	if d.Cluster.Brokers != nil {
		bs = d.Cluster.Brokers()
	}
	if len(bs) == 0 {
		bs = []Broker{{NodeID: d.Cluster.NodeID, Host: d.Cluster.Host, Port: d.Cluster.Port, Rack: d.Cluster.Rack}}
	}
	listener := PlaintextListener.Name
	if c != nil {
		listener = c.Listener().Name
	}
	out := make([]Broker, 0, len(bs))
	for _, b := range bs {
		if b.NodeID == d.Cluster.NodeID {
			// This agent's own listeners are known here, whatever its
			// registration carries.
			b.Endpoints = d.Cluster.Endpoints
		}
		if !d.selectEndpoint(&b, listener) {
			continue
		}
		if b.NodeID == d.Cluster.NodeID && (b.Host == "" || b.Port == 0) {
			host, port := localHostPort(c)
			if b.Host == "" {
				b.Host = host
			}
			if b.Port == 0 {
				b.Port = port
			}
		}
		out = append(out, b)
	}
	return out
}

// selectEndpoint sets b's Host and Port to its endpoint for listener,
// and reports whether it has one. A broker without endpoints has only
// its first listener, which is taken to be named as this agent's first.
func (d *Deps) selectEndpoint(b *Broker, listener string) bool {
	if len(b.Endpoints) == 0 {
		return len(d.Cluster.Endpoints) == 0 || d.Cluster.Endpoints[0].Listener == listener
	}
	for _, e := range b.Endpoints {
		if e.Listener == listener {
			b.Host, b.Port = e.Host, e.Port
			return true
		}
	}
	return false
}

// partitionLeader is the broker Metadata names as a partition's leader.
// Any agent serves any partition, so this only steers clients: partitions
// are spread over the live agents, offset by the topic id so that every
// topic's partition 0 does not land on one agent. brokers must be sorted
// by node id (ClusterInfo.Brokers) for every agent to name the same one.
func (d *Deps) partitionLeader(brokers []Broker, id meta.TopicID, partition int32) int32 {
	switch len(brokers) {
	case 0:
		return d.Cluster.NodeID
	case 1:
		// Not always this agent: a client's zone may hold one other.
		return brokers[0].NodeID
	}
	// Topic ids are hashes, so four of their bytes spread well.
	h := uint64(binary.BigEndian.Uint32(id[:4]))
	return brokers[(h+uint64(partition))%uint64(len(brokers))].NodeID
}

// localHostPort is the address the client reached this agent at.
func localHostPort(c *Conn) (string, int32) {
	if c == nil {
		return "", 0
	}
	a := c.LocalAddr()
	if a == nil {
		return "", 0
	}
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return "", 0
	}
	p, _ := strconv.ParseInt(port, 10, 32)
	return host, int32(p)
}

// rackPtr is Rack as the wire's nullable string.
func rackPtr(rack string) *string {
	if rack == "" {
		return nil
	}
	return &rack
}
