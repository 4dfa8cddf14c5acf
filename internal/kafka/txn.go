package kafka

// Shared by the transaction coordinator handlers (22, 24, 25, 26, 28):
// every one of them is a single meta command, proposed through the log
// and answered from its result, so any agent can serve any transactional
// id (the coordinator state is in the replicated database, meta/txn.go).

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
)

// proposeTxn proposes one transaction command and returns its result. A
// proposal that fails is answered with a retriable code: an agent that is
// stopping is COORDINATOR_NOT_AVAILABLE (the client looks the coordinator
// up again), an ambiguous or timed-out proposal REQUEST_TIMED_OUT; a
// retry of an ambiguous command is safe because each command checks the
// state it finds (a repeated EndTxn succeeds again, a repeated
// AddPartitionsToTxn adds nothing new).
func proposeTxn(ctx context.Context, db MetaDB, cmd meta.Command) (meta.Result, *kerr.Error) {
	res, e := proposeTxns(ctx, db, cmd)
	if e != nil {
		return meta.Result{}, e
	}
	return res[0], nil
}

// proposeTxns proposes commands in one log entry; on success there is a
// result per command.
func proposeTxns(ctx context.Context, db MetaDB, cmds ...meta.Command) ([]meta.Result, *kerr.Error) {
	res, err := db.ProposeBatch(ctx, cmds)
	switch {
	case errors.Is(err, meta.ErrClosed):
		return nil, kerr.CoordinatorNotAvailable
	case err != nil:
		return nil, proposeErrCode(err)
	case len(res) != len(cmds):
		return nil, kerr.UnknownServerError
	}
	return res, nil
}

// fencedCode converts PRODUCER_FENCED to INVALID_PRODUCER_EPOCH for a
// request version older than fencedSince, the version KIP-588 introduced
// the code in, as Kafka's handlers do: older clients know only the
// latter.
func fencedCode(code int16, version, fencedSince int16) int16 {
	if code == kerr.ProducerFenced.Code && version < fencedSince {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// adminSyncTimeout bounds the Sync of the transaction requests that read
// the coordinator state (24 verify-only, 26, 61, 65, 66), and of the
// reads that must not answer from a copy behind the log (1 past the
// local end, 23), which carry no timeout of their own: past it the
// client gets REQUEST_TIMED_OUT and retries.
const adminSyncTimeout = 10 * time.Second

// syncedView syncs the local copy with the log and returns a View of it
// (the caller closes it) and its log clock, so a request sees what every
// agent wrote before it arrived. On failure the view is nil and the
// error is closed (when this agent is stopping, the code that sends the
// client elsewhere), REQUEST_TIMED_OUT or UNKNOWN_SERVER_ERROR.
func syncedView(ctx context.Context, db MetaDB, closed *kerr.Error) (*meta.View, int64, *kerr.Error) {
	ctx, cancel := context.WithTimeout(ctx, adminSyncTimeout)
	defer cancel()
	if err := db.Sync(ctx); err != nil {
		switch {
		case errors.Is(err, meta.ErrClosed):
			return nil, 0, closed
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			return nil, 0, kerr.RequestTimedOut
		}
		return nil, 0, kerr.UnknownServerError
	}
	view := db.View()
	now, err := view.LogClock()
	if err != nil {
		view.Close()
		return nil, 0, kerr.UnknownServerError
	}
	return view, now, nil
}
