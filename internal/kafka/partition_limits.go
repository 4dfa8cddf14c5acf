package kafka

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
)

// Partition limits. Anyone who can create topics can create partitions,
// and every agent holds every partition's metadata: without a bound, 20
// topics of 65,536 partitions are enough to exhaust an agent's memory.
// CreateTopics, CreatePartitions and auto-creation (Metadata, Produce)
// refuse a topic or a growth that would pass Deps.MaxPartitionsPerTopic
// or Deps.MaxPartitions with POLICY_VIOLATION and a message naming the
// limit. KIP-578 proposed these limits (max.partitions for the cluster)
// with a new error code that Kafka never adopted; POLICY_VIOLATION is
// what Kafka answers when a configured policy refuses a creation.
//
// The cluster count is this agent's copy plus the creations its own
// requests have admitted and not yet seen applied, so concurrent requests
// to one agent cannot pass the limit together; requests to different
// agents at the same moment can, by at most what each of them admits.

// Defaults for the partition limits.
const (
	// DefaultMaxPartitionsPerTopic bounds one topic. Kafka's own
	// controller refuses to create more than 10,000 partitions in one
	// request (KAFKA-17870), and a Metadata or Fetch request naming one
	// such topic stays under a megabyte.
	DefaultMaxPartitionsPerTopic = 10_000
	// DefaultMaxPartitions bounds the cluster (KIP-578's max.partitions).
	// Every agent holds every partition: at the 5 KiB per idle partition
	// the performance goals allow, 100,000 of them take 500 MB, the
	// default agent's memory budget.
	DefaultMaxPartitions = 100_000
)

func (d *Deps) maxPartitionsPerTopic() int32 {
	if d.MaxPartitionsPerTopic > 0 {
		return min(d.MaxPartitionsPerTopic, maxPartitionsPerTopic)
	}
	return DefaultMaxPartitionsPerTopic
}

func (d *Deps) maxPartitions() int64 {
	if d.MaxPartitions > 0 {
		return d.MaxPartitions
	}
	return DefaultMaxPartitions
}

// partitionGate counts the partitions this agent's requests are creating
// and its copy may not show yet.
type partitionGate struct {
	mu struct {
		sync.Mutex
		// reserved holds the reservations of admitted creations whose
		// proposals have not returned; bounded by the requests in flight.
		reserved []*reservation
	}
}

// reservation is one admitted creation: topic name is to have total
// partitions, added of them new.
type reservation struct {
	name         string
	total, added int32
}

// pendingLocked sums the partitions of the reservations view does not
// show applied yet. A creation applies, and shows in a view, a moment
// before its request releases its reservation: counting it both ways
// would refuse creations the limit allows.
func (g *partitionGate) pendingLocked(view *meta.View) (int64, error) {
	var n int64
	for _, r := range g.mu.reserved {
		t, exists, err := view.Topic(r.name)
		if err != nil {
			return 0, err
		}
		if !exists || t.Partitions < r.total {
			n += int64(r.added)
		}
	}
	return n, nil
}

// growth is what one command adds: the topic's new total and the
// partitions added.
func growth(view *meta.View, c meta.Command) (name string, total, added int32, ok bool) {
	switch c := c.(type) {
	case meta.CreateTopic:
		return c.Name, c.Partitions, c.Partitions, true
	case meta.CreatePartitions:
		t, exists, err := view.Topic(c.Name)
		if err != nil || !exists {
			// Apply answers the missing topic.
			return c.Name, c.NewTotal, 0, true
		}
		return c.Name, c.NewTotal, max(c.NewTotal-t.Partitions, 0), true
	}
	return "", 0, 0, false
}

// admitCreations checks, in order, the CreateTopic and CreatePartitions
// commands among cmds against the partition limits. It returns an outcome
// per command, POLICY_VIOLATION for those refused and zero for the rest,
// and a release for the partitions it reserved for the admitted ones,
// which the caller calls once their proposal has returned (the copy then
// shows them).
func (d *Deps) admitCreations(db MetaDB, cmds []meta.Command) ([]outcome, func()) {
	outs := make([]outcome, len(cmds))
	gate := new(partitionGate)
	if d.shared != nil {
		gate = &d.shared.partitions
	}
	perTopic, cluster := d.maxPartitionsPerTopic(), d.maxPartitions()

	gate.mu.Lock()
	defer gate.mu.Unlock()
	// A view taken under the lock: a creation that released its
	// reservation has applied, so this view shows it.
	view := db.View()
	defer view.Close()
	var existing, pending int64
	counted := false
	var reserved []*reservation
	for i, c := range cmds {
		name, total, added, ok := growth(view, c)
		if !ok {
			continue
		}
		if total > perTopic {
			outs[i].res = meta.Result{Code: kerr.PolicyViolation.Code, Message: fmt.Sprintf(
				"topic %q would have %d partitions, more than the %d this cluster allows per topic (max-partitions-per-topic)",
				name, total, perTopic)}
			continue
		}
		if !counted {
			ts, err := view.Topics()
			if err != nil {
				outs[i].err = err
				continue
			}
			for _, t := range ts {
				existing += int64(t.Partitions)
			}
			if pending, err = gate.pendingLocked(view); err != nil {
				outs[i].err = err
				continue
			}
			counted = true
		}
		if after := existing + pending + int64(added); after > cluster {
			outs[i].res = meta.Result{Code: kerr.PolicyViolation.Code, Message: fmt.Sprintf(
				"%d more partitions for topic %q would make %d in the cluster, more than max.partitions (%d)",
				added, name, after, cluster)}
			continue
		}
		r := &reservation{name: name, total: total, added: added}
		gate.mu.reserved = append(gate.mu.reserved, r)
		reserved = append(reserved, r)
		pending += int64(added)
	}
	var once sync.Once
	return outs, func() {
		once.Do(func() {
			gate.mu.Lock()
			defer gate.mu.Unlock()
			gate.mu.reserved = slices.DeleteFunc(gate.mu.reserved, func(r *reservation) bool {
				return slices.Contains(reserved, r)
			})
		})
	}
}

// proposeCreations is proposeAll for commands that create topics or
// partitions: those the partition limits refuse get POLICY_VIOLATION
// and are not proposed.
func (d *Deps) proposeCreations(ctx context.Context, db MetaDB, cmds []meta.Command) []outcome {
	outs, release := d.admitCreations(db, cmds)
	defer release()
	var admitted []meta.Command
	var idx []int
	for i, o := range outs {
		if o.err == nil && o.res.Code == 0 {
			admitted = append(admitted, cmds[i])
			idx = append(idx, i)
		}
	}
	for j, o := range proposeAll(ctx, db, admitted) {
		outs[idx[j]] = o
	}
	return outs
}

// createOrValidate proposes cmds as proposeCreations does, bounded by
// timeoutMillis (when positive), or with validateOnly only checks them
// against the partition limits.
func (d *Deps) createOrValidate(ctx context.Context, db MetaDB, cmds []meta.Command, validateOnly bool, timeoutMillis int32) []outcome {
	if validateOnly {
		outs, release := d.admitCreations(db, cmds)
		release()
		return outs
	}
	ctx, cancel := withTimeoutMillis(ctx, timeoutMillis)
	defer cancel()
	return d.proposeCreations(ctx, db, cmds)
}
