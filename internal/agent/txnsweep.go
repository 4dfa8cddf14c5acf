package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
)

// txnSweepInterval is how often an agent looks for transactions that
// timed out or transactional ids that expired. Kafka checks every 10 s
// (transaction.abort.timed.out.transaction.cleanup.interval.ms); the
// check here is a local read, so it can run more often and abort a hung
// transaction closer to its timeout.
const txnSweepInterval = time.Second

// txnSweeper proposes meta.TxnSweep for the transactional ids this agent
// coordinates whose transaction timed out (or whose id expired) by the
// log clock. Apply re-checks every id against the clock, so a sweep that
// races another agent's, or the producer's own EndTxn, changes nothing
// twice.
type txnSweeper struct {
	replica *replica.Replica
	// owns says whether this agent coordinates a transactional id.
	owns   func(id string) bool
	logger *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
}

func startTxnSweeper(r *replica.Replica, owns func(string) bool, logger *slog.Logger) *txnSweeper {
	ctx, cancel := context.WithCancel(context.Background())
	s := &txnSweeper{replica: r, owns: owns, logger: logger, cancel: cancel, done: make(chan struct{})}
	go s.run(ctx)
	return s
}

func (s *txnSweeper) stop() {
	s.cancel()
	<-s.done
}

func (s *txnSweeper) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(txnSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.sweep(ctx); err != nil && ctx.Err() == nil {
			s.logger.Warn("transaction sweep failed", "err", err)
		}
	}
}

func (s *txnSweeper) sweep(ctx context.Context) error {
	view := s.replica.View()
	now, err := view.LogClock()
	var due []string
	if err == nil {
		// The log clock moves only when an entry is applied, so on an
		// idle log it lags the wall clock by up to a lease renewal. The
		// sweep's own entry carries this agent's clock and apply
		// advances the log clock to it before re-checking, so judging
		// by the later of the two aborts a transaction about a sweep
		// interval after its timeout, and apply still decides by the
		// log alone.
		due, err = view.TxnsDue(max(now, time.Now().UnixMilli()))
	}
	view.Close()
	if err != nil {
		return err
	}
	var mine []string
	for _, id := range due {
		if s.owns(id) {
			mine = append(mine, id)
		}
	}
	for len(mine) > 0 {
		n := min(len(mine), meta.MaxTxnSweepIDs)
		res, err := s.replica.ProposeBatch(ctx, []meta.Command{meta.TxnSweep{TransactionalIDs: mine[:n]}})
		if err != nil {
			return err
		}
		if err := res[0].Err(); err != nil {
			return err
		}
		s.logger.Info("swept transactions", "ids", mine[:n])
		mine = mine[n:]
	}
	return nil
}
