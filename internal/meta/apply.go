package meta

import (
	"bytes"
	"fmt"
	"slices"
)

// PoisonError marks an entry that cannot be applied because of its bytes:
// it does not decode, or holds a command this build does not know. The
// batch holds nothing of it, and the driver halts before it: every copy
// of the same build halts at the same position.
type PoisonError struct{ Err error }

func (e *PoisonError) Error() string { return e.Err.Error() }
func (e *PoisonError) Unwrap() error { return e.Err }

// Applier applies log entries to one Batch. It is the deterministic core
// of the package: what it writes depends only on the state it reads
// through the batch, the entry bytes and their position. It reads no
// clock (time is the entry's timestamp), draws no random numbers, starts
// no goroutines, does no I/O but the batch, and never lets map order
// reach the batch (caches are written in key order).
//
// Several entries may share one batch. The driver calls Apply for each,
// then Finish, which writes the applied position into the same batch,
// then commits the batch.
type Applier struct {
	// b is changes, writing through to the driver's batch.
	b       Batch
	changes changeTracker

	clockLoaded bool
	clock       int64 // unix ms, the log clock (logclock.go)
	// ts is the timestamp of the entry being applied.
	ts int64

	// voices caches the clock voices for the batch (logclock.go),
	// sorted by agent id; voicesDirty when Finish must write them.
	// reportBuf is scratch for the vote.
	voices       []clockVoice
	voicesLoaded bool
	voicesDirty  bool
	reportBuf    []int64

	// pos and idx are where the command being applied sits: its entry's
	// log position and its index in the entry. Apply derives ids from
	// them (topic ids, the cluster id).
	pos uint64
	idx int

	// writers caches dedupe state for the batch.
	writers map[string]*writerState
	// parts caches partition states across commands, so a run of
	// commits rewrites each partition once per batch instead of once
	// per command. Each command's row in the table says how it reaches
	// partition state; one that writes partition keys directly writes
	// back and drops the cache first (applyCommand).
	parts map[partRef]*cachedPart
	// flushEveryCommand writes back and drops the cache before every
	// command, whatever its row says: tests run scenarios both ways to
	// check that the table's partitions column changes nothing but
	// speed.
	flushEveryCommand bool

	// featuresChanged: a FinalizeFeatures changed the finalized levels
	// since Reset (FeaturesChanged).
	featuresChanged bool
	// level is the finalized strand.metadata.version once levelLoaded
	// (lifecycleOn).
	level       int16
	levelLoaded bool

	// gc caches the garbage collection state for the batch (gc.go):
	// gcLoaded once gcOn read it, gc nil below metadata level 3, gcDirty
	// when Finish must write it.
	gc       *GCState
	gcLoaded bool
	gcDirty  bool

	// keyBuf and valBuf hold the key and value of one Get, Set or
	// Delete at a time (the batch copies what it keeps), so that apply
	// allocates no key per call: anything passed through the Batch
	// interface escapes to the heap.
	keyBuf []byte
	valBuf []byte

	// notes collects what the command being applied changed of
	// committed offsets and group states (offset_notes.go).
	notes offsetNotes
}

type partRef struct {
	id        TopicID
	partition int32
}

type cachedPart struct {
	st     PartitionState
	exists bool
	dirty  bool
	// stored is the partition's storage record (storage.go), kept in
	// its own key.
	stored storedPart
}

// NewApplier returns an Applier writing to b.
func NewApplier(b Batch) *Applier {
	a := &Applier{
		writers: make(map[string]*writerState),
		parts:   make(map[partRef]*cachedPart),
		changes: changeTracker{
			parts:  make(map[PartitionRef]struct{}),
			topics: make(map[TopicID]struct{}),
		},
	}
	a.Reset(b)
	return a
}

// Reset readies a for the next batch, b, as a new Applier would be, but
// keeping the memory of its caches and buffers: a driver that plays the
// log batch after batch reuses one.
func (a *Applier) Reset(b Batch) {
	a.changes.reset(b)
	a.b = &a.changes
	a.clockLoaded, a.clock, a.ts = false, 0, 0
	a.voices, a.voicesLoaded, a.voicesDirty = a.voices[:0], false, false
	a.pos, a.idx = 0, 0
	a.featuresChanged = false
	a.levelLoaded = false
	a.gc, a.gcLoaded, a.gcDirty = nil, false, false
	clear(a.writers)
	clear(a.parts)
}

// Changes returns what the entries applied since Reset changed of the
// partitions Fetch reads (changes.go), once Finish has written the
// cached partition states. Its slices are the Applier's, valid until
// the next Changes or Reset.
func (a *Applier) Changes() Changes { return a.changes.changes() }

// Outcome is what applying one entry produced.
type Outcome struct {
	// Header is the entry without its commands.
	Header Entry
	// Dropped: the entry repeats one applied before (its writer's
	// incarnation and sequence are not new) and changed nothing.
	Dropped bool
	// Results has one Result per command, in order; nil when Dropped.
	Results []Result
}

// Apply applies the entry data found at log position pos. A *PoisonError
// means the batch holds nothing of this entry and the entries before it
// may still be committed; any other error is a local fault (the batch
// failed) and the batch must be discarded.
func (a *Applier) Apply(pos uint64, data []byte) (Outcome, error) {
	body, err := checkEntry(data)
	if err != nil {
		return Outcome{}, &PoisonError{err}
	}
	hdr, r, err := decodeEntryHeader(body)
	if err != nil {
		return Outcome{}, &PoisonError{err}
	}
	out := Outcome{Header: hdr}

	// Dedupe before decoding commands: a dropped copy has no effect at
	// all, not even on the clock.
	ws, err := a.writer(hdr.WriterID)
	if err != nil {
		return Outcome{}, err
	}
	if hdr.Incarnation < ws.Incarnation || (hdr.Incarnation == ws.Incarnation && hdr.Seq <= ws.LastSeq) {
		out.Dropped = true
		return out, nil
	}

	e := hdr
	if err := decodeEntryCommands(r, &e); err != nil {
		return Outcome{}, &PoisonError{err}
	}
	cmds := make([]Command, len(e.Commands))
	for i, rc := range e.Commands {
		if cmds[i], err = DecodeCommand(rc); err != nil {
			return Outcome{}, &PoisonError{fmt.Errorf("command %d: %w", i, err)}
		}
	}

	*ws = writerState{Incarnation: hdr.Incarnation, LastSeq: hdr.Seq}
	if err := a.loadClock(); err != nil {
		return Outcome{}, err
	}
	a.ts, a.pos = hdr.Timestamp, pos
	if err := a.advanceClock(hdr.WriterID, hdr.Timestamp); err != nil {
		return Outcome{}, err
	}

	out.Results = make([]Result, len(cmds))
	for i, c := range cmds {
		if out.Results[i], err = a.applyCommand(pos, i, c); err != nil {
			return Outcome{}, err
		}
	}
	return out, nil
}

// Finish writes the cached state and the applied position (next, the
// position after the last entry applied) into the batch.
func (a *Applier) Finish(next uint64) error {
	if err := a.flushParts(); err != nil {
		return err
	}
	if err := a.flushGC(); err != nil {
		return err
	}
	if err := a.flushVoices(); err != nil {
		return err
	}
	for _, id := range sortedKeys(a.writers) {
		a.keyBuf = appendWriterKey(a.keyBuf[:0], id)
		if err := a.b.Set(a.keyBuf, a.writers[id].encode()); err != nil {
			return err
		}
	}
	if a.clockLoaded {
		if err := a.b.Set(keyClock, encodeUint64(uint64(a.clock))); err != nil {
			return err
		}
	}
	return a.b.Set(keyApplied, encodeUint64(next))
}

func (a *Applier) writer(id string) (*writerState, error) {
	if ws, ok := a.writers[id]; ok {
		return ws, nil
	}
	ws := new(writerState)
	a.keyBuf = appendWriterKey(a.keyBuf[:0], id)
	v, ok, err := a.get(a.keyBuf)
	if err != nil {
		return nil, err
	}
	if ok {
		if *ws, err = decodeWriterState(v); err != nil {
			return nil, err
		}
	}
	a.writers[id] = ws
	return ws, nil
}

func (a *Applier) loadClock() error {
	if a.clockLoaded {
		return nil
	}
	v, ok, err := a.get(keyClock)
	if err != nil {
		return err
	}
	if ok {
		c, err := decodeUint64("log clock", v)
		if err != nil {
			return err
		}
		a.clock = int64(c)
	}
	a.clockLoaded = true
	return nil
}

// get returns key's value in the batch's view of the state; the caller
// owns it.
func (a *Applier) get(key []byte) ([]byte, bool, error) { return a.b.Get(key) }

// applyCommand applies c, the idx'th command of the entry at pos, by its
// row in the table.
func (a *Applier) applyCommand(pos uint64, idx int, c Command) (Result, error) {
	s := specOf(c.Type())
	if s == nil {
		// DecodeCommand only returns the table's types.
		return Result{}, fmt.Errorf("meta: apply of %T not implemented", c)
	}
	if s.partitions == partitionsDirect || a.flushEveryCommand {
		if err := a.flushParts(); err != nil {
			return Result{}, err
		}
		clear(a.parts)
	}
	a.pos, a.idx = pos, idx
	a.notes.reset()
	res, err := s.apply(a, c)
	a.notes.fill(&res)
	return res, err
}

func (a *Applier) part(ref partRef) (*cachedPart, error) {
	if cp, ok := a.parts[ref]; ok {
		return cp, nil
	}
	cp := new(cachedPart)
	a.keyBuf = appendPartitionKey(a.keyBuf[:0], ref.id, ref.partition)
	v, ok, err := a.get(a.keyBuf)
	if err != nil {
		return nil, err
	}
	if ok {
		if cp.st, err = decodePartitionState(v); err != nil {
			return nil, err
		}
		cp.exists = true
	}
	a.parts[ref] = cp
	return cp, nil
}

// flushParts writes dirty cached partition states in key order.
func (a *Applier) flushParts() error {
	var dirty []partRef
	for ref, cp := range a.parts {
		if cp.dirty || cp.stored.dirty {
			dirty = append(dirty, ref)
		}
	}
	slices.SortFunc(dirty, func(x, y partRef) int {
		if c := bytes.Compare(x.id[:], y.id[:]); c != 0 {
			return c
		}
		return int(x.partition) - int(y.partition)
	})
	for _, ref := range dirty {
		cp := a.parts[ref]
		if cp.stored.dirty {
			if err := a.writeStored(ref, &cp.stored); err != nil {
				return err
			}
		}
		if !cp.dirty {
			continue
		}
		a.valBuf = cp.st.encode(a.valBuf[:0])
		a.keyBuf = appendPartitionKey(a.keyBuf[:0], ref.id, ref.partition)
		if err := a.b.Set(a.keyBuf, a.valBuf); err != nil {
			return err
		}
		cp.dirty = false
	}
	return nil
}
