package agent_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/loglevel"
)

// syncBuffer is a log sink written from the agent's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the lines written so far that contain every one of subs.
func (b *syncBuffer) lines(subs ...string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for line := range strings.Lines(b.buf.String()) {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

// TestAuthorizationLog: a refusal on the Kafka port and one on the
// schema registry are each written by kafka.authorizer.logger with the
// principal, host, operation, resource and listener, and counted in
// strand_authorization_denials_total; a listing that only filters
// writes nothing; the logger is a BROKER_LOGGER whose level an admin
// sets over Kafka, and WARN silences it while the count goes on.
func TestAuthorizationLog(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "admin.pw")
	if err := os.WriteFile(pwFile, []byte("admin-pw-1234\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	levels := loglevel.New()
	logger := slog.New(levels.Handler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: loglevel.Lowest})))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a, err := agent.Start(ctx, agent.Config{
		DataDir:                   filepath.Join(dir, "data"),
		Listeners:                 "SASL_PLAINTEXT://127.0.0.1:0",
		HTTPListen:                "127.0.0.1:0",
		SASLBootstrapUser:         "admin",
		SASLBootstrapPasswordFile: pwFile,
		Authorizer:                "standard",
		SuperUsers:                "User:admin",
		SchemaRegistryListen:      "127.0.0.1:0",
		LogLevels:                 levels,
	}, logger)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { a.Stop(context.Background()) })
	client := func(user, pass string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(a.ListenerAddr("SASL_PLAINTEXT")),
			kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	adminCl := client("admin", "admin-pw-1234")
	admin := kadm.NewClient(adminCl)
	res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pw"}})
	if err == nil {
		for _, r := range res {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("creating alice: %v", err)
	}
	alice := kadm.NewClient(client("alice", "alice-pw"))

	// A listing filters: alice sees no subject and is not refused.
	if got := regDo(t, http.DefaultClient, "http://"+a.RegistryAddr(), regReq{method: "GET", path: "/subjects", user: "alice", pass: "alice-pw"}); got.status != 200 {
		t.Fatalf("GET /subjects as alice: %d %s", got.status, got.body)
	}
	if _, err := alice.ListTopics(ctx); err != nil {
		t.Fatalf("listing topics as alice: %v", err)
	}
	if got := out.lines("kafka.authorizer.logger"); len(got) != 0 {
		t.Errorf("a listing was logged as a denial: %q", got)
	}

	// Refusals on the Kafka port and on the registry.
	cr, err := alice.CreateTopic(ctx, 1, -1, nil, "orders")
	if err == nil {
		err = cr.Err
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("CreateTopics as alice: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if got := regDo(t, http.DefaultClient, "http://"+a.RegistryAddr(), regReq{method: "POST", path: "/subjects/orders-value/versions", body: registerBody(orderV1),
		user: "alice", pass: "alice-pw"}); got.status != 403 {
		t.Fatalf("registering as alice: %d %s", got.status, got.body)
	}
	for _, want := range [][]string{
		{"level=INFO", "component=kafka.authorizer.logger", "principal=User:alice", "host=127.0.0.1", "operation=CREATE",
			"resource_type=TOPIC", "resource=orders", "listener=SASL_PLAINTEXT", "request=CreateTopics", "allow.everyone.if.no.acl.found is false"},
		{"level=INFO", "component=kafka.authorizer.logger", "principal=User:alice", "host=127.0.0.1", "operation=WRITE",
			"resource_type=SUBJECT", "resource=orders-value", "listener=schema-registry", `request="POST /subjects/orders-value/versions"`},
	} {
		if got := out.lines(want...); len(got) != 1 {
			t.Errorf("want one line with %q, got %q; all authorizer lines: %q", want, got, out.lines("kafka.authorizer.logger"))
		}
	}
	denials := func(op, typ string) float64 {
		v, _ := sample(parseScrape(t, scrapeBody(t, a)), "strand_authorization_denials_total", map[string]string{"operation": op, "resource_type": typ})
		return v
	}
	if c, w := denials("CREATE", "TOPIC"), denials("WRITE", "SUBJECT"); c != 1 || w != 1 {
		t.Errorf("denials counted: CREATE TOPIC %v, WRITE SUBJECT %v; want 1 each", c, w)
	}

	// The logger is a broker logger: admin sets it to WARN over Kafka,
	// after which a refusal is counted and not written.
	described := describeLoggers(ctx, t, adminCl)
	if described["kafka.authorizer.logger"] != "INFO" {
		t.Fatalf("BROKER_LOGGER configs %v lack kafka.authorizer.logger at INFO", described)
	}
	setLogger(ctx, t, adminCl, "kafka.authorizer.logger", "WARN")
	cr, err = alice.CreateTopic(ctx, 1, -1, nil, "payments")
	if err == nil {
		err = cr.Err
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("CreateTopics as alice: %v", err)
	}
	if got := out.lines("resource=payments"); len(got) != 0 {
		t.Errorf("written at WARN: %q", got)
	}
	if c := denials("CREATE", "TOPIC"); c != 2 {
		t.Errorf("CREATE TOPIC denials %v, want 2", c)
	}
}

// describeLoggers returns the BROKER_LOGGER configs of agent 0 (the
// default node id), logger to level.
func describeLoggers(ctx context.Context, t *testing.T, cl *kgo.Client) map[string]string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "0"
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range resp.Resources {
		if r.ErrorCode != 0 {
			t.Fatalf("DescribeConfigs BROKER_LOGGER: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		for _, c := range r.Configs {
			out[c.Name] = ""
			if c.Value != nil {
				out[c.Name] = *c.Value
			}
		}
	}
	return out
}

// setLogger sets logger's level on agent 0.
func setLogger(ctx context.Context, t *testing.T, cl *kgo.Client, logger, level string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "0"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = logger, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(level)
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Resources {
		if r.ErrorCode != 0 {
			t.Fatalf("IncrementalAlterConfigs BROKER_LOGGER: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
}
