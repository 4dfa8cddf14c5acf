package meta

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Limits apply enforces on group commands (see the note on apply's other
// limits: changing one changes results).
const (
	// maxGroupIDBytes is the longest group id Kafka's wire format can
	// carry (an int16-length string); offset keys store the length in
	// two bytes.
	maxGroupIDBytes = math.MaxInt16
	// maxOffsetMetadataBytes caps a committed offset's metadata. The
	// coordinator enforces offset.metadata.max.bytes (Kafka's default is
	// 4096) below it.
	maxOffsetMetadataBytes = 64 << 10
	// maxGroupMembers caps a stored group; the coordinator's
	// group.max.size is below it.
	maxGroupMembers = 1 << 16
	// maxExpireGroups caps the groups one ExpireOffsets names, which
	// bounds the work of one apply.
	maxExpireGroups = 4096
)

// MaxOffsetMetadataBytes is the largest committed offset metadata apply
// stores.
const MaxOffsetMetadataBytes = maxOffsetMetadataBytes

// MaxExpireGroups is the most groups one ExpireOffsets may name.
const MaxExpireGroups = maxExpireGroups

func groupKey(group string) []byte { return appendGroupKey(nil, group) }

func appendGroupKey(dst []byte, group string) []byte {
	dst = append(dst, prefixGroup)
	return append(dst, group...)
}

// groupOffsetPrefix starts every committed offset of group. The group id
// is length-prefixed so that one group's keys never run into another's
// ("ab" + topic id vs "a" + "b...").
func groupOffsetPrefix(group string) []byte {
	return appendGroupOffsetPrefix(make([]byte, 0, 3+len(group)+16+4), group)
}

func appendGroupOffsetPrefix(dst []byte, group string) []byte {
	dst = append(dst, prefixGroupOffset)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(group)))
	return append(dst, group...)
}

func groupTopicOffsetPrefix(group string, id TopicID) []byte {
	return append(groupOffsetPrefix(group), id[:]...)
}

func groupOffsetKey(group string, id TopicID, partition int32) []byte {
	return appendGroupOffsetKey(make([]byte, 0, 3+len(group)+16+4), group, id, partition)
}

func appendGroupOffsetKey(dst []byte, group string, id TopicID, partition int32) []byte {
	dst = appendGroupOffsetPrefix(dst, group)
	dst = append(dst, id[:]...)
	return binary.BigEndian.AppendUint32(dst, uint32(partition))
}

// splitGroupOffsetKey returns the topic id and partition of a key under
// groupOffsetPrefix(group).
func splitGroupOffsetKey(k []byte, groupLen int) (TopicID, int32, bool) {
	rest := k[3+groupLen:]
	if len(rest) != 16+4 {
		return TopicID{}, 0, false
	}
	var id TopicID
	copy(id[:], rest)
	return id, int32(binary.BigEndian.Uint32(rest[16:])), true
}

// topicGroupKey marks that group has offsets of topic id, so deleting the
// topic finds the groups to clean without scanning every offset.
func topicGroupKey(id TopicID, group string) []byte { return appendTopicGroupKey(nil, id, group) }

func appendTopicGroupKey(dst []byte, id TopicID, group string) []byte {
	dst = append(dst, prefixTopicGroup)
	dst = append(dst, id[:]...)
	return append(dst, group...)
}

// topicGroupMarker is the value of a topicGroupKey.
var topicGroupMarker = []byte{recordV1}

func spanOf(prefix []byte) (start, end []byte) { return prefix, keySuccessor(prefix) }

// Group is a group's durable state, as its coordinator last stored it
// (GroupState), or as the first offset commit created it.
type Group struct {
	Name            string
	Kind            GroupKind
	ProtocolType    string
	Protocol        string
	Generation      int32
	Leader          string
	SubscribedKnown bool
	Subscribed      []string
	Members         []GroupMember
	// StateTimestamp is the log clock (unix ms) when this state was
	// stored; for a group without members, when it became empty.
	StateTimestamp int64
}

func (g *Group) encode() []byte {
	b := []byte{recordV1}
	b = appendUvarint(b, uint64(g.Kind))
	b = appendString(b, g.ProtocolType)
	b = appendString(b, g.Protocol)
	b = appendVarint(b, int64(g.Generation))
	b = appendString(b, g.Leader)
	b = appendVarint(b, g.StateTimestamp)
	b = appendBool(b, g.SubscribedKnown)
	b = appendStringList(b, g.Subscribed)
	return appendGroupMembers(b, g.Members)
}

func decodeGroup(name string, v []byte) (Group, error) {
	r := recordReader(v)
	g := Group{Name: name}
	g.Kind = r.groupKind()
	g.ProtocolType = r.string()
	g.Protocol = r.string()
	g.Generation = r.int32()
	g.Leader = r.string()
	g.StateTimestamp = r.varint()
	g.SubscribedKnown = r.bool()
	g.Subscribed = r.stringList()
	g.Members = r.groupMembers()
	if err := r.done(); err != nil {
		return Group{}, corrupt("group record", err)
	}
	return g, nil
}

// CommittedOffset is one committed offset of a group.
type CommittedOffset struct {
	TopicID TopicID
	// Topic is the topic's name, resolved when read.
	Topic           string
	Partition       int32
	Offset          int64
	LeaderEpoch     int32
	Metadata        string
	CommitTimestamp int64
	// ExpireTimestamp is an explicit expiry (unix ms), -1 for none.
	ExpireTimestamp int64
}

func (o *CommittedOffset) encode(b []byte) []byte {
	b = append(b, recordV1)
	b = appendVarint(b, o.Offset)
	b = appendVarint(b, int64(o.LeaderEpoch))
	b = appendString(b, o.Metadata)
	b = appendVarint(b, o.CommitTimestamp)
	return appendVarint(b, o.ExpireTimestamp)
}

func decodeCommittedOffset(id TopicID, partition int32, v []byte) (CommittedOffset, error) {
	r := recordReader(v)
	o := CommittedOffset{TopicID: id, Partition: partition}
	o.Offset = r.varint()
	o.LeaderEpoch = r.int32()
	o.Metadata = r.string()
	o.CommitTimestamp = r.varint()
	o.ExpireTimestamp = r.varint()
	if err := r.done(); err != nil {
		return CommittedOffset{}, corrupt("committed offset", err)
	}
	return o, nil
}

func (a *Applier) group(name string) (Group, bool, error) {
	a.keyBuf = appendGroupKey(a.keyBuf[:0], name)
	v, ok, err := a.get(a.keyBuf)
	if err != nil || !ok {
		return Group{}, false, err
	}
	g, err := decodeGroup(name, v)
	return g, err == nil, err
}

func (a *Applier) putGroup(g *Group) error {
	a.noteGroup(g.Name)
	a.keyBuf = appendGroupKey(a.keyBuf[:0], g.Name)
	return a.b.Set(a.keyBuf, g.encode())
}

// failAll is a failed result whose Codes all carry e.
func failAll(n int, e *kerr.Error, format string, args ...any) Result {
	r := failed(e, format, args...)
	r.Codes = make([]int16, n)
	for i := range r.Codes {
		r.Codes[i] = e.Code
	}
	return r
}

// topicLookup caches topic lookups by name within one command.
type topicLookup struct {
	a *Applier
	m map[string]Topic
}

func (l *topicLookup) get(name string) (Topic, bool, error) {
	if t, ok := l.m[name]; ok {
		return t, !t.ID.IsZero(), nil
	}
	t, ok, err := l.a.topic(name)
	if err != nil {
		return Topic{}, false, err
	}
	if l.m == nil {
		l.m = make(map[string]Topic)
	}
	if !ok {
		t = Topic{}
	}
	l.m[name] = t
	return t, ok, nil
}

// offset checks one offset to commit and resolves its topic: a nonzero
// code is the partition's answer (OFFSET_METADATA_TOO_LARGE,
// UNKNOWN_TOPIC_OR_PARTITION). The commit time defaults to the log clock.
func (l *topicLookup) offset(o *OffsetCommitPartition, expire int64) (TopicID, CommittedOffset, int16, error) {
	if len(o.Metadata) > maxOffsetMetadataBytes {
		return TopicID{}, CommittedOffset{}, kerr.OffsetMetadataTooLarge.Code, nil
	}
	t, ok, err := l.get(o.Topic)
	if err != nil {
		return TopicID{}, CommittedOffset{}, 0, err
	}
	if !ok || o.Partition < 0 || o.Partition >= t.Partitions {
		return TopicID{}, CommittedOffset{}, kerr.UnknownTopicOrPartition.Code, nil
	}
	co := CommittedOffset{
		TopicID:         t.ID,
		Partition:       o.Partition,
		Offset:          o.Offset,
		LeaderEpoch:     o.LeaderEpoch,
		Metadata:        o.Metadata,
		CommitTimestamp: o.CommitTimestamp,
		ExpireTimestamp: expire,
	}
	if co.CommitTimestamp == -1 {
		co.CommitTimestamp = l.a.clock
	}
	return t.ID, co, 0, nil
}

// storeOffset writes a committed offset of topic (named, and by its id)
// and the marker that the group has offsets of the topic.
func (a *Applier) storeOffset(group, topic string, id TopicID, co *CommittedOffset) error {
	a.noteOffset(group, topic, co.Partition)
	a.valBuf = co.encode(a.valBuf[:0])
	a.keyBuf = appendGroupOffsetKey(a.keyBuf[:0], group, id, co.Partition)
	if err := a.b.Set(a.keyBuf, a.valBuf); err != nil {
		return err
	}
	a.keyBuf = appendTopicGroupKey(a.keyBuf[:0], id, group)
	return a.b.Set(a.keyBuf, topicGroupMarker)
}

func (a *Applier) offsetCommit(c OffsetCommit) (Result, error) {
	n := len(c.Offsets)
	if len(c.Group) > maxGroupIDBytes {
		return failAll(n, kerr.InvalidGroupID, "group id is %d bytes", len(c.Group)), nil
	}
	g, exists, err := a.group(c.Group)
	if err != nil {
		return Result{}, err
	}
	if exists && g.Kind == GroupShare {
		return failAll(n, kerr.GroupIDNotFound, "group %q is a share group", c.Group), nil
	}
	if exists && c.Generation >= 0 && g.Generation > c.Generation {
		return failAll(n, kerr.IllegalGeneration, "group %q is at generation %d, commit from %d", c.Group, g.Generation, c.Generation), nil
	}
	res := Result{Codes: make([]int16, n)}
	expire := int64(-1)
	if c.RetentionMs >= 0 {
		expire = satAdd(a.clock, c.RetentionMs)
	}
	topics := topicLookup{a: a}
	stored := false
	for i := range c.Offsets {
		id, co, code, err := topics.offset(&c.Offsets[i], expire)
		if err != nil {
			return Result{}, err
		}
		if res.Codes[i] = code; code != 0 {
			continue
		}
		if err := a.storeOffset(c.Group, c.Offsets[i].Topic, id, &co); err != nil {
			return Result{}, err
		}
		stored = true
	}
	if stored && !exists {
		g = Group{Name: c.Group, Kind: GroupClassic, StateTimestamp: a.clock}
		if err := a.putGroup(&g); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

func (a *Applier) groupState(c GroupState) (Result, error) {
	switch {
	case len(c.Group) > maxGroupIDBytes:
		return failed(kerr.InvalidGroupID, "group id is %d bytes", len(c.Group)), nil
	case c.Kind != GroupClassic && c.Kind != GroupConsumer:
		return failed(kerr.InvalidRequest, "unknown group kind %d", c.Kind), nil
	case len(c.Members) > maxGroupMembers:
		return failed(kerr.InvalidRequest, "%d members, at most %d", len(c.Members), maxGroupMembers), nil
	}
	old, ok, err := a.group(c.Group)
	if err != nil {
		return Result{}, err
	}
	if ok && old.Kind == GroupShare {
		// One id, one kind: a share group is stored from level 9 on,
		// whose builds all refuse this.
		return failed(kerr.GroupIDNotFound, "group %q is a share group", c.Group), nil
	}
	if ok && old.Generation > c.Generation {
		return failed(kerr.IllegalGeneration, "group %q is at generation %d, state of %d", c.Group, old.Generation, c.Generation), nil
	}
	g := Group{
		Name:            c.Group,
		Kind:            c.Kind,
		ProtocolType:    c.ProtocolType,
		Protocol:        c.Protocol,
		Generation:      c.Generation,
		Leader:          c.Leader,
		SubscribedKnown: c.SubscribedKnown,
		Subscribed:      c.Subscribed,
		Members:         c.Members,
		StateTimestamp:  a.clock,
	}
	return Result{}, a.putGroup(&g)
}

func (a *Applier) deleteGroup(c DeleteGroup) (Result, error) {
	_, ok, err := a.group(c.Group)
	if err != nil || !ok {
		return failed(kerr.GroupIDNotFound, "no group %q", c.Group), err
	}
	if err := a.deleteGroupOffsets(c.Group); err != nil {
		return Result{}, err
	}
	// Offsets committed in ongoing transactions go too, so a later
	// commit of such a transaction cannot bring the group back.
	start, end := spanOf(txnOffsetGroupPrefix(c.Group))
	if err := a.b.DeleteRange(start, end); err != nil {
		return Result{}, err
	}
	a.noteGroup(c.Group)
	return Result{}, a.b.Delete(groupKey(c.Group))
}

// groupTopics returns the ids of the topics group has offsets of, in key
// order, skipping from one topic to the next.
func (a *Applier) groupTopics(group string) ([]TopicID, error) {
	start, end := spanOf(groupOffsetPrefix(group))
	it, err := a.b.NewIter(start, end)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var ids []TopicID
	for ok := it.First(); ok; {
		id, _, valid := splitGroupOffsetKey(it.Key(), len(group))
		if !valid {
			return nil, corrupt("committed offset key", errRange)
		}
		ids = append(ids, id)
		ok = it.SeekGE(keySuccessor(groupTopicOffsetPrefix(group, id)))
	}
	return ids, it.Error()
}

func (a *Applier) deleteGroupOffsets(group string) error {
	if err := a.noteGroupOffsets(group, groupOffsetPrefix(group), ""); err != nil {
		return err
	}
	ids, err := a.groupTopics(group)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := a.b.Delete(topicGroupKey(id, group)); err != nil {
			return err
		}
	}
	start, end := spanOf(groupOffsetPrefix(group))
	return a.b.DeleteRange(start, end)
}

// hasTopicOffsets reports whether group still has an offset of topic id.
func (a *Applier) hasTopicOffsets(group string, id TopicID) (bool, error) {
	start, end := spanOf(groupTopicOffsetPrefix(group, id))
	it, err := a.b.NewIter(start, end)
	if err != nil {
		return false, err
	}
	found := it.First()
	err = it.Error()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return found, err
}

// dropEmptyTopicMarkers removes the topic-to-group markers of the topics
// in ids (sorted, so map order never reaches the batch) that group no
// longer has offsets of.
func (a *Applier) dropEmptyTopicMarkers(group string, ids []TopicID) error {
	slices.SortFunc(ids, func(x, y TopicID) int { return bytes.Compare(x[:], y[:]) })
	ids = slices.Compact(ids)
	for _, id := range ids {
		has, err := a.hasTopicOffsets(group, id)
		if err != nil {
			return err
		}
		if !has {
			if err := a.b.Delete(topicGroupKey(id, group)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (a *Applier) offsetDelete(c OffsetDelete) (Result, error) {
	n := len(c.Partitions)
	_, ok, err := a.group(c.Group)
	if err != nil || !ok {
		return failAll(n, kerr.GroupIDNotFound, "no group %q", c.Group), err
	}
	res := Result{Codes: make([]int16, n)}
	topics := topicLookup{a: a}
	var touched []TopicID
	for i, tp := range c.Partitions {
		t, ok, err := topics.get(tp.Topic)
		if err != nil {
			return Result{}, err
		}
		if !ok || tp.Partition < 0 || tp.Partition >= t.Partitions {
			res.Codes[i] = kerr.UnknownTopicOrPartition.Code
			continue
		}
		if err := a.b.Delete(groupOffsetKey(c.Group, t.ID, tp.Partition)); err != nil {
			return Result{}, err
		}
		a.noteOffset(c.Group, tp.Topic, tp.Partition)
		touched = append(touched, t.ID)
	}
	return res, a.dropEmptyTopicMarkers(c.Group, touched)
}

func (a *Applier) expireOffsets(c ExpireOffsets) (Result, error) {
	if c.RetentionMs < 0 {
		return failed(kerr.InvalidRequest, "negative retention %d", c.RetentionMs), nil
	}
	if len(c.Groups) > maxExpireGroups {
		return failed(kerr.InvalidRequest, "%d groups, at most %d", len(c.Groups), maxExpireGroups), nil
	}
	for _, name := range c.Groups {
		if err := a.expireGroup(name, c.RetentionMs); err != nil {
			return Result{}, err
		}
	}
	return Result{}, nil
}

// expireGroup applies ExpireOffsets' rules to one group.
func (a *Applier) expireGroup(name string, retentionMs int64) error {
	g, ok, err := a.group(name)
	if err != nil || !ok {
		return err
	}
	if g.Kind == GroupShare {
		// A share group has no committed offsets here, and deleting it
		// would leave its share partitions' state: only DeleteGroups
		// deletes one.
		return nil
	}
	empty := len(g.Members) == 0
	if !empty && !g.SubscribedKnown && g.ProtocolType != "" {
		return nil // a live group whose topics are unknown keeps all
	}
	subscribed := make(map[string]bool, len(g.Subscribed))
	for _, t := range g.Subscribed {
		subscribed[t] = true
	}
	start, end := spanOf(groupOffsetPrefix(name))
	it, err := a.b.NewIter(start, end)
	if err != nil {
		return err
	}
	var expired [][]byte
	var touched []TopicID
	remaining := 0
	names := make(map[TopicID]string)
	for ok := it.First(); ok; ok = it.Next() {
		id, p, valid := splitGroupOffsetKey(it.Key(), len(name))
		if !valid {
			it.Close()
			return corrupt("committed offset key", errRange)
		}
		o, err := decodeCommittedOffset(id, p, it.Value())
		if err != nil {
			it.Close()
			return err
		}
		eligible := g.ProtocolType == "" || empty
		topic, found, err := a.topicNameOf(id, names)
		if err != nil {
			it.Close()
			return err
		}
		if !eligible {
			eligible = !subscribed[topic]
		}
		if eligible && offsetExpired(&g, &o, a.clock, retentionMs) {
			if found {
				a.noteOffset(name, topic, p)
			}
			expired = append(expired, bytes.Clone(it.Key()))
			touched = append(touched, id)
			continue
		}
		remaining++
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, k := range expired {
		if err := a.b.Delete(k); err != nil {
			return err
		}
	}
	if err := a.dropEmptyTopicMarkers(name, touched); err != nil {
		return err
	}
	if remaining == 0 && empty {
		a.noteGroup(name)
		return a.b.Delete(groupKey(name))
	}
	return nil
}

// offsetExpired is KIP-211's rule for an offset eligible for expiry: an
// explicit expiry wins; otherwise retention counts from when an empty
// group (with a protocol) became empty, else from the commit.
func offsetExpired(g *Group, o *CommittedOffset, now, retentionMs int64) bool {
	if o.ExpireTimestamp >= 0 {
		return now >= o.ExpireTimestamp
	}
	base := o.CommitTimestamp
	if g.ProtocolType != "" && len(g.Members) == 0 {
		base = g.StateTimestamp
	}
	return now >= satAdd(base, retentionMs)
}

// deleteTopicOffsets drops every group's committed offsets of topic id,
// as Kafka does when a topic is deleted.
func (a *Applier) deleteTopicOffsets(topic string, id TopicID) error {
	start, end := spanOf(append([]byte{prefixTopicGroup}, id[:]...))
	it, err := a.b.NewIter(start, end)
	if err != nil {
		return err
	}
	var groups []string
	for ok := it.First(); ok; ok = it.Next() {
		groups = append(groups, string(it.Key()[1+16:]))
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, g := range groups {
		if err := a.noteGroupOffsets(g, groupTopicOffsetPrefix(g, id), topic); err != nil {
			return err
		}
		gs, ge := spanOf(groupTopicOffsetPrefix(g, id))
		if err := a.b.DeleteRange(gs, ge); err != nil {
			return err
		}
	}
	return a.b.DeleteRange(start, end)
}

// satAdd is a+b, saturating instead of wrapping.
func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	if b < 0 && a < math.MinInt64-b {
		return math.MinInt64
	}
	return a + b
}

// Group returns a group's stored state.
func (v *View) Group(name string) (Group, bool, error) {
	val, ok, err := v.get(groupKey(name))
	if err != nil || !ok {
		return Group{}, false, err
	}
	g, err := decodeGroup(name, val)
	return g, err == nil, err
}

// Groups returns every stored group, sorted by name.
func (v *View) Groups() ([]Group, error) {
	it, err := v.r.NewIter([]byte{prefixGroup}, []byte{prefixGroup + 1})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var gs []Group
	for ok := it.First(); ok; ok = it.Next() {
		g, err := decodeGroup(string(it.Key()[1:]), it.Value())
		if err != nil {
			return nil, err
		}
		gs = append(gs, g)
	}
	return gs, it.Error()
}

// GroupNames returns the name of every stored group, sorted, without
// decoding their states (which hold every member's assignment).
func (v *View) GroupNames() ([]string, error) {
	it, err := v.r.NewIter([]byte{prefixGroup}, []byte{prefixGroup + 1})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var names []string
	for ok := it.First(); ok; ok = it.Next() {
		names = append(names, string(it.Key()[1:]))
	}
	return names, it.Error()
}

// CommittedOffset returns one committed offset of group; Topic is left
// empty (the caller named the topic).
func (v *View) CommittedOffset(group string, id TopicID, partition int32) (CommittedOffset, bool, error) {
	if partition < 0 {
		return CommittedOffset{}, false, nil
	}
	val, ok, err := v.get(groupOffsetKey(group, id, partition))
	if err != nil || !ok {
		return CommittedOffset{}, false, err
	}
	o, err := decodeCommittedOffset(id, partition, val)
	return o, err == nil, err
}

// CommittedOffsets returns every committed offset of group, sorted by
// topic name and partition. Offsets of a topic id that no longer exists
// are skipped (topic deletion removes them in the same apply).
func (v *View) CommittedOffsets(group string) ([]CommittedOffset, error) {
	start, end := spanOf(groupOffsetPrefix(group))
	it, err := v.r.NewIter(start, end)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []CommittedOffset
	names := make(map[TopicID]string)
	for ok := it.First(); ok; ok = it.Next() {
		id, p, valid := splitGroupOffsetKey(it.Key(), len(group))
		if !valid {
			return nil, corrupt("committed offset key", errRange)
		}
		name, seen := names[id]
		if !seen {
			n, _, err := v.get(topicIDKey(id))
			if err != nil {
				return nil, err
			}
			name = string(n)
			names[id] = name
		}
		if name == "" {
			continue
		}
		o, err := decodeCommittedOffset(id, p, it.Value())
		if err != nil {
			return nil, err
		}
		o.Topic = name
		out = append(out, o)
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(x, y CommittedOffset) int {
		if x.Topic != y.Topic {
			if x.Topic < y.Topic {
				return -1
			}
			return 1
		}
		return int(x.Partition) - int(y.Partition)
	})
	return out, nil
}
