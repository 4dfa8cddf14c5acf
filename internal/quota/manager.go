package quota

import (
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/clock"
)

// Config configures a Manager.
type Config struct {
	// Window is how rates are measured; zero fields are Kafka's
	// defaults (11 samples of 1 s).
	Window Window
	// IdleExpiry drops what the Manager knows of a client that recorded
	// nothing for this long (Kafka expires its quota sensors after an
	// hour); zero means an hour.
	IdleExpiry time.Duration
	// MaxClients bounds the clients measured per kind (about 250 bytes
	// each); when a new one comes with the table full, the one idle
	// longest is forgotten. Only clients a quota applies to are
	// measured. Zero means 20000.
	MaxClients int
	// Clock is the time source; nil means the wall clock.
	Clock clock.Clock
}

const (
	defaultIdleExpiry = time.Hour
	defaultMaxClients = 20_000
)

// Manager measures what clients use, per kind, and says how long one
// over its quota is throttled. Safe for concurrent use.
type Manager struct {
	window     Window
	idleExpiry time.Duration
	maxClients int
	clock      clock.Clock
	// epoch is where the rates' nanosecond times start.
	epoch time.Time

	mu struct {
		sync.Mutex
		clients [numKinds]map[Client]*usage
		// nextSweep is when idle clients are next looked for.
		nextSweep int64
	}
}

type usage struct {
	rate *rate
	// last is when the client last recorded.
	last int64
}

// NewManager returns a Manager measuring nothing yet.
func NewManager(cfg Config) *Manager {
	m := &Manager{
		window:     cfg.Window.orDefault(),
		idleExpiry: cfg.IdleExpiry,
		maxClients: cfg.MaxClients,
		clock:      clock.OrReal(cfg.Clock),
	}
	if m.idleExpiry <= 0 {
		m.idleExpiry = defaultIdleExpiry
	}
	if m.maxClients <= 0 {
		m.maxClients = defaultMaxClients
	}
	m.epoch = m.clock.Now()
	for k := range m.mu.clients {
		m.mu.clients[k] = map[Client]*usage{}
	}
	return m
}

func (m *Manager) now() int64 { return int64(m.clock.Now().Sub(m.epoch)) }

// MaxByteThrottle bounds the throttle of a byte rate. Kafka leaves it
// unbounded: a request of more than this much quota (100 MiB against
// 100 KiB/s) is held this long, and its bytes keep the rate over the
// bound, so the requests after it are throttled in turn.
const MaxByteThrottle = 10 * time.Minute

// MaxThrottle bounds the throttle of kind k: MaxByteThrottle for byte
// rates, one window for request_percentage (Kafka's
// ClientRequestQuotaManager bounds it so).
func (m *Manager) MaxThrottle(k Kind) time.Duration {
	if k == Request {
		return m.window.Size
	}
	return MaxByteThrottle
}

// Record adds v to what c used of kind k and returns how long c must
// now be throttled against bound (zero when within it), rounded to the
// millisecond as Kafka does. As in Kafka, the usage is recorded even
// when it breaks the quota.
func (m *Manager) Record(k Kind, c Client, bound, v float64) time.Duration {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.usageLocked(k, c, now)
	u.rate.record(m.window, v, now)
	u.last = now
	value := u.rate.measure(m.window, now)
	d := u.rate.throttle(m.window, bound, value, now).Round(time.Millisecond)
	return min(d, m.MaxThrottle(k))
}

// Unrecord takes v back from what c used of kind k: a Fetch that was
// throttled answers no records, and they do not count (Kafka's
// unrecordQuotaSensor).
func (m *Manager) Unrecord(k Kind, c Client, v float64) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if u, ok := m.mu.clients[k][c]; ok {
		u.rate.record(m.window, -v, now)
	}
}

// Rate is what c uses of kind k per second now; zero for a client not
// measured.
func (m *Manager) Rate(k Kind, c Client) float64 {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.mu.clients[k][c]
	if !ok {
		return 0
	}
	return u.rate.measure(m.window, now)
}

// MaxInWindow is the most a client with quota bound may take in one
// request: what the bound allows over Samples-1 windows (Kafka's
// getMaxValueInQuotaWindow, which caps a Fetch's MaxBytes).
func (m *Manager) MaxInWindow(bound float64) float64 {
	return bound * float64(m.window.Samples-1) * m.window.Size.Seconds()
}

// Clients is how many clients of kind k are measured.
func (m *Manager) Clients(k Kind) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.mu.clients[k])
}

// usageLocked returns c's usage of kind k, made if new: idle clients
// are swept first, at most once per window, and with the table full the
// one idle longest makes room.
func (m *Manager) usageLocked(k Kind, c Client, now int64) *usage {
	if now >= m.mu.nextSweep {
		m.sweepLocked(now)
	}
	tab := m.mu.clients[k]
	if u, ok := tab[c]; ok {
		return u
	}
	if len(tab) >= m.maxClients {
		var oldest Client
		first := true
		var at int64
		for id, u := range tab {
			if first || u.last < at {
				oldest, at, first = id, u.last, false
			}
		}
		delete(tab, oldest)
	}
	u := &usage{rate: newRate(m.window, now), last: now}
	tab[c] = u
	return u
}

func (m *Manager) sweepLocked(now int64) {
	m.mu.nextSweep = now + int64(m.window.Size)
	for _, tab := range m.mu.clients {
		for c, u := range tab {
			if now-u.last >= int64(m.idleExpiry) {
				delete(tab, c)
			}
		}
	}
}
