package group

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
)

// ListedGroup is a group as ListGroups shows it.
type ListedGroup struct {
	Group        string
	ProtocolType string
	State        string
	// Type is the group's kind as ListGroups v5 names it: classic,
	// consumer or share.
	Type string
}

// DescribedGroup is a group as DescribeGroups shows it.
type DescribedGroup struct {
	Group string
	// Code is a Kafka error code, 0 for success.
	Code         int16
	State        string
	ProtocolType string
	// Protocol is set in a Stable group.
	Protocol string
	Members  []DescribedMember
	// Type is the group's kind (ListedGroup.Type).
	Type string
}

// DescribedMember is a classic group's member. Its subscription and
// assignment are shown only in a Stable group, as Kafka does.
type DescribedMember struct {
	MemberID   string
	InstanceID string // empty if not static
	ClientID   string
	ClientHost string
	Metadata   []byte
	Assignment []byte
}

// summaryLocked describes g.
func (g *group) summaryLocked(withMembers bool) DescribedGroup {
	s := DescribedGroup{Group: g.name, State: g.state.String(), ProtocolType: g.protocolType, Type: g.kind.String()}
	if g.kind == meta.GroupShare {
		// Members of a share group are shown by ShareGroupDescribe.
		s.State, s.ProtocolType = g.shareStateLocked(), meta.ShareProtocolType
		if g.shareMembers() > 0 {
			s.Protocol = meta.SimpleAssignor
		}
		return s
	}
	if g.kind == meta.GroupConsumer {
		// Members of a KIP-848 group are shown by
		// ConsumerGroupDescribe.
		s.State = g.consumerStateLocked()
		if g.cg != nil {
			s.Protocol = g.cg.assignor
		}
		return s
	}
	if g.state == stateStable {
		s.Protocol = g.protocol
	}
	if !withMembers {
		return s
	}
	for _, m := range g.sortedMembersLocked() {
		dm := DescribedMember{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost}
		if g.state == stateStable {
			dm.Metadata = m.metadataFor(g.protocol)
			dm.Assignment = m.assignment
		}
		s.Members = append(s.Members, dm)
	}
	return s
}

// storedSummary describes a group that is stored but not in memory.
func storedSummary(sg *meta.Group) DescribedGroup {
	s := DescribedGroup{Group: sg.Name, State: stateEmpty.String(), ProtocolType: sg.ProtocolType, Type: sg.Kind.String()}
	if len(sg.Members) > 0 {
		// Stored with members but not loaded: another agent's until
		// just now. Loading it (any request for it) shows it in full.
		s.State, s.Protocol = stateStable.String(), sg.Protocol
	}
	return s
}

// ListGroups returns the groups this agent coordinates, in memory or
// stored, sorted by id, and a Kafka error code. With states, only groups
// in one of them (case-insensitive) are listed; with types, only groups
// of one of those kinds (classic, consumer, share; case-insensitive).
func (c *Coordinator) ListGroups(ctx context.Context, states, types []string) ([]ListedGroup, int16) {
	var want, wantType map[string]bool
	if len(states) > 0 {
		want = make(map[string]bool)
		for _, s := range states {
			want[strings.ToLower(s)] = true
		}
	}
	if len(types) > 0 {
		wantType = make(map[string]bool)
		for _, t := range types {
			wantType[strings.ToLower(t)] = true
		}
	}
	seen := make(map[string]bool)
	var out []DescribedGroup
	c.mu.Lock()
	groups := make([]*group, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		groups = append(groups, g)
	}
	c.mu.Unlock()
	for _, g := range groups {
		g.mu.Lock()
		if !g.gone && g.state != stateDead && c.Owns(g.name) {
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
		return nil, kerr.UnknownServerError.Code
	}
	for i := range stored {
		if !seen[stored[i].Name] && c.Owns(stored[i].Name) {
			out = append(out, storedSummary(&stored[i]))
		}
	}
	slices.SortFunc(out, func(a, b DescribedGroup) int { return strings.Compare(a.Group, b.Group) })
	var listed []ListedGroup
	for _, s := range out {
		if (want != nil && !want[strings.ToLower(s.State)]) || (wantType != nil && !wantType[s.Type]) {
			continue
		}
		listed = append(listed, ListedGroup{Group: s.Group, ProtocolType: s.ProtocolType, State: s.State, Type: s.Type})
	}
	return listed, 0
}

// DescribeGroups describes each named group. An unknown group is "Dead"
// without an error.
func (c *Coordinator) DescribeGroups(ctx context.Context, names []string) []DescribedGroup {
	out := make([]DescribedGroup, 0, len(names))
	for _, name := range names {
		if !c.Owns(name) {
			out = append(out, DescribedGroup{Group: name, Code: kerr.NotCoordinator.Code})
			continue
		}
		g, e := c.lockGroup(ctx, name, false)
		switch {
		case e != nil:
			out = append(out, DescribedGroup{Group: name, Code: e.Code})
		case g == nil:
			out = append(out, DescribedGroup{Group: name, State: stateDead.String()})
		default:
			s := g.summaryLocked(true)
			g.mu.Unlock()
			out = append(out, s)
		}
	}
	return out
}

// DeleteGroups deletes each named group's state and offsets, and returns
// a Kafka error code per group: a group with members is NON_EMPTY_GROUP.
func (c *Coordinator) DeleteGroups(ctx context.Context, names []string) []int16 {
	codes := make([]int16, len(names))
	for i, name := range names {
		codes[i] = c.deleteGroup(ctx, name).Code
	}
	return codes
}

func (c *Coordinator) deleteGroup(ctx context.Context, name string) *kerr.Error {
	if !c.Owns(name) {
		return kerr.NotCoordinator
	}
	g, e := c.lockGroup(ctx, name, false)
	switch {
	case e != nil:
		return e
	case g == nil:
		return c.deleteShareStateOnly(ctx, name)
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
	share := g.kind == meta.GroupShare
	g.mu.Unlock()
	var err error
	if share {
		err = c.deleteShareState(ctx, name)
	}
	var res []meta.Result
	if err == nil {
		var p *replica.Proposal
		if p, err = c.store.Submit(ctx, []meta.Command{meta.DeleteGroup{Group: name}}); err == nil {
			res, err = p.Wait(ctx)
		}
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

// deleteShareState deletes the share partitions' state of share group
// name before the group itself, so no share partition outlives its
// group: the one place DeleteGroups reaches package share (through
// Config.DeleteShareState, which the agent wires).
func (c *Coordinator) deleteShareState(ctx context.Context, name string) error {
	if c.cfg.DeleteShareState == nil {
		return nil
	}
	return c.cfg.DeleteShareState(ctx, name)
}

// deleteShareStateOnly deletes a share group that has share partitions'
// state but no group record: AlterShareGroupOffsets made it before any
// member joined. Kafka has such a group, empty, and deletes it;
// anything else is GROUP_ID_NOT_FOUND.
func (c *Coordinator) deleteShareStateOnly(ctx context.Context, name string) *kerr.Error {
	if !c.shareStateOnly(name) {
		return kerr.GroupIDNotFound
	}
	if err := c.deleteShareState(ctx, name); err != nil {
		return proposeErrCode(err)
	}
	return errNone
}

// shareStateOnly reports whether name has share partitions' state and
// no group record.
func (c *Coordinator) shareStateOnly(name string) bool {
	v := c.store.View()
	defer v.Close()
	if _, ok, err := v.Group(name); err != nil || ok {
		return false
	}
	states, err := v.ShareStates(name)
	return err == nil && len(states) > 0
}

// kerrOf is the *kerr.Error of a code.
func kerrOf(code int16) *kerr.Error {
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e
	}
	return kerr.UnknownServerError
}
