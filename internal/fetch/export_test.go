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
