package loglettest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// maxPos is the largest position, for reads bounded only by the tail.
const maxPos = sharedlog.Pos(math.MaxUint64)

// env is one case's loglet with assertion helpers. Helpers call t.Fatalf,
// so they are for the test goroutine only; goroutines use t.Errorf.
type env struct {
	t   *testing.T
	ctx context.Context
	l   sharedlog.Loglet
	o   Options
}

// payload returns distinct, recognisable bytes for tag and i, of a size
// that varies with i so length bugs show.
func payload(tag string, i int) []byte {
	head := fmt.Sprintf("%s/%d/", tag, i)
	b := make([]byte, len(head)+(i*37)%300)
	copy(b, head)
	for j := len(head); j < len(b); j++ {
		b[j] = byte(i + j)
	}
	return b
}

func (e *env) append(data []byte) sharedlog.Pos {
	e.t.Helper()
	pos, err := e.l.Append(e.ctx, data)
	if err != nil {
		e.t.Fatalf("Append(%d bytes): %v", len(data), err)
	}
	return pos
}

// appendN appends payload(tag, i) for i in [0, n) and checks that they
// land at consecutive positions from the current tail.
func (e *env) appendN(tag string, n int) [][]byte {
	e.t.Helper()
	start, _ := e.checkTail()
	out := make([][]byte, n)
	for i := range out {
		out[i] = payload(tag, i)
		if pos := e.append(out[i]); pos != start+sharedlog.Pos(i) {
			e.t.Fatalf("append %d landed at %d, want %d", i, pos, start+sharedlog.Pos(i))
		}
	}
	return out
}

func (e *env) checkTail() (sharedlog.Pos, bool) {
	e.t.Helper()
	tail, sealed, err := e.l.CheckTail(e.ctx)
	if err != nil {
		e.t.Fatalf("CheckTail: %v", err)
	}
	return tail, sealed
}

func (e *env) wantTail(tail sharedlog.Pos, sealed bool) {
	e.t.Helper()
	gotTail, gotSealed := e.checkTail()
	if gotTail != tail || gotSealed != sealed {
		e.t.Fatalf("CheckTail = (%d, sealed %v), want (%d, sealed %v)", gotTail, gotSealed, tail, sealed)
	}
}

// readNext calls ReadNext and checks what every call must satisfy: the
// entries start at from, are dense, and lie below max.
func readNext(ctx context.Context, l sharedlog.Log, from, max sharedlog.Pos) ([]sharedlog.Entry, error) {
	es, err := l.ReadNext(ctx, from, max)
	if err != nil {
		return nil, err
	}
	for i, en := range es {
		if want := from + sharedlog.Pos(i); en.Pos != want {
			return nil, fmt.Errorf("ReadNext(%d, %d): entry %d has position %d, want %d", from, max, i, en.Pos, want)
		}
		if en.Pos >= max {
			return nil, fmt.Errorf("ReadNext(%d, %d): returned position %d, not below max", from, max, en.Pos)
		}
	}
	return es, nil
}

// readRange reads [from, to) page by page; every position in it must be
// readable, so each call must return at least one entry.
func (e *env) readRange(from, to sharedlog.Pos) []sharedlog.Entry {
	e.t.Helper()
	var out []sharedlog.Entry
	for p := from; p < to; {
		es, err := readNext(e.ctx, e.l, p, to)
		if err != nil {
			e.t.Fatalf("reading [%d, %d): %v", from, to, err)
		}
		if len(es) == 0 {
			e.t.Fatalf("ReadNext(%d, %d) returned no entries below the tail", p, to)
		}
		out = append(out, es...)
		p += sharedlog.Pos(len(es))
	}
	return out
}

// wantEntries reads [from, from+len(want)) and compares the bytes.
func (e *env) wantEntries(from sharedlog.Pos, want [][]byte) {
	e.t.Helper()
	got := e.readRange(from, from+sharedlog.Pos(len(want)))
	for i, en := range got {
		if !bytes.Equal(en.Data, want[i]) {
			e.t.Fatalf("entry at %d = %q, want %q", en.Pos, clip(en.Data), clip(want[i]))
		}
	}
}

func (e *env) wantEmptyRead(from, max sharedlog.Pos) {
	e.t.Helper()
	es, err := readNext(e.ctx, e.l, from, max)
	if err != nil {
		e.t.Fatalf("ReadNext(%d, %d): %v", from, max, err)
	}
	if len(es) != 0 {
		e.t.Fatalf("ReadNext(%d, %d) returned %d entries from %d, want none", from, max, len(es), es[0].Pos)
	}
}

func (e *env) wantTrimmed(from sharedlog.Pos) {
	e.t.Helper()
	es, err := e.l.ReadNext(e.ctx, from, maxPos)
	if !errors.Is(err, sharedlog.ErrTrimmed) {
		e.t.Fatalf("ReadNext(%d) below the trim point = (%d entries, %v), want ErrTrimmed", from, len(es), err)
	}
}

func (e *env) trim(before sharedlog.Pos) {
	e.t.Helper()
	if err := e.l.PrefixTrim(e.ctx, before); err != nil {
		e.t.Fatalf("PrefixTrim(%d): %v", before, err)
	}
}

func (e *env) seal() {
	e.t.Helper()
	if err := e.l.Seal(e.ctx); err != nil {
		e.t.Fatalf("Seal: %v", err)
	}
}

func (e *env) wantAppendSealed() {
	e.t.Helper()
	pos, err := e.l.Append(e.ctx, []byte("after seal"))
	if !errors.Is(err, sharedlog.ErrSealed) {
		e.t.Fatalf("Append on a sealed loglet = (%d, %v), want ErrSealed", pos, err)
	}
}

// clip shortens data for failure messages.
func clip(data []byte) []byte {
	if len(data) > 48 {
		return data[:48]
	}
	return data
}
