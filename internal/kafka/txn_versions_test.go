package kafka

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
)

// callHandler runs req's registered handler on deps, at req's version,
// without a server or a connection.
func callHandler(t *testing.T, deps *Deps, req kmsg.Request) kmsg.Response {
	t.Helper()
	e := builtin.lookup(req.Key())
	if !e.serves(req.GetVersion()) {
		t.Fatalf("key %d v%d is not served", req.Key(), req.GetVersion())
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	resp, err := e.handler(ctx, &Request{Header: Header{Key: req.Key(), Version: req.GetVersion()}, Body: req, Deps: deps})
	if err != nil {
		t.Fatalf("key %d v%d: %v", req.Key(), req.GetVersion(), err)
	}
	return resp
}

// TestTxnVersions checks what the transaction handlers leave to the
// wire: which versions name a fenced producer INVALID_PRODUCER_EPOCH
// (before KIP-588's PRODUCER_FENCED), and which EndTxn returns the
// bumped epoch. It runs the handlers on a copy in memory (metatest) and
// the transaction coordinator over it: no Pebble, no server.
func TestTxnVersions(t *testing.T) {
	db := metatest.New(nil)
	deps := &Deps{Meta: db, Txns: newTestTxns(t, db)}
	if res, err := db.Propose(context.Background(), meta.CreateTopic{Name: "t", Partitions: 1}); err != nil || res.Code != 0 {
		t.Fatalf("create: %v, %v", err, res.Err())
	}
	const id = "tx"
	init := func() *kmsg.InitProducerIDResponse {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 4, kmsg.StringPtr(id), 60_000
		resp := callHandler(t, deps, req).(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(resp.ErrorCode))
		}
		return resp
	}
	stale := init()
	cur := init()
	pid := cur.ProducerID

	fenced := func(newSince int16, code func(version int16) int16) {
		t.Helper()
		if got := code(newSince - 1); got != kerr.InvalidProducerEpoch.Code {
			t.Errorf("v%d: %v, want INVALID_PRODUCER_EPOCH", newSince-1, kerr.ErrorForCode(got))
		}
		if got := code(newSince); got != kerr.ProducerFenced.Code {
			t.Errorf("v%d: %v, want PRODUCER_FENCED", newSince, kerr.ErrorForCode(got))
		}
	}
	t.Run("AddPartitionsToTxn", func(t *testing.T) {
		fenced(2, func(v int16) int16 {
			req := kmsg.NewPtrAddPartitionsToTxnRequest()
			req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = v, id, pid, stale.ProducerEpoch
			req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0}}}
			return callHandler(t, deps, req).(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode
		})
	})
	t.Run("AddOffsetsToTxn", func(t *testing.T) {
		fenced(2, func(v int16) int16 {
			req := kmsg.NewPtrAddOffsetsToTxnRequest()
			req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = v, id, pid, stale.ProducerEpoch, "g"
			return callHandler(t, deps, req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
		})
	})
	t.Run("TxnOffsetCommit", func(t *testing.T) {
		fenced(3, func(v int16) int16 {
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = v, id, pid, stale.ProducerEpoch, "g"
			p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			p.Partition, p.Offset = 0, 1
			req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{p}}}
			return callHandler(t, deps, req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		})
	})
	t.Run("EndTxn", func(t *testing.T) {
		end := func(v, epoch int16) *kmsg.EndTxnResponse {
			req := kmsg.NewPtrEndTxnRequest()
			req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = v, id, pid, epoch
			return callHandler(t, deps, req).(*kmsg.EndTxnResponse)
		}
		fenced(2, func(v int16) int16 { return end(v, stale.ProducerEpoch).ErrorCode })
		// Aborting with nothing ongoing is refused before v5 and bumps
		// the epoch from v5 on, which only v5 answers with.
		if resp := end(4, cur.ProducerEpoch); resp.ErrorCode != kerr.InvalidTxnState.Code || resp.ProducerID != -1 || resp.ProducerEpoch != -1 {
			t.Errorf("v4 abort with none ongoing: %+v", resp)
		}
		if resp := end(5, cur.ProducerEpoch); resp.ErrorCode != 0 || resp.ProducerID != pid || resp.ProducerEpoch != cur.ProducerEpoch+1 {
			t.Errorf("v5 abort with none ongoing: %+v", resp)
		}
	})
}
