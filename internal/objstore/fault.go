package objstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
)

// ErrInjected is the failure WithFaults reports in place of a real one.
// It is not one of the Store sentinels, so callers must treat it like any
// transport error: the operation may or may not have been performed.
var ErrInjected = errors.New("objstore: injected fault")

// FaultMode says what WithFaults does with one operation.
type FaultMode int

const (
	// NoFault performs the operation and reports its real result.
	NoFault FaultMode = iota
	// FaultBefore fails the operation without performing it.
	FaultBefore
	// FaultAfter performs the operation and then reports ErrInjected, as
	// if the store applied it but the reply was lost. If the operation
	// itself failed, its real error is reported.
	FaultAfter
)

func (m FaultMode) String() string {
	switch m {
	case NoFault:
		return "none"
	case FaultBefore:
		return "before"
	case FaultAfter:
		return "after"
	}
	return fmt.Sprintf("fault-mode(%d)", int(m))
}

// FaultInjector decides, once per operation and before it runs, whether
// WithFaults fails it. For List the key is the prefix. Implementations
// must be safe for concurrent use.
type FaultInjector interface {
	Fault(op Op, key string) FaultMode
}

// FaultFunc adapts a function to FaultInjector.
type FaultFunc func(op Op, key string) FaultMode

func (f FaultFunc) Fault(op Op, key string) FaultMode { return f(op, key) }

// WithFaults returns a Store that asks inj about every operation on s and
// fails it as told, with an error wrapping ErrInjected.
func WithFaults(s Store, inj FaultInjector) Store {
	return &faultStore{s: s, inj: inj}
}

type faultStore struct {
	s   Store
	inj FaultInjector
}

var _ Store = (*faultStore)(nil)

func injected(op Op, key string, mode FaultMode) error {
	return fmt.Errorf("%w: %s %q (%s)", ErrInjected, op, key, mode)
}

// do runs fn under the injector's decision for (op, key).
func (f *faultStore) do(op Op, key string, fn func() error) error {
	mode := f.inj.Fault(op, key)
	if mode == FaultBefore {
		return injected(op, key, mode)
	}
	if err := fn(); err != nil {
		return err
	}
	if mode == FaultAfter {
		return injected(op, key, mode)
	}
	return nil
}

func (f *faultStore) Put(ctx context.Context, key string, data []byte) error {
	return f.do(OpPut, key, func() error { return f.s.Put(ctx, key, data) })
}

func (f *faultStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return f.do(OpPutIfAbsent, key, func() error { return f.s.PutIfAbsent(ctx, key, data) })
}

func (f *faultStore) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	var out []byte
	err := f.do(OpGet, key, func() error {
		var err error
		out, err = f.s.Get(ctx, key, offset, length)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (f *faultStore) Delete(ctx context.Context, key string) error {
	return f.do(OpDelete, key, func() error { return f.s.Delete(ctx, key) })
}

func (f *faultStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	err := f.do(OpList, prefix, func() error {
		var err error
		out, err = f.s.List(ctx, prefix)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Faults is a FaultInjector driven by rules, for tests and simulations.
// Rules are checked in the order they were added and the first that fires
// decides; an operation no rule fires on runs normally. Randomness comes
// from one seeded source, so a single-goroutine run replays exactly from
// its seed. Safe for concurrent use.
type Faults struct {
	mu struct {
		sync.Mutex
		rules    []*faultRule
		rnd      *rand.Rand
		injected int
	}
}

type faultRule struct {
	ops  []Op // empty matches every op
	mode FaultMode
	// remaining counts how many more matching ops fail; -1 is no limit.
	remaining int
	// prob is the chance that a matching op fails; 1 for FailNext rules.
	prob float64
}

var _ FaultInjector = (*Faults)(nil)

// NewFaults returns an injector with no rules whose random draws start
// from seed.
func NewFaults(seed uint64) *Faults {
	f := &Faults{}
	f.mu.rnd = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return f
}

// FailNext fails the next n operations of the given kinds (of any kind if
// ops is empty) with mode.
func (f *Faults) FailNext(n int, mode FaultMode, ops ...Op) *Faults {
	if n <= 0 {
		return f
	}
	return f.add(&faultRule{ops: slices.Clone(ops), mode: mode, remaining: n, prob: 1})
}

// FailRandomly fails each operation of the given kinds (of any kind if ops
// is empty) with probability p, until Reset.
func (f *Faults) FailRandomly(p float64, mode FaultMode, ops ...Op) *Faults {
	return f.add(&faultRule{ops: slices.Clone(ops), mode: mode, remaining: -1, prob: p})
}

func (f *Faults) add(r *faultRule) *Faults {
	f.mu.Lock()
	f.mu.rules = append(f.mu.rules, r)
	f.mu.Unlock()
	return f
}

// Reset drops every rule. The injected count is kept.
func (f *Faults) Reset() {
	f.mu.Lock()
	f.mu.rules = nil
	f.mu.Unlock()
}

// Injected returns how many operations have been failed so far.
func (f *Faults) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.injected
}

func (f *Faults) Fault(op Op, _ string) FaultMode {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.mu.rules {
		if len(r.ops) > 0 && !slices.Contains(r.ops, op) {
			continue
		}
		if r.prob < 1 && f.mu.rnd.Float64() >= r.prob {
			continue
		}
		if r.remaining > 0 {
			r.remaining--
			if r.remaining == 0 {
				f.mu.rules = slices.Delete(f.mu.rules, i, i+1)
			}
		}
		if r.mode != NoFault {
			f.mu.injected++
		}
		return r.mode
	}
	return NoFault
}
