// Package batchtest builds and decodes Kafka v2 record batches for tests,
// with franz-go's own encoders: records and batch header from kmsg, and
// compression from kgo's default compressor (the code a franz-go producer
// runs). Tests of the produce and fetch paths use it to get batches a real
// client would send, without a client.
package batchtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/recordbatch"
)

// Options describe a batch. The zero value is one record with an empty value,
// no key, uncompressed, not idempotent.
type Options struct {
	Records    int // at least 1; 0 means 1
	KeyBytes   int // 0 means a null key
	ValueBytes int
	Headers    int // headers per record

	Compression recordbatch.Compression

	// ProducerID 0 means not idempotent (-1 on the wire, as are the epoch
	// and sequence).
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	Transactional bool

	// FirstTimestamp is the first record's timestamp in milliseconds;
	// later records are 1 ms apart. 0 means a fixed default.
	FirstTimestamp int64

	// Seed varies the keys' and values' contents between batches.
	Seed uint64

	// Values and Keys, when Values is set, are the records' values and
	// keys as given (nil: null; Keys may be shorter), instead of
	// Records, KeyBytes and ValueBytes.
	Values, Keys [][]byte
}

// DefaultTimestamp is the first record's timestamp when Options leave it 0.
const DefaultTimestamp = 1_700_000_000_000

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Build encodes a batch described by o, with a correct CRC and baseOffset 0,
// as a producer sends it.
func Build(tb testing.TB, o Options) []byte {
	tb.Helper()
	b, err := build(o)
	if err != nil {
		tb.Fatalf("batchtest.Build(%+v): %v", o, err)
	}
	return b
}

// Value returns the value Build puts in record i of a batch built with o, so
// tests can check what a consumer decodes.
func Value(o Options, i int) []byte { return fill(o.ValueBytes, o.Seed, uint64(i), 'v') }

// Key returns the key Build puts in record i (nil for a null key).
func Key(o Options, i int) []byte {
	if o.KeyBytes == 0 {
		return nil
	}
	return fill(o.KeyBytes, o.Seed, uint64(i), 'k')
}

// fill makes compressible but seed- and index-dependent bytes, so the codecs
// have something to do and records differ.
func fill(n int, seed, i uint64, tag byte) []byte {
	b := make([]byte, 0, n)
	word := fmt.Appendf(nil, "%c%d-%d ", tag, seed, i)
	for len(b) < n {
		b = append(b, word...)
	}
	return b[:n]
}

func build(o Options) ([]byte, error) {
	n := max(o.Records, 1)
	if len(o.Values) > 0 {
		n = len(o.Values)
	}
	ts := o.FirstTimestamp
	if ts == 0 {
		ts = DefaultTimestamp
	}
	var raw []byte
	for i := range n {
		r := kmsg.Record{
			TimestampDelta64: int64(i),
			OffsetDelta:      int32(i),
			Key:              Key(o, i),
			Value:            Value(o, i),
		}
		if len(o.Values) > 0 {
			r.Key, r.Value = nil, o.Values[i]
			if i < len(o.Keys) {
				r.Key = o.Keys[i]
			}
		}
		for h := range o.Headers {
			r.Headers = append(r.Headers, kmsg.Header{Key: fmt.Sprintf("h%d", h), Value: []byte("header-value")})
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // body size: drop the 1-byte varint of Length 0
		raw = r.AppendTo(raw)
	}

	records := raw
	if o.Compression != recordbatch.CompressionNone {
		codec, err := kgoCodec(o.Compression)
		if err != nil {
			return nil, err
		}
		c, err := kgo.DefaultCompressor(codec)
		if err != nil {
			return nil, err
		}
		out, used := c.Compress(new(bytes.Buffer), raw)
		if int8(used) != int8(o.Compression) {
			return nil, fmt.Errorf("compressor used codec %d, want %d", used, o.Compression)
		}
		records = bytes.Clone(out)
	}

	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           int16(o.Compression),
		LastOffsetDelta:      int32(n - 1),
		FirstTimestamp:       ts,
		MaxTimestamp:         ts + int64(n-1),
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(n),
		Records:              records,
	}
	if o.ProducerID != 0 {
		rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = o.ProducerID, o.ProducerEpoch, o.BaseSequence
	}
	if o.Transactional {
		rb.Attributes |= 0x10
	}
	rb.Length = int32(recordbatch.HeaderSize - recordbatch.LogOverhead + len(records))
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32c))
	return b, nil
}

func kgoCodec(c recordbatch.Compression) (kgo.CompressionCodec, error) {
	switch c {
	case recordbatch.CompressionGzip:
		return kgo.GzipCompression(), nil
	case recordbatch.CompressionSnappy:
		return kgo.SnappyCompression(), nil
	case recordbatch.CompressionLZ4:
		return kgo.Lz4Compression(), nil
	case recordbatch.CompressionZstd:
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("no codec %v", c)
}

// Decode parses a batch with kmsg and decodes its records with kgo's default
// decompressor, independently of package recordbatch, so tests can check
// what a franz-go consumer would see.
func Decode(tb testing.TB, batch []byte) (kmsg.RecordBatch, []kmsg.Record) {
	tb.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(batch); err != nil {
		tb.Fatalf("kmsg.RecordBatch.ReadFrom: %v", err)
	}
	raw := rb.Records
	if codec := rb.Attributes & 0x07; codec != 0 {
		var err error
		raw, err = kgo.DefaultDecompressor().Decompress(raw, kgo.CompressionCodecType(codec))
		if err != nil {
			tb.Fatalf("decompress codec %d: %v", codec, err)
		}
	}
	var recs []kmsg.Record
	for len(raw) > 0 {
		length, n := binary.Varint(raw)
		if n <= 0 || length < 0 || int(length) > len(raw)-n {
			tb.Fatalf("record %d: bad length", len(recs))
		}
		var r kmsg.Record
		if err := r.ReadFrom(raw[:n+int(length)]); err != nil {
			tb.Fatalf("record %d: %v", len(recs), err)
		}
		recs = append(recs, r)
		raw = raw[n+int(length):]
	}
	if len(recs) != int(rb.NumRecords) {
		tb.Fatalf("decoded %d records, header says %d", len(recs), rb.NumRecords)
	}
	return rb, recs
}

// ProduceRequest is an acks=all Produce request carrying batch to one
// partition: what a test sends raw to see a broker's own error code,
// which a client's retries would hide.
func ProduceRequest(topic string, partition int32, batch []byte, timeoutMillis int32) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, timeoutMillis
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
