package fetch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/recordbatch"
)

// Storage verification (`strand storage verify`): walk the offset index of
// every partition and check that each data object it points at exists
// and that each entry's bytes verify as a read would check them (framing,
// CRC-32C, counts against the index), reading at a bounded pace.

const (
	// DefaultVerifyBytesPerSecond paces a verification that names no
	// rate: a background job, well below what a store serves a fetch.
	DefaultVerifyBytesPerSecond = 16 << 20
	// verifyMinChargeBytes is the least one GET costs against the rate,
	// so that an index of tiny entries is not read at thousands of GETs
	// a second.
	verifyMinChargeBytes = 16 << 10
	// verifyEntriesPerView bounds the entries read from one View: the
	// walk holds no Pebble snapshot while it reads the store.
	verifyEntriesPerView = 256
	// DefaultVerifyMaxObjects bounds the damaged objects a report lists,
	// maxVerifyRangesPerObject the offset ranges listed per object: the
	// report stays well under a megabyte of JSON however large the
	// damage.
	DefaultVerifyMaxObjects  = 256
	maxVerifyRangesPerObject = 16
)

// ViewSource opens views of the local copy; *replica.Replica is one.
type ViewSource interface {
	View() *meta.View
}

// VerifyOptions tune a verification. The zero value is the defaults.
type VerifyOptions struct {
	// BytesPerSecond paces the reads; each GET is charged at least
	// 16 KiB. <= 0 means DefaultVerifyBytesPerSecond.
	BytesPerSecond int64
	// MaxObjects bounds the damaged objects listed; more are counted.
	// <= 0 means DefaultVerifyMaxObjects.
	MaxObjects int
	// Damage, if set, is told of every damaged object found, as reads
	// tell it (a log line per object, metrics).
	Damage *DamageLog
}

// VerifyReport is what a verification found.
type VerifyReport struct {
	// Partitions, Entries and Bytes count what was checked: index
	// entries with object bytes (transaction markers have none) and
	// their bytes.
	Partitions int64 `json:"partitions"`
	Entries    int64 `json:"entries"`
	Bytes      int64 `json:"bytes"`
	// DamagedObjects counts the damaged objects found, Missing and
	// Corrupt by kind; Damaged lists the first MaxObjects of them.
	DamagedObjects int             `json:"damaged_objects"`
	Missing        int             `json:"missing"`
	Corrupt        int             `json:"corrupt"`
	Damaged        []DamagedObject `json:"damaged"`
	// DurationNS is how long the walk took, in nanoseconds.
	DurationNS time.Duration `json:"duration_ns"`
}

// DamagedObject is one damaged data object and the partition ranges it
// holds that cannot be served.
type DamagedObject struct {
	Key string `json:"key"`
	// Kind is "missing" or "corrupt"; Error is the first error met.
	Kind  string `json:"kind"`
	Error string `json:"error"`
	// Ranges are the damaged offset ranges, merged where contiguous;
	// MoreRanges counts those left out past a bound.
	Ranges     []DamagedRange `json:"ranges"`
	MoreRanges int            `json:"more_ranges,omitempty"`
}

// DamagedRange is offsets [FirstOffset, LastOffset] of one partition.
type DamagedRange struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	FirstOffset int64  `json:"first_offset"`
	LastOffset  int64  `json:"last_offset"`
}

// Verify walks the offset index of every partition as db holds it and
// checks every data object entry against store, at opts' pace. It
// returns an error only if the walk could not finish (ctx ended, the
// local copy failed, the store failed other than by a missing object);
// damage is in the report.
func Verify(ctx context.Context, db ViewSource, store objstore.Store, opts VerifyOptions) (VerifyReport, error) {
	if opts.BytesPerSecond <= 0 {
		opts.BytesPerSecond = DefaultVerifyBytesPerSecond
	}
	if opts.MaxObjects <= 0 {
		opts.MaxObjects = DefaultVerifyMaxObjects
	}
	w := verifier{
		db: db, store: store, opts: opts,
		pace:   newPacer(opts.BytesPerSecond, time.Now, nil),
		byKey:  make(map[string]int),
		missed: make(map[string]bool),
	}
	start := time.Now()
	err := w.run(ctx)
	w.report.DurationNS = time.Since(start)
	return w.report, err
}

type verifier struct {
	db     ViewSource
	store  objstore.Store
	opts   VerifyOptions
	pace   *pacer
	report VerifyReport
	// byKey indexes report.Damaged by object key; missed holds the
	// missing objects among them, whose further entries need no GET.
	byKey  map[string]int
	missed map[string]bool
}

func (w *verifier) run(ctx context.Context) error {
	v := w.db.View()
	topics, err := v.Topics()
	v.Close()
	if err != nil {
		return fmt.Errorf("fetch: verify: topics: %w", err)
	}
	for _, t := range topics {
		for p := range t.Partitions {
			if err := w.partition(ctx, t, p); err != nil {
				return err
			}
			w.report.Partitions++
		}
	}
	return nil
}

// partition checks one partition's entries, verifyEntriesPerView at a
// time from a fresh view.
func (w *verifier) partition(ctx context.Context, t meta.Topic, p int32) error {
	for next := int64(0); ; {
		entries, err := w.entries(t.ID, p, next)
		if err != nil {
			return fmt.Errorf("fetch: verify %s/%d: %w", t.Name, p, err)
		}
		if len(entries) == 0 {
			return nil
		}
		for i := range entries {
			e := &entries[i]
			if err := w.entry(ctx, t, p, e); err != nil {
				return err
			}
		}
		last := entries[len(entries)-1]
		next = last.BaseOffset + int64(last.Records)
	}
}

// entries returns up to verifyEntriesPerView index entries of a
// partition from offset on.
func (w *verifier) entries(id meta.TopicID, p int32, offset int64) ([]meta.IndexEntry, error) {
	v := w.db.View()
	defer v.Close()
	it, err := v.Seek(id, p, offset)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var es []meta.IndexEntry
	for len(es) < verifyEntriesPerView && it.Next() {
		es = append(es, it.Entry())
	}
	return es, it.Err()
}

// entry checks one index entry's bytes.
func (w *verifier) entry(ctx context.Context, t meta.Topic, p int32, e *meta.IndexEntry) error {
	if e.Control {
		return nil
	}
	w.report.Entries++
	w.report.Bytes += e.Length
	if w.missed[e.ObjectKey] {
		w.damaged(t, p, e, fmt.Errorf("%w: %s", ErrMissing, e.ObjectKey))
		return nil
	}
	if err := w.pace.wait(ctx, e.Length); err != nil {
		return err
	}
	data, err := w.store.Get(ctx, e.ObjectKey, e.Position, e.Length)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		// Retention may have dropped the entry, and the janitor the
		// object, since the view was read: damage only if a fresh
		// view still points at it.
		still, verr := w.stillIndexed(t.ID, p, e)
		if verr != nil {
			return fmt.Errorf("fetch: verify %s/%d: %w", t.Name, p, verr)
		}
		if still {
			w.damaged(t, p, e, fmt.Errorf("%w: %w", ErrMissing, err))
		}
		return nil
	case errors.Is(err, objstore.ErrInvalidRange):
		// The index points past the object's end.
		w.damaged(t, p, e, fmt.Errorf("%w: %s: %w", ErrCorrupt, e.ObjectKey, err))
		return nil
	case err != nil:
		return fmt.Errorf("fetch: verify: read %s: %w", e.ObjectKey, err)
	}
	if err := checkEntry(data, e); err != nil {
		w.damaged(t, p, e, err)
	}
	return nil
}

// stillIndexed reports whether a fresh view still holds e.
func (w *verifier) stillIndexed(id meta.TopicID, p int32, e *meta.IndexEntry) (bool, error) {
	es, err := w.entries(id, p, e.BaseOffset)
	if err != nil || len(es) == 0 {
		return false, err
	}
	return es[0].BaseOffset == e.BaseOffset && es[0].ObjectKey == e.ObjectKey, nil
}

// damaged records that e's bytes are damaged.
func (w *verifier) damaged(t meta.Topic, p int32, e *meta.IndexEntry, err error) {
	kind, _ := damageKind(err)
	if w.opts.Damage != nil {
		w.opts.Damage.Report(e.ObjectKey, t.ID, p, e.BaseOffset, err)
	}
	i, ok := w.byKey[e.ObjectKey]
	if !ok {
		w.report.DamagedObjects++
		if kind == DamageMissing {
			w.report.Missing++
		} else {
			w.report.Corrupt++
		}
		if len(w.report.Damaged) >= w.opts.MaxObjects {
			return
		}
		i = len(w.report.Damaged)
		w.byKey[e.ObjectKey] = i
		w.report.Damaged = append(w.report.Damaged, DamagedObject{Key: e.ObjectKey, Kind: kind.String(), Error: err.Error()})
		if kind == DamageMissing {
			w.missed[e.ObjectKey] = true
		}
	}
	d := &w.report.Damaged[i]
	r := DamagedRange{Topic: t.Name, Partition: p, FirstOffset: e.BaseOffset, LastOffset: e.LastOffset()}
	if n := len(d.Ranges); n > 0 {
		last := &d.Ranges[n-1]
		if last.Topic == r.Topic && last.Partition == r.Partition && last.LastOffset+1 == r.FirstOffset {
			last.LastOffset = r.LastOffset
			return
		}
	}
	if len(d.Ranges) >= maxVerifyRangesPerObject {
		d.MoreRanges++
		return
	}
	d.Ranges = append(d.Ranges, r)
}

// checkEntry checks an index entry's bytes as a read does: whole batches
// with matching CRC-32Cs (checkBatches) whose batch and record counts
// are the entry's.
func checkEntry(data []byte, e *meta.IndexEntry) error {
	if err := checkBatches(data); err != nil {
		return fmt.Errorf("%s at %d: %w", e.ObjectKey, e.Position, err)
	}
	var batches int32
	var records int64
	for rest := data; len(rest) > 0; batches++ {
		batch, next, _ := recordbatch.Next(rest) // checkBatches framed them
		h, err := recordbatch.ParseHeader(batch)
		if err != nil || h.LastOffsetDelta < 0 {
			return fmt.Errorf("%w: %s at %d: batch %d: %v (lastOffsetDelta %d)", ErrCorrupt, e.ObjectKey, e.Position, batches, err, h.LastOffsetDelta)
		}
		if e.OwnOffsets {
			// The batches carry their offsets, with gaps: each must
			// lie inside the entry, in order.
			if h.BaseOffset < e.BaseOffset+records || h.LastOffset() >= e.BaseOffset+int64(e.Records) {
				return fmt.Errorf("%w: %s at %d: batch %d at offsets %d..%d, outside or out of order in the entry's %d..%d",
					ErrCorrupt, e.ObjectKey, e.Position, batches, h.BaseOffset, h.LastOffset(), e.BaseOffset, e.LastOffset())
			}
			records = h.LastOffset() + 1 - e.BaseOffset
			rest = next
			continue
		}
		records += int64(h.LastOffsetDelta) + 1
		rest = next
	}
	if e.OwnOffsets {
		records = int64(e.Records) // a span, not a count: checked above
	}
	if batches != e.BatchCount || records != int64(e.Records) {
		return fmt.Errorf("%w: %s at %d: %d batches of %d records, index says %d batches of %d",
			ErrCorrupt, e.ObjectKey, e.Position, batches, records, e.BatchCount, e.Records)
	}
	return nil
}

// pacer spaces reads so that they never run ahead of rate bytes per
// second: each read takes n/rate seconds of the budget, and starts once
// the reads before it have used theirs. Time spent idle (a slow store)
// is not saved up for a burst later.
type pacer struct {
	rate int64
	next time.Time // when the next read may start
	now  func() time.Time
	// sleep waits d unless ctx ends first; nil means pause, on timer.
	sleep func(ctx context.Context, d time.Duration) error
	timer *time.Timer
}

func newPacer(rate int64, now func() time.Time, sleep func(context.Context, time.Duration) error) *pacer {
	return &pacer{rate: rate, now: now, sleep: sleep}
}

// wait waits until a read of n bytes (charged at least
// verifyMinChargeBytes) may start.
func (p *pacer) wait(ctx context.Context, n int64) error {
	now := p.now()
	start := p.next
	if start.Before(now) {
		start = now
	}
	p.next = start.Add(time.Duration(float64(max(n, verifyMinChargeBytes)) / float64(p.rate) * float64(time.Second)))
	d := start.Sub(now)
	switch {
	case d <= 0:
		return ctx.Err()
	case p.sleep != nil:
		return p.sleep(ctx, d)
	}
	// One timer for the whole walk, not one per read.
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d)
	}
	select {
	case <-p.timer.C:
		return nil
	case <-ctx.Done():
		p.timer.Stop()
		return ctx.Err()
	}
}
