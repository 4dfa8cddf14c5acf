package views

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/types"
)

// TestViewMetrics: what an epoch and a measurement make of a view's
// lag in time, state size, update rate and late and bad counts, on
// /metrics and in Status.
func TestViewMetrics(t *testing.T) {
	r := &Runner{metrics: newMetrics()}
	tk := r.newTask(t.Context(), meta.Relation{ID: 7, Name: "v"}, nil)
	tk.dir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(tk.dir, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tk.dir, "state", "000001.sst"), make([]byte, 1234), 0o644); err != nil {
		t.Fatal(err)
	}
	m := r.metrics
	if st := tk.status(); st.LagRecords != -1 || st.StateBytes != -1 {
		t.Fatalf("before any measurement: %+v, want -1 for lag and size", st)
	}
	if got := value(t, m.bad.WithLabelValues("v")); got != 0 {
		t.Fatalf("bad records before any epoch: %v (want a 0 series)", got)
	}

	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	// An epoch of records produced 90 s before it commits, one late
	// and two bad among them, two rows changed (an update: -1 +1) and
	// a window dropping 3 late changes.
	tk.mu.Lock()
	c := epochCounts{consumed: 20}
	c.add(1, 0, t0.Add(-100*time.Second))
	c.add(0, 2, t0.Add(-90*time.Second))
	out := []types.Change{{Row: types.Row{int64(1)}, Diff: -1}, {Row: types.Row{int64(2)}, Diff: +1}}
	tk.committedLocked(t0, 5, c, 3, out)
	tk.mu.Unlock()
	if got := value(t, m.lagSeconds.WithLabelValues("v")); got != 90 {
		t.Errorf("lag seconds after the epoch: %v, want 90 (the newest record's age)", got)
	}
	// The measurement: still 10 records behind, 30 s later: the newest
	// record held is 120 s old.
	tk.measured(t0.Add(30*time.Second), 10, 30, true)
	st := tk.status()
	if st.LagRecords != 10 || st.LagSeconds != 120 || st.StateBytes != 1234 || st.Late != 1 || st.Bad != 2 || st.Dropped != 3 {
		t.Errorf("status %+v, want lag 10 records and 120 s, 1234 bytes, 1 late, 2 bad, 3 dropped", st)
	}
	for name, c := range map[string]struct {
		got, want float64
	}{
		"lag records": {value(t, m.lag.WithLabelValues("v")), 10},
		"lag seconds": {value(t, m.lagSeconds.WithLabelValues("v")), 120},
		"state bytes": {value(t, m.stateBytes.WithLabelValues("v")), 1234},
		"outputs":     {value(t, m.outputs.WithLabelValues("v")), 2},
		"late":        {value(t, m.late.WithLabelValues("v")), 1},
		"dropped":     {value(t, m.lateDropped.WithLabelValues("v")), 3},
		"bad":         {value(t, m.bad.WithLabelValues("v")), 2},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", name, c.got, c.want)
		}
	}

	// A second epoch: the driver's late total grows to 4 (1 more), 6
	// more rows change, 8 more records consumed: 2 behind the ends last
	// measured (30), its newest record 5 s old; caught up 5 s later:
	// no lag in time, and 6 updates over 10 s.
	tk.mu.Lock()
	tk.committedLocked(t0.Add(35*time.Second), 1, epochCounts{newest: t0.Add(30 * time.Second), consumed: 28}, 4,
		[]types.Change{{Row: types.Row{int64(3)}, Diff: 6}})
	tk.mu.Unlock()
	if got := value(t, m.lagSeconds.WithLabelValues("v")); got != 5 {
		t.Errorf("lag seconds after the second epoch: %v, want 5", got)
	}
	if got := value(t, m.lag.WithLabelValues("v")); got != 2 {
		t.Errorf("lag records estimated after the second epoch: %v, want 2", got)
	}
	tk.measured(t0.Add(40*time.Second), 0, 30, true)
	st = tk.status()
	if st.LagRecords != 0 || st.LagSeconds != 0 || st.Dropped != 4 || st.UpdatesPerSecond != 0.6 {
		t.Errorf("status %+v, want caught up (0 records, 0 s), 4 dropped, 0.6 updates/s", st)
	}
	// An epoch reaching the ends last measured is caught up at once,
	// without waiting for the next measurement.
	tk.measured(t0.Add(45*time.Second), 5, 35, true)
	if st := tk.status(); st.LagRecords != 5 || st.LagSeconds != 15 {
		t.Errorf("5 behind at 45 s: %+v, want 5 records, 15 s (the newest held is from 30 s)", st)
	}
	tk.mu.Lock()
	tk.committedLocked(t0.Add(46*time.Second), 5, epochCounts{newest: t0.Add(44 * time.Second), consumed: 35}, 4, nil)
	tk.mu.Unlock()
	if st := tk.status(); st.LagRecords != 0 || st.LagSeconds != 0 {
		t.Errorf("after consuming up to the ends: %+v, want 0 records, 0 s", st)
	}
	// A run after a failure starts the driver's late total again.
	tk.mu.Lock()
	tk.mu.live.droppedRun = 0
	tk.committedLocked(t0.Add(50*time.Second), 0, epochCounts{consumed: 35}, 2, nil)
	tk.mu.Unlock()
	if got := value(t, m.lateDropped.WithLabelValues("v")); got != 6 {
		t.Errorf("dropped after a restart's 2: %v, want 6", got)
	}
	// A producer's clock ahead of the agent's is no negative lag.
	if got := ageSeconds(t0, t0.Add(time.Minute)); got != 0 {
		t.Errorf("age of a future timestamp: %v", got)
	}
	r.metrics.forget("v")
	for _, c := range m.Collectors() {
		ch := make(chan prometheus.Metric, 16)
		c.Collect(ch)
		close(ch)
		if n := len(ch); n != 0 {
			t.Errorf("%d series left after forget", n)
		}
	}
}

// value is a counter's or gauge's value.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}
