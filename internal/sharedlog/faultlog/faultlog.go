// Package faultlog owns fault injection for sharedlog.Loglet: Wrap puts an
// Injector in front of any backend, which can fail an operation before it
// reaches the backend, perform it and then lose the reply, or delay it.
// Tests of code above the log (VirtualLog, meta) use it to check that
// ambiguous failures are handled; with an Injector that never fires, a
// wrapped loglet behaves exactly like the inner one.
package faultlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/sharedlog"
)

// ErrInjected is the error every injected failure wraps.
var ErrInjected = errors.New("faultlog: injected fault")

// Op names a Loglet operation. Ops are bits so a set of them is an Op too.
type Op uint8

const (
	OpAppend Op = 1 << iota
	OpCheckTail
	OpReadNext
	OpSeal
	OpPrefixTrim
	OpWaitTail

	// OpAll is every operation. Close is never injected: a test must be
	// able to tear down.
	OpAll = OpAppend | OpCheckTail | OpReadNext | OpSeal | OpPrefixTrim | OpWaitTail
)

func (op Op) String() string {
	switch op {
	case OpAppend:
		return "Append"
	case OpCheckTail:
		return "CheckTail"
	case OpReadNext:
		return "ReadNext"
	case OpSeal:
		return "Seal"
	case OpPrefixTrim:
		return "PrefixTrim"
	case OpWaitTail:
		return "WaitTail"
	}
	return fmt.Sprintf("Op(%#x)", uint8(op))
}

// Mode is how an operation fails.
type Mode uint8

const (
	// None lets the operation through.
	None Mode = iota
	// FailBefore returns ErrInjected without calling the inner loglet:
	// nothing is written.
	FailBefore
	// FailAfter performs the operation and then returns ErrInjected in
	// place of its result: for Append, "appended but the reply was lost".
	FailAfter
)

func (m Mode) String() string {
	switch m {
	case None:
		return "none"
	case FailBefore:
		return "fail-before"
	case FailAfter:
		return "fail-after"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Fault is what to do to one operation.
type Fault struct {
	Mode Mode
	// Delay is waited before the operation, or until its ctx is done.
	Delay time.Duration
}

// Injector decides the fault for each operation. It is called once per
// operation, concurrently from the loglet's callers.
type Injector interface {
	Fault(op Op) Fault
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op) Fault

func (f InjectorFunc) Fault(op Op) Fault { return f(op) }

// Wrap returns a loglet that consults inj before every operation on l. The
// result implements sharedlog.TailWaiter if l does.
func Wrap(l sharedlog.Loglet, inj Injector) sharedlog.Loglet {
	w := &loglet{inner: l, inj: inj}
	if tw, ok := l.(sharedlog.TailWaiter); ok {
		return &waitingLoglet{loglet: w, tw: tw}
	}
	return w
}

type loglet struct {
	inner sharedlog.Loglet
	inj   Injector
}

// before applies the delay and, for FailBefore, returns the error to
// return without calling the inner loglet.
func (l *loglet) before(ctx context.Context, op Op) (Fault, error) {
	f := l.inj.Fault(op)
	if err := clock.Sleep(ctx, clock.Real, f.Delay); err != nil {
		return f, err
	}
	if f.Mode == FailBefore {
		return f, fmt.Errorf("%w: %v %v", ErrInjected, op, f.Mode)
	}
	return f, nil
}

// replaceResult replaces the inner result's error for FailAfter.
func replaceResult(f Fault, op Op, err error) error {
	if f.Mode != FailAfter {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: %v %v (inner error: %w)", ErrInjected, op, f.Mode, err)
	}
	return fmt.Errorf("%w: %v %v", ErrInjected, op, f.Mode)
}

func (l *loglet) Append(ctx context.Context, entry []byte) (sharedlog.Pos, error) {
	f, err := l.before(ctx, OpAppend)
	if err != nil {
		return 0, err
	}
	pos, err := l.inner.Append(ctx, entry)
	if err = replaceResult(f, OpAppend, err); err != nil {
		return 0, err
	}
	return pos, nil
}

func (l *loglet) CheckTail(ctx context.Context) (sharedlog.Pos, bool, error) {
	f, err := l.before(ctx, OpCheckTail)
	if err != nil {
		return 0, false, err
	}
	tail, sealed, err := l.inner.CheckTail(ctx)
	if err = replaceResult(f, OpCheckTail, err); err != nil {
		return 0, false, err
	}
	return tail, sealed, nil
}

func (l *loglet) ReadNext(ctx context.Context, from, max sharedlog.Pos) ([]sharedlog.Entry, error) {
	f, err := l.before(ctx, OpReadNext)
	if err != nil {
		return nil, err
	}
	es, err := l.inner.ReadNext(ctx, from, max)
	if err = replaceResult(f, OpReadNext, err); err != nil {
		return nil, err
	}
	return es, nil
}

func (l *loglet) Seal(ctx context.Context) error {
	f, err := l.before(ctx, OpSeal)
	if err != nil {
		return err
	}
	return replaceResult(f, OpSeal, l.inner.Seal(ctx))
}

func (l *loglet) PrefixTrim(ctx context.Context, before sharedlog.Pos) error {
	f, err := l.before(ctx, OpPrefixTrim)
	if err != nil {
		return err
	}
	return replaceResult(f, OpPrefixTrim, l.inner.PrefixTrim(ctx, before))
}

func (l *loglet) Close() error { return l.inner.Close() }

type waitingLoglet struct {
	*loglet
	tw sharedlog.TailWaiter
}

func (l *waitingLoglet) WaitTail(ctx context.Context, after sharedlog.Pos) (sharedlog.Pos, error) {
	f, err := l.before(ctx, OpWaitTail)
	if err != nil {
		return 0, err
	}
	tail, err := l.tw.WaitTail(ctx, after)
	if err = replaceResult(f, OpWaitTail, err); err != nil {
		return 0, err
	}
	return tail, nil
}
