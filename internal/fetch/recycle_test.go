package fetch_test

import (
	"bytes"
	"testing"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/objstore/memobj"
)

// TestRecycle reads a partition, gives its answer back, and reads
// another partition and the first one from elsewhere into it: the
// answers copied into a recycled buffer must be those of a reader that
// recycles nothing, whatever the buffer held before.
func TestRecycle(t *testing.T) {
	cache := fetch.NewCache(1 << 30)
	e := newEnv(t, memobj.New(), 2, cache)
	for i := range 12 {
		e.produce(t, 0, build(t, 16, 1024, uint64(i)))
		e.produce(t, 1, build(t, 16, 1024, uint64(100+i)))
	}
	v := e.view(t)
	r := fetch.NewReader(e.store, cache)
	plain := fetch.NewReader(e.store, cache)
	read := func(r *fetch.Reader, partition int32, offset int64) []byte {
		t.Helper()
		res, err := r.Read(testCtx(t), v, e.topic, partition, offset, 1<<20)
		if err != nil || res.Err != 0 {
			t.Fatalf("Read(%d, %d) = %d, %v", partition, offset, res.Err, err)
		}
		return res.Records
	}

	first := read(r, 0, 0)
	if len(first) < 128<<10 {
		t.Fatalf("answer of %d bytes, want one large enough to recycle", len(first))
	}
	at := &first[0]
	r.Recycle(first)
	for _, tc := range []struct {
		partition int32
		offset    int64
	}{{1, 16 * 5}, {0, 16 * 6}, {1, 16 * 8}} {
		got := read(r, tc.partition, tc.offset)
		if &got[0] != at {
			t.Fatalf("partition %d at %d: the answer was not copied into the recycled buffer", tc.partition, tc.offset)
		}
		if want := read(plain, tc.partition, tc.offset); !bytes.Equal(got, want) {
			t.Fatalf("partition %d at %d: answer in a recycled buffer differs from a fresh one (%d and %d bytes)",
				tc.partition, tc.offset, len(got), len(want))
		}
		r.Recycle(got)
	}
}
