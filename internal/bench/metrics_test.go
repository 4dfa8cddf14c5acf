package bench

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// testdata/metrics.txt is /metrics of an agent captured after a short
// run (367 flushes of one PUT and one Produce request each).
func TestParseMetrics(t *testing.T) {
	captured, err := os.ReadFile("testdata/metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		in      string
		wantErr error
		check   func(t *testing.T, m AgentMetrics)
	}{
		{
			name: "captured agent exposition",
			in:   string(captured),
			check: func(t *testing.T, m AgentMetrics) {
				for _, c := range []struct {
					what      string
					got, want float64
				}{
					{"puts", m.Puts(), 367},
					{"put bytes", m.PutBytes(), 8332049},
					{"gets", m.ObjRequests["get"], 0},
					{"log appends", m.LogAppends, 368},
					{"flushes", m.Flushes, 367},
					{"flush bytes", m.FlushBytes, 8292613},
					{"produce requests", m.ProduceRequests, 367},
					{"cpu seconds", m.CPUSeconds, 0.65},
					{"rss", m.RSSBytes, 4.9221632e+07},
				} {
					if c.got != c.want {
						t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
					}
				}
			},
		},
		{
			name: "put-if-absent counts as a PUT",
			in: `# TYPE strand_objstore_requests_total counter
strand_objstore_requests_total{op="put"} 3
strand_objstore_requests_total{op="put-if-absent"} 2
strand_objstore_requests_total{op="get"} 7
`,
			check: func(t *testing.T, m AgentMetrics) {
				if m.Puts() != 5 || m.ObjRequests["get"] != 7 {
					t.Errorf("puts %v gets %v, want 5 and 7", m.Puts(), m.ObjRequests["get"])
				}
			},
		},
		{
			name: "views by label",
			in: `# TYPE strand_sql_view_epochs_total counter
strand_sql_view_epochs_total{view="a"} 4
strand_sql_view_epochs_total{view="b"} 9
# TYPE strand_sql_view_input_offsets gauge
strand_sql_view_input_offsets{view="a"} 120
# TYPE strand_sql_view_input_lag_records gauge
strand_sql_view_input_lag_records{view="b"} 7
# TYPE strand_sql_view_failures_total counter
strand_sql_view_failures_total{view="b"} 1
`,
			check: func(t *testing.T, m AgentMetrics) {
				want := map[string]ViewMetrics{
					"a": {Epochs: 4, InputOffsets: 120},
					"b": {Epochs: 9, LagRecords: 7, Failures: 1},
				}
				if len(m.Views) != len(want) || m.Views["a"] != want["a"] || m.Views["b"] != want["b"] {
					t.Errorf("views = %+v, want %+v", m.Views, want)
				}
			},
		},
		{
			name:    "not an agent",
			in:      "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n",
			wantErr: ErrNoMetrics,
		},
		{
			name:    "garbage",
			in:      "strand_flush_bytes_count{ 12\n",
			wantErr: errParse,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMetrics(strings.NewReader(tc.in))
			switch {
			case tc.wantErr == errParse:
				if err == nil || errors.Is(err, ErrNoMetrics) {
					t.Fatalf("err = %v, want a parse error", err)
				}
				return
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			tc.check(t, m)
		})
	}
}

// errParse stands for "any parse error" in the table above.
var errParse = errors.New("parse error")

func TestScrape(t *testing.T) {
	captured, err := os.ReadFile("testdata/metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Write(captured)
	}))
	t.Cleanup(srv.Close)
	for _, addr := range []string{srv.Listener.Addr().String(), srv.URL, srv.URL + "/"} {
		m, err := Scrape(context.Background(), addr)
		if err != nil {
			t.Fatalf("Scrape(%q): %v", addr, err)
		}
		if m.LogAppends != 368 {
			t.Errorf("Scrape(%q): log appends %v, want 368", addr, m.LogAppends)
		}
	}
	if _, err := Scrape(context.Background(), srv.URL+"/nothing-here"); err == nil {
		t.Error("Scrape of a 404 succeeded")
	}
}
