package cli

import (
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FormatJSON selects one JSON object per record (JSONRecord) instead of
// a layout.
const FormatJSON = "json"

// DefaultFormat prints each value on its own line.
const DefaultFormat = `%v\n`

// formatHelp documents --format of consume; the language is franz-go's
// kgo.RecordFormatter, the one rpk's -f speaks.
const formatHelp = `output: "json", or an rpk-style layout (franz-go's RecordFormatter): ` +
	`%t topic, %p partition, %o offset, %k key, %v value, %d timestamp (%d{go#RFC3339#}), ` +
	`%H header count, %h{%k=%v } headers, %K/%V sizes, %v{hex|base64}, \n \t escapes`

// recordFormatter renders one record onto dst and returns the extended
// slice, so the consumer reuses one buffer for a whole fetch. p is the
// record's fetched partition (for %[ %| %]).
type recordFormatter interface {
	appendRecord(dst []byte, p *kgo.FetchPartition, r *kgo.Record) ([]byte, error)
}

// parseFormat compiles --format once, so a bad layout fails before any
// record is fetched.
func parseFormat(s string) (recordFormatter, error) {
	if s == FormatJSON {
		return jsonFormat{}, nil
	}
	f, err := kgo.NewRecordFormatter(s)
	if err != nil {
		return nil, fmt.Errorf("%w: --format %q: %v", ErrUsage, s, err)
	}
	return layoutFormat{f}, nil
}

// layoutFormat is a kgo.RecordFormatter layout.
type layoutFormat struct{ f *kgo.RecordFormatter }

func (l layoutFormat) appendRecord(dst []byte, p *kgo.FetchPartition, r *kgo.Record) ([]byte, error) {
	return l.f.AppendPartitionRecord(dst, p, r), nil
}

// JSONRecord is the shape of one line of `consume --format json`. Key and
// Value are null for a null key or value (a tombstone), so they stay
// distinct from empty ones. Bytes that are not UTF-8 become U+FFFD.
type JSONRecord struct {
	Topic     string       `json:"topic"`
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Timestamp int64        `json:"timestamp"` // Unix milliseconds
	Key       *string      `json:"key"`
	Value     *string      `json:"value"`
	Headers   []JSONHeader `json:"headers"`
}

// JSONHeader is one record header; a list, not an object, because Kafka
// allows repeated header keys.
type JSONHeader struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type jsonFormat struct{}

func (jsonFormat) appendRecord(dst []byte, _ *kgo.FetchPartition, r *kgo.Record) ([]byte, error) {
	jr := JSONRecord{
		Topic:     r.Topic,
		Partition: r.Partition,
		Offset:    r.Offset,
		Timestamp: r.Timestamp.UnixMilli(),
		Key:       bytesPtr(r.Key),
		Value:     bytesPtr(r.Value),
		Headers:   make([]JSONHeader, 0, len(r.Headers)),
	}
	for _, h := range r.Headers {
		jr.Headers = append(jr.Headers, JSONHeader{Key: h.Key, Value: string(h.Value)})
	}
	b, err := json.Marshal(jr)
	if err != nil {
		return dst, err
	}
	dst = append(dst, b...)
	return append(dst, '\n'), nil
}

func bytesPtr(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}
