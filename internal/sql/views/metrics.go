package views

import (
	"errors"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Metrics are the views' series, labelled by view alone: views are
// bounded by the catalog, so the series are too.
type Metrics struct {
	epochs      *prometheus.CounterVec
	changes     *prometheus.CounterVec
	failures    *prometheus.CounterVec
	lastEpoch   *prometheus.GaugeVec
	offsets     *prometheus.GaugeVec
	lag         *prometheus.GaugeVec
	lagSeconds  *prometheus.GaugeVec
	stateBytes  *prometheus.GaugeVec
	outputs     *prometheus.CounterVec
	late        *prometheus.CounterVec
	lateDropped *prometheus.CounterVec
	bad         *prometheus.CounterVec
	watermark   *prometheus.GaugeVec
}

func newMetrics() *Metrics {
	return &Metrics{
		epochs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_view_epochs_total",
			Help: "Epochs a materialized view committed on this agent."}, []string{"view"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_view_input_changes_total",
			Help: "Input changes a materialized view consumed on this agent."}, []string{"view"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_view_failures_total",
			Help: "Times a materialized view failed (to compile or to run) and was restarted from its checkpoint."}, []string{"view"}),
		lastEpoch: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_sql_view_last_epoch_timestamp_seconds",
			Help: "When a materialized view last committed an epoch (unix seconds): its freshness."}, []string{"view"}),
		offsets: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_sql_view_input_offsets",
			Help: "Sum over a materialized view's input partitions of the next offset to read."}, []string{"view"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_sql_view_input_lag_records",
			Help: "Records a materialized view's committed state is behind its input topics' ends (measured every 5 s)."}, []string{"view"}),
		lagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_sql_view_input_lag_seconds",
			Help: "A materialized view's lag in time: the age (by the agent's clock) of the newest input record's Kafka timestamp its committed state holds, 0 when no record waits for it (set at each epoch and every 5 s)."}, []string{"view"}),
		stateBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_sql_view_state_bytes",
			Help: "Disk space a materialized view's local state takes (its Pebble database and upsert key stores; measured every 5 s)."}, []string{"view"}),
		outputs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_view_output_changes_total",
			Help: "Changes to a materialized view's contents (rows added or removed, an update being one of each) on this agent."}, []string{"view"}),
		late: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_view_late_records_total",
			Help: "Input records a materialized view consumed whose event time was behind their partition's watermark (the source's rule)."}, []string{"view"}),
		lateDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_view_late_dropped_total",
			Help: "Input changes a materialized view dropped as late: records behind their partition's watermark in a view whose windows close, and changes for windows already closed."}, []string{"view"}),
		bad: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_sql_view_bad_records_total",
			Help: "Input records a materialized view's readers could not decode (dropped or dead-lettered by the source's policy)."}, []string{"view"}),
		watermark: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_sql_view_watermark_timestamp_seconds",
			Help: "A materialized view's watermark (unix seconds, 0 while it has none): windows ending at or before it are closed."}, []string{"view"}),
	}
}

// Collectors are what to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.epochs, m.changes, m.failures, m.lastEpoch, m.offsets, m.lag,
		m.lagSeconds, m.stateBytes, m.outputs, m.late, m.lateDropped, m.bad, m.watermark}
}

// start gives a view's counters their zero, so a view that never
// failed (or never saw a late record) shows 0 rather than no series.
func (m *Metrics) start(view string) {
	m.failures.WithLabelValues(view)
	m.outputs.WithLabelValues(view)
	m.late.WithLabelValues(view)
	m.lateDropped.WithLabelValues(view)
	m.bad.WithLabelValues(view)
}

func (m *Metrics) forget(view string) {
	m.epochs.DeleteLabelValues(view)
	m.changes.DeleteLabelValues(view)
	m.failures.DeleteLabelValues(view)
	m.lastEpoch.DeleteLabelValues(view)
	m.offsets.DeleteLabelValues(view)
	m.lag.DeleteLabelValues(view)
	m.lagSeconds.DeleteLabelValues(view)
	m.stateBytes.DeleteLabelValues(view)
	m.outputs.DeleteLabelValues(view)
	m.late.DeleteLabelValues(view)
	m.lateDropped.DeleteLabelValues(view)
	m.bad.DeleteLabelValues(view)
	m.watermark.DeleteLabelValues(view)
}

// live is what a task measures of its view beyond Status's state, kept
// under the task's lock for Status (the console shows it).
type live struct {
	lagRecords int64 // -1 until measured
	// ends is the inputs' end offsets summed at the last measurement
	// (-1 before one), from which an epoch estimates lagRecords.
	ends       int64
	lagSeconds float64
	stateBytes int64 // -1 until measured
	// newest is the newest input record's timestamp the committed
	// state holds; zero while none.
	newest  time.Time
	outputs uint64
	late    uint64
	dropped uint64
	bad     uint64
	// droppedRun is the driver's late-drop total this run.
	droppedRun uint64
	// updatesPerSecond is outputs' rate over the last lagInterval,
	// from rateOutputs at rateAt.
	updatesPerSecond float64
	rateAt           time.Time
	rateOutputs      uint64
}

// epochCounts is what one epoch adds to a view's counters, and where
// its inputs stand after it.
type epochCounts struct {
	late, bad int
	newest    time.Time
	// consumed is the sum of the inputs' next offsets after the epoch
	// (what strand_sql_view_input_offsets shows).
	consumed int64
}

// add counts one input batch.
func (c *epochCounts) add(late, bad int, newest time.Time) {
	c.late += late
	c.bad += bad
	if newest.After(c.newest) {
		c.newest = newest
	}
}

// ageSeconds is how old ts is at now, in seconds: never negative (a
// producer's clock ahead of the agent's is not negative lag).
func ageSeconds(now, ts time.Time) float64 {
	if ts.IsZero() || !now.After(ts) {
		return 0
	}
	return now.Sub(ts).Seconds()
}

// dirBytes is the size of the files under dir: a view's state on disk
// (Pebble's sstables, WAL and manifest; the upsert key stores). A file
// removed while walking (a compaction's input) is skipped.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n, err
}

// committedLocked records an epoch's counters, t.mu held: n input
// changes, what the readers counted, the windows' late drops so far
// (the driver's total) and the output.
func (t *task) committedLocked(now time.Time, n int, c epochCounts, droppedTotal int64, outChanges []types.Change) {
	var out int64
	for _, ch := range outChanges {
		out += max(ch.Diff, -ch.Diff)
	}
	m, name := t.r.metrics, t.rel.Name
	lv := &t.mu.live
	if c.newest.After(lv.newest) {
		lv.newest = c.newest
	}
	lv.outputs += uint64(out)
	lv.late += uint64(c.late)
	lv.bad += uint64(c.bad)
	// The driver's total starts again from 0 with each run (its stats
	// are not in the state): count only what it adds.
	if d := uint64(max(droppedTotal, 0)); d > lv.droppedRun {
		m.lateDropped.WithLabelValues(name).Add(float64(d - lv.droppedRun))
		lv.dropped += d - lv.droppedRun
		lv.droppedRun = d
	}
	if lv.ends >= 0 && lv.lagRecords >= 0 {
		// Between measurements the lag in records is estimated from the
		// inputs' ends last measured: records produced since are not in
		// it until the next measurement.
		lv.lagRecords = max(0, lv.ends-c.consumed)
		m.lag.WithLabelValues(name).Set(float64(lv.lagRecords))
	}
	if n > 0 || lv.lagRecords == 0 {
		lv.lagSeconds = ageSeconds(now, c.newest)
		if lv.lagRecords == 0 {
			lv.lagSeconds = 0
		}
		m.lagSeconds.WithLabelValues(name).Set(lv.lagSeconds)
	}
	m.outputs.WithLabelValues(name).Add(float64(out))
	m.late.WithLabelValues(name).Add(float64(c.late))
	m.bad.WithLabelValues(name).Add(float64(c.bad))
}

// measured records what measureLag found every lagInterval: behind,
// the records not consumed yet, and ends, the inputs' end offsets
// summed (ok false: not known this time).
func (t *task) measured(now time.Time, behind, ends int64, ok bool) {
	m, name := t.r.metrics, t.rel.Name
	size, serr := dirBytes(t.dir)
	t.mu.Lock()
	lv := &t.mu.live
	if ok {
		lv.lagRecords, lv.ends = behind, ends
		// Caught up, the view is as fresh as its inputs: nothing waits.
		// Behind, the newest record it holds ages with the clock until
		// the next epoch, so a stuck view's lag grows.
		if behind == 0 {
			lv.lagSeconds = 0
		} else {
			lv.lagSeconds = ageSeconds(now, lv.newest)
		}
	}
	if serr == nil {
		lv.stateBytes = size
	}
	if !lv.rateAt.IsZero() && now.After(lv.rateAt) {
		lv.updatesPerSecond = float64(lv.outputs-lv.rateOutputs) / now.Sub(lv.rateAt).Seconds()
	}
	lv.rateAt, lv.rateOutputs = now, lv.outputs
	lagSeconds := lv.lagSeconds
	t.mu.Unlock()
	if ok {
		m.lag.WithLabelValues(name).Set(float64(behind))
		m.lagSeconds.WithLabelValues(name).Set(lagSeconds)
	}
	if serr == nil {
		m.stateBytes.WithLabelValues(name).Set(float64(size))
	}
}

// droppedLate is the changes drv's operators dropped as late this run.
func droppedLate(drv *flow.Driver) int64 {
	var n int64
	for _, s := range drv.Stats() {
		n += s.Late
	}
	return n
}

// StateBytes is the view's local state on disk as last measured, -1
// when not known (catalog.StateSizer: psql's \dm+ shows it).
func (r *Runner) StateBytes(id uint64) int64 {
	st, ok := r.ViewStatus(id)
	if !ok {
		return -1
	}
	return st.StateBytes
}
