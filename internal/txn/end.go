package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
)

// EndRequest is an EndTxn.
type EndRequest struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Commit          bool
	// BumpEpoch bumps the producer's epoch with the end and returns the
	// new one (EndTxn v5, KIP-890 part 2), so a request of the ended
	// transaction that is still on its way is fenced.
	BumpEpoch bool
}

// EndResult answers an EndRequest: with BumpEpoch, the producer's id and
// epoch for its next transaction; -1 otherwise and with an error.
type EndResult struct {
	Code          int16
	ProducerID    int64
	ProducerEpoch int16
}

// EndTxn commits or aborts the producer's transaction in one apply
// (meta.EndTxn): a marker in every partition the transaction added,
// aborted ranges indexed for read_committed, the transaction's offsets
// committed to their groups. There is no PrepareCommit phase to wait
// out, so the next transaction may begin at once.
//
// KAFKA-17754: the copy is synced with the log first and the command
// names the transaction found ongoing (TxnState.Seq); apply refuses it
// if another transaction began since, so an EndTxn delayed anywhere
// inside Strand (in a queue, in an ambiguous proposal retried later)
// never ends a later transaction. Ending a transaction that already
// ended the same way succeeds (a client's retry); the other way, or with
// none ongoing, is INVALID_TXN_STATE.
func (c *Coordinator) EndTxn(ctx context.Context, req EndRequest) EndResult {
	out := EndResult{ProducerID: -1, ProducerEpoch: -1}
	view, _, e := c.syncedView(ctx, kerr.CoordinatorNotAvailable)
	if e != nil {
		out.Code = e.Code
		return out
	}
	s, ok, err := view.Txn(req.TransactionalID)
	view.Close()
	switch {
	case err != nil:
		out.Code = kerr.UnknownServerError.Code
		return out
	case !ok:
		out.Code = kerr.TransactionalIDNotFound.Code
		return out
	}
	res, e := c.propose(ctx, meta.EndTxn{
		TransactionalID: req.TransactionalID,
		ProducerID:      req.ProducerID,
		ProducerEpoch:   req.ProducerEpoch,
		Commit:          req.Commit,
		Seq:             s.Seq,
		BumpEpoch:       req.BumpEpoch,
	})
	switch {
	case e != nil:
		out.Code = e.Code
	case res.Code != 0:
		out.Code = res.Code
	case req.BumpEpoch:
		out.ProducerID, out.ProducerEpoch = res.ProducerID, res.ProducerEpoch
	}
	return out
}

// CommitRequest is a TxnOffsetCommit.
type CommitRequest struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Group           string
	// Generation is checked against the group's stored generation
	// (KIP-447: ILLEGAL_GENERATION when older); -1 skips the check.
	Generation int32
	// AddGroup adds Group to the transaction in the same log entry
	// (TxnOffsetCommit v5, KIP-890 part 2); without it the group must
	// have been added with AddOffsets, else INVALID_TXN_STATE.
	AddGroup bool
	Offsets  []CommitOffset
}

// CommitOffset is one partition's offset in a CommitRequest.
type CommitOffset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32 // -1 if not known
	Metadata    string
}

// CommitOffsets stores the offsets as pending in the producer's
// transaction (meta.TxnOffsetCommit); EndTxn commits or drops them. It
// returns a code per offset, in request order. A zombie consumer with
// the group's current generation is not checked against the group
// coordinator's members: the producer epoch fences it. A failed
// AddGroup answers every offset.
func (c *Coordinator) CommitOffsets(ctx context.Context, req CommitRequest) []int16 {
	cmd := meta.TxnOffsetCommit{
		TransactionalID: req.TransactionalID,
		ProducerID:      req.ProducerID,
		ProducerEpoch:   req.ProducerEpoch,
		Group:           req.Group,
		Generation:      req.Generation,
		Offsets:         make([]meta.OffsetCommitPartition, len(req.Offsets)),
	}
	for i, o := range req.Offsets {
		cmd.Offsets[i] = meta.OffsetCommitPartition{
			Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
			LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimestamp: -1,
		}
	}
	var res meta.Result
	var e *kerr.Error
	if req.AddGroup {
		res, e = c.addGroupAndCommit(ctx, cmd)
	} else {
		res, e = c.propose(ctx, cmd)
	}
	codes := make([]int16, len(req.Offsets))
	for i := range codes {
		switch {
		case e != nil:
			codes[i] = e.Code
		case i < len(res.Codes):
			codes[i] = res.Codes[i]
		default:
			codes[i] = res.Code
		}
	}
	return codes
}

// addGroupAndCommit adds the group to the transaction and commits in one
// log entry; a failed add is the result.
func (c *Coordinator) addGroupAndCommit(ctx context.Context, cmd meta.TxnOffsetCommit) (meta.Result, *kerr.Error) {
	add := meta.AddOffsetsToTxn{TransactionalID: cmd.TransactionalID, ProducerID: cmd.ProducerID, ProducerEpoch: cmd.ProducerEpoch, Group: cmd.Group}
	res, e := c.proposeAll(ctx, add, cmd)
	switch {
	case e != nil:
		return meta.Result{}, e
	case res[0].Code != 0:
		return res[0], nil
	}
	return res[1], nil
}
