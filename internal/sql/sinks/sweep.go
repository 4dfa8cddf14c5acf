package sinks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/meta"
)

// The progress topics of dropped sinks are deleted by a sweep rather
// than by DROP SINK itself: the catalog change is applied by every
// agent, the sink's owner may be dead when it is, and a stale owner
// that has not yet seen the drop may create the topic again as its
// task starts (ensureProgressTopic). A sweep that deletes every
// progress topic naming a dropped sink covers all three.
const (
	// sweepKey is the placement key of the one agent that sweeps, so
	// the live agents do not all list and delete the same topics.
	sweepKey = "sql-sink-sweep"
	// sweepInterval bounds how long a topic a stale owner created
	// again after a sweep stays: the sweep also runs at every change
	// of the catalog's sinks.
	sweepInterval = 5 * time.Minute
	// sweepTimeout bounds one sweep's requests.
	sweepTimeout = 10 * time.Second
)

// sweepState is what the last successful sweep saw; the Run loop's
// alone.
type sweepState struct {
	sinks string // the sinks' ids then, comma separated
	at    time.Time
}

// maybeSweep sweeps if this agent owns the sweep and the catalog's
// sinks changed since the last sweep or sweepInterval passed.
func (r *Runner) maybeSweep(ctx context.Context, st *sweepState) {
	if r.cfg.Owner(sweepKey) != r.cfg.Self {
		st.sinks = "" // sweep again at once if the sweep comes back here
		return
	}
	ids, next, err := r.catalogSinks()
	if err != nil {
		r.cfg.Logger.Warn("sinks: reading the catalog", "err", err)
		return
	}
	sig := sinksSignature(ids)
	now := r.cfg.Clock.Now()
	if sig == st.sinks && now.Sub(st.at) < sweepInterval {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	deleted, err := r.sweep(sctx, ids, next)
	if err != nil {
		r.cfg.Logger.Warn("sinks: deleting dropped sinks' progress topics", "err", err)
		return
	}
	for _, topic := range deleted {
		r.cfg.Logger.Info("sinks: deleted a dropped sink's progress topic", "topic", topic)
	}
	*st = sweepState{sinks: sig, at: now}
}

// catalogSinks returns the ids of the catalog's sinks and the id the
// next relation will get.
func (r *Runner) catalogSinks() (map[uint64]bool, uint64, error) {
	v := r.cfg.Store.View()
	defer v.Close()
	rels, err := v.Relations()
	if err != nil {
		return nil, 0, err
	}
	next, err := v.NextRelationID()
	if err != nil {
		return nil, 0, err
	}
	ids := map[uint64]bool{}
	for _, rel := range rels {
		if rel.Kind == meta.RelationSink {
			ids[rel.ID] = true
		}
	}
	return ids, next, nil
}

func sinksSignature(ids map[uint64]bool) string {
	s := make([]string, 0, len(ids))
	for id := range ids {
		s = append(s, strconv.FormatUint(id, 10))
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

// sweep deletes the progress topics of sinks the catalog no longer
// has and returns their names.
func (r *Runner) sweep(ctx context.Context, live map[uint64]bool, next uint64) ([]string, error) {
	cl, err := kgo.NewClient(r.cfg.Kafka()...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	var dead []string
	for _, name := range topics.Names() {
		if _, ok := droppedProgressTopic(name, live, next); ok {
			dead = append(dead, name)
		}
	}
	if len(dead) == 0 {
		return nil, nil
	}
	res, err := adm.DeleteTopics(ctx, dead...)
	if err != nil {
		return nil, err
	}
	var errs []error
	var deleted []string
	for _, t := range res.Sorted() {
		switch {
		case t.Err == nil:
			deleted = append(deleted, t.Topic)
		case errors.Is(t.Err, kerr.UnknownTopicOrPartition):
			// Another sweep (an agent that owned the sweep a moment
			// ago) was first.
		default:
			errs = append(errs, fmt.Errorf("%s: %w", t.Topic, t.Err))
		}
	}
	return deleted, errors.Join(errs...)
}

// droppedProgressTopic reports whether name is the progress topic of
// a dropped sink: one with an id below next (so created, not one being
// created now) that the catalog does not list. A relation id is never
// reused, so the topic can only be that sink's.
func droppedProgressTopic(name string, live map[uint64]bool, next uint64) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, progressTopicPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(rest, 10, 64)
	if err != nil || strconv.FormatUint(id, 10) != rest || id >= next || live[id] {
		return 0, false
	}
	return id, true
}
