package kafka

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
	"github.com/strandkafka/strand/internal/txn"
)

// testAgent is one whole agent for handler tests: a replica.Replica playing
// an in-memory shared log into a Pebble copy in a temp dir (or, from
// newMemAgent, a metatest.DB), an in-memory object store, the transaction
// coordinator over the copy, and the Kafka server on 127.0.0.1:0 with
// Deps wired, plus a kgo client and a kadm client pointed at it.
// Everything is closed at cleanup. Handler files that need more
// dependencies add agentOptions and fields here.
type testAgent struct {
	*testServer
	// Log and Replica are nil in an agent from newMemAgent.
	Log     *memlog.Loglet
	Replica *replica.Replica
	Store   *memobj.Store
	// Deps is the server's copy, the one handlers see.
	Deps   *Deps
	Client *kgo.Client
	Admin  *kadm.Client
}

// agentConfig is what agentOptions change before the server starts. The
// agent's log, replica and store are already running, so an option can
// wire them into Deps.
type agentConfig struct {
	// Server is the Kafka server config; Deps.Meta is the replica.
	Server     Config
	ClientOpts []kgo.Opt

	Log     *memlog.Loglet
	Replica *replica.Replica
	Store   *memobj.Store
	// txnTunes change the transaction coordinator's Config; it is made
	// over Deps.Meta once every option ran, unless one set Deps.Txns.
	txnTunes []func(*txn.Config)
}

type agentOption func(*agentConfig)

// withDeps changes the Deps before the server starts.
func withDeps(f func(*Deps)) agentOption {
	return func(c *agentConfig) { f(&c.Server.Deps) }
}

// withTxns changes the transaction coordinator's Config.
func withTxns(tune func(*txn.Config)) agentOption {
	return func(c *agentConfig) { c.txnTunes = append(c.txnTunes, tune) }
}

// withAutoCreate turns auto.create.topics.enable on with num.partitions.
func withAutoCreate(partitions int32) agentOption {
	return withDeps(func(d *Deps) {
		d.AutoCreateTopics = true
		d.DefaultPartitions = partitions
	})
}

// withMetaDB makes handlers see wrap(replica) instead of the replica.
func withMetaDB(wrap func(*replica.Replica) MetaDB) agentOption {
	return func(c *agentConfig) { c.Server.Deps.Meta = wrap(c.Replica) }
}

// Test cluster identity.
const (
	testClusterID = "strand-test-cluster"
	testNodeID    = 7
)

// newTestAgent starts an agent. By default it advertises its listener's
// address, has node id testNodeID, auto-creation off and 1 default
// partition.
func newTestAgent(t testing.TB, opts ...agentOption) *testAgent {
	t.Helper()
	log := memlog.New()
	t.Cleanup(func() { log.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	rep, err := replica.Open(ctx, replica.Config{
		Dir:      t.TempDir(),
		Log:      log,
		WriterID: fmt.Sprintf("agent-%d", testNodeID),
		Logger:   discardLogger,
	})
	if err != nil {
		t.Fatalf("replica.Open: %v", err)
	}
	t.Cleanup(func() { rep.Close() })
	return startTestAgent(t, agentConfig{Log: log, Replica: rep}, rep, opts)
}

// newMemAgent starts an agent like newTestAgent's whose handlers read
// and propose on db: no Pebble, no shared log. Options that need the
// replica (withGroups, withMetaDB) do not apply.
func newMemAgent(t testing.TB, db *metatest.DB, opts ...agentOption) *testAgent {
	t.Helper()
	return startTestAgent(t, agentConfig{}, db, opts)
}

// startTestAgent starts the server and the clients of an agent over db.
func startTestAgent(t testing.TB, cfg agentConfig, db MetaDB, opts []agentOption) *testAgent {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	cfg.Store = memobj.New()
	cfg.Server = Config{
		Logger: discardLogger,
		Deps: Deps{
			Meta: db,
			Cluster: ClusterInfo{
				ClusterID: testClusterID,
				NodeID:    testNodeID,
				Host:      "127.0.0.1",
				Port:      int32(port),
			},
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.Server.Deps.Txns == nil {
		cfg.Server.Deps.Txns = newTestTxns(t, cfg.Server.Deps.Meta, cfg.txnTunes...)
	}

	ts := serveOn(t, ln, cfg.Server)
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(ts.addr),
		kgo.RequestRetries(2),
		kgo.RetryTimeout(guard),
		// kgo asks for a telemetry subscription (key 71) on its own
		// after its first request, which would race with tests that
		// count requests; telemetry tests make their own clients.
		kgo.DisableClientMetrics(),
	}, cfg.ClientOpts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return &testAgent{
		testServer: ts,
		Log:        cfg.Log,
		Replica:    cfg.Replica,
		Store:      cfg.Store,
		Deps:       &ts.cfg.Deps,
		Client:     cl,
		Admin:      kadm.NewClient(cl),
	}
}

// newTestTxns is a transaction coordinator over store, as node
// testNodeID alone, without a timeout sweep (no handler test waits for
// one), closed at cleanup.
func newTestTxns(t testing.TB, store txn.Metadata, tunes ...func(*txn.Config)) *txn.Coordinator {
	t.Helper()
	cfg := txn.Config{Meta: store, NodeID: testNodeID, SweepInterval: -1, Logger: discardLogger}
	for _, tune := range tunes {
		tune(&cfg)
	}
	c, err := txn.New(cfg)
	if err != nil {
		t.Fatalf("txn.New: %v", err)
	}
	// Registered before the server's Shutdown, so it runs after it.
	t.Cleanup(func() { c.Close() })
	return c
}

// serveOn is startServer on a listener the caller opened (to know its
// port before New).
func serveOn(t testing.TB, ln net.Listener, cfg Config) *testServer {
	t.Helper()
	obs := newTestObserver()
	if cfg.Observer == nil {
		cfg.Observer = obs
	}
	s, err := New(cfg)
	if err != nil {
		ln.Close()
		t.Fatalf("New: %v", err)
	}
	ts := &testServer{Server: s, addr: ln.Addr().String(), obs: obs, served: make(chan error, 1)}
	go func() { ts.served <- s.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown at cleanup: %v", err)
		}
		select {
		case <-ts.served:
		case <-time.After(guard):
			t.Error("Serve did not return after Shutdown")
		}
	})
	return ts
}

// ctx is a context bounded by the deadlock guard. It also makes kadm ask
// for authorized operations, which makes it send every Metadata request
// rather than answer from kgo's metadata cache (kept for 5s): a test that
// creates a topic must see what the agent says now.
func (a *testAgent) ctx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	t.Cleanup(cancel)
	return kadm.WithAuthorizedOps(ctx)
}

// request sends req to the agent through the kgo client, at the highest
// version both sides serve, and returns the response.
func (a *testAgent) request(t testing.TB, req kmsg.Request) kmsg.Response {
	t.Helper()
	// kgo sends Produce at v13, which names topics by id: fill in the
	// ids of named topics, as kgo's producer does from Metadata.
	if p, ok := req.(*kmsg.ProduceRequest); ok {
		for i := range p.Topics {
			if rt := &p.Topics[i]; rt.TopicID == ([16]byte{}) {
				if tp, ok := a.topic(t, rt.Topic); ok {
					rt.TopicID = tp.ID
				}
			}
		}
	}
	resp, err := a.Client.SeedBrokers()[0].Request(a.ctx(t), req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp
}

// rawRequest sends req at exactly its version over a fresh connection,
// for versions kgo would not pick, and decodes the response.
func (a *testAgent) rawRequest(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	return roundTrip(t, dial(t, a.addr), 1, req)
}

// createTopic creates a topic through the Kafka API and returns its id.
func (a *testAgent) createTopic(t testing.TB, name string, partitions int32, configs map[string]*string) meta.TopicID {
	t.Helper()
	resp, err := a.Admin.CreateTopic(a.ctx(t), partitions, -1, configs, name)
	if err != nil || resp.Err != nil {
		t.Fatalf("CreateTopic(%s): %v, %v", name, err, resp.Err)
	}
	return meta.TopicID(resp.ID)
}

// testBatch is a record batch to commit: its record count and timestamps.
type testBatch struct {
	records          int32
	firstTs, maxTsMs int64
}

// objectSeq names test data objects uniquely.
var objectSeq atomic.Uint64

// commit writes a data object holding one fake batch per entry of batches
// to the object store and commits it to partition p of topic with
// meta.CommitObject, as the produce path will. It returns each batch's
// base offset.
func (a *testAgent) commit(t testing.TB, topic string, p int32, batches ...testBatch) []int64 {
	t.Helper()
	const batchBytes = 100
	id := a.topicID(t, topic)
	key := fmt.Sprintf("data/test-%d", objectSeq.Add(1))
	size := int64(len(batches)) * batchBytes
	if err := a.Store.Put(a.ctx(t), key, make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	co := meta.CommitObject{ObjectKey: key, ObjectSize: size}
	for i, b := range batches {
		co.Batches = append(co.Batches, meta.CommitBatch{
			TopicID: id, Partition: p,
			Position: int64(i) * batchBytes, Length: batchBytes,
			Records: b.records, BatchCount: 1,
			FirstTimestamp: b.firstTs, MaxTimestamp: b.maxTsMs,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		})
	}
	res, err := a.Replica.Propose(a.ctx(t), co)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	offs := make([]int64, len(res.Batches))
	for i, br := range res.Batches {
		if br.Code != 0 {
			t.Fatalf("commit batch %d: code %d", i, br.Code)
		}
		offs[i] = br.BaseOffset
	}
	return offs
}

// topicID reads a topic's id from the agent's copy.
func (a *testAgent) topicID(t testing.TB, name string) meta.TopicID {
	t.Helper()
	tp, ok := a.topic(t, name)
	if !ok {
		t.Fatalf("no topic %q", name)
	}
	return tp.ID
}

// topic reads a topic from the agent's copy.
func (a *testAgent) topic(t testing.TB, name string) (meta.Topic, bool) {
	t.Helper()
	v := a.Replica.View()
	defer v.Close()
	tp, ok, err := v.Topic(name)
	if err != nil {
		t.Fatal(err)
	}
	return tp, ok
}

// splitAddr splits host:port.
func splitAddr(addr string) (string, int32, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.ParseInt(port, 10, 32)
	return host, int32(p), err
}
