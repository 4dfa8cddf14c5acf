package offsetstopic

import (
	"context"

	"github.com/strandkafka/strand/internal/meta"
)

// Resync writes again the records of every stored committed offset and
// group state of the groups owns claims, in the background, and closes
// the returned channel when done (or stopped by Close). The agent runs
// it once at start for the groups it coordinates: records that a crash
// lost (the change applied, its write never ran) are written then. It
// cannot recover what a crash lost of a group that another agent
// coordinates after the restart, nor the tombstones of offsets deleted
// since. It rewrites every record of those groups, so a rolling restart
// rewrites the whole topic once; the cleaner compacts the duplicates.
//
// It queues at most half of MaxPending keys at a time, waiting for them
// to be written before it queues more, so it never crowds out the
// changes noted meanwhile.
func (w *Writer) Resync(owns func(group string) bool) <-chan struct{} {
	done := make(chan struct{})
	w.wg.Go(func() {
		defer close(done)
		if err := w.resync(w.ctx, owns); err != nil && w.ctx.Err() == nil {
			w.log.Warn("rewriting the __consumer_offsets records of this agent's groups failed", "err", err)
		}
	})
	return done
}

func (w *Writer) resync(ctx context.Context, owns func(group string) bool) error {
	v := w.cfg.Meta.View()
	groups, err := v.GroupNames()
	v.Close()
	if err != nil {
		return err
	}
	budget := max(w.cfg.MaxPending/2, 1)
	queued, groupsDone := 0, 0
	for _, g := range groups {
		if !owns(g) {
			continue
		}
		v := w.cfg.Meta.View()
		offs, err := v.CommittedOffsets(g)
		v.Close()
		if err != nil {
			return err
		}
		if queued > 0 && queued+len(offs)+1 > budget {
			if err := w.Sync(ctx); err != nil {
				return err
			}
			queued = 0
		}
		res := meta.Result{Groups: []string{g}, Offsets: make([]meta.OffsetRef, len(offs))}
		for i, o := range offs {
			res.Offsets[i] = meta.OffsetRef{Group: g, Topic: o.Topic, Partition: o.Partition}
		}
		w.Note([]meta.Result{res})
		queued += len(offs) + 1
		groupsDone++
	}
	if err := w.Sync(ctx); err != nil {
		return err
	}
	w.log.Info("rewrote the __consumer_offsets records of this agent's groups", "groups", groupsDone)
	return nil
}
