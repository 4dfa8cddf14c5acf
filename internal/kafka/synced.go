package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/txn"
)

// syncedView syncs the local copy with the log and returns a View of it
// (the caller closes it), for the partition reads that must not answer
// from a copy behind the log: a Fetch past the local end (1) and
// OffsetForLeaderEpoch (23). Any agent serves any partition, so a
// consumer can read records through one agent that another has not
// applied yet. Neither request carries a timeout of its own, so the
// Sync is bounded as the transaction reads' is; on failure the view is
// nil and the error is NOT_LEADER_OR_FOLLOWER (this agent is stopping,
// or its copy halted and it exits: the client looks for another),
// REQUEST_TIMED_OUT or UNKNOWN_SERVER_ERROR.
func syncedView(ctx context.Context, db MetaDB) (*meta.View, *kerr.Error) {
	ctx, cancel := context.WithTimeout(ctx, txn.SyncTimeout)
	defer cancel()
	if err := db.Sync(ctx); err != nil {
		return nil, syncErrCode(err)
	}
	return db.View(), nil
}

// syncErrCode is the code of a failed Sync (see syncedView).
func syncErrCode(err error) *kerr.Error {
	if errors.Is(err, replica.ErrClosed) || errors.Is(err, replica.ErrHalted) {
		return kerr.NotLeaderForPartition
	}
	return proposeErrCode(err)
}
