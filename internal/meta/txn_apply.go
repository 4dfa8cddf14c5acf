package meta

// Apply of the transaction commands (txn.go describes the model).

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/recordbatch"
)

func (a *Applier) txn(id string) (TxnState, bool, error) {
	v, ok, err := a.get(txnKey(id))
	if err != nil || !ok {
		return TxnState{}, false, err
	}
	s, err := decodeTxnState(id, v)
	return s, err == nil, err
}

func (a *Applier) putTxn(s *TxnState) error {
	s.UpdatedMs = a.clock
	a.valBuf = s.encode(a.valBuf[:0])
	return a.b.Set(txnKey(s.TransactionalID), a.valBuf)
}

// nextProducerID takes a producer id from the 0x10 counter.
func (a *Applier) nextProducerID() (int64, bool, error) {
	var next int64
	v, ok, err := a.get(keyProducerNextID)
	if err != nil {
		return 0, false, err
	}
	if ok {
		r := recordReader(v)
		next = r.varint()
		if err := r.done(); err != nil {
			return 0, false, corrupt("next producer id", err)
		}
	}
	if next == math.MaxInt64 {
		return 0, false, nil
	}
	b := appendVarint([]byte{recordV1}, next+1)
	return next, true, a.b.Set(keyProducerNextID, b)
}

func (a *Applier) initTxnProducer(c InitTransactionalProducer) (Result, error) {
	if c.TransactionalID == "" || len(c.TransactionalID) > maxTxnIDBytes {
		return failed(kerr.InvalidRequest, "invalid transactional id"), nil
	}
	if c.TimeoutMs <= 0 || c.TimeoutMs > MaxTxnTimeoutMs {
		return failed(kerr.InvalidTransactionTimeout, "transaction timeout %d ms is not in (0, %d]", c.TimeoutMs, MaxTxnTimeoutMs), nil
	}
	s, exists, err := a.txn(c.TransactionalID)
	if err != nil {
		return Result{}, err
	}
	newID := func() (Result, bool, error) {
		id, ok, err := a.nextProducerID()
		if err != nil || !ok {
			return failed(kerr.UnknownServerError, "producer ids exhausted"), false, err
		}
		s.ProducerID, s.ProducerEpoch, s.PrevEpoch, s.PrevBy, s.PrevProducerID = id, 0, -1, BumpByInit, -1
		return Result{}, true, nil
	}
	switch {
	case !exists:
		s = TxnState{TransactionalID: c.TransactionalID}
		if res, ok, err := newID(); !ok {
			return res, err
		}
	case c.ProducerID >= 0 && c.ProducerID != s.ProducerID:
		return failed(kerr.ProducerFenced, "producer id %d is not the current one of %q", c.ProducerID, c.TransactionalID), nil
	case c.ProducerID >= 0 && c.ProducerEpoch == s.PrevEpoch && s.PrevBy != BumpByInit && s.Status != TxnOngoing:
		// A retry of the request that made the current epoch, or the
		// producer whose transaction timed out (KIP-588): the current
		// epoch already fences PrevEpoch everywhere, and bumping again
		// would fence a retry of this very request (as Kafka answers
		// a request naming lastProducerEpoch).
		return Result{ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch}, nil
	case c.ProducerID >= 0 && c.ProducerEpoch != s.ProducerEpoch && !(s.PrevBy == BumpByTimeout && c.ProducerEpoch == s.PrevEpoch):
		return failed(kerr.ProducerFenced, "epoch %d of producer %d is not current (%d)", c.ProducerEpoch, c.ProducerID, s.ProducerEpoch), nil
	default:
		prev := s.ProducerEpoch
		if s.ProducerEpoch >= maxBumpableEpoch {
			if s.Status == TxnOngoing {
				if err := a.completeTxn(&s, false); err != nil {
					return Result{}, err
				}
			}
			if res, ok, err := newID(); !ok {
				return res, err
			}
		} else {
			s.ProducerEpoch++
			s.PrevEpoch, s.PrevBy, s.PrevProducerID = prev, BumpByInit, s.ProducerID
			if c.ProducerID >= 0 {
				s.PrevBy = BumpByRequest
			}
			if s.Status == TxnOngoing {
				// Abort with the new epoch, so the markers fence the
				// old producer in every partition.
				if err := a.completeTxn(&s, false); err != nil {
					return Result{}, err
				}
			}
		}
	}
	s.TimeoutMs = c.TimeoutMs
	s.Status = TxnEmpty
	if err := a.putTxn(&s); err != nil {
		return Result{}, err
	}
	return Result{ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch}, nil
}

// txnForProducer loads a transactional id's state and checks the caller's
// producer id and epoch against it.
func (a *Applier) txnForProducer(id string, pid int64, epoch int16) (TxnState, Result, bool, error) {
	s, ok, err := a.txn(id)
	if err != nil {
		return TxnState{}, Result{}, false, err
	}
	if res := CheckTxnProducer(s, ok, id, pid, epoch); res.Code != 0 {
		return s, res, false, nil
	}
	return s, Result{}, true, nil
}

// CheckTxnProducer is the rule every transaction command applies to its
// caller's producer id and epoch against the transactional id's state s
// (found false: no state), as a failed Result or a zero one. Readers of
// a View (a verify-only AddPartitionsToTxn) answer by the same rule.
func CheckTxnProducer(s TxnState, found bool, id string, pid int64, epoch int16) Result {
	switch {
	case !found:
		return failed(kerr.TransactionalIDNotFound, "no transactional id %q", id)
	case s.ProducerID != pid:
		return failed(kerr.InvalidProducerIDMapping, "producer id %d is not %q's (%d)", pid, id, s.ProducerID)
	case s.ProducerEpoch != epoch:
		return failed(kerr.ProducerFenced, "epoch %d is not %q's current epoch %d", epoch, id, s.ProducerEpoch)
	}
	return Result{}
}

// beginIfIdle starts a transaction in s if none is ongoing.
func (a *Applier) beginIfIdle(s *TxnState) {
	if s.Status == TxnOngoing {
		return
	}
	s.Status = TxnOngoing
	s.Seq++
	s.StartMs = a.clock
	s.Partitions, s.Groups = nil, nil
}

func (a *Applier) addPartitionsToTxn(c AddPartitionsToTxn) (Result, error) {
	n := len(c.Partitions)
	s, res, ok, err := a.txnForProducer(c.TransactionalID, c.ProducerID, c.ProducerEpoch)
	if err != nil || !ok {
		return withCodes(res, n), err
	}
	added := 0
	if s.Status == TxnOngoing {
		added = len(s.Partitions)
	}
	if added+n > maxTxnPartitions {
		return withCodes(failed(kerr.InvalidRequest, "more than %d partitions in one transaction", maxTxnPartitions), n), nil
	}
	a.beginIfIdle(&s)
	res = Result{Codes: make([]int16, n)}
	topics := topicLookup{a: a}
	for i, p := range c.Partitions {
		t, ok, err := topics.get(p.Topic)
		if err != nil {
			return Result{}, err
		}
		if !ok || p.Partition < 0 || p.Partition >= t.Partitions {
			res.Codes[i] = kerr.UnknownTopicOrPartition.Code
			continue
		}
		tp := TxnPartition{TopicID: t.ID, Partition: p.Partition}
		j, found := slices.BinarySearchFunc(s.Partitions, tp, comparePartitions)
		if found {
			continue
		}
		s.Partitions = slices.Insert(s.Partitions, j, tp)
		a.keyBuf = openTxnKey(a.keyBuf[:0], t.ID, p.Partition, s.ProducerID)
		a.valBuf = openTxn{Epoch: s.ProducerEpoch, FirstOffset: -1}.encode(a.valBuf[:0])
		if err := a.b.Set(a.keyBuf, a.valBuf); err != nil {
			return Result{}, err
		}
	}
	return res, a.putTxn(&s)
}

func withCodes(r Result, n int) Result {
	r.Codes = make([]int16, n)
	for i := range r.Codes {
		r.Codes[i] = r.Code
	}
	return r
}

func (a *Applier) addOffsetsToTxn(c AddOffsetsToTxn) (Result, error) {
	if c.Group == "" || len(c.Group) > maxGroupIDBytes {
		return failed(kerr.InvalidGroupID, "invalid group id"), nil
	}
	s, res, ok, err := a.txnForProducer(c.TransactionalID, c.ProducerID, c.ProducerEpoch)
	if err != nil || !ok {
		return res, err
	}
	a.beginIfIdle(&s)
	if j, found := slices.BinarySearch(s.Groups, c.Group); !found {
		if len(s.Groups) >= maxTxnGroups {
			return failed(kerr.InvalidRequest, "more than %d groups in one transaction", maxTxnGroups), nil
		}
		s.Groups = slices.Insert(s.Groups, j, c.Group)
	}
	return Result{}, a.putTxn(&s)
}

func (a *Applier) txnOffsetCommit(c TxnOffsetCommit) (Result, error) {
	n := len(c.Offsets)
	s, res, ok, err := a.txnForProducer(c.TransactionalID, c.ProducerID, c.ProducerEpoch)
	if err != nil || !ok {
		return withCodes(res, n), err
	}
	if _, found := slices.BinarySearch(s.Groups, c.Group); s.Status != TxnOngoing || !found {
		return failAll(n, kerr.InvalidTxnState, "group %q is not in an ongoing transaction of %q", c.Group, c.TransactionalID), nil
	}
	g, exists, err := a.group(c.Group)
	if err != nil {
		return Result{}, err
	}
	if exists && c.Generation >= 0 && g.Generation > c.Generation {
		return failAll(n, kerr.IllegalGeneration, "group %q is at generation %d, commit from %d", c.Group, g.Generation, c.Generation), nil
	}
	res = Result{Codes: make([]int16, n)}
	topics := topicLookup{a: a}
	for i := range c.Offsets {
		id, co, code, err := topics.offset(&c.Offsets[i], -1)
		if err != nil {
			return Result{}, err
		}
		if res.Codes[i] = code; code != 0 {
			continue
		}
		p := pendingTxnOffset{ProducerID: s.ProducerID, Offset: co}
		a.valBuf = p.encode(a.valBuf[:0])
		if err := a.b.Set(txnOffsetKey(c.Group, id, co.Partition, s.ProducerID), a.valBuf); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

func (a *Applier) endTxn(c EndTxn) (Result, error) {
	if c.BumpEpoch {
		if s, ok, err := a.txn(c.TransactionalID); err != nil {
			return Result{}, err
		} else if ok && s.PrevBy == BumpByEndTxn && c.ProducerID == s.PrevProducerID && c.ProducerEpoch == s.PrevEpoch &&
			(c.Commit && s.Status == TxnCompleteCommit || !c.Commit && s.Status == TxnCompleteAbort) {
			// A retry of the EndTxn that bumped to the current pair.
			return Result{ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch}, nil
		}
	}
	s, res, ok, err := a.txnForProducer(c.TransactionalID, c.ProducerID, c.ProducerEpoch)
	if err != nil || !ok {
		return res, err
	}
	if c.Seq >= 0 && c.Seq != s.Seq {
		return failed(kerr.InvalidTxnState, "EndTxn names transaction %d of %q, which is at %d", c.Seq, c.TransactionalID, s.Seq), nil
	}
	ongoing := s.Status == TxnOngoing
	switch {
	case ongoing:
	case c.BumpEpoch && !c.Commit:
		// Nothing to abort: only the epoch moves on.
	case !c.BumpEpoch && (s.Status == TxnCompleteCommit && c.Commit || s.Status == TxnCompleteAbort && !c.Commit):
		return Result{ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch}, nil // a retry of the EndTxn that ended it
	default:
		return failed(kerr.InvalidTxnState, "%q is %v, cannot %s", c.TransactionalID, s.Status, map[bool]string{true: "commit", false: "abort"}[c.Commit]), nil
	}
	if c.BumpEpoch {
		prevID, prev := s.ProducerID, s.ProducerEpoch
		if s.ProducerEpoch < maxBumpableEpoch {
			s.ProducerEpoch++
		}
		if ongoing {
			if err := a.completeTxn(&s, c.Commit); err != nil {
				return Result{}, err
			}
		}
		if s.ProducerEpoch == prev {
			// Exhausted: the markers carry the last epoch of the old
			// id, the producer goes on with a new one.
			id, ok, err := a.nextProducerID()
			if err != nil || !ok {
				return failed(kerr.UnknownServerError, "producer ids exhausted"), err
			}
			s.ProducerID, s.ProducerEpoch = id, 0
		}
		s.PrevProducerID, s.PrevEpoch, s.PrevBy = prevID, prev, BumpByEndTxn
		s.Status = TxnCompleteAbort
		if c.Commit {
			s.Status = TxnCompleteCommit
		}
	} else if err := a.completeTxn(&s, c.Commit); err != nil {
		return Result{}, err
	}
	return Result{ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch}, a.putTxn(&s)
}

// completeTxn ends s's ongoing transaction: a marker with s's current
// epoch in every partition it added, its aborted ranges recorded, its
// offsets committed or dropped. The caller stores s.
func (a *Applier) completeTxn(s *TxnState, commit bool) error {
	for _, tp := range s.Partitions {
		if err := a.writeMarker(s, tp, commit); err != nil {
			return err
		}
	}
	for _, g := range s.Groups {
		if err := a.settleTxnOffsets(g, s.ProducerID, commit); err != nil {
			return err
		}
	}
	s.Status = TxnCompleteAbort
	if commit {
		s.Status = TxnCompleteCommit
	}
	return nil
}

func (a *Applier) writeMarker(s *TxnState, tp TxnPartition, commit bool) error {
	okey := openTxnKey(nil, tp.TopicID, tp.Partition, s.ProducerID)
	v, open, err := a.get(okey)
	if err != nil {
		return err
	}
	first := int64(-1)
	if open {
		o, err := decodeOpenTxn(v)
		if err != nil {
			return err
		}
		first = o.FirstOffset
		if err := a.b.Delete(okey); err != nil {
			return err
		}
	}
	cp, err := a.part(partRef{tp.TopicID, tp.Partition})
	if err != nil {
		return err
	}
	if !cp.exists {
		return nil // the topic was deleted during the transaction
	}
	off := cp.st.NextOffset
	cp.st.NextOffset++
	cp.dirty = true
	mb := CommitBatch{
		TopicID: tp.TopicID, Partition: tp.Partition,
		Length: recordbatch.ControlBatchSize, Records: 1, BatchCount: 1,
		FirstTimestamp: a.clock, MaxTimestamp: a.clock,
		ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch, BaseSequence: -1,
		Transactional: true,
	}
	attrs := uint64(indexAttrTransactional | indexAttrControl)
	if commit {
		attrs |= indexAttrCommit
	}
	a.keyBuf = indexKey(a.keyBuf[:0], tp.TopicID, tp.Partition, off)
	a.valBuf = encodeIndexValueAttrs(a.valBuf[:0], "", &mb, attrs)
	if err := a.b.Set(a.keyBuf, a.valBuf); err != nil {
		return err
	}
	if !commit && first >= 0 {
		v := appendVarint(appendVarint([]byte{recordV1}, s.ProducerID), first)
		if err := a.b.Set(abortedTxnKey(tp.TopicID, tp.Partition, off), v); err != nil {
			return err
		}
	}
	return a.fenceProducer(tp, s.ProducerID, s.ProducerEpoch)
}

// fenceProducer raises the partition's producer state to epoch, as a
// marker does in Kafka: batches of an older epoch are then refused.
func (a *Applier) fenceProducer(tp TxnPartition, pid int64, epoch int16) error {
	key := producerStateKey(nil, tp.TopicID, tp.Partition, pid)
	v, ok, err := a.get(key)
	if err != nil {
		return err
	}
	st := producerState{Epoch: epoch}
	if ok {
		if st, err = decodeProducerState(v); err != nil {
			return err
		}
		if st.Epoch < epoch {
			st = producerState{Epoch: epoch}
		}
	}
	st.LastWriteMs = a.clock
	a.valBuf = st.encode(a.valBuf[:0])
	return a.b.Set(key, a.valBuf)
}

// settleTxnOffsets commits (or drops) a producer's pending offsets of one
// group.
func (a *Applier) settleTxnOffsets(group string, pid int64, commit bool) error {
	start, end := spanOf(txnOffsetGroupPrefix(group))
	it, err := a.b.NewIter(start, end)
	if err != nil {
		return err
	}
	type pending struct {
		key []byte
		p   pendingTxnOffset
	}
	var mine []pending
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(start)+28 {
			continue
		}
		var id TopicID
		copy(id[:], k[len(start):])
		part := int32(binary.BigEndian.Uint32(k[len(start)+16:]))
		p, err := decodePendingTxnOffset(id, part, it.Value())
		if err != nil {
			it.Close()
			return err
		}
		if p.ProducerID == pid {
			mine = append(mine, pending{bytes.Clone(k), p})
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return err
	}
	if err := it.Close(); err != nil {
		return err
	}
	stored := false
	for _, m := range mine {
		if err := a.b.Delete(m.key); err != nil {
			return err
		}
		if !commit {
			continue
		}
		o := m.p.Offset
		t, ok, err := a.topicByID(o.TopicID)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := a.storeOffset(group, t.Name, o.TopicID, &o); err != nil {
			return err
		}
		stored = true
	}
	if stored {
		if _, exists, err := a.group(group); err != nil {
			return err
		} else if !exists {
			g := Group{Name: group, Kind: GroupClassic, StateTimestamp: a.clock}
			return a.putGroup(&g)
		}
	}
	return nil
}

func (a *Applier) topicByID(id TopicID) (Topic, bool, error) {
	name, ok, err := a.get(topicIDKey(id))
	if err != nil || !ok {
		return Topic{}, false, err
	}
	return a.topic(string(name))
}

func (a *Applier) txnSweep(c TxnSweep) (Result, error) {
	if len(c.TransactionalIDs) > MaxTxnSweepIDs {
		return failed(kerr.InvalidRequest, "more than %d transactional ids", MaxTxnSweepIDs), nil
	}
	for _, id := range c.TransactionalIDs {
		s, ok, err := a.txn(id)
		if err != nil {
			return Result{}, err
		}
		switch {
		case !ok:
		case txnTimedOut(&s, a.clock):
			// KIP-588: abort with a bumped epoch, so the producer's
			// next request is fenced and it re-initializes.
			prev := s.ProducerEpoch
			if s.ProducerEpoch < maxBumpableEpoch {
				s.ProducerEpoch++
				s.PrevEpoch, s.PrevBy, s.PrevProducerID = prev, BumpByTimeout, s.ProducerID
			}
			if err := a.completeTxn(&s, false); err != nil {
				return Result{}, err
			}
			if err := a.putTxn(&s); err != nil {
				return Result{}, err
			}
		case txnIDExpired(&s, a.clock):
			if err := a.b.Delete(txnKey(id)); err != nil {
				return Result{}, err
			}
		}
	}
	return Result{}, nil
}

func txnTimedOut(s *TxnState, now int64) bool {
	return s.Status == TxnOngoing && now-s.StartMs >= int64(s.TimeoutMs)
}

func txnIDExpired(s *TxnState, now int64) bool {
	return s.Status != TxnOngoing && now-s.UpdatedMs >= TxnIDExpirationMs
}

// checkTxnBatch applies KIP-890's first defence to a transactional batch:
// it is accepted only into a partition its producer's ongoing transaction
// added, in that transaction's epoch. A batch from a fenced epoch is
// INVALID_PRODUCER_EPOCH (the producer recovers by re-initializing); one
// outside any transaction is INVALID_TXN_STATE.
func (a *Applier) checkTxnBatch(cb *CommitBatch, br *BatchResult) (*pendingOpen, bool, error) {
	if !cb.Transactional {
		return nil, false, nil
	}
	if cb.ProducerID < 0 {
		br.Code = kerr.InvalidRecord.Code
		return nil, true, nil
	}
	key := openTxnKey(nil, cb.TopicID, cb.Partition, cb.ProducerID)
	v, ok, err := a.get(key)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		br.Code = kerr.InvalidTxnState.Code
		pv, pok, err := a.get(producerStateKey(nil, cb.TopicID, cb.Partition, cb.ProducerID))
		if err != nil {
			return nil, false, err
		}
		if pok {
			if st, err := decodeProducerState(pv); err == nil && st.Epoch > cb.ProducerEpoch {
				br.Code = kerr.InvalidProducerEpoch.Code
			}
		}
		return nil, true, nil
	}
	o, err := decodeOpenTxn(v)
	if err != nil {
		return nil, false, err
	}
	switch {
	case cb.ProducerEpoch < o.Epoch:
		br.Code = kerr.InvalidProducerEpoch.Code
		return nil, true, nil
	case cb.ProducerEpoch > o.Epoch:
		br.Code = kerr.InvalidTxnState.Code
		return nil, true, nil
	}
	if o.FirstOffset >= 0 {
		return nil, false, nil
	}
	return &pendingOpen{key: key, open: o}, false, nil
}

// pendingOpen is an open transaction whose first offset in the partition
// the batch being applied sets.
type pendingOpen struct {
	key  []byte
	open openTxn
}

func (a *Applier) recordTxnFirst(p *pendingOpen, baseOffset int64) error {
	if p == nil {
		return nil
	}
	p.open.FirstOffset = baseOffset
	a.valBuf = p.open.encode(a.valBuf[:0])
	return a.b.Set(p.key, a.valBuf)
}
