package source

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Headers a dead-lettered record carries beside its own, saying where
// it came from and why it was refused (as Kafka Connect's
// __connect.errors.* headers do).
const (
	HeaderSource    = "strand.source"
	HeaderTopic     = "strand.source.topic"
	HeaderPartition = "strand.source.partition"
	HeaderOffset    = "strand.source.offset"
	HeaderReason    = "strand.error.reason"
	HeaderSQLState  = "strand.error.sqlstate"
	HeaderMessage   = "strand.error.message"
)

// deadLetter is the record that carries bad record r to topic.
func deadLetter(def *Def, r *kgo.Record, b *BadRecord) *kgo.Record {
	h := append([]kgo.RecordHeader(nil), r.Headers...)
	h = append(h,
		kgo.RecordHeader{Key: HeaderSource, Value: []byte(def.Name)},
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderPartition, Value: []byte(strconv.Itoa(int(r.Partition)))},
		kgo.RecordHeader{Key: HeaderOffset, Value: []byte(strconv.FormatInt(r.Offset, 10))},
		kgo.RecordHeader{Key: HeaderReason, Value: []byte(b.Reason)},
		kgo.RecordHeader{Key: HeaderSQLState, Value: []byte(b.SQLState())},
		kgo.RecordHeader{Key: HeaderMessage, Value: []byte(b.Err.Error())},
	)
	return &kgo.Record{Topic: def.DeadLetterTopic, Key: r.Key, Value: r.Value, Headers: h, Timestamp: r.Timestamp}
}

// produceDeadLetters writes rs and waits for every acknowledgement: a
// bad record counts as consumed only once its copy is safe.
func produceDeadLetters(ctx context.Context, cl *kgo.Client, rs []*kgo.Record) error {
	if len(rs) == 0 {
		return nil
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return fmt.Errorf("source: dead-letter topic %s: %w", rs[0].Topic, err)
	}
	return nil
}
