package agent

// GET /v1/cost prices what this agent counted since it started (package
// cost): its object store requests, its shared-log appends and the bytes
// it took from producers, per GB ingested, beside Kafka RF=3 for the
// same workload. The workload comes from the query (fan_out,
// retention_days, zones; 3, 7 and 3 by default) and the prices from
// --cost-prices (the shipped list prices by default). A cluster's cost
// is the sum over its agents' counters; each agent prices its own share.
//
// DESCRIBE on the cluster, as the other reads of the cluster's state.

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/strandkafka/strand/internal/cost"
	"github.com/strandkafka/strand/internal/objstore"
)

// PathCost is the cost report's endpoint.
const PathCost = "/v1/cost"

// CostReport is the answer of GET /v1/cost.
type CostReport struct {
	Region                string        `json:"region"`
	Workload              cost.Workload `json:"workload"`
	Measured              cost.Measured `json:"measured"`
	Strand                cost.Report   `json:"strand"`
	StrandPerGB           float64       `json:"strand_dollars_per_gb"`
	Kafka                 cost.Report   `json:"kafka"`
	KafkaPerGB            float64       `json:"kafka_dollars_per_gb"`
	KafkaFollowerFetching cost.Report   `json:"kafka_follower_fetching"`
}

func (a *Agent) handleCost(w http.ResponseWriter, r *http.Request) {
	wl := cost.Workload{FanOut: 3, RetentionDays: 7, Zones: 3}
	q := r.URL.Query()
	for _, p := range []struct {
		name string
		dst  *float64
	}{{"fan_out", &wl.FanOut}, {"retention_days", &wl.RetentionDays}} {
		if v := q.Get(p.name); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				writeError(w, http.StatusBadRequest, errors.New(p.name+": want a number"))
				return
			}
			*p.dst = f
		}
	}
	if v := q.Get("zones"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, errors.New("zones: want an integer"))
			return
		}
		wl.Zones = n
	}
	if err := wl.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	prices, err := cost.LoadPrices(a.cfg.CostPrices)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	m, err := a.measuredCost()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	rep := CostReport{Region: prices.Region, Workload: wl, Measured: m}
	if rep.Strand, err = cost.Strand(prices, wl, m); err != nil {
		writeError(w, http.StatusConflict, err) // nothing ingested yet
		return
	}
	rep.Kafka, _ = cost.Kafka(prices, wl, false)
	rep.KafkaFollowerFetching, _ = cost.Kafka(prices, wl, true)
	rep.StrandPerGB, rep.KafkaPerGB = rep.Strand.Total(), rep.Kafka.Total()
	writeJSON(w, http.StatusOK, rep)
}

// measuredCost reads the agent's counters since it started from its
// registry, as /metrics shows them.
func (a *Agent) measuredCost() (cost.Measured, error) {
	fams, err := a.metrics.reg.Gather()
	if err != nil {
		return cost.Measured{}, err
	}
	m := cost.Measured{LogBackend: logBackend(a.cfg.Log), LogCounter: "strand_log_append_seconds_count"}
	for _, f := range fams {
		switch f.GetName() {
		case "strand_produce_request_bytes_total":
			m.IngestBytes = sumMetric(f, nil)
		case "strand_objstore_requests_total":
			// S3 bills LIST and conditional PUTs as PUTs; DELETE is free.
			for _, op := range []objstore.Op{objstore.OpPut, objstore.OpPutIfAbsent, objstore.OpList} {
				m.Puts += sumMetric(f, map[string]string{"op": op.String()})
			}
			m.Gets = sumMetric(f, map[string]string{"op": objstore.OpGet.String()})
		case "strand_zone_bytes_total":
			// What crossed zones both ways; bytes of clients whose
			// zone was never learned count only where they did cross.
			m.CrossZoneBytes = sumMetric(f, map[string]string{"crossed": "yes"})
			m.CrossZoneCounter = `strand_zone_bytes_total{crossed="yes"}`
		case "strand_log_append_seconds":
			for _, s := range f.GetMetric() {
				m.LogWrites += float64(s.GetHistogram().GetSampleCount())
			}
		}
	}
	return m, nil
}

// sumMetric sums the counter samples of f whose labels hold every pair
// of want.
func sumMetric(f *dto.MetricFamily, want map[string]string) float64 {
	var sum float64
	for _, s := range f.GetMetric() {
		ok := true
		for k, v := range want {
			found := false
			for _, l := range s.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if ok {
			sum += s.GetCounter().GetValue()
		}
	}
	return sum
}

// logBackend is the backend a --log URL names, as the price table knows
// them.
func logBackend(url string) string {
	scheme, _, ok := strings.Cut(url, "://")
	if !ok || url == "" {
		return "file"
	}
	switch scheme {
	case "s3", "dynamodb", "postgres", "postgresql", "etcd", "file":
		return strings.TrimSuffix(scheme, "ql")
	}
	return scheme
}
