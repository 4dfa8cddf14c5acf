// Package clientmetrics owns KIP-714 client telemetry on an agent: the
// subscription a client is handed (GetTelemetrySubscriptions), the
// checks of its pushes (PushTelemetry), and the metrics it pushed,
// decoded from OTLP and re-exported on the agent's /metrics with the
// client's instance id and client id as labels.
//
// The state is per agent and in memory: a subscription id is a hash of
// the agent's telemetry configuration and the client instance id, so
// agents configured alike accept each other's subscriptions, and a push
// to an agent that never saw the client (it moved, or this agent
// restarted) is taken as Kafka takes it, by creating the client's entry.
//
// Everything is bounded: clients (MaxClients, the least recently heard
// from evicted first), series across clients (MaxSeries, the same), the
// payload (MaxBytes, before and after decompression), and a client's
// series expire when it has not pushed for three push intervals.
//
// Time is read from Config.Clock only; handlers call in from connection
// goroutines, so a Manager is safe for concurrent use.
package clientmetrics

import (
	"container/list"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/codec"
)

// Defaults of Config's zero fields.
const (
	// DefaultPushInterval is shorter than Kafka's 5 minutes: pushes here
	// feed a Prometheus scrape, and a minute keeps them fresh without
	// costing clients much.
	DefaultPushInterval = time.Minute
	// DefaultMaxBytes is Kafka's telemetry.max.bytes.
	DefaultMaxBytes   = 1 << 20
	DefaultMaxClients = 1000
	DefaultMaxSeries  = 20000
	// minPushInterval keeps a misconfiguration from having every client
	// push continuously; kgo waits at least a second anyway.
	minPushInterval = 100 * time.Millisecond
)

// Config configures a Manager.
type Config struct {
	// Metrics are the metric name prefixes clients are asked to push,
	// as Kafka's client-metrics "metrics" config: an element "" (or
	// "*") asks for all. Empty asks for none: clients then push nothing
	// and ask again after PushInterval.
	Metrics []string
	// PushInterval is the subscription's push interval; zero means
	// DefaultPushInterval.
	PushInterval time.Duration
	// MaxBytes bounds a push's metrics payload, compressed and
	// decompressed (TelemetryMaxBytes); zero means DefaultMaxBytes.
	MaxBytes int32
	// MaxClients bounds the clients tracked; zero means DefaultMaxClients.
	MaxClients int
	// MaxSeries bounds the re-exported series of all clients; zero
	// means DefaultMaxSeries.
	MaxSeries int
	// Clock is the time source; nil means clock.Real.
	Clock clock.Clock
}

// Errors of Subscribe and Push, each one Kafka error code (the kafka
// package maps them).
var (
	// ErrUnknownSubscription: the push names a subscription this
	// configuration does not give the client (UNKNOWN_SUBSCRIPTION_ID);
	// the client asks for its subscription again.
	ErrUnknownSubscription = errors.New("clientmetrics: unknown subscription id")
	// ErrTooLarge: the payload exceeds MaxBytes (TELEMETRY_TOO_LARGE).
	ErrTooLarge = errors.New("clientmetrics: metrics payload too large")
	// ErrThrottled: a request came before the push interval passed
	// (THROTTLING_QUOTA_EXCEEDED).
	ErrThrottled = errors.New("clientmetrics: telemetry request before the push interval")
	// ErrTerminated: a push after the client's terminating push
	// (INVALID_REQUEST).
	ErrTerminated = errors.New("clientmetrics: push after a terminating push")
	// ErrCompression: a compression type the subscription does not
	// accept (UNSUPPORTED_COMPRESSION_TYPE).
	ErrCompression = errors.New("clientmetrics: unsupported compression type")
	// ErrPayload: the payload does not decompress or decode (INVALID_RECORD).
	ErrPayload = errors.New("clientmetrics: metrics payload unreadable")
	// ErrInstanceID: the zero client instance id on a push (INVALID_REQUEST).
	ErrInstanceID = errors.New("clientmetrics: push without a client instance id")
)

// acceptedCompression is Kafka's list, in its order of preference.
var acceptedCompression = []int8{
	int8(recordbatch.CompressionZstd), int8(recordbatch.CompressionLZ4),
	int8(recordbatch.CompressionGzip), int8(recordbatch.CompressionSnappy),
}

// Subscription is GetTelemetrySubscriptions' answer.
type Subscription struct {
	InstanceID               [16]byte
	ID                       int32
	AcceptedCompressionTypes []int8
	PushInterval             time.Duration
	MaxBytes                 int32
	// DeltaTemporality is false: Prometheus wants cumulative counters.
	DeltaTemporality bool
	RequestedMetrics []string
}

// Push is one PushTelemetry request.
type Push struct {
	InstanceID     [16]byte
	SubscriptionID int32
	Terminating    bool
	Compression    int8
	Metrics        []byte
	// ClientID is the request header's client id, a label of the
	// client's series.
	ClientID string
}

// Manager tracks telemetry clients and their series. Build one with New.
type Manager struct {
	cfg      Config
	clk      clock.Clock
	metrics  []string
	cfgHash  uint32
	counters managerCounters

	mu struct {
		sync.Mutex
		clients map[[16]byte]*client
		// lru orders clients by last request, oldest in front; its
		// values are *client.
		lru    *list.List
		series int
		// families fixes each exported name's kind and help at its
		// first push: Prometheus refuses a scrape whose families
		// disagree, so a later client's conflicting point is dropped.
		families map[string]family
	}
}

type family struct {
	kind Kind
	help string
	refs int
}

type client struct {
	id       [16]byte
	idText   string
	clientID string
	lastGet  time.Time
	lastPush time.Time
	// pushed and subscribed say which came last: a push after a
	// subscription, or the reverse, is never early.
	pushed, subscribed bool
	terminating        bool
	elem               *list.Element
	series             []series
}

type series struct {
	name   string // Prometheus name
	kind   Kind
	labels []string // names, sorted; client_instance_id and client_id first
	values []string
	value  float64
}

// New returns a Manager for cfg, its zero fields defaulted.
func New(cfg Config) *Manager {
	if cfg.PushInterval == 0 {
		cfg.PushInterval = DefaultPushInterval
	}
	cfg.PushInterval = max(cfg.PushInterval, minPushInterval)
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.MaxSeries <= 0 {
		cfg.MaxSeries = DefaultMaxSeries
	}
	m := &Manager{cfg: cfg, clk: clock.OrReal(cfg.Clock)}
	for _, p := range cfg.Metrics {
		if p == "*" {
			p = ""
		}
		if !slices.Contains(m.metrics, p) {
			m.metrics = append(m.metrics, p)
		}
	}
	if slices.Contains(m.metrics, "") {
		m.metrics = []string{""}
	}
	h := crc32.NewIEEE()
	h.Write([]byte(strings.Join(m.metrics, "\x00")))
	binary.Write(h, binary.BigEndian, int64(cfg.PushInterval))
	binary.Write(h, binary.BigEndian, cfg.MaxBytes)
	m.cfgHash = h.Sum32()
	m.mu.clients = map[[16]byte]*client{}
	m.mu.lru = list.New()
	m.mu.families = map[string]family{}
	m.counters = newManagerCounters(m)
	return m
}

// subscriptionID is the id a client is given: the same on every agent
// configured alike, different once the configuration changes (then a
// push with the old id is UNKNOWN_SUBSCRIPTION_ID and the client asks
// again, as with Kafka's altered client-metrics resources).
func (m *Manager) subscriptionID(instance [16]byte) int32 {
	return int32(crc32.Update(m.cfgHash, crc32.IEEETable, instance[:]) & 0x7fffffff)
}

// Subscribe answers GetTelemetrySubscriptions for instance, the zero id
// asking for a new one (made with newID). A client asking again before
// its push interval passed, without pushing in between, is
// ErrThrottled, as Kafka answers.
func (m *Manager) Subscribe(instance [16]byte, newID func() [16]byte) (Subscription, error) {
	now := m.clk.Now()
	if instance == ([16]byte{}) {
		instance = newID()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.clientLocked(instance, now)
	if !c.lastGet.IsZero() && !c.pushed && now.Sub(c.lastGet) < m.cfg.PushInterval {
		m.counters.subscribe(resultThrottled)
		return Subscription{}, ErrThrottled
	}
	c.lastGet = now
	c.subscribed, c.pushed = true, false
	c.terminating = false
	m.counters.subscribe(resultOK)
	return Subscription{
		InstanceID:               instance,
		ID:                       m.subscriptionID(instance),
		AcceptedCompressionTypes: acceptedCompression,
		PushInterval:             m.cfg.PushInterval,
		MaxBytes:                 m.cfg.MaxBytes,
		RequestedMetrics:         slices.Clone(m.metrics),
	}, nil
}

// Push checks and takes one push, replacing the client's series with
// the payload's.
func (m *Manager) Push(p Push) error {
	err := m.push(p)
	m.counters.push(resultOf(err))
	return err
}

func (m *Manager) push(p Push) error {
	now := m.clk.Now()
	if p.InstanceID == ([16]byte{}) {
		return ErrInstanceID
	}
	if p.SubscriptionID != m.subscriptionID(p.InstanceID) {
		return ErrUnknownSubscription
	}
	if p.Compression != 0 && !slices.Contains(acceptedCompression, p.Compression) {
		return ErrCompression
	}
	if len(p.Metrics) > int(m.cfg.MaxBytes) {
		return ErrTooLarge
	}
	m.mu.Lock()
	c := m.clientLocked(p.InstanceID, now)
	switch {
	case c.terminating:
		m.mu.Unlock()
		return ErrTerminated
	case !p.Terminating && !c.lastPush.IsZero() && !c.subscribed &&
		now.Sub(c.lastPush) < m.cfg.PushInterval/2:
		// Half the interval: clients jitter their pushes, and Kafka
		// refuses only pushes that come clearly too often.
		m.mu.Unlock()
		return ErrThrottled
	}
	c.lastPush = now
	c.pushed, c.subscribed = true, false
	c.terminating = p.Terminating
	if p.ClientID != "" {
		c.clientID = p.ClientID
	}
	m.mu.Unlock()

	// Decompressing and decoding happen outside the lock: they cost
	// up to MaxBytes of work.
	raw, err := codec.Decompress(recordbatch.Compression(p.Compression), p.Metrics, int(m.cfg.MaxBytes))
	switch {
	case errors.Is(err, codec.ErrTooLarge):
		return ErrTooLarge
	case err != nil:
		return ErrPayload
	}
	d, err := DecodeMetrics(raw)
	if err != nil {
		return ErrPayload
	}
	m.counters.dropped(dropUnsupported, d.Skipped)

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.clients[p.InstanceID] != c { // evicted meanwhile
		return nil
	}
	m.setSeriesLocked(c, d.Points)
	return nil
}

// clientLocked returns instance's entry, made (evicting the least
// recently heard from past MaxClients) if new, and marks it used.
func (m *Manager) clientLocked(instance [16]byte, now time.Time) *client {
	m.expireLocked(now)
	if c, ok := m.mu.clients[instance]; ok {
		m.mu.lru.MoveToBack(c.elem)
		return c
	}
	for len(m.mu.clients) >= m.cfg.MaxClients {
		m.evictLocked(m.mu.lru.Front().Value.(*client))
		m.counters.evicted.Inc()
	}
	c := &client{id: instance, idText: uuidText(instance)}
	c.elem = m.mu.lru.PushBack(c)
	m.mu.clients[instance] = c
	return c
}

// expireLocked forgets clients not heard from for three push
// intervals: they stopped, and their last values would be exported as
// current forever.
func (m *Manager) expireLocked(now time.Time) {
	for e := m.mu.lru.Front(); e != nil; {
		c := e.Value.(*client)
		last := c.lastPush
		if c.lastGet.After(last) {
			last = c.lastGet
		}
		if now.Sub(last) < 3*m.cfg.PushInterval {
			return
		}
		e = e.Next()
		m.evictLocked(c)
	}
}

func (m *Manager) evictLocked(c *client) {
	m.dropSeriesLocked(c)
	m.mu.lru.Remove(c.elem)
	delete(m.mu.clients, c.id)
}

func (m *Manager) dropSeriesLocked(c *client) {
	for _, s := range c.series {
		f := m.mu.families[s.name]
		if f.refs--; f.refs <= 0 {
			delete(m.mu.families, s.name)
		} else {
			m.mu.families[s.name] = f
		}
	}
	m.mu.series -= len(c.series)
	c.series = nil
}

// reservedPrefixes are the agent's own families: a client cannot push
// into them.
var reservedPrefixes = []string{"strand_", "go_", "process_", "promhttp_"}

func (m *Manager) setSeriesLocked(c *client, points []Point) {
	m.dropSeriesLocked(c)
	seen := make(map[string]bool, len(points))
	for _, p := range points {
		name := PromName(p.Name)
		if slices.ContainsFunc(reservedPrefixes, func(r string) bool { return strings.HasPrefix(name, r) }) {
			m.counters.dropped(dropReserved, 1)
			continue
		}
		if f, ok := m.mu.families[name]; ok && f.kind != p.Kind {
			m.counters.dropped(dropConflict, 1)
			continue
		}
		s := series{name: name, kind: p.Kind, value: p.Value}
		labels := map[string]string{}
		for _, a := range p.Attrs {
			if l := promLabel(a[0]); l != "" && l != "client_instance_id" && l != "client_id" {
				labels[l] = a[1]
			}
		}
		labels["client_instance_id"], labels["client_id"] = c.idText, c.clientID
		for l := range labels {
			s.labels = append(s.labels, l)
		}
		slices.Sort(s.labels)
		for _, l := range s.labels {
			s.values = append(s.values, labels[l])
		}
		key := name + "\xff" + strings.Join(s.values, "\xff") + "\xff" + strings.Join(s.labels, "\xff")
		if seen[key] { // the same series twice in one push: the last wins
			for i := range c.series {
				if c.series[i].name == s.name && slices.Equal(c.series[i].values, s.values) && slices.Equal(c.series[i].labels, s.labels) {
					c.series[i].value = s.value
				}
			}
			continue
		}
		for m.mu.series >= m.cfg.MaxSeries {
			oldest := m.mu.lru.Front().Value.(*client)
			if oldest == c {
				break
			}
			m.evictLocked(oldest)
			m.counters.evicted.Inc()
		}
		if m.mu.series >= m.cfg.MaxSeries {
			m.counters.dropped(dropCap, 1)
			continue
		}
		seen[key] = true
		f := m.mu.families[name]
		if f.refs == 0 {
			f = family{kind: p.Kind, help: p.Help}
			if f.help == "" {
				f.help = "Pushed by Kafka clients (KIP-714 client telemetry): " + p.Name
			}
		}
		f.refs++
		m.mu.families[name] = f
		c.series = append(c.series, s)
		m.mu.series++
	}
}

func uuidText(id [16]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}

// Describe sends nothing: the pushed families are not known in advance,
// so the collector is unchecked. The Manager's own series are in
// Collectors.
func (m *Manager) Describe(chan<- *prometheus.Desc) {}

// Collect exports every tracked client's series. It copies what it
// exports under the lock and sends outside it, so a slow scrape does not
// hold pushes up: a push replaces a client's series slice, never
// changing one already taken.
func (m *Manager) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	m.expireLocked(m.clk.Now())
	taken := make([][]series, 0, len(m.mu.clients))
	help := make(map[string]string, len(m.mu.families))
	for e := m.mu.lru.Front(); e != nil; e = e.Next() {
		taken = append(taken, e.Value.(*client).series)
	}
	for name, f := range m.mu.families {
		help[name] = f.help
	}
	m.mu.Unlock()

	descs := map[string]*prometheus.Desc{}
	for _, ss := range taken {
		for _, s := range ss {
			key := s.name + "\xff" + strings.Join(s.labels, "\xff")
			d, ok := descs[key]
			if !ok {
				d = prometheus.NewDesc(s.name, help[s.name], s.labels, nil)
				descs[key] = d
			}
			t := prometheus.GaugeValue
			if s.kind == Counter {
				t = prometheus.CounterValue
			}
			if mt, err := prometheus.NewConstMetric(d, t, s.value, s.values...); err == nil {
				ch <- mt
			}
		}
	}
}

var _ prometheus.Collector = (*Manager)(nil)
