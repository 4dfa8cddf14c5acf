package meta

import (
	"encoding/binary"
	"math"
)

// ProducerLastOffsets returns, for each producer still active in a
// partition at log clock now (its state there is younger than
// ProducerIDExpirationMs), the offset of the last record of its latest
// batch: what Kafka's cleaner keeps a batch for
// (lastRecordsOfActiveProducers), so the producer's sequence stays in
// the log.
func (v *View) ProducerLastOffsets(id TopicID, partition int32, now int64) (map[int64]int64, error) {
	start, end := partitionSpan(prefixProducerState, id, partition)
	it, err := v.r.NewIter(start, end)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := map[int64]int64{}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(start)+8 {
			continue
		}
		st, err := decodeProducerState(it.Value())
		if err != nil {
			return nil, err
		}
		n := len(st.Batches)
		if n == 0 || now-st.LastWriteMs >= ProducerIDExpirationMs {
			continue
		}
		b := st.Batches[n-1]
		span := int64(b.LastSeq) - int64(b.FirstSeq)
		if span < 0 { // the sequence wrapped past MaxInt32
			span += math.MaxInt32 + 1
		}
		out[int64(binary.BigEndian.Uint64(k[len(start):]))] = b.BaseOffset + span
	}
	return out, it.Error()
}
