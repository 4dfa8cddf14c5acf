package txn

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog"
)

// These tests run the coordinator on metatest.DB, a copy of the state
// machine in memory: what it proposes applies at once, so each test
// reads as a sequence of requests. The commands' own semantics are
// meta's tests; the wire is package kafka's.

// t0 is the test clock's start (unix ms).
const t0 = 1_700_000_000_000

type env struct {
	t   *testing.T
	db  *metatest.DB
	c   *Coordinator
	now *atomic.Int64
}

// Now is the test's time: the copy's log clock and the sweep's clock.
func (e *env) Now() time.Time { return time.UnixMilli(e.now.Load()) }

// AfterFunc runs on the wall clock: no test here runs the periodic sweep.
func (e *env) AfterFunc(d time.Duration, f func()) clock.Timer { return clock.Real.AfterFunc(d, f) }

// newEnv returns a coordinator, without a running sweep, over a copy
// clocked by the test; tune changes its Config.
func newEnv(t *testing.T, tune func(*Config)) *env {
	t.Helper()
	e := &env{t: t, now: new(atomic.Int64)}
	e.now.Store(t0)
	e.db = metatest.New(e.Now)
	cfg := Config{Meta: e.db, NodeID: 1, SweepInterval: -1, Clock: e, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if tune != nil {
		tune(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e.c = c
	return e
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *env) createTopic(name string, partitions int32) {
	e.t.Helper()
	if res, err := e.db.Propose(e.ctx(), meta.CreateTopic{Name: name, Partitions: partitions}); err != nil || res.Code != 0 {
		e.t.Fatalf("create %s: %v, %v", name, err, res.Err())
	}
}

// init initializes a transactional producer.
func (e *env) init(id string, timeoutMs int32) InitResult {
	e.t.Helper()
	r := e.c.InitProducerID(e.ctx(), InitRequest{TransactionalID: id, TimeoutMs: timeoutMs, ProducerID: -1, ProducerEpoch: -1})
	if r.Code != 0 {
		e.t.Fatalf("init %s: %v", id, kerr.ErrorForCode(r.Code))
	}
	return r
}

func (e *env) state(id string) meta.TxnState {
	e.t.Helper()
	v := e.db.View()
	defer v.Close()
	s, ok, err := v.Txn(id)
	if err != nil || !ok {
		e.t.Fatalf("txn %s: %v, %v", id, ok, err)
	}
	return s
}

func tp(topic string, p int32) meta.TopicPartition {
	return meta.TopicPartition{Topic: topic, Partition: p}
}

func TestInitProducerID(t *testing.T) {
	e := newEnv(t, nil)
	plain := e.c.InitProducerID(e.ctx(), InitRequest{ProducerID: -1, ProducerEpoch: -1})
	if plain.Code != 0 || plain.ProducerID < 0 || plain.ProducerEpoch != 0 {
		t.Fatalf("without a transactional id: %+v", plain)
	}
	first := e.init("tx", 60_000)
	if first.ProducerID == plain.ProducerID {
		t.Fatal("two producers share an id")
	}
	again := e.init("tx", 60_000)
	if again.ProducerID != first.ProducerID || again.ProducerEpoch != first.ProducerEpoch+1 {
		t.Fatalf("second init %+v after %+v, want the epoch bumped", again, first)
	}
	bad := e.c.InitProducerID(e.ctx(), InitRequest{TransactionalID: "tx2", TimeoutMs: meta.MaxTxnTimeoutMs + 1, ProducerID: -1, ProducerEpoch: -1})
	if bad.Code != kerr.InvalidTransactionTimeout.Code || bad.ProducerID != -1 || bad.ProducerEpoch != -1 {
		t.Fatalf("timeout over the max: %+v", bad)
	}
}

// Partitions of unknown topics are refused before anything is proposed,
// and the rest are not attempted; a verify reads what was added.
func TestAddPartitions(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("t", 2)
	p := e.init("tx", 60_000)
	req := AddPartitionsRequest{TransactionalID: "tx", ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch}

	req.Partitions = []meta.TopicPartition{tp("t", 0), tp("t", 2), tp("nope", 0)}
	unknown, notAttempted := kerr.UnknownTopicOrPartition.Code, kerr.OperationNotAttempted.Code
	if got := e.c.AddPartitions(e.ctx(), req); !slices.Equal(got, []int16{notAttempted, unknown, unknown}) {
		t.Fatalf("with unknown partitions: %v", got)
	}
	if s := e.state("tx"); s.Status != meta.TxnEmpty {
		t.Fatalf("a refused add began a transaction: %v", s.Status)
	}

	req.Partitions = []meta.TopicPartition{tp("t", 0)}
	if got := e.c.AddPartitions(e.ctx(), req); !slices.Equal(got, []int16{0}) {
		t.Fatalf("add: %v", got)
	}
	req.VerifyOnly = true
	req.Partitions = []meta.TopicPartition{tp("t", 0), tp("t", 1), tp("t", 5)}
	if got := e.c.AddPartitions(e.ctx(), req); !slices.Equal(got, []int16{0, kerr.InvalidTxnState.Code, unknown}) {
		t.Fatalf("verify: %v", got)
	}
	req.ProducerEpoch++
	if got := e.c.AddPartitions(e.ctx(), req); !slices.Equal(got, []int16{kerr.ProducerFenced.Code, kerr.ProducerFenced.Code, kerr.ProducerFenced.Code}) {
		t.Fatalf("verify with a later epoch: %v", got)
	}
}

// A Produce request's partitions that are in the transaction already
// cost no proposal.
func TestAddProduced(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("t", 2)
	v := e.db.View()
	topic, _, _ := v.Topic("t")
	v.Close()
	p := e.init("tx", 60_000)
	part := func(n int32) ProducedPartition {
		return ProducedPartition{Topic: "t", TopicID: topic.ID, Partition: n, ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch}
	}
	add := func(id string, parts ...ProducedPartition) []int16 {
		e.c.AddProduced(e.ctx(), id, parts)
		codes := make([]int16, len(parts))
		for i, p := range parts {
			codes[i] = p.Code
		}
		return codes
	}
	if got := add("tx", part(0)); !slices.Equal(got, []int16{0}) {
		t.Fatalf("first add: %v", got)
	}
	before := e.state("tx").UpdatedMs
	e.now.Add(10)
	if got := add("tx", part(0)); !slices.Equal(got, []int16{0}) {
		t.Fatalf("repeat: %v", got)
	}
	if s := e.state("tx"); s.UpdatedMs != before {
		t.Fatal("a partition already in the transaction was proposed again")
	}
	stale := part(1)
	stale.ProducerEpoch--
	if got := add("tx", part(0), stale); got[0] != 0 || got[1] != kerr.ProducerFenced.Code {
		t.Fatalf("a stale epoch: %v", got)
	}
	if got := add("nope", part(0)); got[0] != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("unknown id: %v", got)
	}
}

// EndTxn ends the transaction it found ongoing; a retry the same way
// succeeds, the other way does not.
func TestEndTxn(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("t", 1)
	p := e.init("tx", 60_000)
	if r := e.c.EndTxn(e.ctx(), EndRequest{TransactionalID: "nope", Commit: true}); r.Code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("unknown id: %+v", r)
	}
	add := AddPartitionsRequest{TransactionalID: "tx", ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, Partitions: []meta.TopicPartition{tp("t", 0)}}
	if got := e.c.AddPartitions(e.ctx(), add); got[0] != 0 {
		t.Fatal(got)
	}
	end := EndRequest{TransactionalID: "tx", ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, Commit: true}
	for range 2 {
		if r := e.c.EndTxn(e.ctx(), end); r.Code != 0 || r.ProducerID != -1 {
			t.Fatalf("commit: %+v", r)
		}
	}
	end.Commit = false
	if r := e.c.EndTxn(e.ctx(), end); r.Code != kerr.InvalidTxnState.Code {
		t.Fatalf("abort after commit: %+v", r)
	}
	// KIP-890 part 2: the epoch moves with the end.
	if got := e.c.AddPartitions(e.ctx(), add); got[0] != 0 {
		t.Fatal(got)
	}
	end.BumpEpoch = true
	if r := e.c.EndTxn(e.ctx(), end); r.Code != 0 || r.ProducerID != p.ProducerID || r.ProducerEpoch != p.ProducerEpoch+1 {
		t.Fatalf("abort with a bump: %+v", r)
	}
}

// Offsets join the transaction only with their group; AddGroup adds it
// in the same entry.
func TestCommitOffsets(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("t", 1)
	p := e.init("tx", 60_000)
	req := CommitRequest{
		TransactionalID: "tx", ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, Group: "g", Generation: -1,
		Offsets: []CommitOffset{{Topic: "t", Partition: 0, Offset: 5, LeaderEpoch: -1}, {Topic: "t", Partition: 3, Offset: 1, LeaderEpoch: -1}},
	}
	if got := e.c.CommitOffsets(e.ctx(), req); !slices.Equal(got, []int16{kerr.InvalidTxnState.Code, kerr.InvalidTxnState.Code}) {
		t.Fatalf("without the group: %v", got)
	}
	req.AddGroup = true
	if got := e.c.CommitOffsets(e.ctx(), req); !slices.Equal(got, []int16{0, kerr.UnknownTopicOrPartition.Code}) {
		t.Fatalf("with AddGroup: %v", got)
	}
	if s := e.state("tx"); !slices.Equal(s.Groups, []string{"g"}) {
		t.Fatalf("groups %v", s.Groups)
	}
	req.ProducerEpoch++
	if got := e.c.CommitOffsets(e.ctx(), req); !slices.Equal(got, []int16{kerr.ProducerFenced.Code, kerr.ProducerFenced.Code}) {
		t.Fatalf("failed add: %v", got)
	}
	if code := e.c.AddOffsets(e.ctx(), AddOffsetsRequest{TransactionalID: "tx", ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, Group: "h"}); code != 0 {
		t.Fatalf("AddOffsets: %v", kerr.ErrorForCode(code))
	}
}

// The sweep aborts what timed out by the log clock, on the agent that
// coordinates the id only.
func TestSweep(t *testing.T) {
	const other = 2
	e := newEnv(t, func(c *Config) {
		c.Placement = ownerFunc(func(id string) int32 {
			if id == "theirs" {
				return other
			}
			return 1
		})
	})
	e.createTopic("t", 1)
	for _, id := range []string{"mine", "theirs"} {
		p := e.init(id, 1000)
		add := AddPartitionsRequest{TransactionalID: id, ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, Partitions: []meta.TopicPartition{tp("t", 0)}}
		if got := e.c.AddPartitions(e.ctx(), add); got[0] != 0 {
			t.Fatal(got)
		}
	}
	e.now.Add(999)
	if err := e.c.Sweep(e.ctx()); err != nil {
		t.Fatal(err)
	}
	if s := e.state("mine"); s.Status != meta.TxnOngoing {
		t.Fatalf("swept before its timeout: %v", s.Status)
	}
	e.now.Add(1)
	if err := e.c.Sweep(e.ctx()); err != nil {
		t.Fatal(err)
	}
	if s := e.state("mine"); s.Status != meta.TxnCompleteAbort || s.ProducerEpoch != 1 || s.PrevBy != meta.BumpByTimeout {
		t.Fatalf("after its timeout: %+v", s)
	}
	if s := e.state("theirs"); s.Status != meta.TxnOngoing {
		t.Fatalf("swept another agent's id: %v", s.Status)
	}
	if e.c.Coordinator("theirs") != other || e.c.Coordinator("mine") != 1 {
		t.Fatal("Coordinator disagrees with the placement")
	}
}

type ownerFunc func(string) int32

func (f ownerFunc) Owner(id string) int32 { return f(id) }

// failingStore fails every proposal and sync with err.
type failingStore struct {
	*metatest.DB
	err error
}

func (s failingStore) ProposeBatch(context.Context, []meta.Command) ([]meta.Result, error) {
	return nil, s.err
}

func (s failingStore) Sync(context.Context) error { return s.err }

// A proposal or sync with no result gets a retriable code; what only
// a proposal may leave unknown is no reason for a failed sync.
func TestStoreFailures(t *testing.T) {
	for _, c := range []struct {
		err           error
		propose, sync *kerr.Error
	}{
		{replica.ErrClosed, kerr.CoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
		// Halted for good (here: trimmed out of the log while paused):
		// the agent exits, so the client must look for another, as
		// when it is closing, not give up on the transaction.
		{&replica.HaltError{Pos: 7, Cause: sharedlog.ErrTrimmed}, kerr.CoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
		{replica.ErrAmbiguous, kerr.RequestTimedOut, kerr.UnknownServerError},
		{context.DeadlineExceeded, kerr.RequestTimedOut, kerr.RequestTimedOut},
		{errors.New("disk on fire"), kerr.UnknownServerError, kerr.UnknownServerError},
	} {
		t.Run(c.err.Error(), func(t *testing.T) {
			e := newEnv(t, func(cfg *Config) { cfg.Meta = failingStore{metatest.New(nil), c.err} })
			if r := e.c.InitProducerID(e.ctx(), InitRequest{TransactionalID: "tx", ProducerID: -1, ProducerEpoch: -1}); r.Code != c.propose.Code {
				t.Errorf("init: %v", kerr.ErrorForCode(r.Code))
			}
			if r := e.c.EndTxn(e.ctx(), EndRequest{TransactionalID: "tx"}); r.Code != c.sync.Code {
				t.Errorf("end: %v", kerr.ErrorForCode(r.Code))
			}
			if r := e.c.ListTransactions(e.ctx(), ListRequest{MinDurationMs: -1}); r.Code != c.sync.Code {
				t.Errorf("list: %v", kerr.ErrorForCode(r.Code))
			}
		})
	}
}
