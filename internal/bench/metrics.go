package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// AgentMetrics is what the report needs from one scrape of an agent's
// /metrics. Counters are totals since the agent started; the report
// subtracts two scrapes.
type AgentMetrics struct {
	// ObjRequests and ObjBytes are strand_objstore_{requests,bytes}_total
	// by op label (put, put-if-absent, get, delete, list).
	ObjRequests map[string]float64
	ObjBytes    map[string]float64
	// LogAppends is strand_log_append_seconds_count.
	LogAppends float64
	// Flushes and FlushBytes are strand_flush_bytes_count and _sum: one
	// observation per flush cut, so one per data object.
	Flushes    float64
	FlushBytes float64
	// ProduceRequests is strand_kafka_requests_total{api="Produce"} over
	// every error label.
	ProduceRequests float64
	// CPUSeconds and RSSBytes are the process collector's
	// process_cpu_seconds_total and process_resident_memory_bytes.
	CPUSeconds float64
	RSSBytes   float64
	// RSSPeakBytes is strand_process_resident_memory_peak_bytes.
	RSSPeakBytes float64
	// Hedges is strand_produce_upload_hedges_total by result (won,
	// lost).
	Hedges map[string]float64
	// ExpressPuts is strand_express_puts_total by zone label;
	// ExpressThirds is strand_express_third_writes_total.
	ExpressPuts, ExpressPutBytes map[string]float64
	ExpressThirds                float64
	// Views are the strand_sql_view_* series by view label.
	Views map[string]ViewMetrics
}

// ViewMetrics are one materialized view's series on the agent.
type ViewMetrics struct {
	// Epochs is strand_sql_view_epochs_total.
	Epochs float64
	// InputOffsets is strand_sql_view_input_offsets: the next offsets
	// to read, summed over its input partitions, so its increase is the
	// records it consumed.
	InputOffsets float64
	// LagRecords is strand_sql_view_input_lag_records.
	LagRecords float64
	// Failures is strand_sql_view_failures_total.
	Failures float64
}

// Puts counts both kinds of PUT.
func (m AgentMetrics) Puts() float64 { return m.ObjRequests["put"] + m.ObjRequests["put-if-absent"] }

// PutBytes counts the payload of both kinds of PUT.
func (m AgentMetrics) PutBytes() float64 { return m.ObjBytes["put"] + m.ObjBytes["put-if-absent"] }

// ErrNoMetrics: the exposition held none of the agent's metrics, so the
// address is probably not a Strand agent.
var ErrNoMetrics = errors.New("bench: no strand metrics in the exposition")

// ParseMetrics reads a Prometheus text exposition (what /metrics serves).
func ParseMetrics(r io.Reader) (AgentMetrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return AgentMetrics{}, fmt.Errorf("bench: parse metrics: %w", err)
	}
	m := AgentMetrics{ObjRequests: map[string]float64{}, ObjBytes: map[string]float64{}, Hedges: map[string]float64{}, ExpressPuts: map[string]float64{}, ExpressPutBytes: map[string]float64{}}
	found := false
	byLabel := func(name, label string, into map[string]float64) {
		f, ok := fams[name]
		if !ok {
			return
		}
		found = true
		for _, mm := range f.GetMetric() {
			into[labelValue(mm, label)] += metricValue(mm)
		}
	}
	byLabel("strand_objstore_requests_total", "op", m.ObjRequests)
	byLabel("strand_objstore_bytes_total", "op", m.ObjBytes)
	byLabel("strand_produce_upload_hedges_total", "result", m.Hedges)
	byLabel("strand_express_puts_total", "zone", m.ExpressPuts)
	byLabel("strand_express_put_bytes_total", "zone", m.ExpressPutBytes)
	if f, ok := fams["strand_express_third_writes_total"]; ok && len(f.GetMetric()) > 0 {
		m.ExpressThirds = metricValue(f.GetMetric()[0])
	}
	if f, ok := fams["strand_log_append_seconds"]; ok {
		found = true
		for _, mm := range f.GetMetric() {
			m.LogAppends += float64(mm.GetHistogram().GetSampleCount())
		}
	}
	if f, ok := fams["strand_flush_bytes"]; ok {
		found = true
		for _, mm := range f.GetMetric() {
			m.Flushes += float64(mm.GetHistogram().GetSampleCount())
			m.FlushBytes += mm.GetHistogram().GetSampleSum()
		}
	}
	if f, ok := fams["strand_kafka_requests_total"]; ok {
		found = true
		for _, mm := range f.GetMetric() {
			if labelValue(mm, "api") == "Produce" {
				m.ProduceRequests += metricValue(mm)
			}
		}
	}
	if f, ok := fams["process_cpu_seconds_total"]; ok && len(f.GetMetric()) > 0 {
		m.CPUSeconds = metricValue(f.GetMetric()[0])
	}
	if f, ok := fams["process_resident_memory_bytes"]; ok && len(f.GetMetric()) > 0 {
		m.RSSBytes = metricValue(f.GetMetric()[0])
	}
	if f, ok := fams["strand_process_resident_memory_peak_bytes"]; ok && len(f.GetMetric()) > 0 {
		m.RSSPeakBytes = metricValue(f.GetMetric()[0])
	}
	m.Views = map[string]ViewMetrics{}
	for _, s := range []struct {
		name string
		set  func(*ViewMetrics, float64)
	}{
		{"strand_sql_view_epochs_total", func(v *ViewMetrics, x float64) { v.Epochs = x }},
		{"strand_sql_view_input_offsets", func(v *ViewMetrics, x float64) { v.InputOffsets = x }},
		{"strand_sql_view_input_lag_records", func(v *ViewMetrics, x float64) { v.LagRecords = x }},
		{"strand_sql_view_failures_total", func(v *ViewMetrics, x float64) { v.Failures = x }},
	} {
		f, ok := fams[s.name]
		if !ok {
			continue
		}
		found = true
		for _, mm := range f.GetMetric() {
			name := labelValue(mm, "view")
			v := m.Views[name]
			s.set(&v, metricValue(mm))
			m.Views[name] = v
		}
	}
	if !found {
		return m, ErrNoMetrics
	}
	return m, nil
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// scrapeTimeout bounds one /metrics request, so a hung agent cannot stall
// the progress loop for more than this.
const scrapeTimeout = 5 * time.Second

// Scrape fetches and parses http://addr/metrics (addr may carry its own
// scheme).
func Scrape(ctx context.Context, addr string) (AgentMetrics, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	url := addr
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	url = strings.TrimSuffix(url, "/") + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return AgentMetrics{}, err
	}
	// Ask for the text format: ParseMetrics reads nothing else.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return AgentMetrics{}, fmt.Errorf("bench: scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return AgentMetrics{}, fmt.Errorf("bench: scrape %s: %s", url, resp.Status)
	}
	return ParseMetrics(resp.Body)
}
