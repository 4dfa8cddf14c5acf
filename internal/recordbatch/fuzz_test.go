package recordbatch_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// minEntryBytes is the smallest whole entry Next accepts (a v0 message's
// 12-byte prefix and 14-byte minimum body), which bounds how many entries,
// and so how large a result, any input can produce.
const minEntryBytes = 26

func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, c := range allCompressions {
		seeds = append(seeds, batchtest.Build(f, batchtest.Options{Records: 3, KeyBytes: 2, ValueBytes: 16, Headers: 1, Compression: c, ProducerID: 1}))
	}
	seeds = append(seeds,
		bytes.Join(seeds[:3], nil),
		recordbatch.ControlBatch(1, 0, true, 0, 0, 0),
		legacyMessage(0),
		legacyMessage(1),
		nil,
		make([]byte, 61),
	)
	return seeds
}

// FuzzSplitValidate: no panic on any input, results alias and tile the
// input, their count is bounded by the input's size, and whatever Validate
// accepts is self-consistent.
func FuzzSplitValidate(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		batches, err := recordbatch.Split(data)
		if err == nil {
			if len(batches) == 0 || len(batches) > len(data)/minEntryBytes {
				t.Fatalf("%d batches from %d bytes", len(batches), len(data))
			}
			off := 0
			for _, b := range batches {
				if &b[0] != &data[off] {
					t.Fatal("batch does not alias the input in order")
				}
				off += len(b)
			}
			if off != len(data) {
				t.Fatalf("batches cover %d of %d bytes", off, len(data))
			}
		}
		for _, b := range batches {
			h, err := recordbatch.Validate(b, 0)
			if err != nil {
				if recordbatch.ErrorCode(err) <= 0 {
					t.Fatalf("validation error %v has no Kafka code", err)
				}
				continue
			}
			if h.Size() != len(b) || h.NumRecords <= 0 || recordbatch.CheckCRC(b) != nil {
				t.Fatalf("accepted an inconsistent batch: %+v", h)
			}
		}
		batch, h, err := recordbatch.ValidateProduce(data, 11, 0)
		if err == nil && (len(batches) != 1 || !bytes.Equal(batch, data) || h.Size() != len(data)) {
			t.Fatalf("ValidateProduce accepted what Split saw as %d batches", len(batches))
		}
	})
}

// FuzzValidateRecords fixes up batchLength and the CRC of the fuzzed bytes
// so the fuzzer reaches the header and record checks behind the CRC.
func FuzzValidateRecords(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	table := crc32.MakeTable(crc32.Castagnoli)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < recordbatch.HeaderSize {
			return
		}
		binary.BigEndian.PutUint64(data, 0)
		binary.BigEndian.PutUint32(data[8:], uint32(len(data)-recordbatch.LogOverhead))
		data[16] = 2
		binary.BigEndian.PutUint32(data[17:], crc32.Checksum(data[21:], table))
		h, err := recordbatch.Validate(data, 0)
		if err != nil {
			if recordbatch.ErrorCode(err) <= 0 {
				t.Fatalf("validation error %v has no Kafka code", err)
			}
			return
		}
		if h.NumRecords <= 0 || int64(h.LastOffsetDelta)+1 != int64(h.NumRecords) || h.IsControl() {
			t.Fatalf("accepted header %+v", h)
		}
		// Patching an accepted batch keeps it valid for the fetch path.
		recordbatch.SetLogAppendTime(data, 1)
		if err := recordbatch.CheckCRC(data); err != nil {
			t.Fatalf("after SetLogAppendTime: %v", err)
		}
	})
}
