package promtest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/testservers/promtest"
)

// TestScrapeAndQuery has a prometheus scrape a fake target and reads its
// metric back through Query and Series.
func TestScrapeAndQuery(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("# TYPE promtest_answer gauge\npromtest_answer{kind=\"life\"} 42\n"))
	}))
	defer target.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := promtest.Start(t, time.Second, strings.TrimPrefix(target.URL, "http://"))
	if err := p.WaitScraped(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	v, err := p.Query(ctx, `promtest_answer{job="`+promtest.Job+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 1 || v[0].Value != 42 || v[0].Metric["kind"] != "life" {
		t.Fatalf("promtest_answer: %v, want one sample of 42 with kind=life", v)
	}
	if v, err := p.Query(ctx, "scalar(promtest_answer) * 2"); err != nil || len(v) != 1 || v[0].Value != 84 {
		t.Fatalf("a scalar query: %v, %v; want 84", v, err)
	}
	sets, err := p.Series(ctx, "promtest_answer")
	if err != nil || len(sets) != 1 || sets[0]["kind"] != "life" {
		t.Fatalf("Series: %v, %v", sets, err)
	}
	if _, err := p.Query(ctx, "rate(promtest_answer"); err == nil || !strings.Contains(err.Error(), "bad_data") {
		t.Fatalf("a malformed query: %v, want Prometheus's bad_data error", err)
	}
}
