package segment_test

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/segment"
)

func fuzzObjects(f *testing.F) [][]byte {
	b1 := batchtest.Build(f, batchtest.Options{Records: 2, ValueBytes: 8})
	b2 := batchtest.Build(f, batchtest.Options{Records: 1, ValueBytes: 3, FirstTimestamp: 5})
	var objs [][]byte
	for _, adds := range [][]add{
		nil,
		{{topic(1), 0, b1}},
		{{topic(1), 0, b1}, {topic(1), 1, b2}, {topic(2), 0, b1}},
	} {
		w := segment.NewWriter()
		for _, a := range adds {
			if _, err := w.Add(a.topic, a.partition, a.batches); err != nil {
				f.Fatal(err)
			}
		}
		objs = append(objs, append([]byte(nil), w.Finish()...))
	}
	return objs
}

// checkChunks asserts what any successfully decoded footer must satisfy,
// including that decoding allocated no more chunks than the input could
// describe.
func checkChunks(t *testing.T, chunks []segment.Chunk, inputLen int, objSize int64) {
	t.Helper()
	if len(chunks) > inputLen/segment.EntrySize {
		t.Fatalf("%d chunks from %d input bytes", len(chunks), inputLen)
	}
	next := int64(segment.HeaderSize)
	for i, c := range chunks {
		if c.Offset != next || c.Length <= 0 || c.Batches <= 0 || c.Records < 0 {
			t.Fatalf("chunk %d: %+v", i, c)
		}
		next = c.End()
	}
	if next > objSize-segment.TrailerSize-int64(len(chunks))*segment.EntrySize {
		t.Fatalf("chunks end at %d in a %d-byte object", next, objSize)
	}
}

// FuzzReadFooter: whole objects, through ReadFooter and Verify. With
// fixCRC the footer CRC is recomputed first, so the fuzzer reaches the
// entry checks behind it.
func FuzzReadFooter(f *testing.F) {
	for _, o := range fuzzObjects(f) {
		f.Add(o, false)
		f.Add(o, true)
	}
	table := crc32.MakeTable(crc32.Castagnoli)
	f.Fuzz(func(t *testing.T, obj []byte, fixCRC bool) {
		if fixCRC && len(obj) >= segment.TrailerSize {
			tr := obj[len(obj)-segment.TrailerSize:]
			if flen := int64(binary.BigEndian.Uint32(tr)); flen <= int64(len(obj)-segment.TrailerSize) {
				start := len(obj) - segment.TrailerSize - int(flen)
				binary.BigEndian.PutUint32(tr[8:], crc32.Checksum(obj[start:len(obj)-segment.TrailerSize+8], table))
			}
		}
		chunks, err := segment.ReadFooter(obj)
		if err != nil {
			if !errors.Is(err, segment.ErrCorrupt) && !errors.Is(err, segment.ErrVersion) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		checkChunks(t, chunks, len(obj), int64(len(obj)))
		if _, err := segment.Verify(obj); err != nil && !errors.Is(err, segment.ErrCorrupt) {
			t.Fatalf("unclassified Verify error: %v", err)
		}
	})
}

// FuzzReadFooterFromTail: a tail and a claimed object size, which may be
// anything, including far larger than the tail.
func FuzzReadFooterFromTail(f *testing.F) {
	for _, o := range fuzzObjects(f) {
		f.Add(o, int64(0))
		f.Add(o[len(o)/2:], int64(len(o)-len(o)/2))
	}
	f.Fuzz(func(t *testing.T, tail []byte, extra int64) {
		objSize := int64(len(tail)) + extra
		chunks, err := segment.ReadFooterFromTail(tail, objSize)
		var short *segment.ShortTailError
		switch {
		case errors.As(err, &short):
			if short.Need <= int64(len(tail)) || short.Need > objSize {
				t.Fatalf("ShortTailError needs %d with %d of %d bytes", short.Need, len(tail), objSize)
			}
		case err != nil:
			if !errors.Is(err, segment.ErrCorrupt) && !errors.Is(err, segment.ErrVersion) {
				t.Fatalf("unclassified error: %v", err)
			}
		default:
			checkChunks(t, chunks, len(tail), objSize)
		}
	})
}
