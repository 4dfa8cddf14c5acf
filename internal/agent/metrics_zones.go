package agent

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// zoneTraffic counts what crosses zones (DESIGN.md 7b): the bytes of
// requests and responses by the client's zone and this agent's, and
// whether each request came from a client of this agent's zone (hit),
// another zone (miss) or one not known (unaware).
//
// Clients name their zone (client.rack, client.id), so a client zone is
// a label only once it is a zone of the cluster: this agent's rack, a
// per-zone listener's, or a live agent's rack seen at a lease renewal,
// at most maxZoneLabels of them; any other is "other", an unlearned one
// "unknown". The label values are bounded whatever clients send.
type zoneTraffic struct {
	agentZone string
	bytes     *prometheus.CounterVec // direction, client_zone, agent_zone, crossed
	requests  *prometheus.CounterVec // result
	// hit, miss, unaware are requests' series, resolved once.
	hit, miss, unaware prometheus.Counter

	mu struct {
		sync.RWMutex
		// known are the zones that are labels; it only grows, so a
		// zone's series does not move to "other" while it is down.
		known map[string]bool
	}
}

// maxZoneLabels bounds the client zones that get a series of their own;
// clouds have three to six zones a region.
const maxZoneLabels = 16

// Zone label values for clients whose zone is not learned, or is not
// one of the cluster's.
const (
	zoneUnknown = "unknown"
	zoneOther   = "other"
)

func newZoneTraffic(rack string, listenerZones []string) *zoneTraffic {
	z := &zoneTraffic{agentZone: rack}
	if z.agentZone == "" {
		z.agentZone = zoneUnknown
	}
	z.bytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strand_zone_bytes_total",
		Help: "Bytes of Kafka requests received (in) and responses sent (out), frames whole, by the client's zone (unknown: not learned; other: not a zone of the cluster) and this agent's (its --rack, unknown without one); crossed is yes where the two differ, unknown where either is unknown, else no.",
	}, []string{"direction", "client_zone", "agent_zone", "crossed"})
	z.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strand_zone_requests_total",
		Help: "Kafka requests by whether the client's zone is this agent's (hit), another (miss) or not known (unaware).",
	}, []string{"result"})
	z.hit = z.requests.WithLabelValues("hit")
	z.miss = z.requests.WithLabelValues("miss")
	z.unaware = z.requests.WithLabelValues("unaware")
	z.mu.known = map[string]bool{}
	z.learn(append([]string{rack}, listenerZones...))
	// The series every agent has from the start, so a ratio over them
	// is 0 before the first request, not absent.
	for _, d := range []string{"in", "out"} {
		z.bytes.WithLabelValues(d, z.agentZone, z.agentZone, z.crossed(z.agentZone))
		z.bytes.WithLabelValues(d, zoneUnknown, z.agentZone, z.crossed(zoneUnknown))
	}
	return z
}

// learn makes zones labels, up to maxZoneLabels.
func (z *zoneTraffic) learn(zones []string) {
	z.mu.RLock()
	missing := false
	for _, zone := range zones {
		if zone != "" && !z.mu.known[zone] {
			missing = true
		}
	}
	z.mu.RUnlock()
	if !missing {
		return
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	for _, zone := range zones {
		if zone != "" && len(z.mu.known) < maxZoneLabels {
			z.mu.known[zone] = true
		}
	}
}

// label is a client zone's label value.
func (z *zoneTraffic) label(zone string) string {
	if zone == "" {
		return zoneUnknown
	}
	z.mu.RLock()
	ok := z.mu.known[zone]
	z.mu.RUnlock()
	if !ok {
		return zoneOther
	}
	return zone
}

// request counts one request of a client in zone ("" when unknown).
func (z *zoneTraffic) request(zone string, bytesIn, bytesOut int) {
	label := z.label(zone)
	switch {
	case zone == "":
		z.unaware.Inc()
	case label == z.agentZone:
		z.hit.Inc()
	default:
		z.miss.Inc()
	}
	crossed := z.crossed(label)
	z.bytes.WithLabelValues("in", label, z.agentZone, crossed).Add(float64(bytesIn))
	if bytesOut > 0 {
		z.bytes.WithLabelValues("out", label, z.agentZone, crossed).Add(float64(bytesOut))
	}
}

// crossed is the crossed label of bytes of a client of zone label: a
// label of its own, since PromQL cannot compare two labels.
func (z *zoneTraffic) crossed(label string) string {
	switch {
	case label == zoneUnknown || z.agentZone == zoneUnknown:
		return "unknown"
	case label == z.agentZone:
		return "no"
	}
	return "yes"
}

// registerZones starts counting by zone, for an agent in rack with
// per-zone listeners of listenerZones.
func (m *metrics) registerZones(rack string, listenerZones []string) {
	m.zones = newZoneTraffic(rack, listenerZones)
	m.reg.MustRegister(m.zones.bytes, m.zones.requests)
}
