package group

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// OffsetCommit serves OffsetCommit v0-9 in two steps: it validates the
// commit and queues it for the log, then the returned function waits for
// the outcome. Commits queued in sequence apply in sequence, so a caller
// that queues a connection's commits in request order (kafka's
// Request.InOrder) keeps a later commit from being overwritten by an
// earlier one. Commits of many groups share log entries.
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) func(context.Context) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	// codes points at every partition's ErrorCode, in request order.
	var codes []*int16
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			codes = append(codes, &resp.Topics[i].Partitions[j].ErrorCode)
		}
	}
	done := func(context.Context) *kmsg.OffsetCommitResponse { return resp }
	failAll := func(e *kerr.Error) func(context.Context) *kmsg.OffsetCommitResponse {
		for _, code := range codes {
			*code = e.Code
		}
		return done
	}
	if !c.owns(req.Group) {
		return failAll(kerr.NotCoordinator)
	}
	generation, memberID := req.Generation, req.MemberID
	if req.Version == 0 {
		generation, memberID = -1, ""
	}

	cmd := meta.OffsetCommit{Group: req.Group, Generation: generation, RetentionMs: -1}
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis >= 0 {
		cmd.RetentionMs = req.RetentionTimeMillis
	}
	// cmdCodes maps cmd.Offsets to their response codes.
	var cmdCodes []*int16
	topics := topicNames{view: c.store.View()}
	k := 0
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			code := codes[k]
			k++
			if rp.Metadata != nil && len(*rp.Metadata) > c.cfg.MaxOffsetMetadataBytes {
				*code = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			if e := topics.check(rt.Topic, rp.Partition); e != nil {
				*code = e.Code
				continue
			}
			o := meta.OffsetCommitPartition{
				Topic:           rt.Topic,
				Partition:       rp.Partition,
				Offset:          rp.Offset,
				LeaderEpoch:     -1,
				Metadata:        strOr(rp.Metadata),
				CommitTimestamp: -1,
			}
			if req.Version >= 6 {
				o.LeaderEpoch = rp.LeaderEpoch
			}
			if req.Version == 1 && rp.Timestamp != -1 {
				o.CommitTimestamp = rp.Timestamp
			}
			cmd.Offsets = append(cmd.Offsets, o)
			cmdCodes = append(cmdCodes, code)
		}
	}
	topics.view.Close()
	if len(cmd.Offsets) == 0 {
		return done
	}
	fail := func(e *kerr.Error) func(context.Context) *kmsg.OffsetCommitResponse {
		for _, code := range cmdCodes {
			*code = e.Code
		}
		return done
	}

	g, e := c.lockGroup(ctx, req.Group, false)
	if e != nil {
		return fail(e)
	}
	var p *meta.Pending
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
	return func(ctx context.Context) *kmsg.OffsetCommitResponse {
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
		return resp
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
	case errors.Is(err, meta.ErrClosed):
		return kerr.NotCoordinator
	case errors.Is(err, meta.ErrAmbiguous), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut
	case errors.Is(err, meta.ErrTooLarge):
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

// fetchTopic is one topic of an OffsetFetch, request or answer.
type fetchTopic struct {
	topic      string
	partitions []fetchPartition
}

type fetchPartition struct {
	partition   int32
	offset      int64
	leaderEpoch int32
	metadata    string
	code        int16
}

// OffsetFetch serves OffsetFetch v0-9 (v8+: several groups). Offsets are
// read from this agent's copy, which holds every commit this coordinator
// acknowledged. A partition without a committed offset is -1.
// RequireStable (v7+) changes nothing until transactional commits exist.
func (c *Coordinator) OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	v := c.store.View()
	defer v.Close()
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			var ask []fetchTopic
			if rg.Topics != nil {
				ask = make([]fetchTopic, 0, len(rg.Topics))
				for _, t := range rg.Topics {
					ask = append(ask, askTopic(t.Topic, t.Partitions))
				}
			}
			got, e := c.fetchOffsets(v, rg.Group, ask, rg.Topics == nil)
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = rg.Group, e.Code
			for _, ft := range got {
				t := kmsg.NewOffsetFetchResponseGroupTopic()
				t.Topic = ft.topic
				for _, fp := range ft.partitions {
					p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					p.Partition, p.Offset, p.LeaderEpoch = fp.partition, fp.offset, fp.leaderEpoch
					p.Metadata, p.ErrorCode = kmsg.StringPtr(fp.metadata), fp.code
					t.Partitions = append(t.Partitions, p)
				}
				g.Topics = append(g.Topics, t)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp
	}
	var ask []fetchTopic
	all := req.Topics == nil && req.Version >= 2
	for _, t := range req.Topics {
		ask = append(ask, askTopic(t.Topic, t.Partitions))
	}
	got, e := c.fetchOffsets(v, req.Group, ask, all)
	if e.Code != 0 && req.Version < 2 {
		// No group-level error code before v2: every partition carries
		// it.
		got = ask
		for i := range got {
			for j := range got[i].partitions {
				got[i].partitions[j].code = e.Code
			}
		}
	}
	if req.Version >= 2 {
		resp.ErrorCode = e.Code
	}
	for _, ft := range got {
		t := kmsg.NewOffsetFetchResponseTopic()
		t.Topic = ft.topic
		for _, fp := range ft.partitions {
			p := kmsg.NewOffsetFetchResponseTopicPartition()
			p.Partition, p.Offset, p.LeaderEpoch = fp.partition, fp.offset, fp.leaderEpoch
			p.Metadata, p.ErrorCode = kmsg.StringPtr(fp.metadata), fp.code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func askTopic(topic string, partitions []int32) fetchTopic {
	ft := fetchTopic{topic: topic, partitions: make([]fetchPartition, len(partitions))}
	for i, p := range partitions {
		ft.partitions[i] = fetchPartition{partition: p, offset: -1, leaderEpoch: -1}
	}
	return ft
}

// fetchOffsets answers one group: the asked partitions, or with all every
// committed offset.
func (c *Coordinator) fetchOffsets(v *meta.View, group string, ask []fetchTopic, all bool) ([]fetchTopic, *kerr.Error) {
	if !c.owns(group) {
		return nil, kerr.NotCoordinator
	}
	if all {
		os, err := v.CommittedOffsets(group)
		if err != nil {
			c.log.Warn("group: reading committed offsets", "group", group, "err", err)
			return nil, kerr.UnknownServerError
		}
		var out []fetchTopic
		for _, o := range os {
			if n := len(out); n == 0 || out[n-1].topic != o.Topic {
				out = append(out, fetchTopic{topic: o.Topic})
			}
			ft := &out[len(out)-1]
			ft.partitions = append(ft.partitions, fetchPartition{
				partition: o.Partition, offset: o.Offset, leaderEpoch: o.LeaderEpoch, metadata: o.Metadata,
			})
		}
		return out, errNone
	}
	topics := topicNames{view: v}
	for i := range ask {
		t, ok := topics.get(ask[i].topic)
		if !ok {
			continue
		}
		for j := range ask[i].partitions {
			fp := &ask[i].partitions[j]
			o, found, err := v.CommittedOffset(group, t.ID, fp.partition)
			switch {
			case err != nil:
				fp.code = kerr.UnknownServerError.Code
			case found:
				fp.offset, fp.leaderEpoch, fp.metadata = o.Offset, o.LeaderEpoch, o.Metadata
			}
		}
	}
	return ask, errNone
}

// OffsetDelete serves OffsetDelete v0: offsets of topics the group's
// members consume are GROUP_SUBSCRIBED_TO_TOPIC; a non-empty group that
// does not run the consumer protocol is NON_EMPTY_GROUP.
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if !c.owns(req.Group) {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}
	g, e := c.lockGroup(ctx, req.Group, false)
	switch {
	case e != nil:
		resp.ErrorCode = e.Code
		return resp
	case g == nil:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp
	}
	var cmd meta.OffsetDelete
	var cmdCodes []*int16
	p, err := func() (*meta.Pending, error) {
		defer g.mu.Unlock()
		switch {
		case g.state == stateDead:
			resp.ErrorCode = kerr.GroupIDNotFound.Code
			return nil, nil
		case g.activeLocked() && g.protocolType != consumerProtocolType:
			resp.ErrorCode = kerr.NonEmptyGroup.Code
			return nil, nil
		}
		topics := topicNames{view: c.store.View()}
		defer topics.view.Close()
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetDeleteResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetDeleteResponseTopicPartition()
				sp.Partition = rp.Partition
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		for i, rt := range req.Topics {
			for j, rp := range rt.Partitions {
				code := &resp.Topics[i].Partitions[j].ErrorCode
				switch {
				case topics.check(rt.Topic, rp.Partition) != nil:
					*code = kerr.UnknownTopicOrPartition.Code
				case g.activeLocked() && g.subscribedToLocked(rt.Topic):
					*code = kerr.GroupSubscribedToTopic.Code
				default:
					cmd.Partitions = append(cmd.Partitions, meta.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
					cmdCodes = append(cmdCodes, code)
				}
			}
		}
		if len(cmd.Partitions) == 0 {
			return nil, nil
		}
		cmd.Group = req.Group
		return c.store.Submit(ctx, []meta.Command{cmd})
	}()
	if p == nil && err == nil {
		return resp
	}
	var res []meta.Result
	if err == nil {
		res, err = p.Wait(ctx)
	}
	if err != nil {
		for _, code := range cmdCodes {
			*code = proposeErrCode(err).Code
		}
		return resp
	}
	if res[0].Code == kerr.GroupIDNotFound.Code {
		// Deleted meanwhile.
		resp.ErrorCode, resp.Topics = res[0].Code, nil
		return resp
	}
	for i, code := range cmdCodes {
		if i < len(res[0].Codes) {
			*code = res[0].Codes[i]
		}
	}
	return resp
}
