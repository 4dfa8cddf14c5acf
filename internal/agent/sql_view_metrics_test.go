package agent_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// viewMetricsAge is how old viewMetricsTraffic's records are, by their
// Kafka timestamps.
const viewMetricsAge = time.Hour

// viewMetricsTraffic makes a view's metrics move: a source ev over the
// topic ev with an event-time watermark (1 s of allowed lateness), a
// view ev_count over it, and three records an hour old by their Kafka
// timestamps: one on time, one 10 s behind the watermark (late), one
// that is not JSON (bad). It returns once the view consumed all three.
func viewMetricsTraffic(t *testing.T, a *agent.Agent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	createTopic(t, a.KafkaAddr(), "ev", 1)
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://alice@%s/strand?sslmode=disable", a.SQLAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, ddl := range []string{
		"CREATE SOURCE ev (id int8, ts timestamp) WITH (topic = 'ev', format = 'json', watermark.column = 'ts', watermark.delay = '1 second')",
		"CREATE MATERIALIZED VIEW ev_count AS SELECT count(*) AS n, max(id) AS top FROM ev",
	} {
		if _, err := conn.Exec(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
	old := time.Now().Add(-viewMetricsAge)
	produce(t, a.KafkaAddr(), []*kgo.Record{
		{Topic: "ev", Timestamp: old, Value: []byte(`{"id": 1, "ts": "2026-01-01 10:00:10"}`)},
		{Topic: "ev", Timestamp: old, Value: []byte(`{"id": 2, "ts": "2026-01-01 10:00:00"}`)},
		{Topic: "ev", Timestamp: old, Value: []byte(`not json`)},
	})
	deadline := time.Now().Add(opTimeout)
	for {
		if v, _ := metricValue(t, a.HTTPAddr(), "strand_sql_view_input_offsets", map[string]string{"view": "ev_count"}); v == 3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("view ev_count did not consume its three records")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sinkAndSnapshotTraffic, after viewMetricsTraffic, makes the sinks'
// and the view snapshots' series: a sink over ev_count that commits a
// transaction, and a snapshot of ev_count (with a short
// SQLViewSnapshotInterval).
func sinkAndSnapshotTraffic(t *testing.T, a *agent.Agent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	createTopic(t, a.KafkaAddr(), "ev_out", 1)
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://alice@%s/strand?sslmode=disable", a.SQLAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE SINK ev_sink WITH (topic = 'ev_out', format = 'json', envelope = 'upsert') AS SELECT * FROM ev_count"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ name, label, value string }{
		{"strand_sql_sink_transactions_total", "sink", "ev_sink"},
		{"strand_sql_view_snapshots_total", "view", "ev_count"},
	} {
		deadline := time.Now().Add(opTimeout)
		for {
			if v, _ := metricValue(t, a.HTTPAddr(), want.name, map[string]string{want.label: want.value}); v > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s{%s=%q} after %v", want.name, want.label, want.value, opTimeout)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// metricValue sums the samples of name with labels on /metrics; ok
// false if there are none.
func metricValue(t *testing.T, httpAddr, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	code, body := get(t, "http://"+httpAddr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	var total float64
	ok := false
	for _, m := range fams[name].GetMetric() {
		if hasLabels(m, labels) {
			total += sampleValue(m)
			ok = true
		}
	}
	return total, ok
}

// TestSQLViewMetrics: a view's late and bad records, output changes,
// state size and lag in time on /metrics, as its inputs made them.
func TestSQLViewMetrics(t *testing.T) {
	a := startWith(t, agent.Config{DataDir: t.TempDir(), SQLListen: "127.0.0.1:0"}, nil)
	viewMetricsTraffic(t, a)
	view := map[string]string{"view": "ev_count"}
	exact := func(name string, want float64) {
		t.Helper()
		if got, ok := metricValue(t, a.HTTPAddr(), name, view); !ok || got != want {
			t.Errorf("%s: %v (present %v), want %v", name, got, ok, want)
		}
	}
	exact("strand_sql_view_bad_records_total", 1)
	exact("strand_sql_view_late_records_total", 1)
	exact("strand_sql_view_late_dropped_total", 0) // no window to drop from
	exact("strand_sql_view_failures_total", 0)
	// One row, (2, 2): at least its insert; more if the records came in
	// two epochs (an update is a -1 and a +1).
	if got, _ := metricValue(t, a.HTTPAddr(), "strand_sql_view_output_changes_total", view); got < 1 || int(got)%2 != 1 {
		t.Errorf("output changes %v, want an odd count >= 1 (one row inserted, then updates)", got)
	}
	// The lag in time is the records' age from the epoch that consumed
	// them until a measurement (every 5 s) finds the view caught up.
	deadline := time.Now().Add(opTimeout)
	for {
		lag, _ := metricValue(t, a.HTTPAddr(), "strand_sql_view_input_lag_seconds", view)
		records, measured := metricValue(t, a.HTTPAddr(), "strand_sql_view_input_lag_records", view)
		size, _ := metricValue(t, a.HTTPAddr(), "strand_sql_view_state_bytes", view)
		if size <= 0 {
			t.Fatalf("state bytes %v, want the view's Pebble database's size", size)
		}
		if lag != 0 && math.Abs(lag-viewMetricsAge.Seconds()) > 300 {
			t.Fatalf("lag %v s, want the records' age (%v) or 0", lag, viewMetricsAge)
		}
		if measured && records == 0 && lag == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lag %v s and %v records (measured %v); want 0 once caught up", lag, records, measured)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
