package fetch

import "time"

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
