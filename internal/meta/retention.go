package meta

// Retention (cleanup.policy=delete): a partition's log start advances
// past index entries that are older than retention.ms or beyond
// retention.bytes, with Kafka's rules (UnifiedLog's
// deleteRetentionMsBreachedSegments and
// deleteRetentionSizeBreachedSegments), index entries standing in for
// segments. The decision is apply's, by the log clock and the topic's
// configs, so a proposal that races another, a config change or a
// DeleteRecords changes nothing twice.

import (
	"math"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Limits of retention. Like apply's other limits they are part of what
// apply means.
const (
	// MaxRetentionPartitions bounds the partitions of one ApplyRetention,
	// so one entry stays small and its apply short.
	MaxRetentionPartitions = 1024
	// MaxRetentionEntries bounds the index entries one ApplyRetention
	// removes from one partition: a partition with more to remove is
	// proposed again, and each apply stays bounded however far behind
	// retention is.
	MaxRetentionEntries = 10000
	// minRetentionPartitionBytes is the smallest encoded partition: the
	// id and a one-byte varint.
	minRetentionPartitionBytes = 16 + 1
)

// ApplyRetention applies retention to the partitions named: in each, the
// log start offset moves past the longest run of index entries from the
// start that Kafka's retention would delete, by the log clock:
//
//   - retention.ms (when >= 0): an entry goes while the log clock is more
//     than retention.ms past its largest timestamp;
//   - then retention.bytes (when >= 0): an entry goes while the partition
//     keeps at least retention.bytes without it.
//
// Whole entries only, never one holding offsets at or above the high
// watermark or the last stable offset, at most MaxRetentionEntries per
// partition. Topics whose cleanup.policy does not include delete keep
// everything. Index entries go through trimIndex; producer states whose
// last batch and aborted transactions whose marker are below the new
// start go with them, as Kafka trims its producer state and transaction
// index when the log start moves.
//
// A topic that sets retention.ms or retention.bytes is ruled by its own
// value; one that does not by the Default fields, the proposer's broker
// defaults (log.retention.ms, log.retention.bytes), carried in the
// command because flags are not in the log.
// Result: Batches, one per partition in order: Code and LogStartOffset
// after apply. UNKNOWN_TOPIC_OR_PARTITION for a partition that does not
// exist; INVALID_REQUEST, changing nothing, for more than
// MaxRetentionPartitions.
type ApplyRetention struct {
	DefaultRetentionMs    int64
	DefaultRetentionBytes int64
	Partitions            []RetentionPartition
}

// RetentionPartition names one partition for ApplyRetention.
type RetentionPartition struct {
	TopicID   TopicID
	Partition int32
}

func (ApplyRetention) Type() CommandType { return TypeApplyRetention }
func (ApplyRetention) version() uint16   { return 1 }

func (c ApplyRetention) appendPayload(b []byte) []byte {
	b = appendVarint(b, c.DefaultRetentionMs)
	b = appendVarint(b, c.DefaultRetentionBytes)
	b = appendUvarint(b, uint64(len(c.Partitions)))
	for _, p := range c.Partitions {
		b = append(b, p.TopicID[:]...)
		b = appendVarint(b, int64(p.Partition))
	}
	return b
}

func decodeApplyRetentionV1(p []byte) (ApplyRetention, error) {
	r := &reader{b: p}
	var c ApplyRetention
	c.DefaultRetentionMs = r.varint()
	c.DefaultRetentionBytes = r.varint()
	n := r.count(minRetentionPartitionBytes)
	if n > 0 {
		c.Partitions = make([]RetentionPartition, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		rp := &c.Partitions[i]
		r.fixed(rp.TopicID[:])
		rp.Partition = r.int32()
	}
	return c, r.done()
}

// RetentionPolicy is what retention reads of a topic.
type RetentionPolicy struct {
	// Delete: cleanup.policy includes delete.
	Delete bool
	// Ms and Bytes are retention.ms and retention.bytes; negative is no
	// limit.
	Ms, Bytes int64
}

// RetentionPolicyOf is the retention policy of a topic with configs,
// where defaultMs and defaultBytes rule what it does not set. A value
// that does not parse counts as unset. Parsing lives here, not in
// package topicconfig, because it is part of what apply means: a change
// to the schema's parsing must not change apply.
func RetentionPolicyOf(configs map[string]string, defaultMs, defaultBytes int64) RetentionPolicy {
	p := RetentionPolicy{Delete: true, Ms: defaultMs, Bytes: defaultBytes}
	if v, ok := configs["cleanup.policy"]; ok {
		p.Delete = false
		for _, it := range strings.Split(v, ",") {
			p.Delete = p.Delete || strings.TrimSpace(it) == "delete"
		}
	}
	parse := func(name string, dst *int64) {
		if v, ok := configs[name]; ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				*dst = n
			}
		}
	}
	parse("retention.ms", &p.Ms)
	parse("retention.bytes", &p.Bytes)
	return p
}

// Limited reports whether the policy can delete anything.
func (p RetentionPolicy) Limited() bool { return p.Delete && (p.Ms >= 0 || p.Bytes >= 0) }

// retentionStart returns the log start offset retention by p moves a
// partition in state st to at log clock now, st.LogStartOffset if it
// stays, and how many entries it passes. stored is the partition's
// storage. It reads r only, so apply (on its batch) and a proposer (on
// a View) decide alike.
func retentionStart(r Reader, id TopicID, partition int32, st PartitionState, stored PartitionStorage, p RetentionPolicy, now int64) (int64, int, error) {
	if !p.Limited() {
		return st.LogStartOffset, 0, nil
	}
	limit, err := lastStableOffset(r, id, partition, st.HighWatermark())
	if err != nil {
		return 0, 0, err
	}
	start, end := indexSpan(id, partition)
	it, err := r.NewIter(start, end)
	if err != nil {
		return 0, 0, err
	}
	defer it.Close()
	newStart, n := st.LogStartOffset, 0
	timePhase := p.Ms >= 0
	remaining := stored.Bytes
	for ok := it.First(); ok && n < MaxRetentionEntries; ok = it.Next() {
		e, err := decodeIndexEntry(it.Key(), it.Value())
		if err != nil {
			return 0, 0, err
		}
		next := e.BaseOffset + int64(e.Records)
		if next > limit {
			break
		}
		var size int64
		if !e.Control && e.ObjectKey != "" {
			size = e.Length
		}
		// Kafka deletes by time first, then by size from where time
		// stopped.
		if timePhase && !(now-e.MaxTimestamp > p.Ms) {
			timePhase = false
		}
		if !timePhase && !(p.Bytes >= 0 && remaining-size >= p.Bytes) {
			break
		}
		remaining -= size
		newStart = max(newStart, next)
		n++
	}
	return newStart, n, it.Error()
}

func (a *Applier) applyRetention(c ApplyRetention) (Result, error) {
	if len(c.Partitions) > MaxRetentionPartitions {
		return failed(kerr.InvalidRequest, "%d partitions, at most %d", len(c.Partitions), MaxRetentionPartitions), nil
	}
	res := Result{Batches: make([]BatchResult, len(c.Partitions))}
	for i, rp := range c.Partitions {
		br := &res.Batches[i]
		t, ok, err := a.topicByID(rp.TopicID)
		if err != nil {
			return Result{}, err
		}
		if !ok || rp.Partition < 0 || rp.Partition >= t.Partitions {
			br.Code = kerr.UnknownTopicOrPartition.Code
			continue
		}
		ref := partRef{rp.TopicID, rp.Partition}
		cp, err := a.part(ref)
		if err != nil {
			return Result{}, err
		}
		if !cp.exists {
			br.Code = kerr.UnknownTopicOrPartition.Code
			continue
		}
		stored, err := a.storedOf(ref, cp)
		if err != nil {
			return Result{}, err
		}
		policy := RetentionPolicyOf(t.Configs, c.DefaultRetentionMs, c.DefaultRetentionBytes)
		newStart, _, err := retentionStart(a.b, rp.TopicID, rp.Partition, cp.st, stored.n, policy, a.clock)
		if err != nil {
			return Result{}, err
		}
		if newStart > cp.st.LogStartOffset {
			if err := a.advanceLogStart(ref, cp, newStart); err != nil {
				return Result{}, err
			}
		}
		br.LogStartOffset = cp.st.LogStartOffset
	}
	return res, nil
}

// advanceLogStart raises a partition's log start (in the cache) to
// logStart, above its current one, and drops what lies below it: the
// index entries through trimIndex, then trimBelowStart. DeleteRecords
// and retention both move log starts through it.
func (a *Applier) advanceLogStart(ref partRef, cp *cachedPart, logStart int64) error {
	cp.st.LogStartOffset = logStart
	cp.dirty = true
	if err := a.trimIndex(ref.id, ref.partition, logStart); err != nil {
		return err
	}
	return a.trimBelowStart(ref.id, ref.partition, logStart)
}

// trimBelowStart drops, from metadata level 3, what a partition keeps of
// offsets below a new log start besides its index: aborted transactions
// whose marker is below it, and producer states whose newest batch ends
// below it (Kafka's ProducerStateManager drops producers without data
// at or above the log start). A state without batches, which only fences
// an epoch, stays.
func (a *Applier) trimBelowStart(id TopicID, partition int32, logStart int64) error {
	if on, err := a.lifecycleOn(); err != nil || !on {
		return err
	}
	if err := a.b.DeleteRange(abortedTxnKey(id, partition, 0), abortedTxnKey(id, partition, logStart)); err != nil {
		return err
	}
	start, end := partitionSpan(prefixProducerState, id, partition)
	it, err := a.b.NewIter(start, end)
	if err != nil {
		return err
	}
	var gone [][]byte
	for ok := it.First(); ok && err == nil; ok = it.Next() {
		var s producerState
		if s, err = decodeProducerState(it.Value()); err == nil && len(s.Batches) > 0 {
			b := s.Batches[len(s.Batches)-1]
			if b.BaseOffset+seqSpan(b.FirstSeq, b.LastSeq) <= logStart {
				gone = append(gone, append([]byte(nil), it.Key()...))
			}
		}
	}
	if err == nil {
		err = it.Error()
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	for _, k := range gone {
		if err != nil {
			break
		}
		err = a.b.Delete(k)
	}
	return err
}

// seqSpan is the number of records from sequence first to last, which
// wrap from MaxInt32 to 0.
func seqSpan(first, last int32) int64 {
	n := int64(last) - int64(first)
	if n < 0 {
		n += math.MaxInt32 + 1
	}
	return n + 1
}

// lastStableOffset is the first offset of the partition's oldest ongoing
// transaction, or hw when none has written.
func lastStableOffset(r Reader, id TopicID, partition int32, hw int64) (int64, error) {
	start, end := partitionSpan(prefixOpenTxn, id, partition)
	it, err := r.NewIter(start, end)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	lso := hw
	for ok := it.First(); ok; ok = it.Next() {
		if len(it.Key()) != len(start)+8 {
			continue
		}
		o, err := decodeOpenTxn(it.Value())
		if err != nil {
			return 0, err
		}
		if o.FirstOffset >= 0 {
			lso = min(lso, o.FirstOffset)
		}
	}
	return lso, it.Error()
}

// RetentionDue returns the log start ApplyRetention with policy p would
// move the partition to at log clock now, and whether it moves: what a
// proposer checks before proposing.
func (v *View) RetentionDue(id TopicID, partition int32, p RetentionPolicy, now int64) (int64, bool, error) {
	st, ok, err := v.Partition(id, partition)
	if err != nil || !ok {
		return 0, false, err
	}
	stored, err := v.PartitionStorage(id, partition)
	if err != nil {
		return 0, false, err
	}
	newStart, _, err := retentionStart(v.r, id, partition, st, stored, p, now)
	return newStart, newStart > st.LogStartOffset, err
}
