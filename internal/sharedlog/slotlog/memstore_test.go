package slotlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// fault is what memStore does to one Put.
type fault uint8

const (
	faultNone      fault = iota
	faultBefore          // fail without applying
	faultLoseReply       // apply, then fail as if the reply was lost
	faultReject          // refuse as malformed: ErrRejected, not applied
)

var errInjected = errors.New("memstore: injected fault")

// memStore is a Slots in memory that behaves like the remote services:
// conditional puts, deletions that leave empty slots, and injected
// faults.
type memStore struct {
	mu sync.Mutex
	// slots holds copies; Data is never shared with callers.
	slots map[sharedlog.Pos]Slot
	tp    sharedlog.Pos
	// withOccupant: a taken Put returns the occupant, as DynamoDB's
	// ReturnValuesOnConditionCheckFailure does; else Loglet probes.
	withOccupant bool
	// putFault, if set, decides each Put's fault.
	putFault func(s Slot) fault
	// written records every applied put, in order.
	written []Slot
	// trimReads counts TrimPoint calls; reads, Read calls.
	trimReads int
	reads     int
}

func newMemStore() *memStore {
	return &memStore{slots: map[sharedlog.Pos]Slot{}}
}

func cloneSlot(s Slot) Slot {
	s.Data = bytes.Clone(s.Data)
	if s.Data == nil && s.Kind == KindEntry {
		s.Data = []byte{}
	}
	return s
}

func (m *memStore) Put(ctx context.Context, s Slot) (*Slot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f := faultNone
	if m.putFault != nil {
		f = m.putFault(s)
	}
	switch f {
	case faultBefore:
		return nil, fmt.Errorf("put %d: %w", s.Pos, errInjected)
	case faultReject:
		return nil, fmt.Errorf("put %d: %w: %w", s.Pos, ErrRejected, errInjected)
	}
	if occ, ok := m.slots[s.Pos]; ok {
		if f == faultLoseReply {
			return nil, fmt.Errorf("put %d: %w", s.Pos, errInjected)
		}
		if m.withOccupant {
			o := cloneSlot(occ)
			return &o, ErrTaken
		}
		return nil, ErrTaken
	}
	m.slots[s.Pos] = cloneSlot(s)
	m.written = append(m.written, cloneSlot(s))
	if f == faultLoseReply {
		return nil, fmt.Errorf("put %d: %w", s.Pos, errInjected)
	}
	return nil, nil
}

func (m *memStore) Probe(ctx context.Context, p sharedlog.Pos) (Slot, bool, error) {
	if err := ctx.Err(); err != nil {
		return Slot{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.slots[p]
	return cloneSlot(s), ok, nil
}

func (m *memStore) Read(ctx context.Context, from, to sharedlog.Pos) ([]Slot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	var out []Slot
	for _, p := range m.sortedLocked() {
		if p >= from && p < to {
			out = append(out, cloneSlot(m.slots[p]))
		}
	}
	return out, nil
}

func (m *memStore) sortedLocked() []sharedlog.Pos {
	ps := make([]sharedlog.Pos, 0, len(m.slots))
	for p := range m.slots {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

func (m *memStore) ScanUp(ctx context.Context, from sharedlog.Pos, limit int) ([]SlotInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []SlotInfo
	for _, p := range m.sortedLocked() {
		if p >= from && len(out) < limit {
			out = append(out, SlotInfo{Pos: p, Kind: m.slots[p].Kind})
		}
	}
	return out, nil
}

func (m *memStore) ScanTop(ctx context.Context, limit int) ([]SlotInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.sortedLocked()
	var out []SlotInfo
	for i := len(ps) - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, SlotInfo{Pos: ps[i], Kind: m.slots[ps[i]].Kind})
	}
	return out, nil
}

func (m *memStore) TrimPoint(ctx context.Context) (sharedlog.Pos, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.trimReads++
	return m.tp, nil
}

func (m *memStore) trimPointReads() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.trimReads
}

func (m *memStore) RaiseTrimPoint(ctx context.Context, p sharedlog.Pos) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tp = max(m.tp, p)
	return nil
}

func (m *memStore) DeleteBelow(ctx context.Context, p sharedlog.Pos) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for q := range m.slots {
		if q < p {
			delete(m.slots, q)
		}
	}
	return nil
}

// slot returns slot p's content.
func (m *memStore) slot(p sharedlog.Pos) (Slot, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.slots[p]
	return cloneSlot(s), ok
}

func (m *memStore) setPutFault(f func(s Slot) fault) {
	m.mu.Lock()
	m.putFault = f
	m.mu.Unlock()
}

// writesAt returns how many puts were applied at p (at most one, unless
// a deletion freed the slot).
func (m *memStore) writesAt(p sharedlog.Pos) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.written {
		if s.Pos == p {
			n++
		}
	}
	return n
}
