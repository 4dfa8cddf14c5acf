package meta

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// Limits apply enforces on commands. They are part of what apply means:
// changing one changes results, so it needs a new command version or a
// feature level in the log, never a silent edit.
const (
	maxTopicNameBytes     = 249
	maxPartitionsPerTopic = 1 << 16
	maxTopicConfigs       = 1024
	maxObjectKeyBytes     = 1024
	// maxTopicIDAttempts bounds the rehashing when a derived topic id is
	// zero or taken, which SHA-256 makes a formality.
	maxTopicIDAttempts = 16
)

// poisonError marks an entry that cannot be applied because of its bytes:
// it does not decode, or holds a command this build does not know. The
// replica halts before it; every replica of the same build halts at the
// same position.
type poisonError struct{ err error }

func (e *poisonError) Error() string { return e.err.Error() }
func (e *poisonError) Unwrap() error { return e.err }

// applier applies log entries to one indexed Pebble batch. It is the
// deterministic core of the package: what it writes depends only on the
// state it reads through the batch, the entry bytes and their position. It
// reads no clock (time is the entry's timestamp), draws no random numbers,
// starts no goroutines, does no I/O but the batch, and never lets map order
// reach the batch (caches are flushed in key order).
//
// Several entries may share one batch; the caller commits the batch after
// finish, and the applied position goes into the same batch.
type applier struct {
	b *pebble.Batch

	clockLoaded bool
	clock       int64 // unix ms, the max entry timestamp applied so far

	// writers caches dedupe state for the batch.
	writers map[string]*writerState
	// parts caches partition states between CommitObject commands, so a
	// run of commits rewrites each partition once per batch instead of
	// once per command. Any other command flushes and drops it first,
	// since those read or delete partition keys through the batch.
	parts map[partRef]*cachedPart

	keyBuf []byte
	valBuf []byte
}

type partRef struct {
	id        TopicID
	partition int32
}

type cachedPart struct {
	st     PartitionState
	exists bool
	dirty  bool
}

func newApplier(b *pebble.Batch) *applier {
	return &applier{
		b:       b,
		writers: make(map[string]*writerState),
		parts:   make(map[partRef]*cachedPart),
	}
}

// entryOutcome is what applying one entry produced.
type entryOutcome struct {
	hdr     Entry // without commands
	dropped bool
	results []Result
}

// applyEntry applies the entry data found at pos. A *poisonError means the
// batch is untouched by this entry; any other error is a local fault and
// the batch must be discarded.
func (a *applier) applyEntry(pos sharedlog.Pos, data []byte) (entryOutcome, error) {
	body, err := checkEntry(data)
	if err != nil {
		return entryOutcome{}, &poisonError{err}
	}
	hdr, r, err := decodeEntryHeader(body)
	if err != nil {
		return entryOutcome{}, &poisonError{err}
	}
	out := entryOutcome{hdr: hdr}

	// Dedupe before decoding commands: a dropped copy has no effect at
	// all, not even on the clock.
	ws, err := a.writer(hdr.WriterID)
	if err != nil {
		return entryOutcome{}, err
	}
	if hdr.Incarnation < ws.Incarnation || (hdr.Incarnation == ws.Incarnation && hdr.Seq <= ws.LastSeq) {
		out.dropped = true
		return out, nil
	}

	e := hdr
	if err := decodeEntryCommands(r, &e); err != nil {
		return entryOutcome{}, &poisonError{err}
	}
	cmds := make([]Command, len(e.Commands))
	for i, rc := range e.Commands {
		if cmds[i], err = DecodeCommand(rc); err != nil {
			return entryOutcome{}, &poisonError{fmt.Errorf("command %d: %w", i, err)}
		}
	}

	*ws = writerState{Incarnation: hdr.Incarnation, LastSeq: hdr.Seq}
	if err := a.loadClock(); err != nil {
		return entryOutcome{}, err
	}
	a.clock = max(a.clock, hdr.Timestamp)

	out.results = make([]Result, len(cmds))
	for i, c := range cmds {
		if out.results[i], err = a.applyCommand(pos, i, c); err != nil {
			return entryOutcome{}, err
		}
	}
	return out, nil
}

// finish writes the cached state and the applied position (next, the
// position after the last entry applied) into the batch.
func (a *applier) finish(next sharedlog.Pos) error {
	if err := a.flushParts(); err != nil {
		return err
	}
	for _, id := range sortedKeys(a.writers) {
		if err := a.b.Set(writerKey(id), a.writers[id].encode(), nil); err != nil {
			return err
		}
	}
	if a.clockLoaded {
		if err := a.b.Set(keyClock, encodeUint64(uint64(a.clock)), nil); err != nil {
			return err
		}
	}
	return a.b.Set(keyApplied, encodeUint64(uint64(next)), nil)
}

func (a *applier) writer(id string) (*writerState, error) {
	if ws, ok := a.writers[id]; ok {
		return ws, nil
	}
	ws := new(writerState)
	v, ok, err := a.get(writerKey(id))
	if err != nil {
		return nil, err
	}
	if ok {
		if *ws, err = decodeWriterState(v); err != nil {
			return nil, err
		}
	}
	a.writers[id] = ws
	return ws, nil
}

func (a *applier) loadClock() error {
	if a.clockLoaded {
		return nil
	}
	v, ok, err := a.get(keyClock)
	if err != nil {
		return err
	}
	if ok {
		c, err := decodeUint64("log clock", v)
		if err != nil {
			return err
		}
		a.clock = int64(c)
	}
	a.clockLoaded = true
	return nil
}

// get returns a copy of key's value in the batch's view of the state.
func (a *applier) get(key []byte) ([]byte, bool, error) {
	v, closer, err := a.b.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v = bytes.Clone(v)
	return v, true, closer.Close()
}

func (a *applier) applyCommand(pos sharedlog.Pos, idx int, c Command) (Result, error) {
	if co, ok := c.(CommitObject); ok {
		return a.commitObject(co)
	}
	if res, ok, err := a.applyGroupCommand(c); ok {
		return res, err
	}
	if err := a.flushParts(); err != nil {
		return Result{}, err
	}
	clear(a.parts)
	// Transaction commands write markers through the partition cache;
	// the next command of another kind flushes it (above), as finish
	// does.
	if res, ok, err := a.applyTxnCommand(c); ok {
		return res, err
	}
	switch c := c.(type) {
	case CreateTopic:
		return a.createTopic(pos, idx, c)
	case DeleteTopic:
		return a.deleteTopic(c)
	case CreatePartitions:
		return a.createPartitions(c)
	case AlterConfigs:
		return a.alterConfigs(c)
	case DeleteRecords:
		return a.deleteRecords(c)
	case AgentHeartbeat:
		return a.agentHeartbeat(pos, idx, c)
	case AllocateProducerID:
		return a.allocateProducerID(c)
	}
	// DecodeCommand only returns the types above.
	return Result{}, fmt.Errorf("meta: apply of %T not implemented", c)
}

// validTopicName follows Kafka's rules: 1 to 249 of [a-zA-Z0-9._-], and
// neither "." nor "..".
func validTopicName(name string) bool {
	if name == "" || len(name) > maxTopicNameBytes || name == "." || name == ".." {
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

func (a *applier) topic(name string) (Topic, bool, error) {
	v, ok, err := a.get(topicNameKey(name))
	if err != nil || !ok {
		return Topic{}, false, err
	}
	t, err := decodeTopic(v)
	return t, err == nil, err
}

func (a *applier) createTopic(pos sharedlog.Pos, idx int, c CreateTopic) (Result, error) {
	if !validTopicName(c.Name) {
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
	id, ok, err := a.newTopicID(c.Name, pos, idx)
	if err != nil || !ok {
		return failed(kerr.UnknownServerError, "no free topic id"), err
	}
	t := Topic{ID: id, Name: c.Name, Partitions: c.Partitions, CreatedAt: a.clock, Configs: c.Configs}
	if err := a.b.Set(topicNameKey(c.Name), t.encode(), nil); err != nil {
		return Result{}, err
	}
	if err := a.b.Set(topicIDKey(id), []byte(c.Name), nil); err != nil {
		return Result{}, err
	}
	if err := a.setPartitions(id, 0, c.Partitions); err != nil {
		return Result{}, err
	}
	return Result{TopicID: id}, nil
}

// setPartitions writes empty state for partitions [from, to).
func (a *applier) setPartitions(id TopicID, from, to int32) error {
	empty := PartitionState{}.encode(nil)
	for p := from; p < to; p++ {
		if err := a.b.Set(partitionKey(id, p), empty, nil); err != nil {
			return err
		}
	}
	return nil
}

// newTopicID derives a topic id from the name and where the command sits in
// the log, so every replica picks the same id and a topic deleted and
// created again gets a new one.
func (a *applier) newTopicID(name string, pos sharedlog.Pos, idx int) (TopicID, bool, error) {
	for attempt := range maxTopicIDAttempts {
		h := sha256.New()
		h.Write([]byte("strand topic id\x00"))
		h.Write([]byte(name))
		var nums [20]byte
		binary.BigEndian.PutUint64(nums[0:], uint64(pos))
		binary.BigEndian.PutUint32(nums[8:], uint32(idx))
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

func (a *applier) deleteTopic(c DeleteTopic) (Result, error) {
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
	if err := a.b.Delete(topicNameKey(t.Name), nil); err != nil {
		return Result{}, err
	}
	if err := a.b.Delete(topicIDKey(t.ID), nil); err != nil {
		return Result{}, err
	}
	for _, p := range []byte{prefixPartition, prefixIndex, prefixProducerState, prefixOpenTxn, prefixAbortedTxn} {
		start, end := topicSpan(p, t.ID)
		if err := a.b.DeleteRange(start, end, nil); err != nil {
			return Result{}, err
		}
	}
	if err := a.deleteTopicOffsets(t.ID); err != nil {
		return Result{}, err
	}
	return Result{TopicID: t.ID}, nil
}

func (a *applier) createPartitions(c CreatePartitions) (Result, error) {
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
	if err := a.b.Set(topicNameKey(t.Name), t.encode(), nil); err != nil {
		return Result{}, err
	}
	return Result{TopicID: t.ID}, nil
}

func (a *applier) alterConfigs(c AlterConfigs) (Result, error) {
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
	if err := a.b.Set(topicNameKey(t.Name), t.encode(), nil); err != nil {
		return Result{}, err
	}
	return Result{TopicID: t.ID}, nil
}

func (a *applier) commitObject(c CommitObject) (Result, error) {
	res := Result{Batches: make([]BatchResult, len(c.Batches))}
	fail := func(e *kerr.Error, format string, args ...any) Result {
		r := failed(e, format, args...)
		r.Batches = res.Batches
		for i := range r.Batches {
			r.Batches[i] = BatchResult{Code: e.Code}
		}
		return r
	}
	if c.ObjectKey == "" || len(c.ObjectKey) > maxObjectKeyBytes || c.ObjectSize < 0 {
		return fail(kerr.InvalidRequest, "invalid object key or size"), nil
	}
	okey := objectKey(c.ObjectKey)
	if _, ok, err := a.get(okey); err != nil || ok {
		return fail(kerr.DuplicateResource, "object %q committed before", c.ObjectKey), err
	}
	for i := range c.Batches {
		cb := &c.Batches[i]
		br := &res.Batches[i]
		if !validCommitBatch(cb, c.ObjectSize) {
			br.Code = kerr.InvalidRequest.Code
			continue
		}
		cp, err := a.part(partRef{cb.TopicID, cb.Partition})
		if err != nil {
			return Result{}, err
		}
		if !cp.exists {
			br.Code = kerr.UnknownTopicOrPartition.Code
			continue
		}
		if cp.st.NextOffset > math.MaxInt64-int64(cb.Records) {
			br.Code = kerr.InvalidRequest.Code
			continue
		}
		txn, done, err := a.checkTxnBatch(cb, br)
		if err != nil {
			return Result{}, err
		}
		if done {
			continue
		}
		producer, done, err := a.checkProducer(cb, cp, br)
		if err != nil {
			return Result{}, err
		}
		if done {
			continue
		}
		br.BaseOffset = cp.st.NextOffset
		br.LogStartOffset = cp.st.LogStartOffset
		cp.st.NextOffset += int64(cb.Records)
		cp.dirty = true
		a.keyBuf = indexKey(a.keyBuf[:0], cb.TopicID, cb.Partition, br.BaseOffset)
		var attrs uint64
		if cb.Transactional {
			attrs = indexAttrTransactional
		}
		a.valBuf = encodeIndexValueAttrs(a.valBuf[:0], c.ObjectKey, cb, attrs)
		if err := a.b.Set(a.keyBuf, a.valBuf, nil); err != nil {
			return Result{}, err
		}
		if err := a.recordProducer(producer, br.BaseOffset); err != nil {
			return Result{}, err
		}
		if err := a.recordTxnFirst(txn, br.BaseOffset); err != nil {
			return Result{}, err
		}
	}
	rec := objectRecord{Size: c.ObjectSize, CommittedAt: a.clock, Batches: int32(len(c.Batches))}
	if err := a.b.Set(okey, rec.encode(), nil); err != nil {
		return Result{}, err
	}
	return res, nil
}

func validCommitBatch(cb *CommitBatch, objectSize int64) bool {
	return cb.Partition >= 0 && cb.Records > 0 && cb.BatchCount > 0 &&
		cb.Position >= 0 && cb.Length > 0 && cb.Length <= objectSize-cb.Position
}

func (a *applier) part(ref partRef) (*cachedPart, error) {
	if cp, ok := a.parts[ref]; ok {
		return cp, nil
	}
	cp := new(cachedPart)
	v, ok, err := a.get(partitionKey(ref.id, ref.partition))
	if err != nil {
		return nil, err
	}
	if ok {
		if cp.st, err = decodePartitionState(v); err != nil {
			return nil, err
		}
		cp.exists = true
	}
	a.parts[ref] = cp
	return cp, nil
}

// flushParts writes dirty cached partition states in key order.
func (a *applier) flushParts() error {
	var dirty []partRef
	for ref, cp := range a.parts {
		if cp.dirty {
			dirty = append(dirty, ref)
		}
	}
	slices.SortFunc(dirty, func(x, y partRef) int {
		if c := bytes.Compare(x.id[:], y.id[:]); c != 0 {
			return c
		}
		return int(x.partition) - int(y.partition)
	})
	for _, ref := range dirty {
		cp := a.parts[ref]
		a.valBuf = cp.st.encode(a.valBuf[:0])
		if err := a.b.Set(partitionKey(ref.id, ref.partition), a.valBuf, nil); err != nil {
			return err
		}
		cp.dirty = false
	}
	return nil
}
