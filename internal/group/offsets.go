package group

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
)

// CommitRequest is an OffsetCommit: a group member's commit, or one from
// outside group management (generation -1, no member id).
type CommitRequest struct {
	Group      string
	MemberID   string
	InstanceID *string
	// Generation is the member's generation, or its member epoch in a
	// KIP-848 group; -1 from outside group management.
	Generation int32
	// RetentionMs gives these offsets their own expiry; -1 for the
	// group's.
	RetentionMs int64
	Topics      []CommitTopic
}

// CommitTopic is one topic of a CommitRequest.
type CommitTopic struct {
	Topic      string
	Partitions []CommitPartition
}

// CommitPartition is one partition's committed offset.
type CommitPartition struct {
	Partition   int32
	Offset      int64
	LeaderEpoch int32 // -1 if not known
	Metadata    string
	// Timestamp is the commit time in Unix ms; -1 for the log's.
	Timestamp int64
}

// OffsetCommit commits in two steps: it validates the commit and queues
// it for the log, then the returned function waits for the outcome: a
// Kafka error code per partition of req, in request order. Commits
// queued in sequence apply in sequence, so a caller that queues a
// connection's commits in request order (kafka's Request.InOrder) keeps
// a later commit from being overwritten by an earlier one. Commits of
// many groups share log entries.
func (c *Coordinator) OffsetCommit(ctx context.Context, req CommitRequest) func(context.Context) []int16 {
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	// codes answers every partition, in request order.
	codes := make([]int16, n)
	done := func(context.Context) []int16 { return codes }
	failAll := func(e *kerr.Error) func(context.Context) []int16 {
		for i := range codes {
			codes[i] = e.Code
		}
		return done
	}
	if !c.Owns(req.Group) {
		return failAll(kerr.NotCoordinator)
	}
	generation, memberID := req.Generation, req.MemberID
	cmd := meta.OffsetCommit{Group: req.Group, Generation: generation, RetentionMs: req.RetentionMs}
	// cmdCodes maps cmd.Offsets to their codes.
	var cmdCodes []*int16
	topics := topicNames{view: c.store.View()}
	k := 0
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			code := &codes[k]
			k++
			if len(rp.Metadata) > c.cfg.MaxOffsetMetadataBytes {
				*code = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			if e := topics.check(rt.Topic, rp.Partition); e != nil {
				*code = e.Code
				continue
			}
			cmd.Offsets = append(cmd.Offsets, meta.OffsetCommitPartition{
				Topic:           rt.Topic,
				Partition:       rp.Partition,
				Offset:          rp.Offset,
				LeaderEpoch:     rp.LeaderEpoch,
				Metadata:        rp.Metadata,
				CommitTimestamp: rp.Timestamp,
			})
			cmdCodes = append(cmdCodes, code)
		}
	}
	topics.view.Close()
	if len(cmd.Offsets) == 0 {
		return done
	}
	fail := func(e *kerr.Error) func(context.Context) []int16 {
		for _, code := range cmdCodes {
			*code = e.Code
		}
		return done
	}

	g, e := c.lockGroup(ctx, req.Group, false)
	if e != nil {
		return fail(e)
	}
	var p *replica.Proposal
	var err error
	if g == nil {
		// Nothing stored or in memory: only a commit from outside group
		// management may create the group.
		if generation >= 0 {
			return fail(kerr.IllegalGeneration)
		}
		p, err = c.store.Submit(ctx, []meta.Command{cmd})
	} else {
		var e *kerr.Error
		if g.kind == meta.GroupShare {
			// A share group commits no offsets (KIP-932): Kafka
			// answers GROUP_ID_NOT_FOUND.
			g.mu.Unlock()
			return fail(kerr.GroupIDNotFound)
		}
		if g.kind == meta.GroupConsumer && g.cg != nil {
			// KIP-848: the member epoch stands in for the generation;
			// the log fences by the group epoch.
			if e = g.consumerCommitCheckLocked(memberID, generation, cmd.Offsets); e == nil && generation >= 0 {
				cmd.Generation = g.generation
			}
		} else {
			e = g.commitCheckLocked(memberID, req.InstanceID, generation)
		}
		if e != nil {
			g.mu.Unlock()
			return fail(e)
		}
		// Queued under the lock: ordered with the group's state stores.
		p, err = c.store.Submit(ctx, []meta.Command{cmd})
		g.mu.Unlock()
	}
	if err != nil {
		return fail(proposeErrCode(err))
	}
	return func(ctx context.Context) []int16 {
		res, err := p.Wait(ctx)
		if err != nil {
			return fail(proposeErrCode(err))(ctx)
		}
		r := res[0]
		for i, code := range cmdCodes {
			switch {
			case i < len(r.Codes):
				*code = r.Codes[i]
			case r.Code != 0:
				*code = r.Code
			}
		}
		return codes
	}
}

// commitCheckLocked is Kafka's validation of a group offset commit.
func (g *group) commitCheckLocked(memberID string, instanceID *string, generation int32) *kerr.Error {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable
	}
	if instanceID != nil {
		if owner, ok := g.static[*instanceID]; ok && owner != memberID {
			return kerr.FencedInstanceID
		}
	}
	if generation < 0 && g.state == stateEmpty {
		return nil // offsets only: the group is not managed here
	}
	m, e := g.memberCheckLocked(memberID, instanceID, generation)
	if e != nil {
		return e
	}
	switch g.state {
	case stateStable, statePreparingRebalance:
		// Commits of the old generation are allowed while members
		// rejoin: they commit what they processed before revoking.
		g.heartbeatLocked(m)
		return nil
	case stateCompletingRebalance:
		return kerr.RebalanceInProgress
	}
	return kerr.UnknownMemberID
}

// proposeErrCode maps a proposal with no result to a retriable code.
func proposeErrCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, replica.ErrClosed):
		return kerr.NotCoordinator
	case errors.Is(err, replica.ErrAmbiguous), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut
	case errors.Is(err, replica.ErrTooLarge):
		return kerr.InvalidRequest
	}
	return kerr.CoordinatorNotAvailable
}

// topicNames looks topics up once per request.
type topicNames struct {
	view *meta.View
	m    map[string]meta.Topic
}

func (t *topicNames) get(name string) (meta.Topic, bool) {
	if tp, ok := t.m[name]; ok {
		return tp, !tp.ID.IsZero()
	}
	tp, ok, err := t.view.Topic(name)
	if err != nil || !ok {
		tp = meta.Topic{}
	}
	if t.m == nil {
		t.m = make(map[string]meta.Topic)
	}
	t.m[name] = tp
	return tp, !tp.ID.IsZero()
}

func (t *topicNames) check(name string, partition int32) *kerr.Error {
	tp, ok := t.get(name)
	if !ok || partition < 0 || partition >= tp.Partitions {
		return kerr.UnknownTopicOrPartition
	}
	return nil
}

// TopicPartitions names some partitions of a topic.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

// FetchRequest asks for one group's committed offsets.
type FetchRequest struct {
	Group string
	// All asks for every committed offset of the group; Topics is
	// ignored then.
	All    bool
	Topics []TopicPartitions
}

// FetchResult answers a FetchRequest.
type FetchResult struct {
	// Code is the group's Kafka error code, 0 for success; Topics is
	// nil with an error.
	Code   int16
	Topics []FetchTopic
}

// FetchTopic is one topic of a FetchResult.
type FetchTopic struct {
	Topic      string
	Partitions []FetchPartition
}

// FetchPartition is one partition's committed offset: offset and leader
// epoch -1, and empty metadata, if there is none.
type FetchPartition struct {
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	// Code is a Kafka error code, 0 for success.
	Code int16
}

// OffsetFetch answers each request from one view of this agent's copy,
// which holds every commit this coordinator acknowledged. A partition
// without a committed offset, or of a topic that does not exist, has
// offset -1.
func (c *Coordinator) OffsetFetch(ctx context.Context, reqs []FetchRequest) []FetchResult {
	v := c.store.View()
	defer v.Close()
	out := make([]FetchResult, len(reqs))
	for i, r := range reqs {
		var ask []FetchTopic
		if !r.All {
			ask = make([]FetchTopic, 0, len(r.Topics))
			for _, t := range r.Topics {
				ask = append(ask, askTopic(t.Topic, t.Partitions))
			}
		}
		got, e := c.fetchOffsets(v, r.Group, ask, r.All)
		out[i] = FetchResult{Code: e.Code, Topics: got}
	}
	return out
}

func askTopic(topic string, partitions []int32) FetchTopic {
	ft := FetchTopic{Topic: topic, Partitions: make([]FetchPartition, len(partitions))}
	for i, p := range partitions {
		ft.Partitions[i] = FetchPartition{Partition: p, Offset: -1, LeaderEpoch: -1}
	}
	return ft
}

// fetchOffsets answers one group: the asked partitions, or with all every
// committed offset.
func (c *Coordinator) fetchOffsets(v *meta.View, group string, ask []FetchTopic, all bool) ([]FetchTopic, *kerr.Error) {
	if !c.Owns(group) {
		return nil, kerr.NotCoordinator
	}
	if all {
		os, err := v.CommittedOffsets(group)
		if err != nil {
			c.log.Warn("group: reading committed offsets", "group", group, "err", err)
			return nil, kerr.UnknownServerError
		}
		var out []FetchTopic
		for _, o := range os {
			if n := len(out); n == 0 || out[n-1].Topic != o.Topic {
				out = append(out, FetchTopic{Topic: o.Topic})
			}
			ft := &out[len(out)-1]
			ft.Partitions = append(ft.Partitions, FetchPartition{
				Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata,
			})
		}
		return out, errNone
	}
	topics := topicNames{view: v}
	for i := range ask {
		t, ok := topics.get(ask[i].Topic)
		if !ok {
			continue
		}
		for j := range ask[i].Partitions {
			fp := &ask[i].Partitions[j]
			o, found, err := v.CommittedOffset(group, t.ID, fp.Partition)
			switch {
			case err != nil:
				fp.Code = kerr.UnknownServerError.Code
			case found:
				fp.Offset, fp.LeaderEpoch, fp.Metadata = o.Offset, o.LeaderEpoch, o.Metadata
			}
		}
	}
	return ask, errNone
}

// OffsetDeleteResult answers OffsetDelete.
type OffsetDeleteResult struct {
	// Code is the group's Kafka error code, 0 for success.
	Code int16
	// Codes, when Code is 0, answer each partition asked for, in
	// request order.
	Codes []int16
}

// OffsetDelete deletes committed offsets of group: offsets of topics the
// group's members consume are GROUP_SUBSCRIBED_TO_TOPIC; a non-empty
// group that does not run the consumer protocol is NON_EMPTY_GROUP.
func (c *Coordinator) OffsetDelete(ctx context.Context, group string, topics []TopicPartitions) OffsetDeleteResult {
	var res OffsetDeleteResult
	if !c.Owns(group) {
		res.Code = kerr.NotCoordinator.Code
		return res
	}
	g, e := c.lockGroup(ctx, group, false)
	switch {
	case e != nil:
		res.Code = e.Code
		return res
	case g == nil:
		res.Code = kerr.GroupIDNotFound.Code
		return res
	}
	var cmd meta.OffsetDelete
	var cmdCodes []*int16
	p, err := func() (*replica.Proposal, error) {
		defer g.mu.Unlock()
		switch {
		case g.state == stateDead:
			res.Code = kerr.GroupIDNotFound.Code
			return nil, nil
		case g.activeLocked() && g.protocolType != consumerProtocolType:
			res.Code = kerr.NonEmptyGroup.Code
			return nil, nil
		}
		names := topicNames{view: c.store.View()}
		defer names.view.Close()
		n := 0
		for _, rt := range topics {
			n += len(rt.Partitions)
		}
		res.Codes = make([]int16, n)
		k := 0
		for _, rt := range topics {
			for _, p := range rt.Partitions {
				code := &res.Codes[k]
				k++
				switch {
				case names.check(rt.Topic, p) != nil:
					*code = kerr.UnknownTopicOrPartition.Code
				case g.activeLocked() && g.subscribedToLocked(rt.Topic):
					*code = kerr.GroupSubscribedToTopic.Code
				default:
					cmd.Partitions = append(cmd.Partitions, meta.TopicPartition{Topic: rt.Topic, Partition: p})
					cmdCodes = append(cmdCodes, code)
				}
			}
		}
		if len(cmd.Partitions) == 0 {
			return nil, nil
		}
		cmd.Group = group
		return c.store.Submit(ctx, []meta.Command{cmd})
	}()
	if p == nil && err == nil {
		return res
	}
	var applied []meta.Result
	if err == nil {
		applied, err = p.Wait(ctx)
	}
	if err != nil {
		for _, code := range cmdCodes {
			*code = proposeErrCode(err).Code
		}
		return res
	}
	if applied[0].Code == kerr.GroupIDNotFound.Code {
		// Deleted meanwhile.
		return OffsetDeleteResult{Code: applied[0].Code}
	}
	for i, code := range cmdCodes {
		if i < len(applied[0].Codes) {
			*code = applied[0].Codes[i]
		}
	}
	return res
}
