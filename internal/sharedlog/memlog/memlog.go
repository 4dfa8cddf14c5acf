// Package memlog is an in-memory sharedlog.Loglet for tests and
// simulations. It is the reference implementation of the Loglet contract.
package memlog

import (
	"context"
	"sync"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// maxReadEntries bounds the entries one ReadNext returns.
const maxReadEntries = 1024

// Loglet keeps entries in a slice.
type Loglet struct {
	mu struct {
		sync.Mutex
		entries [][]byte // entries[i] is at trimmed+i
		trimmed sharedlog.Pos
		sealed  bool
		closed  bool
		// changed is closed and replaced whenever the tail moves or the
		// loglet is sealed, to wake WaitTail callers.
		changed chan struct{}
	}
}

var (
	_ sharedlog.Loglet     = (*Loglet)(nil)
	_ sharedlog.TailWaiter = (*Loglet)(nil)
)

// New returns an empty loglet.
func New() *Loglet {
	l := &Loglet{}
	l.mu.changed = make(chan struct{})
	return l
}

func (l *Loglet) tailLocked() sharedlog.Pos {
	return l.mu.trimmed + sharedlog.Pos(len(l.mu.entries))
}

func (l *Loglet) wakeLocked() {
	close(l.mu.changed)
	l.mu.changed = make(chan struct{})
}

func (l *Loglet) Append(ctx context.Context, entry []byte) (sharedlog.Pos, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	cp := append([]byte(nil), entry...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return 0, sharedlog.ErrClosed
	}
	if l.mu.sealed {
		return 0, sharedlog.ErrSealed
	}
	pos := l.tailLocked()
	l.mu.entries = append(l.mu.entries, cp)
	l.wakeLocked()
	return pos, nil
}

func (l *Loglet) CheckTail(ctx context.Context) (sharedlog.Pos, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return 0, false, sharedlog.ErrClosed
	}
	return l.tailLocked(), l.mu.sealed, nil
}

func (l *Loglet) ReadNext(ctx context.Context, from, max sharedlog.Pos) ([]sharedlog.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return nil, sharedlog.ErrClosed
	}
	if from < l.mu.trimmed {
		return nil, sharedlog.ErrTrimmed
	}
	end := min(max, l.tailLocked(), from+maxReadEntries)
	var out []sharedlog.Entry
	for p := from; p < end; p++ {
		data := l.mu.entries[p-l.mu.trimmed]
		out = append(out, sharedlog.Entry{Pos: p, Data: append([]byte(nil), data...)})
	}
	return out, nil
}

func (l *Loglet) Seal(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return sharedlog.ErrClosed
	}
	if !l.mu.sealed {
		l.mu.sealed = true
		l.wakeLocked()
	}
	return nil
}

func (l *Loglet) PrefixTrim(ctx context.Context, before sharedlog.Pos) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return sharedlog.ErrClosed
	}
	before = min(before, l.tailLocked())
	if before <= l.mu.trimmed {
		return nil
	}
	n := before - l.mu.trimmed
	// Copy so the trimmed entries can be collected.
	l.mu.entries = append([][]byte(nil), l.mu.entries[n:]...)
	l.mu.trimmed = before
	return nil
}

func (l *Loglet) WaitTail(ctx context.Context, after sharedlog.Pos) (sharedlog.Pos, error) {
	for {
		l.mu.Lock()
		if l.mu.closed {
			l.mu.Unlock()
			return 0, sharedlog.ErrClosed
		}
		tail, sealed, ch := l.tailLocked(), l.mu.sealed, l.mu.changed
		l.mu.Unlock()
		if tail > after || sealed {
			return tail, nil
		}
		select {
		case <-ctx.Done():
			return tail, ctx.Err()
		case <-ch:
		}
	}
}

func (l *Loglet) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.mu.closed {
		l.mu.closed = true
		l.wakeLocked()
	}
	return nil
}
