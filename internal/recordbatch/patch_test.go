package recordbatch_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// consume runs franz-go's own fetch-response processing (CRC checks,
// decompression, control-record and aborted-transaction filtering) over the
// given batches, as a kgo consumer at offset `from` would.
func consume(t *testing.T, batches []byte, from int64, opts kgo.ProcessFetchPartitionOpts, aborted ...kmsg.FetchResponseTopicPartitionAbortedTransaction) (recs []*kgo.Record, next int64) {
	t.Helper()
	opts.Offset = from
	opts.Topic = "t"
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.HighWatermark = 1 << 40
	rp.LastStableOffset = 1 << 40
	rp.RecordBatches = batches
	rp.AbortedTransactions = aborted
	fp, next := kgo.ProcessFetchPartition(opts, &rp, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		t.Fatalf("kgo.ProcessFetchPartition: %v", fp.Err)
	}
	return fp.Records, next
}

func TestSetBaseOffsetConsumedByKgo(t *testing.T) {
	for _, c := range allCompressions {
		t.Run(c.String(), func(t *testing.T) {
			o := batchtest.Options{Records: 5, KeyBytes: 4, ValueBytes: 64, Compression: c}
			stored := batchtest.Build(t, o)
			if _, err := recordbatch.Validate(stored, maxMessageBytes); err != nil {
				t.Fatal(err)
			}
			out := bytes.Clone(stored) // the fetch path patches a copy
			const base = 1_000_000
			recordbatch.SetBaseOffset(out, base)
			recordbatch.SetPartitionLeaderEpoch(out, 7)
			if err := recordbatch.CheckCRC(out); err != nil {
				t.Fatalf("patched batch: %v", err)
			}
			if !bytes.Equal(out[16:], stored[16:]) {
				t.Fatal("patching touched bytes beyond the offset and epoch")
			}
			recs, next := consume(t, out, base+2, kgo.ProcessFetchPartitionOpts{})
			if len(recs) != 3 || next != base+5 {
				t.Fatalf("consumed %d records, next offset %d; want 3, %d", len(recs), next, base+5)
			}
			for i, r := range recs {
				idx := i + 2
				if r.Offset != base+int64(idx) || r.LeaderEpoch != 7 || !bytes.Equal(r.Value, batchtest.Value(o, idx)) || !bytes.Equal(r.Key, batchtest.Key(o, idx)) {
					t.Fatalf("record %d: offset %d epoch %d key %q", i, r.Offset, r.LeaderEpoch, r.Key)
				}
			}
		})
	}
}

func TestSetLogAppendTime(t *testing.T) {
	for _, c := range allCompressions {
		t.Run(c.String(), func(t *testing.T) {
			o := batchtest.Options{Records: 4, ValueBytes: 20, Compression: c}
			b := batchtest.Build(t, o)
			const ts = 1_800_000_000_123
			recordbatch.SetLogAppendTime(b, ts)
			if err := recordbatch.CheckCRC(b); err != nil {
				t.Fatalf("after SetLogAppendTime: %v", err)
			}
			h, err := recordbatch.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.TimestampType() != recordbatch.LogAppendTime || h.MaxTimestamp != ts || h.FirstTimestamp != batchtest.DefaultTimestamp || h.Compression() != c {
				t.Fatalf("header %+v", h)
			}
			// A client batch must not claim LogAppendTime; a stored one may.
			if _, err := recordbatch.Validate(b, 0); !errors.Is(err, recordbatch.ErrTimestampType) {
				t.Fatalf("Validate: %v, want ErrTimestampType", err)
			}
			again := bytes.Clone(b)
			recordbatch.SetLogAppendTime(again, ts)
			if !bytes.Equal(again, b) {
				t.Fatal("second SetLogAppendTime with the same time changed the batch")
			}

			recs, _ := consume(t, b, 0, kgo.ProcessFetchPartitionOpts{})
			if len(recs) != 4 {
				t.Fatalf("consumed %d records", len(recs))
			}
			for _, r := range recs {
				if !r.Timestamp.Equal(time.UnixMilli(ts)) || r.Attrs.TimestampType() != 1 {
					t.Fatalf("record %d: timestamp %v type %d", r.Offset, r.Timestamp, r.Attrs.TimestampType())
				}
			}
		})
	}
}

func TestControlBatchDecodesWithKmsg(t *testing.T) {
	tests := []struct {
		name   string
		commit bool
		typ    kmsg.ControlRecordKeyType
	}{
		{"commit", true, kmsg.ControlRecordKeyTypeCommit},
		{"abort", false, kmsg.ControlRecordKeyTypeAbort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const (
				pid       = 77
				epoch     = 4
				offset    = 123456
				ts        = 1_700_000_111_000
				coordEpch = 9
			)
			b := recordbatch.ControlBatch(pid, epoch, tt.commit, offset, ts, coordEpch)
			if len(b) != recordbatch.ControlBatchSize {
				t.Fatalf("size %d, want %d", len(b), recordbatch.ControlBatchSize)
			}
			if err := recordbatch.CheckCRC(b); err != nil {
				t.Fatal(err)
			}
			rb, recs := batchtest.Decode(t, b)
			if rb.FirstOffset != offset || rb.Attributes != 0x30 || rb.ProducerID != pid || rb.ProducerEpoch != epoch ||
				rb.FirstSequence != -1 || rb.LastOffsetDelta != 0 || rb.FirstTimestamp != ts || rb.MaxTimestamp != ts ||
				rb.PartitionLeaderEpoch != -1 || rb.NumRecords != 1 {
				t.Fatalf("batch %+v", rb)
			}
			var key kmsg.ControlRecordKey
			if err := key.ReadFrom(recs[0].Key); err != nil || key.Version != 0 || key.Type != tt.typ {
				t.Fatalf("control key %+v, %v", key, err)
			}
			var val kmsg.EndTxnMarker
			if err := val.ReadFrom(recs[0].Value); err != nil || val.Version != 0 || val.CoordinatorEpoch != coordEpch {
				t.Fatalf("marker value %+v, %v", val, err)
			}
			if len(recs[0].Headers) != 0 || recs[0].OffsetDelta != 0 || recs[0].TimestampDelta64 != 0 {
				t.Fatalf("record %+v", recs[0])
			}
			if _, err := recordbatch.Validate(recordbatch.ControlBatch(pid, epoch, tt.commit, 0, ts, coordEpch), 0); !errors.Is(err, recordbatch.ErrControlBatch) {
				t.Fatalf("a client may not send a control batch; Validate: %v", err)
			}

			// kgo hides control records unless asked to keep them, but
			// still steps past their offset.
			recsKgo, next := consume(t, b, offset, kgo.ProcessFetchPartitionOpts{})
			if len(recsKgo) != 0 || next != offset+1 {
				t.Fatalf("kgo returned %d records, next %d", len(recsKgo), next)
			}
			recsKgo, _ = consume(t, b, offset, kgo.ProcessFetchPartitionOpts{KeepControlRecords: true})
			if len(recsKgo) != 1 || !recsKgo[0].Attrs.IsControl() || !recsKgo[0].Attrs.IsTransactional() || recsKgo[0].ProducerID != pid {
				t.Fatalf("kept control records: %+v", recsKgo)
			}
		})
	}
}

func TestAppendControlBatch(t *testing.T) {
	dst := []byte("prefix")
	dst = recordbatch.AppendControlBatch(dst, 1, 2, true, 3, 4, 5)
	if string(dst[:6]) != "prefix" || !bytes.Equal(dst[6:], recordbatch.ControlBatch(1, 2, true, 3, 4, 5)) {
		t.Fatal("AppendControlBatch differs from ControlBatch")
	}
	buf := make([]byte, 0, recordbatch.ControlBatchSize)
	if a := testing.AllocsPerRun(100, func() { buf = recordbatch.AppendControlBatch(buf[:0], 1, 2, false, 3, 4, 5) }); a != 0 {
		t.Fatalf("AppendControlBatch with capacity allocated %v times", a)
	}
}

// TestReadCommittedWithMarkers is the fetch path's transaction story end to
// end on kgo's consumer logic: data batches patched to their offsets, then a
// synthesized marker, filtered by isolation level and the aborted list.
func TestReadCommittedWithMarkers(t *testing.T) {
	const pid, epoch = 500, 1
	data := batchtest.Build(t, batchtest.Options{Records: 3, ValueBytes: 8, ProducerID: pid, ProducerEpoch: epoch, Transactional: true, Compression: recordbatch.CompressionSnappy})
	recordbatch.SetBaseOffset(data, 10)
	// Non-transactional data after the marker (which holds offset 13).
	other := batchtest.Build(t, batchtest.Options{Records: 2, ValueBytes: 8})
	recordbatch.SetBaseOffset(other, 14)

	tests := []struct {
		name      string
		commit    bool
		isolation kgo.IsolationLevel
		aborted   []kmsg.FetchResponseTopicPartitionAbortedTransaction
		want      []int64
	}{
		{"commit read_committed", true, kgo.ReadCommitted(), nil, []int64{10, 11, 12, 14, 15}},
		{"abort read_committed", false, kgo.ReadCommitted(), []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: pid, FirstOffset: 10}}, []int64{14, 15}},
		{"abort read_uncommitted", false, kgo.ReadUncommitted(), []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: pid, FirstOffset: 10}}, []int64{10, 11, 12, 14, 15}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			batches := bytes.Clone(data)
			batches = recordbatch.AppendControlBatch(batches, pid, epoch, tt.commit, 13, 1_700_000_000_100, 0)
			batches = append(batches, other...)

			recs, next := consume(t, batches, 0, kgo.ProcessFetchPartitionOpts{IsolationLevel: tt.isolation}, tt.aborted...)
			var got []int64
			for _, r := range recs {
				got = append(got, r.Offset)
			}
			if !slices.Equal(got, tt.want) || next != 16 {
				t.Fatalf("offsets %v next %d; want %v next 16", got, next, tt.want)
			}
		})
	}
}
