package share

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandkafka/strand/internal/meta"
)

// Metrics counts what this agent's share path did (acquisitions,
// acknowledgements, archives and lock timeouts it proposed), and reads
// the in-flight records of the copy at scrape time: those are the
// cluster's, so any agent reports them.
type Metrics struct {
	acquired     prometheus.Counter
	acked        *prometheus.CounterVec // type
	ackTypes     [5]prometheus.Counter
	archived     prometheus.Counter
	released     prometheus.Counter
	lockTimeouts prometheus.Counter
	fetches      prometheus.Counter
	sessions     func() int
	sessionsDesc *prometheus.Desc
	inflight     *prometheus.Desc
	view         func() *meta.View
}

// maxScrapedStates bounds the share-partition states one scrape reads.
const maxScrapedStates = 100000

// NewMetrics returns the share metrics; view reads the local copy at
// scrape time.
func NewMetrics(view func() *meta.View) *Metrics {
	m := &Metrics{
		acquired: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_share_records_acquired_total",
			Help: "Records this agent's ShareFetches acquired for share group members (a redelivery counts again)."}),
		acked: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_share_records_acknowledged_total",
			Help: "Records acknowledged through this agent, by type: accept, release, reject, renew (gap counts as accept)."}, []string{"type"}),
		archived: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_share_records_archived_total",
			Help: "Records archived by commands this agent proposed: rejected, or at the delivery count limit."}),
		released: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_share_records_released_total",
			Help: "Records made available again because their member's share session closed or its connection dropped."}),
		lockTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_share_lock_timeouts_total",
			Help: "Acquired records whose acquisition lock had expired (by the log clock) when a command this agent proposed met them."}),
		fetches: prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_share_fetches_total",
			Help: "ShareFetch requests this agent answered (renew-only and session closes not counted)."}),
		sessionsDesc: prometheus.NewDesc("strand_share_sessions", "Share sessions open on this agent.", nil, nil),
		inflight: prometheus.NewDesc("strand_share_inflight_records",
			"Records in the in-flight windows of all share partitions, by state (available, acquired, acknowledged, archived), in this agent's copy.", []string{"state"}, nil),
		view: view,
	}
	for i, name := range []string{"accept", "accept", "release", "reject", "renew"} {
		m.ackTypes[i] = m.acked.WithLabelValues(name)
	}
	return m
}

func (m *Metrics) ack(t byte, n float64) {
	if int(t) < len(m.ackTypes) {
		m.ackTypes[t].Add(n)
	}
}

// Collectors are what the agent registers.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.acquired, m.acked, m.archived, m.released, m.lockTimeouts, m.fetches, (*scraped)(m)}
}

// scraped collects what is read at scrape time.
type scraped Metrics

func (s *scraped) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.sessionsDesc
	ch <- s.inflight
}

func (s *scraped) Collect(ch chan<- prometheus.Metric) {
	n := 0
	if s.sessions != nil {
		n = s.sessions()
	}
	ch <- prometheus.MustNewConstMetric(s.sessionsDesc, prometheus.GaugeValue, float64(n))
	if s.view == nil {
		return
	}
	v := s.view()
	defer v.Close()
	now, err := v.LogClock()
	if err != nil {
		return
	}
	states, err := v.AllShareStates(maxScrapedStates)
	if err != nil {
		return
	}
	var avail, acq, acked, arch int64
	for _, st := range states {
		a, b, c, d := st.InFlight(now)
		avail, acq, acked, arch = avail+a, acq+b, acked+c, arch+d
	}
	for _, x := range []struct {
		state string
		n     int64
	}{{"available", avail}, {"acquired", acq}, {"acknowledged", acked}, {"archived", arch}} {
		ch <- prometheus.MustNewConstMetric(s.inflight, prometheus.GaugeValue, float64(x.n), x.state)
	}
}
