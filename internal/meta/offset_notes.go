package meta

import "slices"

// What a command changed of the committed offsets and group states, for
// the records Strand derives from them in __consumer_offsets (package
// offsetstopic). The committed offsets here are the truth; the topic is
// a view of them that tools such as Burrow read. Apply names each
// offset and group it wrote or deleted in the command's Result, and the
// proposer's agent writes the current value (or a tombstone) of each,
// read from its copy after the apply. Naming is by topic name, as
// Kafka's record keys are: a deleted topic has no id to look up.
//
// Notes are a pure function of state and command like the rest of a
// Result, so every copy computes them; only the proposer uses them.

// OffsetRef names one committed offset as __consumer_offsets keys it.
type OffsetRef struct {
	Group     string
	Topic     string
	Partition int32
}

// noteOffset records that the command being applied stored or deleted
// group's offset of topic's partition.
func (a *Applier) noteOffset(group, topic string, partition int32) {
	a.notes.offsets = append(a.notes.offsets, OffsetRef{Group: group, Topic: topic, Partition: partition})
}

// noteGroup records that the command being applied stored or deleted
// group's state.
func (a *Applier) noteGroup(group string) {
	a.notes.groups = append(a.notes.groups, group)
}

// offsetNotes collects the notes of one command.
type offsetNotes struct {
	offsets []OffsetRef
	groups  []string
}

func (n *offsetNotes) reset() {
	n.offsets, n.groups = n.offsets[:0], n.groups[:0]
}

// fill hands the command's notes to its result, copied: the buffers are
// reused by the next command.
func (n *offsetNotes) fill(r *Result) {
	if len(n.offsets) > 0 {
		r.Offsets = slices.Clone(n.offsets)
	}
	if len(n.groups) > 0 {
		r.Groups = slices.Clone(slices.Compact(n.groups))
	}
}

// topicNameOf returns the name of topic id, caching it in names; ok is
// false for an id with no topic.
func (a *Applier) topicNameOf(id TopicID, names map[TopicID]string) (string, bool, error) {
	if name, ok := names[id]; ok {
		return name, name != "", nil
	}
	v, ok, err := a.get(topicIDKey(id))
	if err != nil {
		return "", false, err
	}
	names[id] = string(v)
	return string(v), ok, nil
}

// noteGroupOffsets notes every stored offset of group under prefix (a
// group's offsets, or one topic's of them), before a range delete.
// topic names them when the prefix is one topic's; otherwise each id is
// resolved.
func (a *Applier) noteGroupOffsets(group string, prefix []byte, topic string) error {
	start, end := spanOf(prefix)
	it, err := a.b.NewIter(start, end)
	if err != nil {
		return err
	}
	defer it.Close()
	names := map[TopicID]string{}
	for ok := it.First(); ok; ok = it.Next() {
		id, p, valid := splitGroupOffsetKey(it.Key(), len(group))
		if !valid {
			return corrupt("committed offset key", errRange)
		}
		name := topic
		if name == "" {
			var found bool
			if name, found, err = a.topicNameOf(id, names); err != nil {
				return err
			} else if !found {
				continue
			}
		}
		a.noteOffset(group, name, p)
	}
	return it.Error()
}
