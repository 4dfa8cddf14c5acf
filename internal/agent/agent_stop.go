package agent

// Stopping an agent: what closes in which order, so that nothing
// acknowledged is lost and nothing closes under a user of it.

import (
	"context"
	"errors"
	"fmt"
)

// Stop shuts down in the order that loses nothing: stop taking requests
// and finish those in flight (their produce calls wait for their commits),
// flush what is still buffered, then close the replica and the log.
func (a *Agent) Stop(ctx context.Context) error {
	a.ready.Store(false)
	a.logger.Info("strand agent shutting down")
	err := a.closeAll(ctx)
	if err != nil {
		a.logger.Error("shutdown", "err", err)
	} else {
		a.logger.Info("strand agent stopped")
	}
	return err
}

func (a *Agent) closeAll(ctx context.Context) error {
	var errs []error
	if a.console != nil {
		a.console.Close() // first: its client would reconnect to the closing server
	}
	if a.registrySrv != nil {
		// Before the replica: a registration in flight is a proposal.
		if err := a.registrySrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("schema registry shutdown: %w", err))
		}
	}
	if err := a.stopConnect(ctx); err != nil {
		errs = append(errs, fmt.Errorf("connect shutdown: %w", err))
	}
	a.stopSinks()
	a.stopSQL()
	if a.server != nil {
		if err := a.server.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("kafka shutdown: %w", err))
		}
	} else {
		for _, l := range a.listeners {
			l.ln.Close()
		}
	}
	if a.shares != nil {
		a.shares.Close(ctx) // after the server (no new sessions), before the replica: a release is a proposal
	}
	if w := a.offsets.Load(); w != nil {
		// After the server (no more commits), before the pipeline its
		// records go through; bounded apart, so that a writer stuck in
		// retries leaves the pipeline the rest of the budget for the
		// clients' data.
		wctx, cancel := context.WithTimeout(ctx, offsetsCloseTimeout)
		if err := w.Close(wctx); err != nil {
			a.logger.Warn("__consumer_offsets records still pending at shutdown are lost; the next start rewrites this agent's groups", "err", err)
		}
		cancel()
	}
	if a.pipeline != nil {
		if err := a.pipeline.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("produce pipeline: %w", err))
		}
	}
	if a.txns != nil {
		a.txns.Close() // after the server, before the replica: a sweep is a proposal
	}
	if a.retention != nil {
		a.retention.Close() // before the replica: a check is a proposal
	}
	if a.cleaner != nil {
		a.cleaner.Close() // before the replica: a round ends in proposals
	}
	if a.collector != nil {
		a.collector.Close() // before the replica: a step ends in a proposal
	}
	if a.compactor != nil {
		a.compactor.Close() // before the replica: a run ends in a proposal
	}
	if a.groups != nil {
		a.groups.Close() // after the server: its handlers use it
	}
	if a.members != nil {
		a.members.stop(ctx) // before the replica: leaving is a proposal
	}
	if a.snapshots != nil {
		a.snapshots.stop() // Replica.Snapshot must return before Close
	}
	if a.replica != nil {
		if err := a.replica.Close(); err != nil {
			errs = append(errs, fmt.Errorf("metadata replica: %w", err))
		}
	}
	if a.log != nil {
		if err := a.log.Close(); err != nil {
			errs = append(errs, fmt.Errorf("shared log: %w", err))
		}
	}
	a.verify.stop() // a walk can last hours: not one Shutdown waits for
	if a.httpSrv != nil {
		if err := a.httpSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
	}
	if a.dirLock != nil {
		a.dirLock.Close() // last: the directory is free for the next agent
	}
	return errors.Join(errs...)
}
