package loglettest

import (
	"github.com/strandkafka/strand/internal/sharedlog"
)

func testReopenEmpty(r *reopener) {
	r.reopen()
	r.wantTail(0, false)
	r.wantEmptyRead(0, maxPos)
	if pos := r.append([]byte("first")); pos != 0 {
		r.t.Fatalf("first append after reopening an empty loglet landed at %d", pos)
	}
	r.reopen()
	r.wantEntries(0, [][]byte{[]byte("first")})
}

func testReopen(r *reopener) {
	want := r.appendN("durable", r.o.Entries)
	// Sizes the sequence above lacks: empty and large.
	big := make([]byte, min(r.o.MaxEntryBytes, 256<<10))
	for i := range big {
		big[i] = byte(i * 13)
	}
	for _, data := range [][]byte{{}, big, []byte("last")} {
		r.append(data)
		want = append(want, data)
	}
	n := sharedlog.Pos(len(want))

	r.reopen()
	r.wantTail(n, false)
	r.wantEntries(0, want)
	r.wantEmptyRead(n, maxPos)
	if pos := r.append([]byte("after reopen")); pos != n {
		r.t.Fatalf("append after reopen landed at %d, want %d", pos, n)
	}

	r.reopen()
	r.wantTail(n+1, false)
	r.wantEntries(0, append(want, []byte("after reopen")))
}

func testReopenSealed(r *reopener) {
	want := r.appendN("sealed", 3)
	r.seal()
	r.reopen()
	r.wantTail(3, true)
	r.wantAppendSealed()
	r.wantEntries(0, want)
	r.seal() // still idempotent
	r.reopen()
	r.wantTail(3, true)
}

func testReopenTrimmed(r *reopener) {
	want := r.appendN("trimmed", 20)
	r.trim(7)
	r.reopen()
	r.wantTail(20, false)
	r.wantTrimmed(6)
	r.wantEntries(7, want[7:])

	r.trim(1000) // clamps to the tail
	r.reopen()
	r.wantTail(20, false)
	r.wantTrimmed(19)
	r.wantEmptyRead(20, maxPos)
	if pos := r.append([]byte("after trim")); pos != 20 {
		r.t.Fatalf("append after trimming everything landed at %d, want 20", pos)
	}
	r.reopen()
	r.wantTail(21, false)
	r.wantTrimmed(19)
	r.wantEntries(20, [][]byte{[]byte("after trim")})
}
