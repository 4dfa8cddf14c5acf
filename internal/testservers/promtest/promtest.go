// Package promtest owns the Prometheus server that tests run against: Start
// runs Debian's prometheus binary on a free loopback port with a temporary
// configuration and storage directory, scraping the given targets, and
// stops it when the test ends. Query and Series ask it through its HTTP
// API.
//
// Without a prometheus binary (Debian's prometheus package) the test is
// skipped, except in CI (CI=true), where it fails.
package promtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/strandkafka/strand/internal/testservers/testproc"
)

const (
	// Job is the scrape job's name, the job label of every scraped series.
	Job = "strand"
	// startTimeout bounds the wait for /-/ready, as a hang guard.
	startTimeout = 60 * time.Second
	// startAttempts bounds retries when the chosen port was taken between
	// picking it and prometheus binding it.
	startAttempts = 3
	stopGrace     = 10 * time.Second
	// maxResponseBytes bounds what one API answer may hold.
	maxResponseBytes = 16 << 20
)

// Server is a running prometheus.
type Server struct {
	// URL is its HTTP API's base, e.g. http://127.0.0.1:41234.
	URL string
}

// Start returns a prometheus scraping targets (host:port, /metrics over
// HTTP) every interval, stopped at t's cleanup.
func Start(t testing.TB, interval time.Duration, targets ...string) *Server {
	t.Helper()
	bin, err := testproc.FindBinary("prometheus")
	if err != nil {
		testproc.SkipOrFail(t, err)
	}
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
scrape_configs:
  - job_name: %[2]s
    static_configs:
      - targets: [%[3]s]
`, model.Duration(interval), Job, strings.Join(quoted, ", "))
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for range startAttempts {
		port, err := testproc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		logPath := filepath.Join(dir, "prometheus.log")
		var id testproc.Identity // prometheus runs as root without complaint
		proc, err := testproc.Start(id.Command(bin,
			"--config.file="+configPath,
			"--storage.tsdb.path="+filepath.Join(dir, "data"),
			"--web.listen-address="+addr,
			"--log.level=warn",
		), logPath)
		if err != nil {
			t.Fatalf("promtest: start prometheus: %v", err)
		}
		s := &Server{URL: "http://" + addr}
		if err := s.waitReady(proc, logPath); err != nil {
			lastErr = err
			continue
		}
		t.Cleanup(func() { proc.Stop(syscall.SIGTERM, stopGrace) })
		return s
	}
	t.Fatal(lastErr)
	return nil
}

func (s *Server) waitReady(proc *testproc.Proc, logPath string) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/-/ready", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-proc.Exited():
			return fmt.Errorf("promtest: prometheus exited during start:\n%s", testproc.Tail(logPath, 2000))
		case <-ctx.Done():
			proc.Stop(syscall.SIGKILL, stopGrace)
			return fmt.Errorf("promtest: prometheus not ready in %v:\n%s", startTimeout, testproc.Tail(logPath, 2000))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// get calls the API at path with query and decodes its data field into
// data. An answer with status "error" is an error naming Prometheus's.
func (s *Server) get(ctx context.Context, path string, query url.Values, data any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path+"?"+query.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return err
	}
	var r struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%s: %s: %w", path, resp.Status, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s: %s", path, r.ErrorType, r.Error)
	}
	return json.Unmarshal(r.Data, data)
}

// Query evaluates expr at the current time (/api/v1/query). A scalar
// result comes back as a one-sample vector with no labels.
func (s *Server) Query(ctx context.Context, expr string) (model.Vector, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := s.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	switch data.ResultType {
	case "vector":
		var v model.Vector
		err := json.Unmarshal(data.Result, &v)
		return v, err
	case "scalar":
		var sc model.Scalar
		if err := json.Unmarshal(data.Result, &sc); err != nil {
			return nil, err
		}
		return model.Vector{{Value: sc.Value, Timestamp: sc.Timestamp}}, nil
	default:
		return nil, fmt.Errorf("query %q: a %s result, not an instant vector", expr, data.ResultType)
	}
}

// Series returns the label sets of the series match selects
// (/api/v1/series).
func (s *Server) Series(ctx context.Context, match string) ([]model.LabelSet, error) {
	var sets []model.LabelSet
	err := s.get(ctx, "/api/v1/series", url.Values{"match[]": {match}}, &sets)
	return sets, err
}

// WaitScraped returns once every target has been scraped successfully
// after after, so what the targets exposed by then is in the database.
func (s *Server) WaitScraped(ctx context.Context, after time.Time) error {
	for {
		var data struct {
			ActiveTargets []struct {
				ScrapeURL  string    `json:"scrapeUrl"`
				Health     string    `json:"health"`
				LastError  string    `json:"lastError"`
				LastScrape time.Time `json:"lastScrape"`
			} `json:"activeTargets"`
		}
		if err := s.get(ctx, "/api/v1/targets", url.Values{"state": {"active"}}, &data); err != nil {
			return err
		}
		done := len(data.ActiveTargets) > 0
		var lastErr error
		for _, tg := range data.ActiveTargets {
			if tg.Health != "up" || !tg.LastScrape.After(after) {
				done = false
			}
			if tg.LastError != "" {
				lastErr = fmt.Errorf("%s: %s", tg.ScrapeURL, tg.LastError)
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("promtest: targets not scraped after %v: %w", after, ctx.Err()), lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
