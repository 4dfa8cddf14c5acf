// Package quota owns client quotas as Kafka enforces them: which of the
// configured quotas applies to a client (Kafka's precedence of user and
// client id entities), the rate a client uses measured over sampled
// windows, and the throttle time a client over its quota gets. It reads
// no configuration and does no I/O: the Kafka server hands it the quotas
// from the metadata database (Set), records what each request used and
// mutes the connection for the throttle time it returns.
package quota

import "time"

// Window is how rates are measured, Kafka's quota.window.num samples of
// quota.window.size.seconds each.
type Window struct {
	Samples int
	Size    time.Duration
}

// Kafka's defaults.
const (
	DefaultSamples    = 11
	DefaultWindowSize = time.Second
)

func (w Window) orDefault() Window {
	if w.Samples < 1 {
		w.Samples = DefaultSamples
	}
	if w.Size <= 0 {
		w.Size = DefaultWindowSize
	}
	return w
}

// rate is Kafka's Rate over a SampledStat: a ring of samples, each
// summing what was recorded in one window that began at its first
// record; a sample older than the whole ring counts as empty. The rate is
// the sum over the elapsed time since the oldest sample began, but never
// over less than Samples-1 windows, so a client's first bytes do not read
// as a burst. Times are nanoseconds of the caller's clock. Not safe for
// concurrent use.
type rate struct {
	samples []sample
	current int
}

type sample struct {
	start int64
	value float64
}

func newRate(w Window, now int64) *rate {
	r := &rate{samples: make([]sample, 1, w.Samples)}
	r.samples[0].start = now
	return r
}

// record adds v at now, in the current window or a new one.
func (r *rate) record(w Window, v float64, now int64) {
	s := &r.samples[r.current]
	if now-s.start >= int64(w.Size) {
		r.current = (r.current + 1) % w.Samples
		if r.current == len(r.samples) {
			r.samples = append(r.samples, sample{})
		}
		s = &r.samples[r.current]
		*s = sample{start: now}
	}
	s.value += v
}

// purge empties the samples that began a whole ring ago.
func (r *rate) purge(w Window, now int64) {
	expire := int64(w.Samples) * int64(w.Size)
	for i := range r.samples {
		if now-r.samples[i].start >= expire {
			r.samples[i] = sample{start: now}
		}
	}
}

// windowSize is the time the rate is measured over at now: since the
// oldest sample began, at least Samples-1 whole windows.
func (r *rate) windowSize(w Window, now int64) time.Duration {
	r.purge(w, now)
	oldest := r.samples[0].start
	for _, s := range r.samples[1:] {
		oldest = min(oldest, s.start)
	}
	elapsed := now - oldest
	full := elapsed / int64(w.Size)
	if minFull := int64(w.Samples - 1); full < minFull {
		elapsed += (minFull - full) * int64(w.Size)
	}
	return time.Duration(elapsed)
}

// measure is the rate at now, per second.
func (r *rate) measure(w Window, now int64) float64 {
	size := r.windowSize(w, now)
	var total float64
	for _, s := range r.samples {
		total += s.value
	}
	return total / size.Seconds()
}

// throttle is how long a client whose rate is value against bound at
// now must wait for its rate to fall back to the bound (Kafka's
// QuotaUtils.throttleTime): the excess as a share of the bound, times
// the window the rate was measured over. Zero at or under the bound.
func (r *rate) throttle(w Window, bound, value float64, now int64) time.Duration {
	if value <= bound {
		return 0
	}
	size := r.windowSize(w, now)
	return time.Duration((value - bound) / bound * float64(size))
}
