package agent

import (
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// PathZones is GET /v1/zones: ZoneTraffic, what this agent counted by
// zone since it started (metrics_zones.go). Each agent answers for
// itself; `strand cluster info --http` asks every agent it is given.
const PathZones = "/v1/zones"

// ZoneTraffic is GET /v1/zones's answer.
type ZoneTraffic struct {
	NodeID int32 `json:"node_id"`
	// Rack is the agent's --rack, "" without one.
	Rack     string       `json:"rack"`
	Requests ZoneRequests `json:"requests"`
	// Bytes are by direction and client zone, sorted.
	Bytes []ZoneBytes `json:"bytes"`
}

// ZoneRequests counts requests from clients of the agent's zone (Hit),
// of another (Miss) and of an unknown one (Unaware).
type ZoneRequests struct {
	Hit     int64 `json:"hit"`
	Miss    int64 `json:"miss"`
	Unaware int64 `json:"unaware"`
}

// ZoneBytes are the bytes of one direction ("in": requests, "out":
// responses) and client zone ("unknown", "other" as the metric labels
// them); Crossed is "yes", "no" or "unknown".
type ZoneBytes struct {
	Direction  string `json:"direction"`
	ClientZone string `json:"client_zone"`
	Crossed    string `json:"crossed"`
	Bytes      int64  `json:"bytes"`
}

func (a *Agent) handleZones(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.zoneTraffic())
}

// zoneTraffic reads the zone counters back from their metrics, so the
// answer and a scrape agree.
func (a *Agent) zoneTraffic() ZoneTraffic {
	zt := ZoneTraffic{NodeID: a.cfg.NodeID, Rack: a.cfg.Rack, Bytes: []ZoneBytes{}}
	z := a.metrics.zones
	if z == nil {
		return zt
	}
	for _, m := range collect(z.bytes) {
		l := labels(m)
		zt.Bytes = append(zt.Bytes, ZoneBytes{Direction: l["direction"], ClientZone: l["client_zone"],
			Crossed: l["crossed"], Bytes: int64(m.GetCounter().GetValue())})
	}
	slices.SortFunc(zt.Bytes, func(x, y ZoneBytes) int {
		if c := strings.Compare(x.Direction, y.Direction); c != 0 {
			return c
		}
		return strings.Compare(x.ClientZone, y.ClientZone)
	})
	for _, m := range collect(z.requests) {
		n := int64(m.GetCounter().GetValue())
		switch labels(m)["result"] {
		case "hit":
			zt.Requests.Hit = n
		case "miss":
			zt.Requests.Miss = n
		case "unaware":
			zt.Requests.Unaware = n
		}
	}
	return zt
}

// collect returns c's samples.
func collect(c prometheus.Collector) []*dto.Metric {
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	var out []*dto.Metric
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) == nil {
			out = append(out, &pb)
		}
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	l := make(map[string]string, len(m.GetLabel()))
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}
