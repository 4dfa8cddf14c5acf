package meta

// Object garbage collection (metadata level 3): what apply keeps so that
// data objects can be deleted safely, and the command through which the
// janitor (package gc) reports what it deleted.
//
// Apply counts, per committed data object, the index entries that point
// into it (0x19). An entry goes in exactly three places, trimIndex
// (DeleteRecords, retention), topic deletion and a compaction swap
// (compact.go), and each calls releaseIndex first; the swap's new
// objects are counted as CommitObject's are. When an object's count reaches zero it joins the
// dead-object queue (0x1A), keyed by the log clock at its death, so the
// queue is in death order. The janitor deletes queue entries older than
// the grace period and proposes GCProgress, whose apply removes them
// from the queue along with the object's 0x05 record.
//
// Objects the database never learns of (uploaded, then the commit
// failed, its reply was lost, or the writer died) are orphans: the
// reconciler lists the store and deletes keys that carry a time below the
// orphan horizon and that the database does not know (no 0x05 record).
// The horizon is max(log clock - grace, floor) and only moves forward:
// grace may shrink at any time, and when it grows, floor keeps the
// horizon where it was. CommitObject refuses an object whose key time is
// below the horizon at its apply (KAFKA_STORAGE_ERROR, retriable: the
// producer sends again into a new object), and queues it as dead. So an
// object the reconciler judged an orphan from a view at position P, with
// key time below horizon(P), can never be committed at any later
// position: a new object is never mistaken for an orphan. Keys without
// a time (written by builds before this layout, or tools) are never
// orphans: the reconciler leaves them alone.

import (
	"encoding/binary"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Key prefixes of garbage collection.
const (
	// prefixObjectRefs: object key -> index entries pointing into it,
	// while there are any.
	prefixObjectRefs byte = 0x19
	// prefixDeadObject: log clock at death (u64), object key -> size.
	prefixDeadObject byte = 0x1A
	// prefixGC: the one GCState record.
	prefixGC byte = 0x1B
)

var keyGC = []byte{prefixGC}

// Limits of GCProgress, part of what apply means.
const (
	// maxGCDeleted bounds the queue entries one GCProgress removes.
	maxGCDeleted = 4096
)

// DefaultGCGrace is the grace period (ms) a log starts with at level 3,
// and the default of --gc-grace. It bounds two waits, and must exceed
// both (from metadata level 5 the first is DeleteDelayConfig's, shorter,
// since the janitor also waits for every live agent to apply a death):
//
//   - A fetch plans its reads from a View and may read an object just
//     after apply dropped the object's last index entry (retention,
//     DeleteRecords, topic deletion). Deleting only grace after the
//     death, by the log clock, leaves that fetch its whole read time: a
//     fetch holds a plan for at most its request's lifetime (fetch.max.wait
//     plus object reads bounded by their timeouts: seconds, under a
//     minute with every retry).
//   - An object is uploaded before its CommitObject applies; its key
//     carries the time of the cut, and apply refuses the commit once that
//     time is below the orphan horizon (clock - grace). The produce path
//     retries an upload for at most 5 attempts of 30 s plus backoff,
//     about 2.6 minutes, then proposes; a grace shorter than that would
//     turn slow uploads into refused produce requests.
//
// The first bound assumes the fetching agent's copy is current: one that
// lags the log by more than the grace period (cut off from the log, its
// apply stalled) plans from a view in which dead objects still live, and
// may find them deleted (the fetch path reports them missing).
//
// Below metadata level 5 both bounds also absorb clock skew between
// agents: the log clock is the largest proposer clock, so an agent whose
// clock runs ahead shortens the real grace by its lead. From level 5 the
// log clock is voted (logclock.go) and runs at most ClockLeadMs ahead.
// 10 minutes is about 4x the longest upload with retries and 10x a slow
// fetch; what it costs is dead bytes kept 10 minutes longer (at 50 MB/s
// of expiring data, 30 GB), which is small next to any retention worth
// setting.
const DefaultGCGrace int64 = 10 * 60 * 1000

// DeleteDelayConfig is the cluster-wide dynamic broker config that sets
// how long, by the log clock, a dead object waits in the queue before
// the janitor deletes it, from metadata level 5: Strand's counterpart of
// Kafka's log.segment.delete.delay.ms (file.delete.delay.ms), with the
// same default. It is read by the janitor (package gc), not by apply:
// apply only queues. Below level 5, and whenever the grace is shorter,
// dead objects wait the grace.
//
// The delay bounds only the wait for fetches: from level 5 the janitor
// also waits until every live agent's heartbeat says it applied the
// death (DeadObject.AppliedBy), so no copy plans a new read of the
// object, and what is left is a fetch that planned before its agent
// applied the death. Such a fetch reads within its request's lifetime:
// fetch.max.wait and object GETs of at most 30 s each (package fetch's
// readTimeout), and the log clock runs at most ClockLeadMs ahead of the
// agents'. A minute covers that; the orphan horizon, which must stay
// above the upload retry budget, is the grace's alone.
const DeleteDelayConfig = "strand.gc.delete.delay.ms"

// DefaultDeleteDelayMs is DeleteDelayConfig's default, Kafka's 1 minute.
const DefaultDeleteDelayMs int64 = 60 * 1000

// MinDeleteDelayMs is the smallest delete delay the Kafka layer and the
// agent's flag accept: above a GET's 30 s timeout and the log clock's
// lead. A test build's agent lowers it (package planted), as it does
// MinGCGraceMs.
var MinDeleteDelayMs int64 = 40 * 1000

// DeleteDelayMs is the wait (ms, by the log clock) between a dead
// object's death and its deletion: DeleteDelayConfig's value in cluster
// (the cluster-wide broker configs; a value that does not parse or is
// below MinDeleteDelayMs counts as unset) at metadata level 5 and up,
// never more than the grace; below level 5 the grace, as dead objects
// carry no position for the janitor to wait on.
func DeleteDelayMs(cluster map[string]string, graceMs int64, level int16) int64 {
	if level < MetadataLevel5 {
		return graceMs
	}
	d := DynamicBrokerConfigs{Default: cluster}.Int64In(DeleteDelayConfig, MinDeleteDelayMs, math.MaxInt64, DefaultDeleteDelayMs)
	return min(d, graceMs)
}

// GCGraceConfig is the cluster-wide dynamic broker config that sets the
// grace period from metadata level 5: one record in the log, so no
// agent's flag can change it behind the others' backs. An agent's
// --gc-grace sets it when the log has none (package agent).
const GCGraceConfig = "strand.gc.grace.ms"

// MinGCGraceMs is the smallest grace period apply accepts from level 5
// (and the agent's flag at start): above the longest an upload may take
// before its commit (package produce's retry budget, 5 attempts of 30 s
// and their backoff: about 2.6 minutes), so that no commit of a slow
// upload is refused, and far above any fetch. A test build's agent
// lowers it at start (package planted); apply reads no environment.
var MinGCGraceMs int64 = 3 * 60 * 1000

// orphanLookback is how far before the level-3 upgrade the reconciler
// starts listing: keys of this layout written before the upgrade (by
// agents of this build at a lower level) are found if they are younger
// than this. A new log starts at its first time.
const orphanLookback int64 = 24 * 60 * 60 * 1000

// OrphanBucketMs is the width of the time buckets data object keys are
// grouped in (package segment's layout); the reconciler lists one bucket
// at a time.
const OrphanBucketMs int64 = 60 * 1000

// GCState is the cluster's garbage collection state and accounting.
type GCState struct {
	// GraceMs is the grace period: a dead object is deleted GraceMs
	// after its death, an orphan once its key time is GraceMs old.
	GraceMs int64
	// FloorMs keeps the orphan horizon from moving back when GraceMs
	// grows (see Horizon).
	FloorMs int64
	// ReconciledTo is the start (unix ms, a multiple of
	// OrphanBucketMs) of the first key bucket the reconciler has not
	// swept.
	ReconciledTo int64
	// Live objects have index entries; dead ones wait in the queue.
	// Bytes are object sizes.
	LiveObjects, LiveBytes int64
	DeadObjects, DeadBytes int64
	// Deleted counts the dead objects the janitor deleted, Orphans the
	// orphans the reconciler deleted; neither are in Live or Dead.
	DeletedObjects, DeletedBytes int64
	Orphans, OrphanBytes         int64
}

// Horizon is the orphan horizon at log clock clock: an object whose key
// time is below it is never committed again, and one the database does
// not know is an orphan. It never moves back as the log goes on.
func (g GCState) Horizon(clock int64) int64 { return max(clock-g.GraceMs, g.FloorMs) }

// StoredBytes is the bytes of committed objects still in the store.
func (g GCState) StoredBytes() int64 { return g.LiveBytes + g.DeadBytes }

func (g *GCState) encode() []byte {
	b := []byte{recordV1}
	for _, v := range []int64{g.GraceMs, g.FloorMs, g.ReconciledTo, g.LiveObjects, g.LiveBytes,
		g.DeadObjects, g.DeadBytes, g.DeletedObjects, g.DeletedBytes, g.Orphans, g.OrphanBytes} {
		b = appendVarint(b, v)
	}
	return b
}

func decodeGCState(v []byte) (GCState, error) {
	r := recordReader(v)
	var g GCState
	for _, p := range []*int64{&g.GraceMs, &g.FloorMs, &g.ReconciledTo, &g.LiveObjects, &g.LiveBytes,
		&g.DeadObjects, &g.DeadBytes, &g.DeletedObjects, &g.DeletedBytes, &g.Orphans, &g.OrphanBytes} {
		*p = r.varint()
	}
	if err := r.done(); err != nil {
		return GCState{}, corrupt("gc state", err)
	}
	return g, nil
}

// DeadObject is an entry of the dead-object queue.
type DeadObject struct {
	// DeadAt is the log clock (unix ms) when its last index entry went.
	DeadAt int64
	Key    string
	// Size is the object's size; GCProgress does not carry it.
	Size int64
	// AppliedBy is the log position after the entry its last index
	// entry went in (from metadata level 5; 0 before): a copy whose next
	// position to apply is at least this plans no read of it.
	AppliedBy uint64
}

func appendDeadObjectKey(dst []byte, deadAt int64, key string) []byte {
	dst = append(dst, prefixDeadObject)
	dst = binary.BigEndian.AppendUint64(dst, uint64(max(deadAt, 0)))
	return append(dst, key...)
}

func appendObjectRefsKey(dst []byte, key string) []byte {
	dst = append(dst, prefixObjectRefs)
	return append(dst, key...)
}

// GCProgress is the janitor's report: the dead objects it deleted from
// the store (apply removes them from the queue and forgets them), how far
// the reconciler swept and the orphans it deleted, and the grace period
// of its --gc-grace. Any agent may propose it, any number of times: an
// entry no longer queued is skipped, a sweep mark below the current one
// changes nothing.
// Result: INVALID_REQUEST for a negative grace or count, or more than
// 4096 objects; nothing changes below metadata level 3.
type GCProgress struct {
	// GraceMs, when positive, becomes the grace period.
	GraceMs int64
	// Deleted are queue entries whose objects are gone from the store.
	Deleted []DeadObject
	// ReconciledTo, when above the current mark, becomes it.
	ReconciledTo int64
	// Orphans and OrphanBytes add to the orphan counts.
	Orphans, OrphanBytes int64
}

func (GCProgress) Type() CommandType { return TypeGCProgress }
func (GCProgress) version() uint16   { return 1 }

// minDeadObjectBytes is the smallest encoded DeadObject: two one-byte
// varints.
const minDeadObjectBytes = 2

func (c GCProgress) appendPayload(b []byte) []byte {
	b = appendVarint(b, c.GraceMs)
	b = appendUvarint(b, uint64(len(c.Deleted)))
	for _, d := range c.Deleted {
		b = appendVarint(b, d.DeadAt)
		b = appendString(b, d.Key)
	}
	b = appendVarint(b, c.ReconciledTo)
	b = appendVarint(b, c.Orphans)
	return appendVarint(b, c.OrphanBytes)
}

func decodeGCProgressV1(p []byte) (GCProgress, error) {
	r := &reader{b: p}
	var c GCProgress
	c.GraceMs = r.varint()
	n := r.count(minDeadObjectBytes)
	if n > 0 {
		c.Deleted = make([]DeadObject, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		c.Deleted[i].DeadAt = r.varint()
		c.Deleted[i].Key = r.string()
	}
	c.ReconciledTo = r.varint()
	c.Orphans = r.varint()
	c.OrphanBytes = r.varint()
	return c, r.done()
}

// gcOn loads the GC state into the applier's cache and reports whether
// garbage collection is on: the finalized metadata level is 3 or more.
// Below it apply writes nothing of garbage collection.
func (a *Applier) gcOn() (bool, error) {
	if a.gcLoaded {
		return a.gc != nil, nil
	}
	on, err := a.lifecycleOn()
	if err != nil || !on {
		return false, err
	}
	a.gcLoaded = true
	v, ok, err := a.get(keyGC)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, corrupt("gc state", errShort) // startGC writes it with level 3
	}
	g, err := decodeGCState(v)
	if err != nil {
		return false, err
	}
	a.gc = &g
	return true, nil
}

// flushGC writes the cached GC state if it changed.
func (a *Applier) flushGC() error {
	if a.gc == nil || !a.gcDirty {
		return nil
	}
	a.gcDirty = false
	return a.b.Set(keyGC, a.gc.encode())
}

// startGC turns garbage collection on when FinalizeFeatures raises the
// metadata level from below 3 to 3 or more: one pass over the index
// counts each object's entries, objects with none are queued as dead now,
// and the GC state is written. A new log (newLog: the bootstrap) has no
// index, so this costs nothing there.
func (a *Applier) startGC(from, to int16, newLog bool) error {
	if from >= MetadataLevel3 || to < MetadataLevel3 {
		return nil
	}
	refs := map[string]int64{}
	if err := a.eachObjectEntry([]byte{prefixIndex}, []byte{prefixIndex + 1}, func(e *IndexEntry) {
		refs[e.ObjectKey]++
	}); err != nil {
		return err
	}
	g := GCState{GraceMs: DefaultGCGrace, ReconciledTo: a.clock - a.clock%OrphanBucketMs}
	if !newLog {
		g.ReconciledTo = max(0, g.ReconciledTo-orphanLookback)
	}
	a.gc, a.gcLoaded, a.gcDirty = &g, true, true
	it, err := a.b.NewIter([]byte{prefixObject}, []byte{prefixObject + 1})
	if err != nil {
		return err
	}
	type obj struct {
		key  string
		size int64
	}
	var objs []obj
	for ok := it.First(); ok; ok = it.Next() {
		rec, err := decodeObjectRecord(it.Value())
		if err != nil {
			it.Close()
			return err
		}
		objs = append(objs, obj{string(it.Key()[1:]), rec.Size})
	}
	if err := it.Error(); err != nil {
		it.Close()
		return err
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, o := range objs {
		if n := refs[o.key]; n > 0 {
			if err := a.setObjectRefs(o.key, n); err != nil {
				return err
			}
			g.LiveObjects++
			g.LiveBytes += o.size
			continue
		}
		if err := a.queueDead(o.key, o.size); err != nil {
			return err
		}
	}
	return nil
}

// eachObjectEntry calls fn with every index entry in [start, end) that
// points into a data object (markers point at none).
func (a *Applier) eachObjectEntry(start, end []byte, fn func(*IndexEntry)) error {
	return scanIndex(a.b, start, end, func(e *IndexEntry) {
		if !e.Control && e.ObjectKey != "" {
			fn(e)
		}
	})
}

// releaseIndex drops the references of the index entries in [start,
// end), which the caller is about to delete: an object left with none
// joins the dead-object queue.
func (a *Applier) releaseIndex(start, end []byte) error {
	if on, err := a.gcOn(); err != nil || !on {
		return err
	}
	released := map[string]int64{}
	if err := a.eachObjectEntry(start, end, func(e *IndexEntry) { released[e.ObjectKey]++ }); err != nil {
		return err
	}
	for _, key := range sortedKeys(released) {
		a.keyBuf = appendObjectRefsKey(a.keyBuf[:0], key)
		v, ok, err := a.get(a.keyBuf)
		if err != nil {
			return err
		}
		if !ok {
			return corrupt("object refs", errRange) // an index entry of an object counted nowhere
		}
		refs, err := decodeObjectRefs(v)
		if err != nil {
			return err
		}
		refs -= released[key]
		if refs < 0 {
			return corrupt("object refs", errRange)
		}
		if refs > 0 {
			if err := a.setObjectRefs(key, refs); err != nil {
				return err
			}
			continue
		}
		if err := a.b.Delete(appendObjectRefsKey(a.keyBuf[:0], key)); err != nil {
			return err
		}
		rec, err := a.objectRecord(key)
		if err != nil {
			return err
		}
		a.gc.LiveObjects--
		a.gc.LiveBytes -= rec.Size
		a.gcDirty = true
		if err := a.queueDead(key, rec.Size); err != nil {
			return err
		}
	}
	return nil
}

// objectCommitted counts a committed object's index entries; with none
// (every batch refused) it is dead at once.
func (a *Applier) objectCommitted(key string, size, refs int64) error {
	if on, err := a.gcOn(); err != nil || !on {
		return err
	}
	if refs == 0 {
		return a.queueDead(key, size)
	}
	a.gc.LiveObjects++
	a.gc.LiveBytes += size
	a.gcDirty = true
	return a.setObjectRefs(key, refs)
}

// tooOld reports whether a CommitObject must be refused because its key
// time is below the orphan horizon: the reconciler may already have
// deleted the object (see the file comment).
func (a *Applier) tooOld(key string) (bool, error) {
	t, timed := ObjectKeyTime(key)
	if !timed {
		return false, nil
	}
	if on, err := a.gcOn(); err != nil || !on {
		return false, err
	}
	return t < a.gc.Horizon(a.clock), nil
}

func (a *Applier) setObjectRefs(key string, refs int64) error {
	a.keyBuf = appendObjectRefsKey(a.keyBuf[:0], key)
	a.valBuf = append(a.valBuf[:0], recordV1)
	a.valBuf = appendUvarint(a.valBuf, uint64(refs))
	return a.b.Set(a.keyBuf, a.valBuf)
}

func decodeObjectRefs(v []byte) (int64, error) {
	r := recordReader(v)
	n := r.uvarint()
	if n == 0 || n > 1<<62 {
		r.fail(errRange)
	}
	if err := r.done(); err != nil {
		return 0, corrupt("object refs", err)
	}
	return int64(n), nil
}

func (a *Applier) queueDead(key string, size int64) error {
	on5, err := a.level5On()
	if err != nil {
		return err
	}
	a.gc.DeadObjects++
	a.gc.DeadBytes += size
	a.gcDirty = true
	a.keyBuf = appendDeadObjectKey(a.keyBuf[:0], a.clock, key)
	a.valBuf = append(a.valBuf[:0], recordV1)
	a.valBuf = appendVarint(a.valBuf, size)
	if on5 {
		// Where it died, so the janitor can wait for every live copy
		// to apply past it (package gc).
		a.valBuf = appendUvarint(a.valBuf, a.pos+1)
	}
	return a.b.Set(a.keyBuf, a.valBuf)
}

// decodeDeadObject reads a dead object's value: its size, and from level
// 5 the position after its death.
func decodeDeadObject(v []byte) (size int64, appliedBy uint64, err error) {
	r := recordReader(v)
	size = r.varint()
	if len(r.b) > 0 {
		appliedBy = r.uvarint()
	}
	if err := r.done(); err != nil {
		return 0, 0, corrupt("dead object", err)
	}
	return size, appliedBy, nil
}

func (a *Applier) objectRecord(key string) (objectRecord, error) {
	v, ok, err := a.get(objectKey(key))
	if err != nil {
		return objectRecord{}, err
	}
	if !ok {
		return objectRecord{}, corrupt("object record", errShort)
	}
	return decodeObjectRecord(v)
}

func decodeObjectRecord(v []byte) (objectRecord, error) {
	r := recordReader(v)
	var o objectRecord
	o.Size = r.varint()
	o.CommittedAt = r.varint()
	o.Batches = r.int32()
	if err := r.done(); err != nil {
		return objectRecord{}, corrupt("object record", err)
	}
	return o, nil
}

func (a *Applier) gcProgress(c GCProgress) (Result, error) {
	if c.GraceMs < 0 || c.Orphans < 0 || c.OrphanBytes < 0 || len(c.Deleted) > maxGCDeleted {
		return failed(kerr.InvalidRequest, "negative grace or count, or more than %d objects", maxGCDeleted), nil
	}
	on, err := a.gcOn()
	if err != nil || !on {
		return Result{Message: "garbage collection waits for " + FeatureMetadata + " 3"}, err
	}
	g := a.gc
	a.gcDirty = true
	on5, err := a.level5On()
	if err != nil {
		return Result{}, err
	}
	if c.GraceMs > 0 && !on5 {
		// From level 5 the grace is GCGraceConfig's: the janitor's flag
		// no longer sets it.
		a.setGrace(c.GraceMs)
	}
	g.ReconciledTo = max(g.ReconciledTo, c.ReconciledTo)
	g.Orphans += c.Orphans
	g.OrphanBytes += c.OrphanBytes
	for _, d := range c.Deleted {
		a.keyBuf = appendDeadObjectKey(a.keyBuf[:0], d.DeadAt, d.Key)
		v, ok, err := a.get(a.keyBuf)
		if err != nil {
			return Result{}, err
		}
		if !ok {
			continue // removed before: another janitor's report
		}
		size, _, err := decodeDeadObject(v)
		if err != nil {
			return Result{}, err
		}
		if err := a.b.Delete(a.keyBuf); err != nil {
			return Result{}, err
		}
		if err := a.b.Delete(objectKey(d.Key)); err != nil {
			return Result{}, err
		}
		g.DeadObjects--
		g.DeadBytes -= size
		g.DeletedObjects++
		g.DeletedBytes += size
	}
	return Result{}, nil
}

// setGrace makes graceMs the grace period.
func (a *Applier) setGrace(graceMs int64) {
	g := a.gc
	if graceMs == g.GraceMs {
		return
	}
	if graceMs > g.GraceMs {
		// A longer grace would move the horizon back, below keys the
		// reconciler may already have judged orphans.
		g.FloorMs = g.Horizon(a.clock)
	}
	g.GraceMs = graceMs
	a.gcDirty = true
}

// ObjectKeyTime returns the time (unix ms) a data object key carries:
// package segment's layout "data/<bucket>/<ms>-<writer>-<seq>.strd", the
// bucket being the time's OrphanBucketMs-wide bucket, both zero-padded
// decimals (10 and 15 digits). ok is false for any other key.
func ObjectKeyTime(key string) (ms int64, ok bool) {
	const prefix = "data/"
	const bucketDigits, msDigits = 10, 15
	if len(key) < len(prefix)+bucketDigits+1+msDigits+1 || key[:len(prefix)] != prefix {
		return 0, false
	}
	rest := key[len(prefix):]
	bucket, ok := decimal(rest[:bucketDigits])
	if !ok || rest[bucketDigits] != '/' {
		return 0, false
	}
	rest = rest[bucketDigits+1:]
	ms, ok = decimal(rest[:msDigits])
	if !ok || rest[msDigits] != '-' || ms/OrphanBucketMs != bucket {
		return 0, false
	}
	return ms, true
}

func decimal(s string) (int64, bool) {
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}

// GC returns the garbage collection state; false below metadata level 3.
func (v *View) GC() (GCState, bool, error) {
	val, ok, err := v.get(keyGC)
	if err != nil || !ok {
		return GCState{}, false, err
	}
	g, err := decodeGCState(val)
	return g, err == nil, err
}

// DeadObjects returns up to limit queue entries that died at or before
// diedBy (log clock), oldest first.
func (v *View) DeadObjects(diedBy int64, limit int) ([]DeadObject, error) {
	// The queue sorts by death time: its keys up to diedBy end before
	// diedBy+1's (every time, if diedBy+1 would wrap).
	end := []byte{prefixDeadObject + 1}
	if diedBy < math.MaxInt64 {
		end = appendDeadObjectKey(nil, diedBy+1, "")
	}
	it, err := v.r.NewIter([]byte{prefixDeadObject}, end)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []DeadObject
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		k := it.Key()
		d := DeadObject{DeadAt: int64(binary.BigEndian.Uint64(k[1:9])), Key: string(k[9:])}
		var err error
		if d.Size, d.AppliedBy, err = decodeDeadObject(it.Value()); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, it.Error()
}

// ObjectKnown reports whether the database knows a data object: it was
// committed (or its commit refused) and the janitor has not yet deleted
// it.
func (v *View) ObjectKnown(key string) (bool, error) {
	_, ok, err := v.get(objectKey(key))
	return ok, err
}

// ObjectRefs returns how many index entries point into a data object (0
// when none, or below metadata level 3).
func (v *View) ObjectRefs(key string) (int64, error) {
	val, ok, err := v.get(appendObjectRefsKey(nil, key))
	if err != nil || !ok {
		return 0, err
	}
	return decodeObjectRefs(val)
}
