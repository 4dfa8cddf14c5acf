package kafka

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// TestTxnProduceKgo runs a franz-go transactional producer: one
// transaction committed, one aborted. Each added partition gets one marker
// per transaction, and the data of both is in the log (read_uncommitted).
// Under transaction.version 2 the client takes the KIP-890 part 2 path
// (Produce v12 adds partitions, EndTxn v5 bumps the epoch per
// transaction); under 1 the older one.
func TestTxnProduceKgo(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("transaction.version=%d", tv), func(t *testing.T) { testTxnProduceKgo(t, tv) })
	}
}

func testTxnProduceKgo(t *testing.T, tv int16) {
	a, _ := newDataAgent(t, nil, withGroups(t, nil, nil), withDeps(func(d *Deps) { d.TransactionVersion = tv }))
	const topic = "txn-out"
	id := a.createTopic(t, topic, 2, nil)
	cl := a.kgoClient(t, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := a.ctx(t)
	for i, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 10 {
			r := &kgo.Record{Partition: int32(j % 2), Value: fmt.Appendf(nil, "txn%d-%d", i, j)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("transaction %d record %d: %v", i, j, err)
			}
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("end transaction %d: %v", i, err)
		}
	}
	view := a.Replica.View()
	defer view.Close()
	for p := range int32(2) {
		it, err := view.Seek(id, p, 0)
		if err != nil {
			t.Fatal(err)
		}
		var data, commits, aborts int
		for it.Next() {
			switch e := it.Entry(); {
			case e.Control && e.Commit:
				commits++
			case e.Control:
				aborts++
			case !e.Transactional:
				t.Errorf("partition %d: data entry at %d is not transactional", p, e.BaseOffset)
			default:
				data += int(e.Records)
			}
		}
		it.Close()
		if data != 10 || commits != 1 || aborts != 1 {
			t.Errorf("partition %d: %d records, %d commit and %d abort markers; want 10, 1, 1", p, data, commits, aborts)
		}
		st, _, _ := view.Partition(id, p)
		if lso, err := view.LastStableOffset(id, p, st.HighWatermark()); err != nil || lso != st.HighWatermark() {
			t.Errorf("partition %d: LSO %d (%v), want the high watermark %d with no open transaction", p, lso, err, st.HighWatermark())
		}
	}
	s, ok, err := view.Txn("tx-1")
	if err != nil || !ok || s.Status != meta.TxnCompleteAbort || s.Seq != 2 {
		t.Errorf("transaction state %+v (%v, %v), want CompleteAbort after 2 transactions", s, ok, err)
	}
	// Each EndTxn v5 bumped the epoch; v4 left it.
	if want := map[int16]int16{1: 0, 2: 2}[tv]; s.ProducerEpoch != want {
		t.Errorf("epoch %d after 2 transactions, want %d", s.ProducerEpoch, want)
	}
}

// TestTxnProduceOutsideTransaction sends transactional batches that no
// AddPartitionsToTxn let in (KIP-890 part 1): refused, nothing stored.
func TestTxnProduceOutsideTransaction(t *testing.T) {
	a, _ := newDataAgent(t, nil)
	const topic = "txn-outside"
	a.createTopic(t, topic, 2, nil)
	txn := "tx-outside"
	// batchtest takes producer id 0 for "none": use it up.
	if first := initProducerID(t, a, 4, nil, -1, -1); first.ProducerID != 0 {
		t.Fatalf("first producer id %d, want 0", first.ProducerID)
	}
	init := initProducerID(t, a, 4, &txn, -1, -1)
	if init.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(init.ErrorCode))
	}
	batch := func(seq int32) []byte {
		return batchtest.Build(t, batchtest.Options{Records: 2, ProducerID: init.ProducerID, ProducerEpoch: init.ProducerEpoch, BaseSequence: seq, Transactional: true})
	}
	send := func(p int32, txnID *string, seq int32) int16 {
		resp := a.rawRequest(t, produceReq(9, -1, txnID, rawPart{topic, p, batch(seq)})).(*kmsg.ProduceResponse)
		return producePartitions(resp)[0].ErrorCode
	}
	if code := send(0, nil, 0); code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("transactional batch without a transactional id: %v", kerr.ErrorForCode(code))
	}
	if code := send(0, &txn, 0); code != kerr.InvalidTxnState.Code {
		t.Errorf("batch before AddPartitionsToTxn: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version = 3
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = txn, init.ProducerID, init.ProducerEpoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: []int32{0}}, {Topic: "no-such-topic", Partitions: []int32{0}}}
	resp := a.rawRequest(t, add).(*kmsg.AddPartitionsToTxnResponse)
	if got := resp.Topics[0].Partitions[0].ErrorCode; got != kerr.OperationNotAttempted.Code {
		t.Errorf("partition beside an unknown topic: %v, want OPERATION_NOT_ATTEMPTED", kerr.ErrorForCode(got))
	}
	if got := resp.Topics[1].Partitions[0].ErrorCode; got != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: %v", kerr.ErrorForCode(got))
	}
	add.Topics = add.Topics[:1]
	resp = a.rawRequest(t, add).(*kmsg.AddPartitionsToTxnResponse)
	if got := resp.Topics[0].Partitions[0].ErrorCode; got != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(got))
	}
	if code := send(0, &txn, 0); code != 0 {
		t.Errorf("batch into an added partition: %v", kerr.ErrorForCode(code))
	}
	if code := send(1, &txn, 0); code != kerr.InvalidTxnState.Code {
		t.Errorf("batch into a partition not added: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	// A verify-only check (v4) agrees.
	verify := kmsg.NewPtrAddPartitionsToTxnRequest()
	verify.Version = 4
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = txn, init.ProducerID, init.ProducerEpoch, true
	tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: topic, Partitions: []int32{0, 1}}}
	verify.Transactions = append(verify.Transactions, tx)
	vresp := a.rawRequest(t, verify).(*kmsg.AddPartitionsToTxnResponse)
	got := vresp.Transactions[0].Topics[0].Partitions
	if got[0].ErrorCode != 0 || got[1].ErrorCode != kerr.InvalidTxnState.Code {
		t.Errorf("verify-only: partition 0 %v, partition 1 %v; want none and INVALID_TXN_STATE", kerr.ErrorForCode(got[0].ErrorCode), kerr.ErrorForCode(got[1].ErrorCode))
	}
	// Re-initializing fences the epoch: its batches are now refused
	// with INVALID_PRODUCER_EPOCH, and the transaction was aborted.
	if re := initProducerID(t, a, 4, &txn, -1, -1); re.ErrorCode != 0 || re.ProducerEpoch != init.ProducerEpoch+1 {
		t.Fatalf("re-init: %+v", re)
	}
	if code := send(0, &txn, 1); code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("batch of the fenced epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.Version = 3
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txn, init.ProducerID, init.ProducerEpoch, true
	if code := a.rawRequest(t, end).(*kmsg.EndTxnResponse).ErrorCode; code != kerr.ProducerFenced.Code {
		t.Errorf("EndTxn of the fenced epoch: %v, want PRODUCER_FENCED", kerr.ErrorForCode(code))
	}
}
