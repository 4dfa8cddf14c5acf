package meta

// Topic commands: create, delete, grow and configure topics. A topic's
// record lives under its name (0x01) and its id (0x02); its partitions'
// state (0x03) and offset index (0x04) are ranges under its id.

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Limits apply enforces on topic commands. Like apply's other limits
// they are part of what apply means: changing one changes results, so it
// needs a new command version or a feature level in the log, never a
// silent edit.
const (
	// MaxTopicNameBytes is Kafka's limit on a topic name (the kafka
	// handlers check names against it before proposing).
	MaxTopicNameBytes     = 249
	maxPartitionsPerTopic = 1 << 16
	maxTopicConfigs       = 1024
	// maxTopicIDAttempts bounds the rehashing when a derived topic id is
	// zero or taken, which SHA-256 makes a formality.
	maxTopicIDAttempts = 16
)

// CreateTopic creates a topic with Partitions empty partitions.
// Result: TopicID, or TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION,
// INVALID_PARTITIONS, INVALID_CONFIG.
type CreateTopic struct {
	Name       string
	Partitions int32
	Configs    map[string]string
}

// DeleteTopic deletes a topic, its partitions, its offset index and every
// group's committed offsets of it. It names the topic by ID when ID is
// set, else by Name.
// Result: TopicID of the deleted topic, or UNKNOWN_TOPIC_ID,
// UNKNOWN_TOPIC_OR_PARTITION.
type DeleteTopic struct {
	Name string
	ID   TopicID
}

// CreatePartitions grows a topic to NewTotal partitions.
// Result: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS.
type CreatePartitions struct {
	Name     string
	NewTotal int32
}

// AlterConfigs changes a topic's configs. Incremental applies Set and
// Delete to the current configs; otherwise the configs become exactly Set
// and Delete must be empty. Apply stores any key and value: which keys
// and values are valid is the Kafka layer's business.
// Result: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST (a key in both Set
// and Delete, or Delete without Incremental), INVALID_CONFIG.
type AlterConfigs struct {
	Name        string
	Set         map[string]string
	Delete      []string
	Incremental bool
}

// CommitObject records a data object holding record batches of many
// partitions. Apply gives each batch the next offsets of its partition in
// log order and writes one offset index entry per batch.
// Result: Batches, one per batch in order. A batch of a missing topic or
// partition gets UNKNOWN_TOPIC_OR_PARTITION and the others still commit;
// an object key committed before gets DUPLICATE_RESOURCE for every batch.
// An idempotent batch may get INVALID_PRODUCER_EPOCH,
// OUT_OF_ORDER_SEQUENCE_NUMBER or INVALID_RECORD, or, as a duplicate, the

func (CreateTopic) Type() CommandType      { return TypeCreateTopic }
func (DeleteTopic) Type() CommandType      { return TypeDeleteTopic }
func (CreatePartitions) Type() CommandType { return TypeCreatePartitions }
func (AlterConfigs) Type() CommandType     { return TypeAlterConfigs }

func (CreateTopic) version() uint16      { return 1 }
func (DeleteTopic) version() uint16      { return 1 }
func (CreatePartitions) version() uint16 { return 1 }
func (AlterConfigs) version() uint16     { return 1 }

func (c CreateTopic) appendPayload(b []byte) []byte {
	b = appendString(b, c.Name)
	b = appendVarint(b, int64(c.Partitions))
	return appendStringMap(b, c.Configs)
}

func (c DeleteTopic) appendPayload(b []byte) []byte {
	b = appendString(b, c.Name)
	return append(b, c.ID[:]...)
}

func (c CreatePartitions) appendPayload(b []byte) []byte {
	b = appendString(b, c.Name)
	return appendVarint(b, int64(c.NewTotal))
}

func (c AlterConfigs) appendPayload(b []byte) []byte {
	b = appendString(b, c.Name)
	b = appendStringMap(b, c.Set)
	b = appendStringList(b, c.Delete)
	return appendBool(b, c.Incremental)
}

func decodeCreateTopicV1(p []byte) (CreateTopic, error) {
	r := &reader{b: p}
	var c CreateTopic
	c.Name = r.string()
	c.Partitions = r.int32()
	c.Configs = r.stringMap()
	return c, r.done()
}

func decodeDeleteTopicV1(p []byte) (DeleteTopic, error) {
	r := &reader{b: p}
	var c DeleteTopic
	c.Name = r.string()
	r.fixed(c.ID[:])
	return c, r.done()
}

func decodeCreatePartitionsV1(p []byte) (CreatePartitions, error) {
	r := &reader{b: p}
	var c CreatePartitions
	c.Name = r.string()
	c.NewTotal = r.int32()
	return c, r.done()
}

func decodeAlterConfigsV1(p []byte) (AlterConfigs, error) {
	r := &reader{b: p}
	var c AlterConfigs
	c.Name = r.string()
	c.Set = r.stringMap()
	c.Delete = r.stringList()
	c.Incremental = r.bool()
	return c, r.done()
}

// ValidTopicName follows Kafka's rules: 1 to 249 of [a-zA-Z0-9._-], and
// neither "." nor "..".
func ValidTopicName(name string) bool {
	if name == "" || len(name) > MaxTopicNameBytes || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

func validConfigs(m map[string]string) (Result, bool) {
	if len(m) > maxTopicConfigs {
		return failed(kerr.InvalidConfig, "%d configs, at most %d", len(m), maxTopicConfigs), false
	}
	if _, ok := m[""]; ok {
		return failed(kerr.InvalidConfig, "empty config name"), false
	}
	return Result{}, true
}

func (a *Applier) topic(name string) (Topic, bool, error) {
	a.keyBuf = appendTopicNameKey(a.keyBuf[:0], name)
	v, ok, err := a.get(a.keyBuf)
	if err != nil || !ok {
		return Topic{}, false, err
	}
	t, err := decodeTopic(v)
	return t, err == nil, err
}

func (a *Applier) createTopic(c CreateTopic) (Result, error) {
	if !ValidTopicName(c.Name) {
		return failed(kerr.InvalidTopicException, "invalid topic name %q", c.Name), nil
	}
	if _, ok, err := a.topic(c.Name); err != nil || ok {
		return failed(kerr.TopicAlreadyExists, "topic %q already exists", c.Name), err
	}
	if c.Partitions < 1 || c.Partitions > maxPartitionsPerTopic {
		return failed(kerr.InvalidPartitions, "%d partitions, want 1 to %d", c.Partitions, maxPartitionsPerTopic), nil
	}
	if res, ok := validConfigs(c.Configs); !ok {
		return res, nil
	}
	id, ok, err := a.newTopicID(c.Name)
	if err != nil || !ok {
		return failed(kerr.UnknownServerError, "no free topic id"), err
	}
	t := Topic{ID: id, Name: c.Name, Partitions: c.Partitions, CreatedAt: a.clock, Configs: c.Configs}
	if err := a.b.Set(topicNameKey(c.Name), t.encode()); err != nil {
		return Result{}, err
	}
	if err := a.b.Set(topicIDKey(id), []byte(c.Name)); err != nil {
		return Result{}, err
	}
	if err := a.setPartitions(id, 0, c.Partitions); err != nil {
		return Result{}, err
	}
	return Result{TopicID: id}, nil
}

// setPartitions writes empty state for partitions [from, to).
func (a *Applier) setPartitions(id TopicID, from, to int32) error {
	empty := PartitionState{}.encode(nil)
	for p := from; p < to; p++ {
		if err := a.b.Set(partitionKey(id, p), empty); err != nil {
			return err
		}
	}
	return nil
}

// newTopicID derives a topic id from the name and where the command sits in
// the log, so every replica picks the same id and a topic deleted and
// created again gets a new one.
func (a *Applier) newTopicID(name string) (TopicID, bool, error) {
	for attempt := range maxTopicIDAttempts {
		h := sha256.New()
		h.Write([]byte("strand topic id\x00"))
		h.Write([]byte(name))
		var nums [20]byte
		binary.BigEndian.PutUint64(nums[0:], a.pos)
		binary.BigEndian.PutUint32(nums[8:], uint32(a.idx))
		binary.BigEndian.PutUint64(nums[12:], uint64(attempt))
		h.Write(nums[:])
		var id TopicID
		copy(id[:], h.Sum(nil))
		if id.IsZero() {
			continue
		}
		_, taken, err := a.get(topicIDKey(id))
		if err != nil {
			return TopicID{}, false, err
		}
		if !taken {
			return id, true, nil
		}
	}
	return TopicID{}, false, nil
}

func (a *Applier) deleteTopic(c DeleteTopic) (Result, error) {
	name := c.Name
	if !c.ID.IsZero() {
		v, ok, err := a.get(topicIDKey(c.ID))
		if err != nil || !ok {
			return failed(kerr.UnknownTopicID, "no topic with id %v", c.ID), err
		}
		name = string(v)
	}
	t, ok, err := a.topic(name)
	if err != nil || !ok {
		return failed(kerr.UnknownTopicOrPartition, "no topic %q", name), err
	}
	if err := a.b.Delete(topicNameKey(t.Name)); err != nil {
		return Result{}, err
	}
	if err := a.b.Delete(topicIDKey(t.ID)); err != nil {
		return Result{}, err
	}
	if err := a.releaseIndex(topicSpan(prefixIndex, t.ID)); err != nil {
		return Result{}, err
	}
	for _, p := range []byte{prefixPartition, prefixIndex, prefixProducerState, prefixOpenTxn, prefixAbortedTxn, prefixReplicas, prefixReplicaEpoch, prefixPartitionStorage} {
		start, end := topicSpan(p, t.ID)
		if err := a.b.DeleteRange(start, end); err != nil {
			return Result{}, err
		}
	}
	if err := a.deleteTopicOffsets(t.Name, t.ID); err != nil {
		return Result{}, err
	}
	return Result{TopicID: t.ID}, nil
}

func (a *Applier) createPartitions(c CreatePartitions) (Result, error) {
	t, ok, err := a.topic(c.Name)
	if err != nil || !ok {
		return failed(kerr.UnknownTopicOrPartition, "no topic %q", c.Name), err
	}
	if c.NewTotal <= t.Partitions {
		return failed(kerr.InvalidPartitions, "topic %q has %d partitions, asked for %d", c.Name, t.Partitions, c.NewTotal), nil
	}
	if c.NewTotal > maxPartitionsPerTopic {
		return failed(kerr.InvalidPartitions, "%d partitions, at most %d", c.NewTotal, maxPartitionsPerTopic), nil
	}
	if err := a.setPartitions(t.ID, t.Partitions, c.NewTotal); err != nil {
		return Result{}, err
	}
	t.Partitions = c.NewTotal
	if err := a.b.Set(topicNameKey(t.Name), t.encode()); err != nil {
		return Result{}, err
	}
	return Result{TopicID: t.ID}, nil
}

func (a *Applier) alterConfigs(c AlterConfigs) (Result, error) {
	t, ok, err := a.topic(c.Name)
	if err != nil || !ok {
		return failed(kerr.UnknownTopicOrPartition, "no topic %q", c.Name), err
	}
	if !c.Incremental && len(c.Delete) > 0 {
		return failed(kerr.InvalidRequest, "delete needs an incremental alter"), nil
	}
	for _, k := range c.Delete {
		if _, ok := c.Set[k]; ok {
			return failed(kerr.InvalidRequest, "config %q both set and deleted", k), nil
		}
	}
	next := make(map[string]string, len(t.Configs)+len(c.Set))
	if c.Incremental {
		for k, v := range t.Configs {
			next[k] = v
		}
		for _, k := range c.Delete {
			delete(next, k)
		}
	}
	for k, v := range c.Set {
		next[k] = v
	}
	if res, ok := validConfigs(next); !ok {
		return res, nil
	}
	t.Configs = next
	if err := a.b.Set(topicNameKey(t.Name), t.encode()); err != nil {
		return Result{}, err
	}
	return Result{TopicID: t.ID}, nil
}
