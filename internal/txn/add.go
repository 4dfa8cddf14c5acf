package txn

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
)

// AddPartitionsRequest is one transaction of an AddPartitionsToTxn.
type AddPartitionsRequest struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	// VerifyOnly checks that the partitions are in the producer's
	// ongoing transaction instead of adding them (KIP-890 part 1, sent
	// by brokers).
	VerifyOnly bool
	Partitions []meta.TopicPartition
}

// AddPartitions adds the partitions to the producer's transaction,
// beginning one if none is ongoing, or with VerifyOnly checks them; it
// returns a code per partition, in request order. Apply refuses
// transactional batches for partitions not added (KIP-890 part 1), so
// this is what lets a producer write there.
//
// A partition of a topic this copy does not know is
// UNKNOWN_TOPIC_OR_PARTITION. Kafka then answers the others
// OPERATION_NOT_ATTEMPTED and adds none of them, which apply would not
// undo, so the topics are checked first and only a request whose
// partitions all exist is proposed. Errors of the whole transaction
// (TRANSACTIONAL_ID_NOT_FOUND, INVALID_PRODUCER_ID_MAPPING,
// PRODUCER_FENCED) answer every partition.
func (c *Coordinator) AddPartitions(ctx context.Context, req AddPartitionsRequest) []int16 {
	codes := make([]int16, len(req.Partitions))
	if req.VerifyOnly {
		c.verifyPartitions(ctx, req, codes)
		return codes
	}
	if c.unknownPartitions(req.Partitions, codes) {
		for i, code := range codes {
			if code == 0 {
				codes[i] = kerr.OperationNotAttempted.Code
			}
		}
		return codes
	}
	res, e := c.propose(ctx, meta.AddPartitionsToTxn{
		TransactionalID: req.TransactionalID, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		Partitions: req.Partitions,
	})
	switch {
	case e != nil:
		fill(codes, e.Code)
	case len(res.Codes) == len(codes):
		copy(codes, res.Codes)
	default:
		fill(codes, res.Code)
	}
	return codes
}

// unknownPartitions marks partitions of topics this copy does not know
// with UNKNOWN_TOPIC_OR_PARTITION and reports whether there were any.
func (c *Coordinator) unknownPartitions(parts []meta.TopicPartition, codes []int16) bool {
	view := c.cfg.Meta.View()
	defer view.Close()
	unknown := false
	for i, p := range parts {
		if _, ok := partitionTopic(view, p); !ok {
			codes[i] = kerr.UnknownTopicOrPartition.Code
			unknown = true
		}
	}
	return unknown
}

// partitionTopic returns p's topic, if it exists and has p.
func partitionTopic(view *meta.View, p meta.TopicPartition) (meta.Topic, bool) {
	t, ok, err := view.Topic(p.Topic)
	return t, err == nil && ok && p.Partition >= 0 && p.Partition < t.Partitions
}

// verifyPartitions answers a VerifyOnly request from the local copy,
// synced with the log first: a partition not in the producer's ongoing
// transaction is INVALID_TXN_STATE. Nothing is proposed.
func (c *Coordinator) verifyPartitions(ctx context.Context, req AddPartitionsRequest, codes []int16) {
	view, _, e := c.syncedView(ctx, kerr.CoordinatorNotAvailable)
	if e != nil {
		fill(codes, e.Code)
		return
	}
	defer view.Close()
	s, ok, err := view.Txn(req.TransactionalID)
	whole := kerr.UnknownServerError.Code
	if err == nil {
		whole = meta.CheckTxnProducer(s, ok, req.TransactionalID, req.ProducerID, req.ProducerEpoch).Code
	}
	for i, p := range req.Partitions {
		if whole != 0 {
			codes[i] = whole
			continue
		}
		t, ok := partitionTopic(view, p)
		if !ok {
			codes[i] = kerr.UnknownTopicOrPartition.Code
			continue
		}
		tp := meta.TxnPartition{TopicID: t.ID, Partition: p.Partition}
		if s.Status != meta.TxnOngoing || !slices.Contains(s.Partitions, tp) {
			codes[i] = kerr.InvalidTxnState.Code
		}
	}
}

// ProducedPartition is a partition a transactional batch of a Produce
// request went to, with its topic's id as the request resolved it, and
// the batch's producer. Code is AddProduced's answer for it.
type ProducedPartition struct {
	Topic         string
	TopicID       meta.TopicID
	Partition     int32
	ProducerID    int64
	ProducerEpoch int16
	Code          int16
}

// AddProduced adds the partitions of a Produce request's transactional
// batches to the transaction of id (Produce v12, KIP-890 part 2: the
// client sends no AddPartitionsToTxn) and sets each one's Code, in
// AddPartitions' terms. Codes are written in place so that a Produce
// request costs no more allocations than the proposal needs. A partition
// this copy already shows in the ongoing transaction, at its batch's
// producer id and epoch, costs no proposal: the usual case for a
// producer's later requests in a transaction. The rest are added in one
// proposal naming the last batch's producer (one request's batches come
// from one producer, and apply checks each batch's own against the
// transaction).
func (c *Coordinator) AddProduced(ctx context.Context, id string, parts []ProducedPartition) {
	if len(parts) == 0 {
		return
	}
	view := c.cfg.Meta.View()
	s, known, err := view.Txn(id)
	view.Close()
	known = known && err == nil && s.Status == meta.TxnOngoing
	inTxn := func(p *ProducedPartition) bool {
		return known && s.ProducerID == p.ProducerID && s.ProducerEpoch == p.ProducerEpoch &&
			slices.Contains(s.Partitions, meta.TxnPartition{TopicID: p.TopicID, Partition: p.Partition})
	}
	last := parts[len(parts)-1]
	add := meta.AddPartitionsToTxn{TransactionalID: id, ProducerID: last.ProducerID, ProducerEpoch: last.ProducerEpoch}
	for i := range parts {
		p := &parts[i]
		p.Code = 0
		if inTxn(p) {
			continue
		}
		if add.Partitions == nil {
			add.Partitions = make([]meta.TopicPartition, 0, len(parts)-i)
		}
		add.Partitions = append(add.Partitions, meta.TopicPartition{Topic: p.Topic, Partition: p.Partition})
	}
	if add.Partitions == nil {
		return
	}
	res, e := c.propose(ctx, add)
	n := 0 // index into add.Partitions
	for i := range parts {
		p := &parts[i]
		if inTxn(p) {
			continue
		}
		switch {
		case e != nil:
			p.Code = e.Code
		case n < len(res.Codes) && res.Codes[n] != 0:
			p.Code = res.Codes[n]
		default:
			p.Code = res.Code
		}
		n++
	}
}

// AddOffsetsRequest is an AddOffsetsToTxn.
type AddOffsetsRequest struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Group           string
}

// AddOffsets adds the group to the producer's transaction (beginning one
// if none is ongoing), which CommitOffsets requires before it stores the
// group's offsets in the transaction. It returns the request's code.
func (c *Coordinator) AddOffsets(ctx context.Context, req AddOffsetsRequest) int16 {
	res, e := c.propose(ctx, meta.AddOffsetsToTxn{
		TransactionalID: req.TransactionalID,
		ProducerID:      req.ProducerID,
		ProducerEpoch:   req.ProducerEpoch,
		Group:           req.Group,
	})
	if e != nil {
		return e.Code
	}
	return res.Code
}
