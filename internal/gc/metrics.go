package gc

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandkafka/strand/internal/meta"
)

// metrics exports the cluster's garbage collection accounting, read from
// the replicated state at scrape time: every agent reports the same
// numbers (those of its copy), so a dashboard may take any one, or the
// max across agents.
type metrics struct {
	meta          meta.Viewer
	storedBytes   *prometheus.Desc
	objects       *prometheus.Desc
	objectBytes   *prometheus.Desc
	deleted       *prometheus.Desc
	deletedBytes  *prometheus.Desc
	orphans       *prometheus.Desc
	orphanBytes   *prometheus.Desc
	lag           *prometheus.Desc
	graceSeconds  *prometheus.Desc
	deleteDelay   *prometheus.Desc
	reconciledLag *prometheus.Desc
}

// NewMetrics returns a collector of the garbage collection metrics of
// the copy m reads. It exports nothing below metadata level 3.
func NewMetrics(m meta.Viewer) prometheus.Collector {
	return &metrics{
		meta:         m,
		storedBytes:  prometheus.NewDesc("strand_data_stored_bytes", "Bytes of committed data objects in the object store: live ones and dead ones not yet deleted (orphans not included).", nil, nil),
		objects:      prometheus.NewDesc("strand_gc_objects", "Committed data objects in the object store, by state: live (index entries point into it) or dead (queued for deletion).", []string{"state"}, nil),
		objectBytes:  prometheus.NewDesc("strand_gc_object_bytes", "Bytes of committed data objects in the object store, by state (live or dead).", []string{"state"}, nil),
		deleted:      prometheus.NewDesc("strand_gc_deleted_objects_total", "Dead data objects the janitor deleted.", nil, nil),
		deletedBytes: prometheus.NewDesc("strand_gc_deleted_bytes_total", "Bytes of dead data objects the janitor deleted.", nil, nil),
		orphans:      prometheus.NewDesc("strand_gc_orphans_total", "Orphans (uploaded, never committed) the reconciler found and deleted.", nil, nil),
		orphanBytes:  prometheus.NewDesc("strand_gc_orphan_bytes_total", "Bytes of orphans the reconciler deleted.", nil, nil),
		lag: prometheus.NewDesc("strand_gc_lag_seconds",
			"How long the oldest dead object has been due for deletion (its death plus the delete delay), by the log clock; 0 when none is due.", nil, nil),
		graceSeconds: prometheus.NewDesc("strand_gc_grace_seconds", "The grace period in the log.", nil, nil),
		deleteDelay: prometheus.NewDesc("strand_gc_delete_delay_seconds",
			"How long a dead object waits before deletion (strand.gc.delete.delay.ms in the log; the grace period below metadata level 5).", nil, nil),
		reconciledLag: prometheus.NewDesc("strand_gc_reconcile_lag_seconds",
			"How far the orphan reconciler's sweep trails the orphan horizon, by the log clock.", nil, nil),
	}
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.storedBytes, m.objects, m.objectBytes, m.deleted, m.deletedBytes,
		m.orphans, m.orphanBytes, m.lag, m.graceSeconds, m.deleteDelay, m.reconciledLag} {
		ch <- d
	}
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	v := m.meta.View()
	defer v.Close()
	g, on, err := v.GC()
	if err != nil || !on {
		return
	}
	now, err := v.LogClock()
	if err != nil {
		return
	}
	f, err := v.Features()
	if err != nil {
		return
	}
	cluster, err := v.BrokerConfigs("")
	if err != nil {
		return
	}
	delay := meta.DeleteDelayMs(cluster, g.GraceMs, f.MetadataLevel())
	var lag float64
	if oldest, err := v.DeadObjects(math.MaxInt64, 1); err == nil && len(oldest) == 1 {
		lag = max(0, float64(now-oldest[0].DeadAt-delay)/1000)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(m.storedBytes, float64(g.StoredBytes()))
	gauge(m.objects, float64(g.LiveObjects), "live")
	gauge(m.objects, float64(g.DeadObjects), "dead")
	gauge(m.objectBytes, float64(g.LiveBytes), "live")
	gauge(m.objectBytes, float64(g.DeadBytes), "dead")
	counter(m.deleted, g.DeletedObjects)
	counter(m.deletedBytes, g.DeletedBytes)
	counter(m.orphans, g.Orphans)
	counter(m.orphanBytes, g.OrphanBytes)
	gauge(m.lag, lag)
	gauge(m.graceSeconds, float64(g.GraceMs)/1000)
	gauge(m.deleteDelay, float64(delay)/1000)
	gauge(m.reconciledLag, max(0, float64(g.Horizon(now)-g.ReconciledTo)/1000))
}
