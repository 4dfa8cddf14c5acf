package group

import (
	"context"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// groupAuthorizedOps is what an authorizer-less Kafka allows on a group:
// READ, DELETE and DESCRIBE.
const groupAuthorizedOps int32 = 1<<3 | 1<<6 | 1<<8

// groupSummary is a group as ListGroups and DescribeGroups show it.
type groupSummary struct {
	name         string
	state        string
	protocolType string
	protocol     string
	members      []kmsg.DescribeGroupsResponseGroupMember
}

// summaryLocked describes g. Member subscriptions and assignments are
// shown only in a stable group, as Kafka does.
func (g *group) summaryLocked(withMembers bool) groupSummary {
	s := groupSummary{name: g.name, state: g.state.String(), protocolType: g.protocolType}
	if g.kind == meta.GroupConsumer {
		// Members of a KIP-848 group are shown by
		// ConsumerGroupDescribe.
		s.state = g.consumerStateLocked()
		if g.cg != nil {
			s.protocol = g.cg.assignor
		}
		return s
	}
	if g.state == stateStable {
		s.protocol = g.protocol
	}
	if !withMembers {
		return s
	}
	for _, m := range g.sortedMembersLocked() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.ClientID, dm.ClientHost = m.id, m.clientID, m.clientHost
		if m.instanceID != "" {
			dm.InstanceID = kmsg.StringPtr(m.instanceID)
		}
		if g.state == stateStable {
			dm.ProtocolMetadata = m.metadataFor(g.protocol)
			dm.MemberAssignment = m.assignment
		}
		s.members = append(s.members, dm)
	}
	return s
}

// storedSummary describes a group that is stored but not in memory.
func storedSummary(sg *meta.Group) groupSummary {
	s := groupSummary{name: sg.Name, state: stateEmpty.String(), protocolType: sg.ProtocolType}
	if len(sg.Members) > 0 {
		// Stored with members but not loaded: another agent's until
		// just now. Loading it (any request for it) shows it in full.
		s.state, s.protocol = stateStable.String(), sg.Protocol
	}
	return s
}

// ListGroups serves ListGroups v0-4 (v4: StatesFilter, case-insensitive):
// the groups this agent coordinates, in memory or stored.
func (c *Coordinator) ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	var states map[string]bool
	if req.Version >= 4 && len(req.StatesFilter) > 0 {
		states = make(map[string]bool)
		for _, s := range req.StatesFilter {
			states[strings.ToLower(s)] = true
		}
	}
	seen := make(map[string]bool)
	var out []groupSummary
	c.mu.Lock()
	groups := make([]*group, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		groups = append(groups, g)
	}
	c.mu.Unlock()
	for _, g := range groups {
		g.mu.Lock()
		if !g.gone && g.state != stateDead && c.owns(g.name) {
			out = append(out, g.summaryLocked(false))
		}
		seen[g.name] = true
		g.mu.Unlock()
	}
	v := c.store.View()
	stored, err := v.Groups()
	v.Close()
	if err != nil {
		c.log.Warn("group: listing stored groups", "err", err)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp
	}
	for i := range stored {
		if !seen[stored[i].Name] && c.owns(stored[i].Name) {
			out = append(out, storedSummary(&stored[i]))
		}
	}
	slices.SortFunc(out, func(a, b groupSummary) int { return strings.Compare(a.name, b.name) })
	for _, s := range out {
		if states != nil && !states[strings.ToLower(s.state)] {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState = s.name, s.protocolType, s.state
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

// DescribeGroups serves DescribeGroups v0-5. An unknown group is "Dead"
// without an error, as Kafka answers below v6.
func (c *Coordinator) DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = name
		dg.AuthorizedOperations = math.MinInt32
		if req.Version >= 3 && req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = groupAuthorizedOps
		}
		if !c.owns(name) {
			dg.ErrorCode = kerr.NotCoordinator.Code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		g, e := c.lockGroup(ctx, name, false)
		switch {
		case e != nil:
			dg.ErrorCode = e.Code
		case g == nil:
			dg.State = stateDead.String()
		default:
			s := g.summaryLocked(true)
			g.mu.Unlock()
			dg.State, dg.ProtocolType, dg.Protocol, dg.Members = s.state, s.protocolType, s.protocol, s.members
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// DeleteGroups serves DeleteGroups v0-2: an empty group's state and
// offsets are deleted; a group with members is NON_EMPTY_GROUP.
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = name
		dg.ErrorCode = c.deleteGroup(ctx, name).Code
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *Coordinator) deleteGroup(ctx context.Context, name string) *kerr.Error {
	if !c.owns(name) {
		return kerr.NotCoordinator
	}
	g, e := c.lockGroup(ctx, name, false)
	switch {
	case e != nil:
		return e
	case g == nil:
		return kerr.GroupIDNotFound
	}
	switch {
	case g.state == stateDead:
		g.mu.Unlock()
		return kerr.GroupIDNotFound
	case g.activeLocked():
		g.mu.Unlock()
		return kerr.NonEmptyGroup
	}
	// Dead keeps joins out (retriable) until the group is gone.
	g.state = stateDead
	p, err := c.store.Submit(ctx, []meta.Command{meta.DeleteGroup{Group: name}})
	g.mu.Unlock()
	var res []meta.Result
	if err == nil {
		res, err = p.Wait(ctx)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	defer c.notify()
	if err != nil {
		if g.state == stateDead && !g.gone {
			g.state = stateEmpty
		}
		return proposeErrCode(err)
	}
	g.unloadLocked(kerr.CoordinatorNotAvailable)
	// Nothing stored (a group that never got past MEMBER_ID_REQUIRED)
	// is still a group deleted.
	if code := res[0].Code; code != 0 && code != kerr.GroupIDNotFound.Code {
		return kerrOf(code)
	}
	return errNone
}

// kerrOf is the *kerr.Error of a code.
func kerrOf(code int16) *kerr.Error {
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e
	}
	return kerr.UnknownServerError
}
