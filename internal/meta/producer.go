package meta

// Idempotent producers: producer id allocation and the per-partition
// sequence state that lets apply refuse duplicates and gaps, as Kafka's
// ProducerStateManager does, but as part of the deterministic apply so
// every copy answers a retried batch the same way.

import (
	"encoding/binary"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Key prefixes of producer state (tabled in the package doc).
const (
	// prefixProducerNextID holds the next producer id to hand out.
	prefixProducerNextID byte = 0x10
	// prefixProducerState starts (topic id, partition, producer id)
	// keys: a topic's producer state is one range, dropped with it.
	prefixProducerState byte = 0x11
)

// Limits of idempotence. Like apply's other limits they are part of what
// apply means: changing one changes results, so it needs a new command
// version or a feature level in the log.
const (
	// ProducerBatchWindow is how many of a producer's latest batches per
	// partition apply remembers, so a retry of any of them is answered
	// with its original offset. It is Kafka's: a client keeps at most 5
	// requests in flight per partition when idempotent.
	ProducerBatchWindow = 5
	// ProducerIDExpirationMs is Kafka's producer.id.expiration.ms
	// default: a producer's state in a partition is forgotten once it has
	// not written there for this long, by the log clock. Apply drops it
	// when it next touches it; nothing sweeps state no one touches (see
	// the package doc).
	ProducerIDExpirationMs = 24 * 60 * 60 * 1000
	// maxBumpableEpoch is the highest epoch AllocateProducerID bumps;
	// from it a new producer id is handed out instead, as Kafka's
	// coordinator does when an epoch is exhausted (Short.MaxValue - 1).
	maxBumpableEpoch = math.MaxInt16 - 2
)

var keyProducerNextID = []byte{prefixProducerNextID}

// AllocateProducerID hands out a producer id and epoch for an idempotent
// producer (InitProducerId without a transactional id).
//
// ProducerID -1 asks for a new id, epoch 0. A known id (one allocated
// before) with its epoch asks for an epoch bump (KIP-360): the answer is
// the same id with epoch + 1, which fences the producer's older epoch in
// every partition it writes next, and whose first batch per partition
// must start at sequence 0. A bump of an exhausted epoch, or of an id
// never handed out, gets a new id instead. Kafka's own coordinator
// ignores the fields for non-transactional producers and always hands
// out a new id; bumping keeps the id stable over a producer's lifetime.
// Result: ProducerID and ProducerEpoch.
type AllocateProducerID struct {
	ProducerID    int64
	ProducerEpoch int16
}

func (AllocateProducerID) Type() CommandType { return TypeAllocateProducerID }
func (AllocateProducerID) version() uint16   { return 1 }

func (c AllocateProducerID) appendPayload(b []byte) []byte {
	b = appendVarint(b, c.ProducerID)
	return appendVarint(b, int64(c.ProducerEpoch))
}

func decodeAllocateProducerIDV1(p []byte) (AllocateProducerID, error) {
	r := &reader{b: p}
	var c AllocateProducerID
	c.ProducerID = r.varint()
	c.ProducerEpoch = r.int16()
	return c, r.done()
}

func (a *Applier) allocateProducerID(c AllocateProducerID) (Result, error) {
	var next int64
	v, ok, err := a.get(keyProducerNextID)
	if err != nil {
		return Result{}, err
	}
	if ok {
		r := recordReader(v)
		next = r.varint()
		if err := r.done(); err != nil {
			return Result{}, corrupt("next producer id", err)
		}
	}
	if c.ProducerID >= 0 && c.ProducerID < next && c.ProducerEpoch >= 0 && c.ProducerEpoch <= maxBumpableEpoch {
		return Result{ProducerID: c.ProducerID, ProducerEpoch: c.ProducerEpoch + 1}, nil
	}
	if next == math.MaxInt64 {
		return failed(kerr.UnknownServerError, "producer ids exhausted"), nil
	}
	b := appendVarint([]byte{recordV1}, next+1)
	if err := a.b.Set(keyProducerNextID, b); err != nil {
		return Result{}, err
	}
	return Result{ProducerID: next, ProducerEpoch: 0}, nil
}

// producerState is what apply keeps of one producer in one partition:
// its epoch and its latest batches, oldest first.
type producerState struct {
	Epoch int16
	// LastWriteMs is the log clock of its last accepted batch.
	LastWriteMs int64
	Batches     []producerBatch
}

// producerBatch is one accepted batch: its sequence range and the offset
// its first record got.
type producerBatch struct {
	FirstSeq, LastSeq int32
	BaseOffset        int64
}

func (s *producerState) encode(b []byte) []byte {
	b = append(b, recordV1)
	b = appendVarint(b, int64(s.Epoch))
	b = appendVarint(b, s.LastWriteMs)
	b = appendUvarint(b, uint64(len(s.Batches)))
	for _, pb := range s.Batches {
		b = appendVarint(b, int64(pb.FirstSeq))
		b = appendVarint(b, int64(pb.LastSeq))
		b = appendVarint(b, pb.BaseOffset)
	}
	return b
}

func decodeProducerState(v []byte) (producerState, error) {
	r := recordReader(v)
	var s producerState
	s.Epoch = r.int16()
	s.LastWriteMs = r.varint()
	n := r.count(3)
	if n > ProducerBatchWindow {
		r.fail(errTooMany)
	}
	if r.err == nil && n > 0 {
		s.Batches = make([]producerBatch, n)
	}
	for i := 0; i < len(s.Batches) && r.err == nil; i++ {
		s.Batches[i] = producerBatch{FirstSeq: r.int32(), LastSeq: r.int32(), BaseOffset: r.varint()}
	}
	if err := r.done(); err != nil {
		return producerState{}, corrupt("producer state", err)
	}
	return s, nil
}

func producerStateKey(dst []byte, id TopicID, partition int32, producerID int64) []byte {
	dst = append(dst, prefixProducerState)
	dst = append(dst, id[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(partition))
	return binary.BigEndian.AppendUint64(dst, uint64(producerID))
}

// lastSequence is the sequence of a batch's last record: sequences wrap
// from MaxInt32 to 0, as Kafka's DefaultRecordBatch.incrementSequence.
func lastSequence(base, records int32) int32 {
	return int32((int64(base) + int64(records) - 1) % (math.MaxInt32 + 1))
}

// inSequence reports whether next may follow last.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}

// pendingProducer is the state an idempotent batch updates once apply has
// given it offsets.
type pendingProducer struct {
	key   []byte
	state producerState
	first int32
	last  int32
}

// checkProducer applies Kafka's idempotence rules to an idempotent batch
// (ProducerID >= 0) before it gets offsets. done means br is the batch's
// whole answer: an error code, or, for a duplicate of one of the
// producer's latest batches, the original base offset with nothing
// written. Otherwise the returned state, nil for a batch without a
// producer id, goes to recordProducer after the offsets are assigned.
//
// The rules are those of Kafka's ProducerAppendInfo (3.x): a lower epoch
// than the stored one is INVALID_PRODUCER_EPOCH; a higher one must start
// at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER; in the stored epoch
// the batch must continue the last one's sequence. A producer this
// partition has no state of (never seen, or expired) is accepted at any
// sequence, as Kafka does since KIP-360 rather than answer
// UNKNOWN_PRODUCER_ID. A CommitBatch of several Kafka batches is checked
// as one range of Records sequences: the Kafka layer sends one batch per
// partition, as Produce v3+ requires.
func (a *Applier) checkProducer(cb *CommitBatch, cp *cachedPart, br *BatchResult) (*pendingProducer, bool, error) {
	if cb.ProducerID < 0 {
		return nil, false, nil
	}
	if cb.ProducerEpoch < 0 || cb.BaseSequence < 0 {
		br.Code = kerr.InvalidRecord.Code
		return nil, true, nil
	}
	p := &pendingProducer{
		key:   producerStateKey(nil, cb.TopicID, cb.Partition, cb.ProducerID),
		first: cb.BaseSequence,
		last:  lastSequence(cb.BaseSequence, cb.Records),
	}
	v, ok, err := a.get(p.key)
	if err != nil {
		return nil, false, err
	}
	if ok {
		if p.state, err = decodeProducerState(v); err != nil {
			return nil, false, err
		}
		if a.clock-p.state.LastWriteMs >= ProducerIDExpirationMs {
			ok = false
			p.state = producerState{}
			if err := a.b.Delete(p.key); err != nil {
				return nil, false, err
			}
		}
	}
	switch {
	case !ok:
		p.state = producerState{Epoch: cb.ProducerEpoch}
	case cb.ProducerEpoch < p.state.Epoch:
		br.Code = kerr.InvalidProducerEpoch.Code
		return nil, true, nil
	case cb.ProducerEpoch > p.state.Epoch:
		if cb.BaseSequence != 0 {
			br.Code = kerr.OutOfOrderSequenceNumber.Code
			return nil, true, nil
		}
		p.state = producerState{Epoch: cb.ProducerEpoch}
	default:
		for _, pb := range p.state.Batches {
			if pb.FirstSeq == p.first && pb.LastSeq == p.last {
				// Kafka answers a duplicate with the original offset
				// and no error: the producer's retry succeeded.
				br.BaseOffset = pb.BaseOffset
				br.LogStartOffset = cp.st.LogStartOffset
				return nil, true, nil
			}
		}
		if n := len(p.state.Batches); n > 0 && !inSequence(p.state.Batches[n-1].LastSeq, p.first) {
			br.Code = kerr.OutOfOrderSequenceNumber.Code
			return nil, true, nil
		}
	}
	return p, false, nil
}

// recordProducer stores an accepted batch in its producer's state.
func (a *Applier) recordProducer(p *pendingProducer, baseOffset int64) error {
	if p == nil {
		return nil
	}
	s := &p.state
	s.LastWriteMs = a.clock
	s.Batches = append(s.Batches, producerBatch{FirstSeq: p.first, LastSeq: p.last, BaseOffset: baseOffset})
	if n := len(s.Batches); n > ProducerBatchWindow {
		s.Batches = s.Batches[n-ProducerBatchWindow:]
	}
	a.valBuf = s.encode(a.valBuf[:0])
	return a.b.Set(p.key, a.valBuf)
}
