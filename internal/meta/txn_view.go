package meta

// The View side of transactions: what the transaction coordinator, Fetch
// (read_committed) and the admin APIs read.

import "encoding/binary"

// Txn returns a transactional id's state.
func (v *View) Txn(id string) (TxnState, bool, error) {
	val, ok, err := v.get(txnKey(id))
	if err != nil || !ok {
		return TxnState{}, false, err
	}
	s, err := decodeTxnState(id, val)
	return s, err == nil, err
}

// Txns returns every transactional id's state, sorted by id.
func (v *View) Txns() ([]TxnState, error) {
	it, err := v.r.NewIter([]byte{prefixTxn}, []byte{prefixTxn + 1})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []TxnState
	for ok := it.First(); ok; ok = it.Next() {
		s, err := decodeTxnState(string(it.Key()[1:]), it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, it.Error()
}

// TxnsDue returns the transactional ids a TxnSweep would act on at log
// clock now: timed out or expired.
func (v *View) TxnsDue(now int64) ([]string, error) {
	all, err := v.Txns()
	if err != nil {
		return nil, err
	}
	var due []string
	for i := range all {
		if txnTimedOut(&all[i], now) || txnIDExpired(&all[i], now) {
			due = append(due, all[i].TransactionalID)
		}
	}
	return due, nil
}

// OpenTxn is an ongoing transaction in one partition.
type OpenTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	// FirstOffset is its first record's offset, -1 before it wrote one.
	FirstOffset int64
}

// OpenTxns returns the transactions ongoing in a partition, by producer
// id.
func (v *View) OpenTxns(id TopicID, partition int32) ([]OpenTxn, error) {
	start, end := partitionSpan(prefixOpenTxn, id, partition)
	it, err := v.r.NewIter(start, end)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []OpenTxn
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(start)+8 {
			continue
		}
		o, err := decodeOpenTxn(it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, OpenTxn{ProducerID: int64(binary.BigEndian.Uint64(k[len(start):])), ProducerEpoch: o.Epoch, FirstOffset: o.FirstOffset})
	}
	return out, it.Error()
}

// LastStableOffset is the partition's last stable offset: the first
// offset of its oldest ongoing transaction, or the high watermark. A
// read_committed consumer reads no further.
func (v *View) LastStableOffset(id TopicID, partition int32, highWatermark int64) (int64, error) {
	open, err := v.OpenTxns(id, partition)
	if err != nil {
		return 0, err
	}
	lso := highWatermark
	for _, o := range open {
		if o.FirstOffset >= 0 {
			lso = min(lso, o.FirstOffset)
		}
	}
	return lso, nil
}

// AbortedTxn is one aborted transaction's range start in a partition, as
// Fetch's AbortedTransactions lists it.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	// LastOffset is the offset of its abort marker.
	LastOffset int64
}

// AbortedTxns returns the aborted transactions of a partition that
// overlap [from, to): their marker is at or after from and their first
// offset is before to. At most limit are returned (0: no limit), in
// marker order.
func (v *View) AbortedTxns(id TopicID, partition int32, from, to int64, limit int) ([]AbortedTxn, error) {
	_, end := partitionSpan(prefixAbortedTxn, id, partition)
	it, err := v.r.NewIter(abortedTxnKey(id, partition, max(from, 0)), end)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []AbortedTxn
	for ok := it.First(); ok && (limit <= 0 || len(out) < limit); ok = it.Next() {
		k := it.Key()
		r := recordReader(it.Value())
		t := AbortedTxn{ProducerID: r.varint(), FirstOffset: r.varint(), LastOffset: int64(binary.BigEndian.Uint64(k[len(k)-8:]))}
		if err := r.done(); err != nil {
			return nil, corrupt("aborted transaction", err)
		}
		if t.FirstOffset < to {
			out = append(out, t)
		}
	}
	return out, it.Error()
}

// ProducerInfo is a producer's state in one partition, as
// DescribeProducers reports it.
type ProducerInfo struct {
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence is the last sequence written, -1 if none.
	LastSequence int32
	// LastTimestamp is the log clock of its last write.
	LastTimestamp int64
	// CurrentTxnStartOffset is the first offset of its ongoing
	// transaction in the partition, -1 if none.
	CurrentTxnStartOffset int64
}

// Producers returns the producers with state in a partition, by id.
func (v *View) Producers(id TopicID, partition int32) ([]ProducerInfo, error) {
	start, end := partitionSpan(prefixProducerState, id, partition)
	it, err := v.r.NewIter(start, end)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	open, err := v.OpenTxns(id, partition)
	if err != nil {
		return nil, err
	}
	var out []ProducerInfo
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(start)+8 {
			continue
		}
		st, err := decodeProducerState(it.Value())
		if err != nil {
			return nil, err
		}
		pi := ProducerInfo{ProducerID: int64(binary.BigEndian.Uint64(k[len(start):])), ProducerEpoch: st.Epoch, LastSequence: -1, LastTimestamp: st.LastWriteMs, CurrentTxnStartOffset: -1}
		if n := len(st.Batches); n > 0 {
			pi.LastSequence = st.Batches[n-1].LastSeq
		}
		for _, o := range open {
			if o.ProducerID == pi.ProducerID {
				pi.CurrentTxnStartOffset = o.FirstOffset
			}
		}
		out = append(out, pi)
	}
	return out, it.Error()
}

// HasPendingTxnOffset reports whether an ongoing transaction has committed
// an offset of the group's partition (OffsetFetch's require_stable).
func (v *View) HasPendingTxnOffset(group string, id TopicID, partition int32) (bool, error) {
	start, end := spanOf(txnOffsetPartitionPrefix(group, id, partition))
	it, err := v.r.NewIter(start, end)
	if err != nil {
		return false, err
	}
	defer it.Close()
	return it.First(), it.Error()
}
