package fetch

import (
	"context"
	"time"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
)

// SetDamageClock makes d read the time from now.
func SetDamageClock(d *DamageLog, now func() time.Time) { d.now = now }

// RememberedObjects is how many damaged objects d remembers.
func RememberedObjects(d *DamageLog) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.mu.seen)
}

// WithCopySlots returns a Reader like r with n copy slots of its own,
// calling copying while a read holds one and waiting when a read finds
// none free.
func WithCopySlots(r *Reader, n int, copying, waiting func()) *Reader {
	c := *r
	c.slots = make(copySlots, n)
	c.copying, c.waiting = copying, waiting
	return &c
}

// Span is one coalesced GET: bytes [Start, End) of object Key.
type Span struct {
	Key        string
	Start, End int64
}

// Coalesce returns the GETs read-ahead makes for entries.
func Coalesce(entries []meta.IndexEntry, maxGap, maxSpan int64) []Span {
	var out []Span
	for _, s := range coalesce(entries, maxGap, maxSpan, nil) {
		out = append(out, Span{s.key, s.start, s.end})
	}
	return out
}

// ReadAheadRange starts a read-ahead GET of bytes [pos, pos+length) of
// key into c, checked by check.
func ReadAheadRange(ctx context.Context, c *Cache, store objstore.Store, key string, pos, length int64, check Check) bool {
	return c.readAhead(ctx, store, key, pos, length, check, nil)
}
