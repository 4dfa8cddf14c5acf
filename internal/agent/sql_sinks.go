package agent

// SQL sinks (package sql/sinks): every agent runs the sinks the
// placement ring gives it, whether or not it serves SQL, so a sink is
// written as long as any agent lives. A sink is placed like a group's
// coordinator: by its key ("sql-sink:<id>") over the live agents of
// the membership table, moving when its agent's lease ends.

import (
	"context"
	"path/filepath"

	"github.com/strandkafka/strand/internal/placement"
	"github.com/strandkafka/strand/internal/sql/sinks"
)

// newSinks makes the sinks' runner; startSinks runs it once the agent
// is ready (its clients are in-process clients of this agent).
func (a *Agent) newSinks() error {
	ring := func(key string) int32 {
		// Read at each call: the membership starts after this.
		return placement.Ring{Self: a.cfg.NodeID, Live: a.members.nodes}.Owner(key)
	}
	r, err := sinks.New(sinks.Config{Store: a.replica, Dir: filepath.Join(a.cfg.DataDir, "sinks"),
		Kafka: a.sqlKafka, Schemas: a.sqlSchemas, Owner: ring, Self: a.cfg.NodeID,
		Logger: a.logger.With("component", "sql-sinks")})
	if err != nil {
		return err
	}
	// Exported, as the views' metrics are, where SQL is served: the
	// sinks' series sit beside the views' they are computed like (an
	// agent without --sql-listen runs its sinks unmetered).
	if a.cfg.SQLListen != "" {
		a.metrics.reg.MustRegister(r.Metrics().Collectors()...)
	}
	a.sqlSinks = r
	return nil
}

func (a *Agent) startSinks() {
	if a.sqlSinks == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.sinksStop, a.sinksDone = cancel, make(chan struct{})
	go func() {
		defer close(a.sinksDone)
		a.sqlSinks.Run(ctx)
	}()
}

// stopSinks stops the sinks' tasks, before the Kafka server their
// clients use: a transaction in flight is abandoned, and the next
// owner's start aborts it.
func (a *Agent) stopSinks() {
	if a.sinksStop != nil {
		a.sinksStop()
		<-a.sinksDone
	}
}
