package kafka

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/txn"
)

// txnAdminAgent is a test agent on a metatest.DB stamped by a clock the
// test sets, so the log clock (which transaction start times and
// durations are read by) is the test's. The copy is in memory: no
// Pebble, no shared log, and what the test proposes is applied when it
// returns.
type txnAdminAgent struct {
	*testAgent
	Meta  *metatest.DB
	nowMs *atomic.Int64
}

// txnAdminT0 is where the test clock starts (unix ms).
const txnAdminT0 = 1_700_000_000_000

func newTxnAdminAgent(t *testing.T, opts ...agentOption) *txnAdminAgent {
	t.Helper()
	ta := &txnAdminAgent{nowMs: new(atomic.Int64)}
	ta.nowMs.Store(txnAdminT0)
	ta.Meta = metatest.New(func() time.Time { return time.UnixMilli(ta.nowMs.Load()) })
	ta.testAgent = newMemAgent(t, ta.Meta, opts...)
	return ta
}

// at sets the test clock to txnAdminT0+ms.
func (a *txnAdminAgent) at(ms int64) { a.nowMs.Store(txnAdminT0 + ms) }

// propose proposes c through Deps.Meta and fails the test on an error
// code.
func (a *txnAdminAgent) propose(t *testing.T, c meta.Command) meta.Result {
	t.Helper()
	res, err := a.Deps.Meta.ProposeBatch(a.ctx(t), []meta.Command{c})
	if err != nil {
		t.Fatalf("propose %v: %v", c.Type(), err)
	}
	if res[0].Code != 0 {
		t.Fatalf("propose %v: %v", c.Type(), res[0].Err())
	}
	for i, code := range res[0].Codes {
		if code != 0 {
			t.Fatalf("propose %v: item %d: %v", c.Type(), i, kerr.ErrorForCode(code))
		}
	}
	return res[0]
}

// begin initializes transactional id id and adds the partitions (topic
// name, partition) to a transaction; it returns the producer id.
func (a *txnAdminAgent) begin(t *testing.T, id string, parts ...meta.TopicPartition) int64 {
	t.Helper()
	res := a.propose(t, meta.InitTransactionalProducer{TransactionalID: id, TimeoutMs: 30_000, ProducerID: -1, ProducerEpoch: -1})
	if len(parts) > 0 {
		a.propose(t, meta.AddPartitionsToTxn{TransactionalID: id, ProducerID: res.ProducerID, ProducerEpoch: res.ProducerEpoch, Partitions: parts})
	}
	return res.ProducerID
}

// write commits one batch of records records to topic/p from producer
// pid at epoch 0 and sequence seq and returns its base offset.
func (a *txnAdminAgent) write(t *testing.T, topic string, p int32, pid int64, seq, records int32, transactional bool) int64 {
	t.Helper()
	v := a.Meta.View()
	tp, ok, err := v.Topic(topic)
	v.Close()
	if err != nil || !ok {
		t.Fatalf("topic %s: %v, %v", topic, ok, err)
	}
	res := a.propose(t, meta.CommitObject{
		ObjectKey: fmt.Sprintf("data/txn-admin-%d", objectSeq.Add(1)), ObjectSize: 100,
		Batches: []meta.CommitBatch{{
			TopicID: tp.ID, Partition: p, Length: 100, Records: records, BatchCount: 1,
			FirstTimestamp: txnAdminT0, MaxTimestamp: txnAdminT0,
			ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq, Transactional: transactional,
		}},
	})
	br := res.Batches[0]
	if br.Code != 0 {
		t.Fatalf("batch to %s/%d: %v", topic, p, kerr.ErrorForCode(br.Code))
	}
	return br.BaseOffset
}

func TestDescribeProducers(t *testing.T) {
	a := newTxnAdminAgent(t)
	a.createTopic(t, "t", 3, nil)
	pid := a.begin(t, "tx", meta.TopicPartition{Topic: "t", Partition: 0})
	a.at(5)
	a.write(t, "t", 0, 500, 0, 2, false) // offsets 0-1, an idempotent producer
	a.at(9)
	first := a.write(t, "t", 0, pid, 0, 3, true) // 2-4
	a.write(t, "t", 1, 500, 0, 1, false)

	described, err := a.Admin.DescribeProducers(a.ctx(t), kadm.TopicsSet{"t": {0: {}, 1: {}, 2: {}}})
	if err != nil {
		t.Fatalf("DescribeProducers: %v", err)
	}
	type prod struct {
		Partition  int32
		ID         int64
		Epoch      int16
		LastSeq    int32
		LastTs     int64
		CoordEpoch int32
		TxnStart   int64
	}
	var got []prod
	for _, d := range described.SortedProducers() {
		got = append(got, prod{d.Partition, d.ProducerID, d.ProducerEpoch, d.LastSequence, d.LastTimestamp, d.CoordinatorEpoch, d.CurrentTxnStartOffset})
	}
	want := []prod{
		{0, pid, 0, 2, txnAdminT0 + 9, -1, first},
		{0, 500, 0, 1, txnAdminT0 + 5, -1, -1},
		{1, 500, 0, 0, txnAdminT0 + 9, -1, -1},
	}
	slices.SortFunc(want, func(x, y prod) int {
		if x.Partition != y.Partition {
			return int(x.Partition - y.Partition)
		}
		return int(x.ID - y.ID)
	})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("producers:\n got %+v\nwant %+v", got, want)
	}
	for _, p := range described.SortedPartitions() {
		if p.Err != nil {
			t.Fatalf("partition %d: %v", p.Partition, p.Err)
		}
	}
	if ps := described["t"].Partitions[2]; len(ps.ActiveProducers) != 0 {
		t.Fatalf("partition 2 has producers %+v", ps.ActiveProducers)
	}

	// Once the transaction ends, nothing is ongoing there.
	a.propose(t, meta.EndTxn{TransactionalID: "tx", ProducerID: pid, Commit: true, Seq: -1})
	described, err = a.Admin.DescribeProducers(a.ctx(t), kadm.TopicsSet{"t": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	dp, ok := described["t"].Partitions[0].ActiveProducers[pid]
	if !ok || dp.CurrentTxnStartOffset != -1 {
		t.Fatalf("after commit: %+v, %v", dp, ok)
	}

	// Unknown topics and partitions, straight to the agent.
	req := kmsg.NewPtrDescribeProducersRequest()
	for _, rt := range []struct {
		topic string
		parts []int32
	}{{"t", []int32{3, -1, 1}}, {"missing", []int32{0}}} {
		dt := kmsg.NewDescribeProducersRequestTopic()
		dt.Topic, dt.Partitions = rt.topic, rt.parts
		req.Topics = append(req.Topics, dt)
	}
	resp := a.request(t, req).(*kmsg.DescribeProducersResponse)
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			codes[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.ErrorCode
		}
	}
	unknown := kerr.UnknownTopicOrPartition.Code
	if want := map[string]int16{"t/3": unknown, "t/-1": unknown, "t/1": 0, "missing/0": unknown}; !reflect.DeepEqual(codes, want) {
		t.Fatalf("codes %v, want %v", codes, want)
	}

	// State idle for producer.id.expiration.ms of log clock is gone.
	a.at(9 + meta.ProducerIDExpirationMs)
	a.propose(t, meta.CreateTopic{Name: "tick", Partitions: 1})
	described, err = a.Admin.DescribeProducers(a.ctx(t), kadm.TopicsSet{"t": {1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if ps := described["t"].Partitions[1].ActiveProducers; len(ps) != 0 {
		t.Fatalf("expired producers listed: %+v", ps)
	}
}

func TestDescribeTransactions(t *testing.T) {
	a := newTxnAdminAgent(t)
	a.createTopic(t, "t", 2, nil)
	a.createTopic(t, "u", 1, nil)
	a.at(10)
	pid1 := a.begin(t, "tx1",
		meta.TopicPartition{Topic: "u", Partition: 0},
		meta.TopicPartition{Topic: "t", Partition: 1},
		meta.TopicPartition{Topic: "t", Partition: 0})
	a.at(20)
	pid2 := a.begin(t, "tx2", meta.TopicPartition{Topic: "t", Partition: 0})
	a.propose(t, meta.EndTxn{TransactionalID: "tx2", ProducerID: pid2, Commit: true, Seq: -1})
	pid3 := a.begin(t, "tx3")

	described, err := a.Admin.DescribeTransactions(a.ctx(t), "tx1", "tx2", "tx3", "nope")
	if err != nil {
		t.Fatalf("DescribeTransactions: %v", err)
	}
	type txn struct {
		State          string
		PID            int64
		Epoch          int16
		Timeout        int32
		StartTimestamp int64
		Topics         kadm.TopicsSet
	}
	check := func(id string, want txn) {
		t.Helper()
		d, err := described.On(id, nil)
		if err != nil || d.Err != nil {
			t.Fatalf("%s: %v, %v", id, err, d.Err)
		}
		got := txn{d.State, d.ProducerID, d.ProducerEpoch, d.TimeoutMillis, d.StartTimestamp, d.Topics}
		if len(got.Topics) == 0 {
			got.Topics = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s = %+v, want %+v", id, got, want)
		}
	}
	check("tx1", txn{"Ongoing", pid1, 0, 30_000, txnAdminT0 + 10, kadm.TopicsSet{"t": {0: {}, 1: {}}, "u": {0: {}}}})
	check("tx2", txn{"CompleteCommit", pid2, 0, 30_000, -1, nil})
	check("tx3", txn{"Empty", pid3, 0, 30_000, -1, nil})
	if d := described["nope"]; !errors.Is(d.Err, kerr.TransactionalIDNotFound) {
		t.Fatalf("unknown id: %+v", d)
	}

	// A topic deleted during the transaction is left out.
	if _, err := a.Admin.DeleteTopic(a.ctx(t), "u"); err != nil {
		t.Fatal(err)
	}
	described, err = a.Admin.DescribeTransactions(a.ctx(t), "tx1")
	if err != nil {
		t.Fatal(err)
	}
	check("tx1", txn{"Ongoing", pid1, 0, 30_000, txnAdminT0 + 10, kadm.TopicsSet{"t": {0: {}, 1: {}}}})

	// A raw request keeps the order and the topics sorted by name.
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{"nope", "tx1"}
	resp := a.request(t, req).(*kmsg.DescribeTransactionsResponse)
	if len(resp.TransactionStates) != 2 || resp.TransactionStates[0].ErrorCode != kerr.TransactionalIDNotFound.Code ||
		resp.TransactionStates[1].ErrorCode != 0 || resp.TransactionStates[1].Topics[0].Topic != "t" ||
		!slices.Equal(resp.TransactionStates[1].Topics[0].Partitions, []int32{0, 1}) {
		t.Fatalf("raw DescribeTransactions: %+v", resp.TransactionStates)
	}
}

func TestListTransactions(t *testing.T) {
	a := newTxnAdminAgent(t)
	a.createTopic(t, "t", 1, nil)
	tp := meta.TopicPartition{Topic: "t", Partition: 0}
	a.at(10)
	a.begin(t, "tx1", tp)
	pid2 := a.begin(t, "tx2", tp)
	a.propose(t, meta.EndTxn{TransactionalID: "tx2", ProducerID: pid2, Commit: true, Seq: -1})
	a.begin(t, "tx3")
	a.at(1000)
	a.begin(t, "tx4", tp)
	a.at(2000)
	a.propose(t, meta.CreateTopic{Name: "tick", Partitions: 1}) // the log clock is now +2000

	list := func(pids []int64, states []string, pattern string) map[string]string {
		t.Helper()
		l, err := a.Admin.ListTransactionsByTxPattern(a.ctx(t), pids, states, pattern)
		if err != nil {
			t.Fatalf("ListTransactions(%v, %v, %q): %v", pids, states, pattern, err)
		}
		out := make(map[string]string)
		for _, lt := range l.Sorted() {
			out[lt.TxnID] = lt.State
		}
		return out
	}
	all := map[string]string{"tx1": "Ongoing", "tx2": "CompleteCommit", "tx3": "Empty", "tx4": "Ongoing"}
	for _, c := range []struct {
		name    string
		pids    []int64
		states  []string
		pattern string
		want    map[string]string
	}{
		{"all", nil, nil, "", all},
		{"ongoing", nil, []string{"Ongoing"}, "", map[string]string{"tx1": "Ongoing", "tx4": "Ongoing"}},
		{"two states", nil, []string{"Empty", "CompleteCommit"}, "", map[string]string{"tx2": "CompleteCommit", "tx3": "Empty"}},
		{"a state Strand never enters", nil, []string{"PrepareCommit"}, "", map[string]string{}},
		{"producer id", []int64{pid2}, nil, "", map[string]string{"tx2": "CompleteCommit"}},
		{"producer id and state", []int64{pid2}, []string{"Ongoing"}, "", map[string]string{}},
		{"pattern", nil, nil, "tx[12]", map[string]string{"tx1": "Ongoing", "tx2": "CompleteCommit"}},
		{"pattern matches whole ids", nil, nil, "tx", map[string]string{}},
		{"pattern and state", nil, []string{"Ongoing"}, "tx.*", map[string]string{"tx1": "Ongoing", "tx4": "Ongoing"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := list(c.pids, c.states, c.pattern); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}

	raw := func(t *testing.T, f func(*kmsg.ListTransactionsRequest)) *kmsg.ListTransactionsResponse {
		t.Helper()
		req := kmsg.NewPtrListTransactionsRequest()
		f(req)
		return a.request(t, req).(*kmsg.ListTransactionsResponse)
	}
	ids := func(resp *kmsg.ListTransactionsResponse) []string {
		var out []string
		for _, ts := range resp.TransactionStates {
			out = append(out, ts.TransactionalID)
		}
		slices.Sort(out)
		return out
	}
	t.Run("duration", func(t *testing.T) {
		// tx1 has run 1990 ms by the log clock, tx4 1000; tx2 and tx3 are
		// not running.
		for _, c := range []struct {
			ms   int64
			want []string
		}{
			{-1, []string{"tx1", "tx2", "tx3", "tx4"}},
			{0, []string{"tx1", "tx4"}},
			{999, []string{"tx1", "tx4"}},
			{1000, []string{"tx1"}},
			{1989, []string{"tx1"}},
			{1990, nil},
		} {
			resp := raw(t, func(r *kmsg.ListTransactionsRequest) { r.DurationFilterMillis = c.ms })
			if got := ids(resp); resp.ErrorCode != 0 || !slices.Equal(got, c.want) {
				t.Fatalf("duration %d: %v (code %d), want %v", c.ms, got, resp.ErrorCode, c.want)
			}
		}
	})
	t.Run("unknown state", func(t *testing.T) {
		resp := raw(t, func(r *kmsg.ListTransactionsRequest) { r.StateFilters = []string{"Bogus", "Ongoing"} })
		if !slices.Equal(resp.UnknownStateFilters, []string{"Bogus"}) || !slices.Equal(ids(resp), []string{"tx1", "tx4"}) {
			t.Fatalf("unknown %v, listed %v", resp.UnknownStateFilters, ids(resp))
		}
		resp = raw(t, func(r *kmsg.ListTransactionsRequest) { r.StateFilters = []string{"Bogus"} })
		if len(resp.TransactionStates) != 0 {
			t.Fatalf("only an unknown state listed %v", ids(resp))
		}
	})
	t.Run("invalid pattern", func(t *testing.T) {
		bad := "tx("
		resp := raw(t, func(r *kmsg.ListTransactionsRequest) { r.TransactionalIDPattern = &bad })
		if resp.ErrorCode != kerr.InvalidRegularExpression.Code || len(resp.TransactionStates) != 0 {
			t.Fatalf("code %d, listed %v", resp.ErrorCode, ids(resp))
		}
	})
	t.Run("v0 ignores later filters", func(t *testing.T) {
		req := kmsg.NewPtrListTransactionsRequest()
		req.Version = 0
		resp := a.rawRequest(t, req).(*kmsg.ListTransactionsResponse)
		if got := ids(resp); !slices.Equal(got, []string{"tx1", "tx2", "tx3", "tx4"}) {
			t.Fatalf("v0 listed %v", got)
		}
	})
}

// TestListTransactionsCoordinated: with several agents, each lists only
// the ids it coordinates, so a client asking all of them sees each once.
func TestListTransactionsCoordinated(t *testing.T) {
	const other = testNodeID + 1
	a := newTxnAdminAgent(t, withTxns(func(c *txn.Config) {
		c.Placement = ownerFunc(func(id string) int32 {
			if id == "mine" {
				return testNodeID
			}
			return other
		})
	}))
	a.begin(t, "mine")
	a.begin(t, "theirs")
	resp := a.request(t, kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse)
	if len(resp.TransactionStates) != 1 || resp.TransactionStates[0].TransactionalID != "mine" {
		t.Fatalf("listed %+v, want only mine", resp.TransactionStates)
	}
	// Describing is not limited: any agent reads any id.
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{"theirs"}
	dresp := a.request(t, req).(*kmsg.DescribeTransactionsResponse)
	if len(dresp.TransactionStates) != 1 || dresp.TransactionStates[0].ErrorCode != 0 || dresp.TransactionStates[0].State != "Empty" {
		t.Fatalf("describe of another agent's id: %+v", dresp.TransactionStates)
	}
}

// ownerFunc places transactional ids by a function.
type ownerFunc func(string) int32

func (f ownerFunc) Owner(id string) int32 { return f(id) }

// TestTxnAdminSyncs: the admin reads see what another agent wrote to the
// log before the request, without waiting for this agent to play it.
func TestTxnAdminSyncs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	var local *replica.Replica
	a := newTestAgent(t, func(c *agentConfig) {
		var err error
		local, err = replica.Open(ctx, replica.Config{
			Dir: t.TempDir(),
			// Hiding the log's TailWaiter, with a poll interval no test
			// waits out, makes this copy play what others append only
			// when it proposes or syncs.
			Log:          struct{ sharedlog.Log }{c.Log},
			PollInterval: time.Hour,
			WriterID:     "txn-admin-test",
			Logger:       discardLogger,
		})
		if err != nil {
			t.Fatalf("replica.Open: %v", err)
		}
		t.Cleanup(func() { local.Close() })
		c.Server.Deps.Meta = local
	})
	// Another agent over the same log; its entries reach local only by
	// playing the log.
	peer, err := replica.Open(ctx, replica.Config{Dir: t.TempDir(), Log: a.Log, WriterID: "peer", Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	res, err := peer.Propose(ctx, meta.InitTransactionalProducer{TransactionalID: "remote", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1})
	if err != nil || res.Code != 0 {
		t.Fatalf("peer init: %v, %v", err, res.Err())
	}
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{"remote"}
	resp := a.request(t, req).(*kmsg.DescribeTransactionsResponse)
	if st := resp.TransactionStates[0]; st.ErrorCode != 0 || st.ProducerID != res.ProducerID {
		t.Fatalf("describe of a peer's id: %+v", st)
	}
	lresp := a.request(t, kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse)
	if len(lresp.TransactionStates) != 1 || lresp.TransactionStates[0].TransactionalID != "remote" {
		t.Fatalf("list: %+v", lresp.TransactionStates)
	}
}
