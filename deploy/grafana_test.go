package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/testservers/promtest"
)

const dashboardPath = "grafana/strand.json"

// dashboardMetrics are the metric families the dashboard must chart: what
// Kafka operators watch (the list). A panel query dropping one
// fails TestDashboardCoversMetrics.
var dashboardMetrics = []string{
	"strand_topic_bytes_in_total", "strand_topic_bytes_out_total",
	"strand_topic_records_in_total", "strand_topic_records_out_total",
	"strand_kafka_requests_total", "strand_kafka_request_seconds_bucket",
	"strand_kafka_connections", "strand_kafka_connections_opened_total", "strand_kafka_connections_closed_total",
	"strand_zone_bytes_total", "strand_zone_requests_total",
	"strand_kafka_quota_throttled_requests_total", "strand_kafka_quota_throttle_seconds_total",
	"strand_consumer_group_lag", "strand_consumer_group_committed_offset", "strand_consumer_group_members",
	"strand_objstore_request_seconds_bucket", "strand_objstore_requests_total",
	"strand_log_append_seconds_bucket", "strand_log_append_errors_total",
	"strand_meta_apply_lag_entries", "strand_meta_apply_lag_seconds", "strand_meta_applied_position",
	"strand_flush_bytes_bucket", "strand_flush_seconds_bucket",
	"strand_gc_deleted_bytes_total", "strand_data_stored_bytes",
	"strand_compaction_read_bytes_total", "strand_compaction_written_bytes_total",
	"process_resident_memory_bytes", "go_memstats_heap_inuse_bytes",
	"strand_build_info",
}

// dashboard is the part of Grafana's dashboard model the tests read.
type dashboard struct {
	SchemaVersion int     `json:"schemaVersion"`
	UID           string  `json:"uid"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Type  string          `json:"type"`
			Name  string          `json:"name"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Type       string     `json:"type"`
	Title      string     `json:"title"`
	Datasource datasource `json:"datasource"`
	Panels     []panel    `json:"panels"` // a collapsed row's
	Targets    []struct {
		RefID      string     `json:"refId"`
		Expr       string     `json:"expr"`
		Datasource datasource `json:"datasource"`
	} `json:"targets"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// query is one expression the dashboard sends Prometheus.
type query struct {
	where string // panel title and refId, or the variable
	expr  string
	// label is set for a variable's label_values(selector, label): the
	// selector must select a series with the label.
	label string
}

func loadDashboard(t *testing.T) (dashboard, []query) {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	var qs []query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				if p.Datasource.UID != "${datasource}" || tg.Datasource.UID != "${datasource}" {
					t.Errorf("panel %q target %s: datasource %v/%v, want the ${datasource} variable", p.Title, tg.RefID, p.Datasource, tg.Datasource)
				}
				qs = append(qs, query{where: fmt.Sprintf("panel %q %s", p.Title, tg.RefID), expr: tg.Expr})
			}
		}
	}
	walk(d.Panels)
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: query %s: %v", v.Name, v.Query, err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("variable %s: query %q is not label_values(selector, label)", v.Name, q.Query)
		}
		qs = append(qs, query{where: "variable $" + v.Name, expr: m[1], label: m[2]})
	}
	return d, qs
}

// TestDashboardCoversMetrics checks the dashboard's shape (schema,
// a Prometheus data source variable, every target on it) and that its
// queries chart every metric family operators watch.
func TestDashboardCoversMetrics(t *testing.T) {
	d, qs := loadDashboard(t)
	if d.SchemaVersion < 36 || d.UID == "" {
		t.Errorf("schemaVersion %d, uid %q: want a current schema (39) and a uid", d.SchemaVersion, d.UID)
	}
	hasDS := false
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Name == "datasource" && string(v.Query) == `"prometheus"` {
			hasDS = true
		}
	}
	if !hasDS {
		t.Error("no datasource variable of type prometheus named datasource")
	}
	all := ""
	for _, q := range qs {
		if q.label == "" {
			all += q.expr + "\n"
		}
	}
	for _, m := range dashboardMetrics {
		if !regexp.MustCompile(`\b` + m + `\b`).MatchString(all) {
			t.Errorf("no panel charts %s", m)
		}
	}
}

// grafanaVars stands in for what Grafana substitutes before querying: the
// variables at "All" (their allValue, .*) and a rate interval that spans
// the traffic the test drives.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "1m",
	"$__interval", "15s",
	"$__range", "5m",
	"$job", ".*",
	"$instance", ".*",
	"$topic", ".*",
	"$group", ".*",
)

// TestDashboardQueriesReturnData runs an agent, has a real Prometheus
// scrape it every second, drives traffic that should light every panel
// (produce to two topics, a consumer group that commits part way, a
// client over its quota, a request that fails), then evaluates every
// panel query and variable query of the dashboard through Prometheus's
// HTTP API: each must return data (a sample that is not NaN). The
// failure lists exactly the queries that returned none.
func TestDashboardQueriesReturnData(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an agent and Prometheus for about 30 s")
	}
	_, queries := loadDashboard(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	a, err := agent.Start(ctx, agent.Config{
		DataDir:     t.TempDir(),
		KafkaListen: "127.0.0.1:0",
		HTTPListen:  "127.0.0.1:0",
		// Compaction registers its metrics only when it runs.
		Compaction: true,
		// Rates over 2 s, not Kafka's 11: a client's first bytes are
		// spread over (samples-1) windows, so with the default one
		// over its quota would have to send for seconds to show it.
		QuotaWindowNum:         2,
		QuotaWindowSizeSeconds: 1,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("agent stop: %v", err)
		}
	})
	prom := promtest.Start(t, time.Second, a.HTTPAddr())
	driveTraffic(ctx, t, a.KafkaAddr(), prom)

	// Some values are computed at intervals (lag, say): give them a few
	// more scrapes before calling a query empty.
	pending := queries
	var failures []string
	for round := 0; len(pending) > 0 && round < 5; round++ {
		if err := prom.WaitScraped(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		failures = failures[:0]
		var still []query
		for _, q := range pending {
			if msg := evaluate(ctx, prom, q); msg != "" {
				still = append(still, q)
				failures = append(failures, msg)
			}
		}
		pending = still
	}
	if len(failures) > 0 {
		sort.Strings(failures)
		t.Errorf("%d of %d dashboard queries returned no data:\n%s", len(failures), len(queries), strings.Join(failures, "\n"))
	}
}

// evaluate runs q and returns why it has no data, or "".
func evaluate(ctx context.Context, prom *promtest.Server, q query) string {
	expr := grafanaVars.Replace(q.expr)
	if q.label != "" {
		sets, err := prom.Series(ctx, expr)
		if err != nil {
			return fmt.Sprintf("  %s: series %s: %v", q.where, expr, err)
		}
		for _, s := range sets {
			if s[model.LabelName(q.label)] != "" {
				return ""
			}
		}
		return fmt.Sprintf("  %s: label_values(%s, %s): no series with the label", q.where, expr, q.label)
	}
	v, err := prom.Query(ctx, expr)
	if err != nil {
		return fmt.Sprintf("  %s: %s: %v", q.where, expr, err)
	}
	for _, s := range v {
		if !math.IsNaN(float64(s.Value)) {
			return ""
		}
	}
	if len(v) > 0 {
		return fmt.Sprintf("  %s: %s: only NaN", q.where, expr)
	}
	return fmt.Sprintf("  %s: %s: empty", q.where, expr)
}

// driveTraffic makes the agent do what every panel charts, in rounds a
// scrape apart, so counters move between samples and rates are not 0:
// records into two topics and out again, a consumer group that
// committed part way (lag > 0) and stays a member, a client throttled by
// its quota, a failed request, connections opened and closed.
func driveTraffic(ctx context.Context, t *testing.T, addr string, prom *promtest.Server) {
	t.Helper()
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	admCl := newClient()
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	topics := map[string]int32{"orders": 3, "payments": 2}
	for topic, parts := range topics {
		if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	// A request that fails, for the error panel.
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "orders"); err == nil {
		t.Fatal("creating orders twice succeeded")
	}
	const throttledClient = "over-quota"
	name := throttledClient
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &name}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 4096}},
	}})
	if err == nil && res[0].Err != nil {
		err = res[0].Err
	}
	if err != nil {
		t.Fatal(err)
	}

	producer := newClient(kgo.ProducerLinger(0))
	defer producer.Close()
	group := newClient(kgo.ConsumerGroup("dashboard"), kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	// Closed by the test's end, not here: a member while Prometheus looks.
	t.Cleanup(group.Close)
	const rounds, perRound = 4, 60
	for round := range rounds {
		var recs []*kgo.Record
		for i := range perRound {
			for topic := range topics {
				recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d-%d", topic, round, i)})
			}
		}
		if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}

		// Over its quota: one 8 KiB record against 4 KiB/s. A new
		// client each round, since kgo holds a throttled client back.
		// Uncompressed: the quota counts the bytes as sent, and 8 KiB
		// of zeros compress to almost nothing.
		over := newClient(kgo.ClientID(throttledClient), kgo.ProducerLinger(0),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err := over.ProduceSync(ctx, &kgo.Record{Topic: "payments", Value: make([]byte, 8<<10)}).FirstErr(); err != nil {
			t.Fatalf("over-quota produce: %v", err)
		}
		over.Close()

		// The group reads a third of what was produced and commits it,
		// so it lags.
		want, got := perRound/3, 0
		for got < want {
			fs := group.PollRecords(ctx, want-got)
			if err := ctx.Err(); err != nil {
				t.Fatalf("consuming: %v", err)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Fatalf("consuming %s/%d: %v", topic, p, err) })
			recs := fs.Records()
			got += len(recs)
			if err := group.CommitRecords(ctx, recs...); err != nil {
				t.Fatalf("commit: %v", err)
			}
		}

		// Everything read back by a plain consumer, which then goes.
		reader := newClient(kgo.ConsumeTopics("orders", "payments"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		for n := 0; n < perRound*len(topics); {
			fs := reader.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("reading: %v", err)
			}
			n += len(fs.Records())
		}
		reader.Close()

		if err := prom.WaitScraped(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
}
