package meta

// Share groups, the membership half (KIP-932; metadata level 9): what a
// share group's coordinator must not lose when it dies, and the
// per-group configs (KIP-848/932 GROUP config resources) of any group.
//
// A share group is stored like the other groups, as a group record
// (0x09) of kind GroupShare, so one group id is one group of one kind:
// ListGroups, DeleteGroup and the type checks see it with the others.
// ShareGroupState replaces it whenever the coordinator changes a durable
// fact: a member joined, left or expired, a subscription or the
// subscribed topics changed (the group epoch moves), a member took the
// assignment of a new epoch. Each member's metadata and assignment are
// encoded as the KIP-848 consumer members' are (ConsumerMemberMetadata:
// subscribed topics, member epoch, rack; ConsumerMemberAssignment), so a
// coordinator that takes the group over has its members, epochs and
// assignment. The share partitions' state (acquired records, start
// offsets) is share-state's (share_state.go), not here.
//
// Group configs (0x40) are kept apart from the group record: Kafka lets
// a group be configured before it exists (franz-go's share tests set
// share.auto.offset.reset before the first member joins), and a config
// outlives the group's membership.

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// GroupShare groups run KIP-932 (ShareGroupHeartbeat): the coordinator
// assigns partitions, which members share.
const GroupShare GroupKind = 2

// ShareProtocolType is the protocol type ListGroups shows for a share
// group, and SimpleAssignor the only assignor Kafka's share groups run.
const (
	ShareProtocolType = "share"
	SimpleAssignor    = "simple"
)

// Command types of share group membership and group configs, written
// from level 9. 48-53 are membership's; 50-53 are free.
const (
	TypeShareGroupState   CommandType = 48
	TypeAlterGroupConfigs CommandType = 49
)

// prefixGroupConfigs keys a group's configs by group id.
const prefixGroupConfigs byte = 0x40

// Limits of apply on group configs, part of what apply means.
const (
	// maxGroupConfigValueBytes bounds one value: the longest valid one
	// is share.auto.offset.reset's by_duration with an ISO-8601
	// duration, far below it.
	maxGroupConfigValueBytes = 1024
)

// ShareGroupState is a share group's state, written by its coordinator
// when a durable fact changed. It replaces the stored group record.
// Generation is the group epoch; Subscribed the topics some member
// subscribes to, sorted.
// Result: INVALID_GROUP_ID for an empty or too long id, INVALID_REQUEST
// for too many members, GROUP_ID_NOT_FOUND when the id is stored as a
// classic or consumer group (one id, one kind), ILLEGAL_GENERATION when
// Generation is below the stored one (a coordinator that lost the
// group). Each changes nothing.
type ShareGroupState struct {
	Group      string
	Generation int32
	Subscribed []string
	Members    []GroupMember
}

// AlterGroupConfigs changes the configs of a GROUP resource, a group id
// that need not exist yet. Set and Delete apply to the current configs;
// Replace makes them exactly Set (AlterConfigs), with Delete empty.
// Values are the Kafka layer's to validate (ValidateGroupConfig); apply
// checks names and sizes.
// Result: INVALID_GROUP_ID for an empty or too long id; INVALID_REQUEST
// for a name both set and deleted, or Delete with Replace;
// INVALID_CONFIG for a name that is not a group config or a value
// longer than 1024 bytes. Each changes nothing.
type AlterGroupConfigs struct {
	Group   string
	Set     map[string]string
	Delete  []string
	Replace bool
}

func (ShareGroupState) Type() CommandType   { return TypeShareGroupState }
func (ShareGroupState) version() uint16     { return 1 }
func (AlterGroupConfigs) Type() CommandType { return TypeAlterGroupConfigs }
func (AlterGroupConfigs) version() uint16   { return 1 }

func (c ShareGroupState) appendPayload(b []byte) []byte {
	b = appendString(b, c.Group)
	b = appendVarint(b, int64(c.Generation))
	b = appendStringList(b, c.Subscribed)
	return appendGroupMembers(b, c.Members)
}

func decodeShareGroupStateV1(p []byte) (ShareGroupState, error) {
	r := &reader{b: p}
	var c ShareGroupState
	c.Group = r.string()
	c.Generation = r.int32()
	c.Subscribed = r.stringList()
	c.Members = r.groupMembers()
	return c, r.done()
}

func (c AlterGroupConfigs) appendPayload(b []byte) []byte {
	b = appendString(b, c.Group)
	b = appendStringMap(b, c.Set)
	b = appendStringList(b, c.Delete)
	return appendBool(b, c.Replace)
}

func decodeAlterGroupConfigsV1(p []byte) (AlterGroupConfigs, error) {
	r := &reader{b: p}
	var c AlterGroupConfigs
	c.Group = r.string()
	c.Set = r.stringMap()
	c.Delete = r.stringList()
	c.Replace = r.bool()
	return c, r.done()
}

func (a *Applier) shareGroupState(c ShareGroupState) (Result, error) {
	switch {
	case c.Group == "" || len(c.Group) > maxGroupIDBytes:
		return failed(kerr.InvalidGroupID, "group id is %d bytes", len(c.Group)), nil
	case len(c.Members) > maxGroupMembers:
		return failed(kerr.InvalidRequest, "%d members, at most %d", len(c.Members), maxGroupMembers), nil
	}
	old, ok, err := a.group(c.Group)
	if err != nil {
		return Result{}, err
	}
	switch {
	case ok && old.Kind != GroupShare:
		return failed(kerr.GroupIDNotFound, "group %q is a %v group, not a share group", c.Group, old.Kind), nil
	case ok && old.Generation > c.Generation:
		return failed(kerr.IllegalGeneration, "group %q is at epoch %d, state of %d", c.Group, old.Generation, c.Generation), nil
	}
	g := Group{
		Name:            c.Group,
		Kind:            GroupShare,
		ProtocolType:    ShareProtocolType,
		Generation:      c.Generation,
		SubscribedKnown: true,
		Subscribed:      c.Subscribed,
		Members:         c.Members,
		StateTimestamp:  a.clock,
	}
	if len(c.Members) > 0 {
		g.Protocol = SimpleAssignor
	}
	return Result{}, a.putGroup(&g)
}

func groupConfigsKey(group string) []byte {
	return append([]byte{prefixGroupConfigs}, group...)
}

func (a *Applier) alterGroupConfigs(c AlterGroupConfigs) (Result, error) {
	switch {
	case c.Group == "" || len(c.Group) > maxGroupIDBytes:
		return failed(kerr.InvalidGroupID, "group id is %d bytes", len(c.Group)), nil
	case c.Replace && len(c.Delete) > 0:
		return failed(kerr.InvalidRequest, "delete in a replacing alter"), nil
	}
	for _, k := range c.Delete {
		if _, ok := c.Set[k]; ok {
			return failed(kerr.InvalidRequest, "config %q both set and deleted", k), nil
		}
	}
	for _, k := range sortedKeys(c.Set) {
		switch v := c.Set[k]; {
		case !IsGroupConfig(k):
			return failed(kerr.InvalidConfig, "unknown group config %q", k), nil
		case len(v) > maxGroupConfigValueBytes:
			return failed(kerr.InvalidConfig, "config %q: value is %d bytes, at most %d", k, len(v), maxGroupConfigValueBytes), nil
		}
	}
	key := groupConfigsKey(c.Group)
	next := make(map[string]string, len(c.Set))
	if !c.Replace {
		v, ok, err := a.get(key)
		if err != nil {
			return Result{}, err
		}
		if ok {
			if next, err = decodeGroupConfigs(v); err != nil {
				return Result{}, err
			}
		}
		for _, k := range c.Delete {
			delete(next, k)
		}
	}
	for k, v := range c.Set {
		next[k] = v
	}
	if len(next) == 0 {
		return Result{}, a.b.Delete(key)
	}
	return Result{}, a.b.Set(key, appendStringMap([]byte{recordV1}, next))
}

func decodeGroupConfigs(v []byte) (map[string]string, error) {
	r := recordReader(v)
	m := r.stringMap()
	if err := r.done(); err != nil {
		return nil, corrupt("group configs", err)
	}
	if m == nil {
		m = map[string]string{}
	}
	return m, nil
}

// GroupConfigs returns the configs set on group (a GROUP resource),
// empty if none are. The caller owns the map. Defaults are not in it:
// GroupConfigDefault has them.
func (v *View) GroupConfigs(group string) (map[string]string, error) {
	val, ok, err := v.r.Get(groupConfigsKey(group))
	if err != nil || !ok {
		return map[string]string{}, err
	}
	return decodeGroupConfigs(val)
}

// GroupConfigs is v.GroupConfigs(group), for readers that hold a View
// through an interface of their own.
func GroupConfigs(v *View, group string) (map[string]string, error) { return v.GroupConfigs(group) }

// ShareGroupsAt reports whether metadata level level stores share
// groups and group configs.
func ShareGroupsAt(level int16) bool { return level >= LevelShareGroups }
