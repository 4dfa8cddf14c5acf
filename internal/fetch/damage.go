package fetch

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/recordbatch"
)

// ErrMissing: a data object the offset index points at is not in the
// object store. Nothing removes an object while an index entry points
// into it (the janitor waits out a grace period after the last
// reference goes), so a missing one is damage, not a race, and retrying
// does not help until someone restores it.
var ErrMissing = errors.New("fetch: data object missing from the store")

// errMissingRecently marks an ErrMissing answered from the DamageLog's
// memory, without asking the store: it does not count as a new check.
var errMissingRecently = errors.New("found missing under a second ago")

// DamageKind says how a data object is damaged.
type DamageKind int

const (
	// DamageCorrupt: bytes that fail their framing or CRC-32C check, or
	// disagree with the index.
	DamageCorrupt DamageKind = iota
	// DamageMissing: the object is not in the store.
	DamageMissing
	numDamageKinds
)

func (k DamageKind) String() string {
	if k == DamageMissing {
		return "missing"
	}
	return "corrupt"
}

// damageKind classifies a read error: ok is false for an error that is
// not damage (the store failing, a cancelled read).
func damageKind(err error) (_ DamageKind, ok bool) {
	switch {
	case errors.Is(err, ErrMissing):
		return DamageMissing, true
	case errors.Is(err, ErrCorrupt):
		return DamageCorrupt, true
	}
	return 0, false
}

const (
	// maxRememberedObjects bounds the damaged objects a DamageLog
	// remembers; past it the one logged longest ago is forgotten (and is
	// logged again if met again).
	maxRememberedObjects = 1024
	// damageRelogInterval: an object still met damaged this long after it
	// was last logged is logged again, so an operator who looks later
	// still finds it in recent logs.
	damageRelogInterval = 10 * time.Minute
	// missingRecheckInterval: a read of an object found missing this
	// recently fails without asking the store again. Consumers retry a
	// failed partition at once, and every retry would otherwise be a
	// GET (a paid request on S3); a restored object is served again
	// within this interval.
	missingRecheckInterval = time.Second
	// maxDamageLinesPerMinute caps the log lines of all objects together,
	// so that even thousands of damaged objects (a wiped bucket) log a
	// bounded amount; the lines left out are counted in the next one.
	maxDamageLinesPerMinute = 60
)

// DamageStats counts what a DamageLog met since it was made.
type DamageStats struct {
	// Objects counts damaged objects, each once while remembered, by
	// kind (indexed by DamageKind).
	Objects [numDamageKinds]int64
	// Reads counts partition reads that failed on a damaged object.
	Reads [numDamageKinds]int64
}

// DamageLog records the damaged data objects that reads meet: it logs
// one line per object (not per read), counts objects and failed reads
// for metrics, and remembers missing objects briefly so retries do not
// each cost a GET. Memory is bounded by maxRememberedObjects. Safe for
// concurrent use.
type DamageLog struct {
	logger *slog.Logger
	now    func() time.Time

	objects, reads [numDamageKinds]atomic.Int64
	// missing counts the remembered objects of kind DamageMissing, so
	// that the read path skips the lock and the clock while there are
	// none.
	missing atomic.Int64

	mu struct {
		sync.Mutex
		seen map[string]*damagedObject
		// window, lines and suppressed enforce maxDamageLinesPerMinute.
		window            time.Time
		lines, suppressed int
	}
}

type damagedObject struct {
	kind DamageKind
	// logged is when the object was last logged, checked when it was
	// last found damaged in the store.
	logged, checked time.Time
}

// NewDamageLog returns a DamageLog writing to logger (nil: nowhere).
func NewDamageLog(logger *slog.Logger) *DamageLog {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d := &DamageLog{logger: logger, now: time.Now}
	d.mu.seen = make(map[string]*damagedObject)
	return d
}

// Stats returns the counts so far.
func (d *DamageLog) Stats() DamageStats {
	var st DamageStats
	for k := range numDamageKinds {
		st.Objects[k] = d.objects[k].Load()
		st.Reads[k] = d.reads[k].Load()
	}
	return st
}

// Report records that a read of a partition at offset failed with err
// on object key; errors that are not damage are ignored. It logs the
// object unless it was logged within damageRelogInterval.
func (d *DamageLog) Report(key string, topic meta.TopicID, partition int32, offset int64, err error) {
	kind, ok := damageKind(err)
	if !ok {
		return
	}
	d.reads[kind].Add(1)
	now := d.now()
	d.mu.Lock()
	o := d.mu.seen[key]
	switch {
	case o == nil:
		if len(d.mu.seen) >= maxRememberedObjects {
			d.forgetOldestLocked()
		}
		o = &damagedObject{kind: kind}
		d.mu.seen[key] = o
		d.objects[kind].Add(1)
		d.countMissingLocked(kind, 1)
	case o.kind != kind:
		// Restored but damaged, or deleted after being found damaged.
		d.countMissingLocked(o.kind, -1)
		d.countMissingLocked(kind, 1)
		o.kind = kind
		o.logged = time.Time{}
		d.objects[kind].Add(1)
	case now.Sub(o.logged) < damageRelogInterval:
		if !errors.Is(err, errMissingRecently) {
			o.checked = now
		}
		d.mu.Unlock()
		return
	}
	o.logged = now
	if !errors.Is(err, errMissingRecently) {
		o.checked = now
	}
	suppressed, ok := d.takeLineLocked(now)
	d.mu.Unlock()
	if !ok {
		return
	}
	args := []any{"object", key, "topic_id", topic, "partition", partition, "offset", offset, "err", err}
	if suppressed > 0 {
		args = append(args, "lines_suppressed", suppressed)
	}
	if kind == DamageMissing {
		d.logger.Error("fetch: a data object the index points at is missing; reads of it fail until it is restored", args...)
	} else {
		d.logger.Error("fetch: a data object is corrupt; its damaged batches are not served", args...)
	}
}

// takeLineLocked reports whether one more line fits this minute, and how
// many were suppressed since the last line logged.
func (d *DamageLog) takeLineLocked(now time.Time) (suppressed int, ok bool) {
	if now.Sub(d.mu.window) >= time.Minute {
		d.mu.window, d.mu.lines = now, 0
	}
	if d.mu.lines >= maxDamageLinesPerMinute {
		d.mu.suppressed++
		return 0, false
	}
	d.mu.lines++
	suppressed, d.mu.suppressed = d.mu.suppressed, 0
	return suppressed, true
}

// forgetOldestLocked drops the remembered object logged longest ago.
// A linear scan: it runs only when a new damaged object is met with
// the set full.
func (d *DamageLog) forgetOldestLocked() {
	var oldest string
	var at time.Time
	for k, o := range d.mu.seen {
		if oldest == "" || o.logged.Before(at) {
			oldest, at = k, o.logged
		}
	}
	d.countMissingLocked(d.mu.seen[oldest].kind, -1)
	delete(d.mu.seen, oldest)
}

func (d *DamageLog) countMissingLocked(k DamageKind, delta int64) {
	if k == DamageMissing {
		d.missing.Add(delta)
	}
}

// missingRecently reports whether key was found missing within
// missingRecheckInterval.
func (d *DamageLog) missingRecently(key string) bool {
	if d.missing.Load() == 0 {
		return false
	}
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	o := d.mu.seen[key]
	return o != nil && o.kind == DamageMissing && now.Sub(o.checked) < missingRecheckInterval
}

// checkBatches is the Check the Reader passes to Cache.Get: data, a byte
// range that starts and ends at batch boundaries (an index entry, or
// entries of one object with other partitions' batches between them,
// since an object's chunks tile it), must be whole v2 batches back to
// back, each with a matching CRC-32C. It does not allocate unless it
// fails. The CRC does not cover a batch's baseOffset (which Read
// rewrites anyway), batchLength (the framing catches it) or
// partitionLeaderEpoch.
func checkBatches(data []byte) error {
	for rest := data; len(rest) > 0; {
		batch, next, err := recordbatch.Next(rest)
		if err == nil {
			err = recordbatch.CheckCRC(batch)
		}
		if err != nil {
			return fmt.Errorf("%w: batch at byte %d of the range: %w", ErrCorrupt, len(data)-len(rest), err)
		}
		rest = next
	}
	return nil
}
