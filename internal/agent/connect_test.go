package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/meta"
)

// runningClass is a fake source whose task runs until stopped, and
// records which agent (by Env.Dir) runs it.
type runningClass struct {
	mu struct {
		sync.Mutex
		dirs []string
	}
}

func (c *runningClass) class() connect.Class {
	return connect.Class{
		Name: "com.example.TestSourceConnector", Kind: connect.KindSource,
		Validate: func(map[string]string) error { return nil },
		Secret:   func(k string) bool { return k == "database.password" },
		New: func(cfg map[string]string) (connect.Task, error) {
			return taskFunc(func(ctx context.Context, env connect.Env) error {
				c.mu.Lock()
				c.mu.dirs = append(c.mu.dirs, env.Dir)
				c.mu.Unlock()
				if topic := cfg["produce.topic"]; topic != "" {
					// A real class asks whether the owner may
					// write; Env.Kafka itself may create topics
					// and write them, whatever the ACLs.
					if err := env.Allowed(kmsg.ACLOperationWrite, topic); err != nil {
						return err
					}
					cl, err := kgo.NewClient(env.Kafka()...)
					if err != nil {
						return err
					}
					defer cl.Close()
					if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
						return err
					}
					if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
						return err
					}
				}
				env.Running()
				<-ctx.Done()
				return nil
			}), nil
		},
	}
}

type taskFunc func(ctx context.Context, env connect.Env) error

func (f taskFunc) Run(ctx context.Context, env connect.Env) error { return f(ctx, env) }

type connReq struct {
	method, path, body string
	user, pass         string
	header             map[string]string
}

type connAnswer struct {
	status int
	body   string
}

func connDo(t testing.TB, base string, q connReq) connAnswer {
	t.Helper()
	var rd io.Reader
	if q.body != "" {
		rd = strings.NewReader(q.body)
	}
	req, err := http.NewRequest(q.method, base+q.path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if q.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if q.user != "" {
		req.SetBasicAuth(q.user, q.pass)
	}
	for k, v := range q.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return connAnswer{status: resp.StatusCode, body: string(b)}
}

func connectorACL(principal, name string, pattern acl.PatternType, op acl.Operation) acl.Binding {
	return acl.Binding{ResourceType: acl.ResourceTypeConnector, ResourceName: name, PatternType: pattern,
		Principal: principal, Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

// TestConnectACLs: the Connect API names its callers as the registry
// does and asks CONNECTOR ACLs: denied without rights, allowed with,
// listing only what the caller may describe, refusing what a browser
// could send from another site.
func TestConnectACLs(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("admin-pw-1234\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := agent.Config{
		DataDir: filepath.Join(dir, "data"), Listeners: "SASL_PLAINTEXT://127.0.0.1:0", HTTPListen: "127.0.0.1:0",
		SASLBootstrapUser: "admin", SASLBootstrapPasswordFile: pwFile, Authorizer: "standard", SuperUsers: "User:admin",
		AdminToken: "connect-token-1234", ConnectListen: "127.0.0.1:0",
	}
	agent.SetConnectClasses(&cfg, (&runningClass{}).class())
	a := startWith(t, cfg, nil)
	admin, err := kgo.NewClient(kgo.SeedBrokers(a.ListenerAddr("SASL_PLAINTEXT")),
		kgo.SASL(scram.Auth{User: "admin", Pass: "admin-pw-1234"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var ups []kadm.UpsertSCRAM
	for _, u := range []string{"alice", "bob"} {
		ups = append(ups, kadm.UpsertSCRAM{User: u, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: u + "-pw"})
	}
	res, err := kadm.NewClient(admin).AlterUserSCRAMs(ctx, nil, ups)
	if err == nil {
		for _, r := range res {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("creating users: %v", err)
	}
	pre := kmsg.ACLResourcePatternTypePrefixed
	for i, err := range createACLs(t, admin,
		connectorACL("User:alice", "alice-", pre, kmsg.ACLOperationCreate),
		connectorACL("User:alice", "alice-", pre, kmsg.ACLOperationAlter),
		connectorACL("User:alice", "alice-", pre, kmsg.ACLOperationDelete),
	) {
		if err != nil {
			t.Fatalf("ACL %d: %v", i, err)
		}
	}
	base := "http://" + a.ConnectAddr()
	as := func(user string, q connReq) connReq { q.user, q.pass = user, user+"-pw"; return q }
	create := func(name string) string {
		return `{"name":"` + name + `","config":{"connector.class":"TestSourceConnector","database.password":"pw-secret-1"}}`
	}
	for _, tc := range []struct {
		name   string
		q      connReq
		status int
	}{
		{"no credentials", connReq{method: "GET", path: "/connectors"}, 401},
		{"wrong password", connReq{method: "GET", path: "/connectors", user: "alice", pass: "nope"}, 401},
		{"bob creates without CREATE", as("bob", connReq{method: "POST", path: "/connectors", body: create("alice-bob")}), 403},
		{"alice creates by prefix", as("alice", connReq{method: "POST", path: "/connectors", body: create("alice-pg")}), 201},
		{"alice creates elsewhere", as("alice", connReq{method: "POST", path: "/connectors", body: create("other")}), 403},
		{"the admin token creates", connReq{method: "POST", path: "/connectors", body: create("admins"),
			header: map[string]string{"Authorization": "Bearer connect-token-1234"}}, 201},
		{"bob cannot see alice's", as("bob", connReq{method: "GET", path: "/connectors/alice-pg/status"}), 403},
		{"bob cannot see one that does not exist", as("bob", connReq{method: "GET", path: "/connectors/alice-none/status"}), 403},
		{"bob cannot pause alice's", as("bob", connReq{method: "PUT", path: "/connectors/alice-pg/pause"}), 403},
		{"alice sees hers", as("alice", connReq{method: "GET", path: "/connectors/alice-pg/status"}), 200},
		{"alice cannot see the admin's", as("alice", connReq{method: "GET", path: "/connectors/admins"}), 403},
		{"alice's own that does not exist", as("alice", connReq{method: "GET", path: "/connectors/alice-none"}), 404},
		{"alice pauses, bodyless as curl sends it", as("alice", connReq{method: "PUT", path: "/connectors/alice-pg/pause"}), 202},
		{"alice restarts, bodyless", as("alice", connReq{method: "POST", path: "/connectors/alice-pg/restart"}), 204},
		{"a form body is refused", as("alice", connReq{method: "PUT", path: "/connectors/alice-pg/config", body: `{}`,
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}), 415},
		{"another origin is refused", as("alice", connReq{method: "DELETE", path: "/connectors/alice-pg",
			header: map[string]string{"Origin": "http://evil.example"}}), 403},
		{"a bodyless cross-site POST is refused", as("alice", connReq{method: "POST", path: "/connectors/alice-pg/restart",
			header: map[string]string{"Sec-Fetch-Site": "cross-site"}}), 415},
		{"no CORS preflight", as("alice", connReq{method: "OPTIONS", path: "/connectors"}), 405},
		{"bob cannot delete", as("bob", connReq{method: "DELETE", path: "/connectors/alice-pg"}), 403},
	} {
		if got := connDo(t, base, tc.q); got.status != tc.status {
			t.Errorf("%s: %s %s: %d %s, want %d", tc.name, tc.q.method, tc.q.path, got.status, got.body, tc.status)
		} else if tc.status >= 400 && !strings.Contains(got.body, `"error_code":`) {
			t.Errorf("%s: %s is not Connect's error shape", tc.name, got.body)
		}
	}
	list := func(q connReq) []string {
		t.Helper()
		got := connDo(t, base, q)
		var names []string
		if err := json.Unmarshal([]byte(got.body), &names); got.status != 200 || err != nil {
			t.Fatalf("GET /connectors: %d %s", got.status, got.body)
		}
		slices.Sort(names)
		return names
	}
	if got := list(as("alice", connReq{method: "GET", path: "/connectors"})); !slices.Equal(got, []string{"alice-pg"}) {
		t.Errorf("alice lists %v, want only hers", got)
	}
	if got := list(as("bob", connReq{method: "GET", path: "/connectors"})); len(got) != 0 {
		t.Errorf("bob lists %v, want none", got)
	}
	if got := list(connReq{method: "GET", path: "/connectors", user: "admin", pass: "admin-pw-1234"}); !slices.Equal(got, []string{"admins", "alice-pg"}) {
		t.Errorf("admin lists %v", got)
	}
	// Each 403 the authorizer gave is counted (the authorization log);
	// the listings that left connectors out are not, nor is the
	// refusal of another origin, which came before authorization.
	fs := parseScrape(t, scrapeBody(t, a))
	for op, want := range map[string]float64{"CREATE": 2, "DESCRIBE": 3, "ALTER": 1, "DELETE": 1} {
		if v, _ := sample(fs, "strand_authorization_denials_total", map[string]string{"operation": op, "resource_type": "CONNECTOR"}); v != want {
			t.Errorf("%s CONNECTOR denials counted: %v, want %v", op, v, want)
		}
	}
	// The secret is masked, and stays out of the log.
	got := connDo(t, base, as("alice", connReq{method: "GET", path: "/connectors/alice-pg/config"}))
	if got.status != 200 || !strings.Contains(got.body, `"database.password":"[hidden]"`) || strings.Contains(got.body, "pw-secret-1") {
		t.Errorf("config: %d %s", got.status, got.body)
	}
	if got := connDo(t, base, as("alice", connReq{method: "DELETE", path: "/connectors/alice-pg"})); got.status != 204 {
		t.Errorf("alice deletes hers: %d %s", got.status, got.body)
	}

	// A task's Kafka client is a super user whatever the ACLs say, but
	// a class asks the authorizer about the owner's rights: alice may
	// create a connector, not write the topic it names.
	if got := connDo(t, base, as("alice", connReq{method: "POST", path: "/connectors",
		body: `{"name":"alice-writer","config":{"connector.class":"TestSourceConnector","produce.topic":"alice-out"}}`})); got.status != 201 {
		t.Fatalf("alice creates a writer: %d %s", got.status, got.body)
	}
	for deadline := time.Now().Add(opTimeout); ; time.Sleep(20 * time.Millisecond) {
		got := connDo(t, base, as("alice", connReq{method: "GET", path: "/connectors/alice-writer/status"}))
		var st connect.Status
		if err := json.Unmarshal([]byte(got.body), &st); err != nil || len(st.Tasks) != 1 {
			t.Fatalf("status: %d %s", got.status, got.body)
		}
		if st.Tasks[0].State == "FAILED" {
			if !strings.Contains(st.Tasks[0].Trace, `may not WRITE topic "alice-out"`) {
				t.Fatalf("alice's writer failed with %q, want the owner's missing right", st.Tasks[0].Trace)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's writer, whose owner may not write its topic: %+v", st.Tasks[0])
		}
	}
	token := map[string]string{"Authorization": "Bearer connect-token-1234"}
	if got := connDo(t, base, connReq{method: "POST", path: "/connectors", header: token,
		body: `{"name":"writer","config":{"connector.class":"TestSourceConnector","produce.topic":"connect-out"}}`}); got.status != 201 {
		t.Fatalf("create writer: %d %s", got.status, got.body)
	}
	deadline := time.Now().Add(opTimeout)
	for {
		got := connDo(t, base, connReq{method: "GET", path: "/connectors/writer/status", header: token})
		var st connect.Status
		if err := json.Unmarshal([]byte(got.body), &st); err != nil || len(st.Tasks) != 1 {
			t.Fatalf("status: %d %s", got.status, got.body)
		}
		if st.Tasks[0].State == "RUNNING" {
			break
		}
		if st.Tasks[0].State == "FAILED" || time.Now().After(deadline) {
			t.Fatalf("the writer's task: %+v", st.Tasks[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConnectMovesWhenAgentStops: a connector runs on the agent the
// ring places it on, once; when that agent stops, the other takes it
// and reports itself as the worker.
func TestConnectMovesWhenAgentStops(t *testing.T) {
	shared := t.TempDir()
	logURL := "mem://" + strings.ReplaceAll(t.Name(), "/", "-")
	fake := &runningClass{}
	var agents []*agent.Agent
	for node := range int32(2) {
		cfg := agent.Config{DataDir: t.TempDir(), NodeID: node + 1, Log: logURL, Lease: time.Second,
			ObjStore: "file://" + filepath.ToSlash(filepath.Join(shared, "objects")), ConnectListen: "127.0.0.1:0"}
		agent.SetConnectClasses(&cfg, fake.class())
		agents = append(agents, startWith(t, cfg, nil))
	}
	body := `{"name":"mover","config":{"connector.class":"com.example.TestSourceConnector","database.password":"pw"}}`
	if got := connDo(t, "http://"+agents[1].ConnectAddr(), connReq{method: "POST", path: "/connectors", body: body}); got.status != 201 {
		t.Fatalf("create: %d %s", got.status, got.body)
	}
	// Both agents answer its status; it runs on one.
	status := func(a *agent.Agent) connect.Status {
		got := connDo(t, "http://"+a.ConnectAddr(), connReq{method: "GET", path: "/connectors/mover/status"})
		var st connect.Status
		if got.status != 200 || json.Unmarshal([]byte(got.body), &st) != nil {
			t.Fatalf("status: %d %s", got.status, got.body)
		}
		return st
	}
	waitRunningOn := func(from *agent.Agent, want func(worker string) bool) connect.Status {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			st := status(from)
			if len(st.Tasks) == 1 && st.Tasks[0].State == "RUNNING" && want(st.Tasks[0].WorkerID) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("status %+v", st)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	st := waitRunningOn(agents[0], func(string) bool { return true })
	var owner, other *agent.Agent
	for i, a := range agents {
		if a.ConnectAddr() == st.Tasks[0].WorkerID {
			owner, other = a, agents[1-i]
		}
	}
	if owner == nil {
		t.Fatalf("worker %q is neither agent's Connect address (%s, %s)", st.Tasks[0].WorkerID, agents[0].ConnectAddr(), agents[1].ConnectAddr())
	}
	stop(t, owner)
	waitRunningOn(other, func(w string) bool { return w == other.ConnectAddr() })
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.mu.dirs) != 2 {
		t.Fatalf("the task started %d times, want twice (once per agent)", len(fake.mu.dirs))
	}
}

// TestConnectClientCertificate: with --http-tls the Connect API serves
// TLS with the HTTP port's certificate; a client certificate is its
// Kafka principal, which CONNECTOR ACLs authorize.
func TestConnectClientCertificate(t *testing.T) {
	pki := newTestPKI(t)
	cfg := pki.serve(agent.Config{DataDir: t.TempDir(), HTTPTLS: true, Authorizer: "standard", SuperUsers: "User:ANONYMOUS",
		ConnectListen: "127.0.0.1:0"}, true)
	cfg.TLSClientAuth = "" // the Kafka listener is PLAINTEXT: its ANONYMOUS is the super user
	agent.SetConnectClasses(&cfg, (&runningClass{}).class())
	a := startWith(t, cfg, nil)
	base := "https://" + a.ConnectAddr()
	do := func(withCert bool, method, path, body string) int {
		t.Helper()
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.clientTLS(t, withCert)}}
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	create := `{"name":"tls-src","config":{"connector.class":"TestSourceConnector"}}`
	if code := do(true, "POST", "/connectors", create); code != 403 {
		t.Fatalf("User:CN=client creates without an ACL: %d, want 403", code)
	}
	for _, err := range createACLs(t, client(t, a.KafkaAddr()),
		connectorACL("User:CN=client", "tls-", kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLOperationCreate)) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if code := do(true, "POST", "/connectors", create); code != 201 {
		t.Fatalf("User:CN=client creates with CREATE: %d", code)
	}
	if code := do(false, "GET", "/connectors", ""); code != 401 {
		t.Fatalf("without a certificate: %d, want 401", code)
	}
}

// TestConnectBelowLevel8: on a log at metadata level 7 creating a
// connector is refused with what to raise and writes nothing, as is a
// CONNECTOR ACL; once the level is raised both work.
func TestConnectBelowLevel8(t *testing.T) {
	dir := t.TempDir()
	logURL := logAtLevel(t, dir, meta.MetadataLevel7)
	cfg := agent.Config{DataDir: filepath.Join(dir, "agent"), Log: logURL, ConnectListen: "127.0.0.1:0"}
	agent.SetConnectClasses(&cfg, (&runningClass{}).class())
	a := startWith(t, cfg, nil)
	base := "http://" + a.ConnectAddr()
	create := connReq{method: "POST", path: "/connectors", body: `{"name":"old","config":{"connector.class":"TestSourceConnector"}}`}
	if got := connDo(t, base, create); got.status != 503 || !strings.Contains(got.body, "strand.metadata.version 8") {
		t.Fatalf("create at level 7: %d %s, want 503 naming strand.metadata.version 8", got.status, got.body)
	}
	if got := connDo(t, base, connReq{method: "GET", path: "/connectors"}); got.status != 200 || strings.TrimSpace(got.body) != "[]" {
		t.Fatalf("connectors after the refusal: %d %s", got.status, got.body)
	}
	kcl := client(t, a.KafkaAddr())
	bind := connectorACL("User:alice", "old", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationAlter)
	if errs := createACLs(t, kcl, bind); !errors.Is(errs[0], kerr.InvalidRequest) || !strings.Contains(errs[0].Error(), "strand.metadata.version 8") {
		t.Fatalf("CONNECTOR ACL at level 7: %v, want INVALID_REQUEST naming the level", errs[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	res, err := kadm.NewClient(kcl).UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: meta.FeatureMetadata, MaxVersionLevel: meta.MetadataLevel8, UpgradeType: 1})
	if err != nil || res.Error() != nil {
		t.Fatalf("raising strand.metadata.version to 8: %v, %v", err, res.Error())
	}
	if got := connDo(t, base, create); got.status != 201 {
		t.Fatalf("create at level 8: %d %s", got.status, got.body)
	}
	if errs := createACLs(t, kcl, bind); errs[0] != nil {
		t.Fatalf("CONNECTOR ACL at level 8: %v", errs[0])
	}
}
