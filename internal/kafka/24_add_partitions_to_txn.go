// AddPartitionsToTxn: v0-5
//   - v0-3 (clients): txn.Coordinator.AddPartitions adds the partitions
//     to the producer's transaction, beginning one if none is ongoing.
//     Apply refuses transactional batches for partitions not added
//     (KIP-890 part 1), so this request is what lets a producer write
//     there.
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
//     not undo, so the coordinator checks topics first and proposes only
//     requests whose partitions all exist.
//   - ACLs (authz.go): Write on the transactional id, else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED everywhere; Write on each topic,
//     else TOPIC_AUTHORIZATION_FAILED and OPERATION_NOT_ATTEMPTED for the
//     rest, nothing added. v4+ (the brokers' API) needs ClusterAction on the
//     cluster, else CLUSTER_AUTHORIZATION_FAILED.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/txn"
)

func init() { regKey(24, 0, 5, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(ctx context.Context, r *Request) (kmsg.Response, error) {
	txns, err := r.Deps.txns()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	z := r.authz()
	if req.Version < 4 {
		add := txn.AddPartitionsRequest{TransactionalID: req.TransactionalID, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}
		for _, t := range addedTopics(ctx, z, txns, add, req.Topics, req.Version) {
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
	// v4+ is the brokers' verification API: ClusterAction, as Kafka
	// asks of it.
	if resp.ErrorCode = z.clusterCode(kmsg.ACLOperationClusterAction); resp.ErrorCode != 0 {
		return resp, nil
	}
	for _, tx := range req.Transactions {
		add := txn.AddPartitionsRequest{TransactionalID: tx.TransactionalID, ProducerID: tx.ProducerID, ProducerEpoch: tx.ProducerEpoch, VerifyOnly: tx.VerifyOnly}
		topics := make([]kmsg.AddPartitionsToTxnRequestTopic, 0, len(tx.Topics))
		for _, t := range tx.Topics {
			topics = append(topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
		rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtx.TransactionalID = tx.TransactionalID
		rtx.Topics = addedTopics(ctx, z, txns, add, topics, req.Version)
		resp.Transactions = append(resp.Transactions, rtx)
	}
	return resp, nil
}

// addedTopics adds (or verifies) one transaction's partitions, topics,
// and answers them in the v4+ layout.
func addedTopics(ctx context.Context, z authz, txns TxnCoordinator, add txn.AddPartitionsRequest, topics []kmsg.AddPartitionsToTxnRequestTopic, version int16) []kmsg.AddPartitionsToTxnResponseTransactionTopic {
	// ACLs: Write on the transactional id, then on every topic; if any
	// fails nothing is added, as Kafka answers.
	if code := z.txnCode(kmsg.ACLOperationWrite, add.TransactionalID); code != 0 {
		return answerTopics(topics, func(string) int16 { return code })
	}
	denied := z.deniedTopics(kmsg.ACLOperationWrite, func(yield func(string) bool) {
		for _, t := range topics {
			if !yield(t.Topic) {
				return
			}
		}
	})
	if len(denied) > 0 {
		return answerTopics(topics, func(topic string) int16 {
			if denied[topic] {
				return kerr.TopicAuthorizationFailed.Code
			}
			return kerr.OperationNotAttempted.Code
		})
	}
	for _, t := range topics {
		for _, p := range t.Partitions {
			add.Partitions = append(add.Partitions, meta.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	codes := txns.AddPartitions(ctx, add)
	out := make([]kmsg.AddPartitionsToTxnResponseTransactionTopic, 0, len(topics))
	i := 0
	for _, t := range topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			rp.Partition, rp.ErrorCode = p, fencedCode(codes[i], version, 2)
			rt.Partitions = append(rt.Partitions, rp)
			i++
		}
		out = append(out, rt)
	}
	return out
}

// answerTopics answers every partition of topics with its topic's code.
func answerTopics(topics []kmsg.AddPartitionsToTxnRequestTopic, code func(topic string) int16) []kmsg.AddPartitionsToTxnResponseTransactionTopic {
	out := make([]kmsg.AddPartitionsToTxnResponseTransactionTopic, 0, len(topics))
	for _, t := range topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			rp.Partition, rp.ErrorCode = p, code(t.Topic)
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}
