package views

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/sql/source"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
)

// Read consistency (the session setting strand.view_consistency):
//
//   - "prefix" (the default) reads the view as this agent's copy stands:
//     one committed epoch, a prefix of every input partition, possibly
//     behind what was produced a moment ago;
//   - "caught_up" first waits until this agent's copy has consumed every
//     input partition up to its last stable offset as the read began,
//     so a read sees every record committed to the inputs before it
//     (read-your-writes for a producer that waited for its acks). It
//     costs one ListOffsets per input topic, and waits as long as the
//     view needs to catch up, up to the timeout WaitCaughtUp is given.
const (
	ConsistencyPrefix   = "prefix"
	ConsistencyCaughtUp = "caught_up"
)

// WaitCaughtUp returns once the view id on this agent has committed an
// epoch at or past its inputs' last stable offsets as they are when it
// is called: 57014 after timeout, 55000 while the view is not running.
// A partition the view has not read yet counts as caught up when it
// holds nothing (its start is its end) or the source starts at the
// latest offset (what was there before the view started is not part of
// it).
func (r *Runner) WaitCaughtUp(ctx context.Context, id uint64, timeout time.Duration) error {
	t, err := r.ready(id) // locked
	if err != nil {
		return err
	}
	defs := t.mu.defs
	t.mu.Unlock()
	type bound struct{ start, end int64 }
	want := make([]map[int32]bound, len(defs))
	cl, err := r.adminClient()
	if err != nil {
		return err
	}
	adm := kadm.NewClient(cl)
	for i, def := range defs {
		ends, err := adm.ListCommittedOffsets(ctx, def.Topic)
		if err == nil {
			err = ends.Error()
		}
		var starts kadm.ListedOffsets
		if err == nil {
			starts, err = adm.ListStartOffsets(ctx, def.Topic)
		}
		if err == nil {
			err = starts.Error()
		}
		if err != nil {
			return fmt.Errorf("view inputs' end offsets: source %s: %w", def.Name, err)
		}
		want[i] = map[int32]bound{}
		ends.Each(func(o kadm.ListedOffset) {
			if o.Topic != def.Topic {
				return
			}
			b := bound{end: o.Offset}
			if s, ok := starts.Lookup(o.Topic, o.Partition); ok {
				b.start = s.Offset
			}
			want[i][o.Partition] = b
		})
	}
	caughtUp := func(pos []map[int32]source.Position) bool {
		for i, parts := range want {
			for p, b := range parts {
				if i < len(pos) {
					if at, ok := pos[i][p]; ok {
						if at.Offset < b.end {
							return false
						}
						continue
					}
				}
				if b.start < b.end && defs[i].Startup != source.Latest {
					return false
				}
			}
		}
		return true
	}
	deadline := r.cfg.Clock.Now().Add(timeout)
	for {
		t.mu.Lock()
		pos, epochDone, stopped := t.mu.positions, t.mu.epochDone, t.mu.stopped
		t.mu.Unlock()
		if caughtUp(pos) {
			return nil
		}
		if stopped {
			return sqlerr.Errorf(sqlerr.ObjectNotInPrerequisiteState, "materialized view %q stopped while a read waited for it to catch up", t.rel.Name)
		}
		left := deadline.Sub(r.cfg.Clock.Now())
		if left <= 0 {
			return sqlerr.Errorf(sqlerr.QueryCanceled, "materialized view %q did not catch up with its inputs within %v (strand.view_consistency = 'caught_up'; 'prefix' reads what it has)", t.rel.Name, timeout)
		}
		tick, timer := clock.After(r.cfg.Clock, min(left, time.Second))
		select {
		case <-epochDone:
		case <-tick:
			// Look again: the deadline, or positions that moved
			// without an epoch this wait saw begin.
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		}
		timer.Stop()
	}
}

// adminClient is a client of the agent for WaitCaughtUp's ListOffsets,
// made once.
func (r *Runner) adminClient() (*kgo.Client, error) {
	r.adminOnce.Do(func() {
		r.admin, r.adminErr = kgo.NewClient(r.cfg.Kafka()...)
	})
	return r.admin, r.adminErr
}
