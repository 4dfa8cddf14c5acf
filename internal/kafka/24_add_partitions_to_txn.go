// AddPartitionsToTxn: v0-5
//   - v0-3 (clients): meta.AddPartitionsToTxn adds the partitions to the
//     producer's transaction, beginning one if none is ongoing. Apply
//     refuses transactional batches for partitions not added (KIP-890
//     part 1), so this request is what lets a producer write there.
//   - v4-5 (KIP-890, sent by brokers): a batch of transactions, each
//     either added like v0-3 or, with VerifyOnly, checked against the
//     local copy after a Sync: a partition not in the producer's ongoing
//     transaction is INVALID_TXN_STATE. Any agent answers; nothing is
//     proposed for a verify.
//   - Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, and for the
//     whole transaction TRANSACTIONAL_ID_NOT_FOUND,
//     INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
//     before v2); when any partition fails, Kafka answers the others
//     OPERATION_NOT_ATTEMPTED and adds none of them, which apply would
//     not undo, so Strand checks topics first and proposes only requests
//     whose partitions all exist.

package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(24, 0, 5, handleAddPartitionsToTxn) }

// txnAdd is one transaction of an AddPartitionsToTxn request, in either
// request layout.
type txnAdd struct {
	id         string
	pid        int64
	epoch      int16
	verifyOnly bool
	topics     []kmsg.AddPartitionsToTxnRequestTopic
}

func handleAddPartitionsToTxn(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		topics := addPartitionsToTxn(ctx, db, txnAdd{req.TransactionalID, req.ProducerID, req.ProducerEpoch, false, req.Topics}, req.Version)
		for _, t := range topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, p.ErrorCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	for _, tx := range req.Transactions {
		add := txnAdd{id: tx.TransactionalID, pid: tx.ProducerID, epoch: tx.ProducerEpoch, verifyOnly: tx.VerifyOnly}
		for _, t := range tx.Topics {
			add.topics = append(add.topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
		rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtx.TransactionalID = tx.TransactionalID
		rtx.Topics = addPartitionsToTxn(ctx, db, add, req.Version)
		resp.Transactions = append(resp.Transactions, rtx)
	}
	return resp, nil
}

// addPartitionsToTxn adds (or verifies) one transaction's partitions and
// returns a code per partition.
func addPartitionsToTxn(ctx context.Context, db MetaDB, add txnAdd, version int16) []kmsg.AddPartitionsToTxnResponseTransactionTopic {
	var parts []meta.TopicPartition
	for _, t := range add.topics {
		for _, p := range t.Partitions {
			parts = append(parts, meta.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	codes := make([]int16, len(parts))
	fill := func(code int16) {
		for i := range codes {
			codes[i] = code
		}
	}
	switch {
	case add.verifyOnly:
		verifyTxnPartitions(ctx, db, add, parts, codes)
	default:
		if unknown := unknownPartitions(db, parts, codes); unknown {
			for i, c := range codes {
				if c == 0 {
					codes[i] = kerr.OperationNotAttempted.Code
				}
			}
			break
		}
		res, e := proposeTxn(ctx, db, meta.AddPartitionsToTxn{
			TransactionalID: add.id, ProducerID: add.pid, ProducerEpoch: add.epoch, Partitions: parts,
		})
		switch {
		case e != nil:
			fill(e.Code)
		case len(res.Codes) == len(codes):
			for i, c := range res.Codes {
				codes[i] = fencedCode(c, version, 2)
			}
		default:
			fill(fencedCode(res.Code, version, 2))
		}
	}
	var out []kmsg.AddPartitionsToTxnResponseTransactionTopic
	i := 0
	for _, t := range add.topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			rp.Partition, rp.ErrorCode = p, codes[i]
			rt.Partitions = append(rt.Partitions, rp)
			i++
		}
		out = append(out, rt)
	}
	return out
}

// unknownPartitions marks partitions of topics this copy does not know
// with UNKNOWN_TOPIC_OR_PARTITION and reports whether there were any.
func unknownPartitions(db MetaDB, parts []meta.TopicPartition, codes []int16) bool {
	view := db.View()
	defer view.Close()
	unknown := false
	for i, p := range parts {
		t, ok, err := view.Topic(p.Topic)
		if err != nil || !ok || p.Partition < 0 || p.Partition >= t.Partitions {
			codes[i] = kerr.UnknownTopicOrPartition.Code
			unknown = true
		}
	}
	return unknown
}

// verifyTxnPartitions answers a VerifyOnly transaction from the local
// copy, synced with the log first.
func verifyTxnPartitions(ctx context.Context, db MetaDB, add txnAdd, parts []meta.TopicPartition, codes []int16) {
	view, _, e := syncedView(ctx, db, kerr.CoordinatorNotAvailable)
	if e != nil {
		for i := range codes {
			codes[i] = e.Code
		}
		return
	}
	defer view.Close()
	s, ok, err := view.Txn(add.id)
	whole := kerr.UnknownServerError.Code
	if err == nil {
		whole = meta.CheckTxnProducer(s, ok, add.id, add.pid, add.epoch).Code
	}
	for i, p := range parts {
		if whole != 0 {
			codes[i] = whole
			continue
		}
		t, ok, err := view.Topic(p.Topic)
		if err != nil || !ok || p.Partition < 0 || p.Partition >= t.Partitions {
			codes[i] = kerr.UnknownTopicOrPartition.Code
			continue
		}
		tp := meta.TxnPartition{TopicID: t.ID, Partition: p.Partition}
		if s.Status != meta.TxnOngoing || !slices.Contains(s.Partitions, tp) {
			codes[i] = kerr.InvalidTxnState.Code
		}
	}
}
