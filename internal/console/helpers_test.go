package console_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// opTimeout bounds each step of a test; generous, as the machine is
// shared.
const opTimeout = 60 * time.Second

// startAgent starts an agent with HTTP on kernel-chosen loopback ports,
// with token as its admin token ("" for none), and stops it at cleanup.
func startAgent(t *testing.T, token string) *agent.Agent {
	t.Helper()
	return startAgentWith(t, agent.Config{KafkaListen: "127.0.0.1:0", AdminToken: token})
}

// startAgentWith starts an agent with cfg, its own data directory and
// HTTP on a kernel-chosen loopback port unless cfg names another, and
// stops it at cleanup.
func startAgentWith(t *testing.T, cfg agent.Config) *agent.Agent {
	t.Helper()
	cfg.DataDir = t.TempDir()
	if cfg.HTTPListen == "" {
		cfg.HTTPListen = "127.0.0.1:0"
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a, err := agent.Start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return a
}

func kafkaClient(t *testing.T, a *agent.Agent, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.KafkaAddr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, adm *kadm.Client, partitions int32, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	res, err := adm.CreateTopics(ctx, partitions, -1, nil, names...)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("creating %v: %v", names, err)
	}
}

func produce(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// noRedirects is an HTTP client that shows redirects instead of
// following them.
var noRedirects = &http.Client{
	Timeout:       opTimeout,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// httpBase is http://host:port of a's HTTP port, on loopback when it
// listens on every interface.
func httpBase(a *agent.Agent) string {
	host, port, _ := net.SplitHostPort(a.HTTPAddr())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// get returns the status and body of GET path on a's HTTP port, with
// the headers given ("Cookie", "Authorization").
func get(t *testing.T, a *agent.Agent, path string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, httpBase(a)+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// post submits form to path as a browser on the console's page would:
// same Origin, and the headers given ("Cookie", "Origin" to override).
func post(t *testing.T, a *agent.Agent, path string, form url.Values, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, httpBase(a)+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", httpBase(a))
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func topicExists(t *testing.T, adm *kadm.Client, name string) bool {
	t.Helper()
	// Asking for authorized operations bypasses kgo's metadata cache:
	// the tests look right after the console changed a topic.
	ctx, cancel := context.WithTimeout(kadm.WithAuthorizedOps(context.Background()), opTimeout)
	defer cancel()
	tds, err := adm.ListTopics(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	td, ok := tds[name]
	return ok && td.Err == nil
}
