package txn

import (
	"context"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
)

// runSweep calls Sweep every SweepInterval until Close.
func (c *Coordinator) runSweep(ctx context.Context) {
	defer c.wg.Done()
	for {
		if clock.Sleep(ctx, c.cfg.Clock, c.cfg.SweepInterval) != nil {
			return
		}
		if err := c.Sweep(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("transaction sweep failed", "err", err)
		}
	}
}

// Sweep proposes meta.TxnSweep for the transactional ids this agent
// coordinates whose transaction timed out (or whose id expired) by the
// log clock. Apply re-checks every id against the clock, so a sweep that
// races another agent's, or the producer's own EndTxn, changes nothing
// twice. While Config.ClockOff says this agent's clock is off, by the log
// clock alone.
func (c *Coordinator) Sweep(ctx context.Context) error {
	view := c.cfg.Meta.View()
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
		if c.cfg.ClockOff == nil || !c.cfg.ClockOff() {
			now = max(now, c.cfg.Clock.Now().UnixMilli())
		}
		due, err = view.TxnsDue(now)
	}
	view.Close()
	if err != nil {
		return err
	}
	var mine []string
	for _, id := range due {
		if c.owns(id) {
			mine = append(mine, id)
		}
	}
	for len(mine) > 0 {
		n := min(len(mine), meta.MaxTxnSweepIDs)
		res, err := c.cfg.Meta.ProposeBatch(ctx, []meta.Command{meta.TxnSweep{TransactionalIDs: mine[:n]}})
		if err != nil {
			return err
		}
		if err := res[0].Err(); err != nil {
			return err
		}
		c.log.Info("swept transactions", "ids", mine[:n])
		mine = mine[n:]
	}
	return nil
}
