package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/codec"
)

// Produce to a compacted topic (cleanup.policy holds compact): every
// record needs a key, as Kafka's LogValidator.validateKey requires, or
// the compactor would have nothing to keep it by. Kafka decompresses the
// batch to see the keys, and so does Strand here, for compacted topics
// only; the batch is then stored as the client sent it.
//
// The answer is Kafka's: INVALID_RECORD for the partition, and from
// Produce v8 a message and one ErrorRecords entry per keyless record
// (its index in the batch).

// keylessRecords returns the indexes of the records without a key in a
// validated batch, or the batch's error when its records do not decode.
func keylessRecords(batch []byte) ([]int32, *kerr.Error, string) {
	h, err := recordbatch.ParseHeader(batch)
	if err != nil {
		return nil, codeOf(recordbatch.ErrorCode(err)), err.Error()
	}
	raw, err := codec.RecordsOf(batch, h)
	if err != nil {
		return nil, codeOf(recordbatch.ErrorCode(err)), err.Error()
	}
	var keyless []int32
	err = recordbatch.EachRecord(raw, h, func(i int, r recordbatch.Record) error {
		if r.Key == nil {
			keyless = append(keyless, int32(i))
		}
		return nil
	})
	if err != nil {
		return nil, codeOf(recordbatch.ErrorCode(err)), err.Error()
	}
	return keyless, nil, ""
}

// refuseKeyless fills sp's ErrorRecords (v8+) for the keyless records
// of a compacted topic's batch and returns the partition's message, in
// Kafka's words.
func refuseKeyless(sp *kmsg.ProduceResponseTopicPartition, version int16, keyless []int32, topic string, partition int32) string {
	perRecord := fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d.", topic, partition)
	errs := make([]recordError, len(keyless))
	for i, idx := range keyless {
		errs[i] = recordError{index: idx, message: perRecord}
	}
	return refuseRecords(sp, version, errs)
}
