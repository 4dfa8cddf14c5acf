package agent_test

import (
	"context"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
)

const (
	orderV1 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`
	orderV2 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"note","type":"string","default":""}]}`
)

// regReq is one request to the registry: basic auth when user is set,
// and a JSON body in Confluent's media type unless header says
// otherwise.
type regReq struct {
	method, path, body string
	user, pass         string
	header             map[string]string
}

// regAnswer is what the registry answered.
type regAnswer struct {
	status int
	header http.Header
	body   string
}

// errorCode is the Confluent error_code of the answer, 0 if none.
func (a regAnswer) errorCode() int {
	var e struct {
		Code int `json:"error_code"`
	}
	_ = json.Unmarshal([]byte(a.body), &e)
	return e.Code
}

func regDo(t testing.TB, c *http.Client, base string, q regReq) regAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, q.method, base+q.path, strings.NewReader(q.body))
	if err != nil {
		t.Fatal(err)
	}
	if q.method == http.MethodPost || q.method == http.MethodPut {
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	}
	if q.user != "" {
		req.SetBasicAuth(q.user, q.pass)
	}
	for k, v := range q.header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", q.method, q.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return regAnswer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func registerBody(schema string) string {
	b, _ := json.Marshal(map[string]string{"schema": schema})
	return string(b)
}

// createACLs creates bindings through CreateAcls as cl's principal,
// raw, as kadm's builder knows no SUBJECT; it returns each creation's
// error.
func createACLs(t *testing.T, cl *kgo.Client, bs ...acl.Binding) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bs {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
		c.Principal, c.Host, c.Operation, c.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("CreateAcls: %v", err)
	}
	out := make([]error, len(resp.Results))
	for i, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			out[i] = errors.Join(err, errors.New(msg))
		}
	}
	return out
}

func subjectACL(principal, subject string, pattern acl.PatternType, op acl.Operation, perm acl.Permission) acl.Binding {
	return acl.Binding{ResourceType: acl.ResourceTypeSubject, ResourceName: subject, PatternType: pattern,
		Principal: principal, Host: "*", Operation: op, Permission: perm}
}

// TestRegistryClient: franz-go's schema registry client (written
// against Confluent's registry) registers, reads by id and looks up on
// an agent's registry; the loopback default takes it as a super user.
// The requests are counted by endpoint and status.
func TestRegistryClient(t *testing.T) {
	a := startWith(t, agent.Config{DataDir: t.TempDir(), SchemaRegistryListen: "127.0.0.1:0"}, nil)
	cl, err := sr.NewClient(sr.URLs("http://" + a.RegistryAddr()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	s1, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV1})
	if err != nil || s1.Version != 1 || s1.ID <= 0 {
		t.Fatalf("CreateSchema = %+v, %v", s1, err)
	}
	s2, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV2})
	if err != nil || s2.Version != 2 || s2.ID == s1.ID {
		t.Fatalf("CreateSchema v2 = %+v, %v", s2, err)
	}
	got, err := cl.SchemaByID(ctx, s1.ID)
	if err != nil || got.Type != sr.TypeAvro || !strings.Contains(got.Schema, `"Order"`) {
		t.Fatalf("SchemaByID(%d) = %+v, %v", s1.ID, got, err)
	}
	look, err := cl.LookupSchema(ctx, "orders-value", sr.Schema{Schema: orderV1})
	if err != nil || look.ID != s1.ID || look.Version != 1 {
		t.Fatalf("LookupSchema = %+v, %v", look, err)
	}
	if _, err := cl.SchemaByID(ctx, 999); err == nil {
		t.Fatal("SchemaByID of an unknown id succeeded")
	}
	checkMetrics(t, a.HTTPAddr(), []metricCheck{
		{name: "strand_schema_registry_requests_total", labels: map[string]string{"endpoint": "POST /subjects/{subject}/versions", "code": "200"}},
		{name: "strand_schema_registry_requests_total", labels: map[string]string{"endpoint": "GET /schemas/ids/{id}", "code": "404"}},
		{name: "strand_schema_registry_request_seconds", labels: map[string]string{"endpoint": "POST /subjects/{subject}"}},
	})
	_, body := get(t, "http://"+a.HTTPAddr()+"/metrics")
	fams := parseScrape(t, body)
	for name, want := range map[string]float64{"strand_schema_registry_subjects": 1, "strand_schema_registry_schemas": 2} {
		f := fams[name]
		if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge().GetValue() != want {
			t.Errorf("%s: %v, want %v", name, f, want)
		}
	}
}

// securedRegistry is an agent with the authorizer on, a SASL listener
// whose super user is admin, an admin token and the registry on
// loopback, with SCRAM users alice, bob and carol.
type securedRegistry struct {
	a     *agent.Agent
	base  string
	admin *kgo.Client
}

const registryToken = "reg-token-1234"

func startSecuredRegistry(t testing.TB) securedRegistry {
	t.Helper()
	dir := t.TempDir()
	pwFile, tokenFile := filepath.Join(dir, "pw"), filepath.Join(dir, "token")
	if err := os.WriteFile(pwFile, []byte("admin-pw-1234\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(registryToken), 0o600); err != nil {
		t.Fatal(err)
	}
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
		AdminTokenFile:            tokenFile,
		SchemaRegistryListen:      "127.0.0.1:0",
	}, quietLogger())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { a.Stop(context.Background()) })
	admin, err := kgo.NewClient(kgo.SeedBrokers(a.ListenerAddr("SASL_PLAINTEXT")),
		kgo.SASL(scram.Auth{User: "admin", Pass: "admin-pw-1234"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	var ups []kadm.UpsertSCRAM
	for _, u := range []string{"alice", "bob", "carol"} {
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
	return securedRegistry{a: a, base: "http://" + a.RegistryAddr(), admin: admin}
}

// TestRegistryAuthentication: basic auth against the SASL users, the
// admin token, and the 401 Confluent's clients expect otherwise.
func TestRegistryAuthentication(t *testing.T) {
	s := startSecuredRegistry(t)
	c := http.DefaultClient
	for _, tc := range []struct {
		name   string
		q      regReq
		status int
		code   int
	}{
		{"no credentials", regReq{method: "GET", path: "/subjects"}, 401, 40101},
		{"wrong password", regReq{method: "GET", path: "/subjects", user: "alice", pass: "nope"}, 401, 40101},
		{"unknown user", regReq{method: "GET", path: "/subjects", user: "mallory", pass: "alice-pw"}, 401, 40101},
		{"a wrong bearer token", regReq{method: "GET", path: "/subjects", header: map[string]string{"Authorization": "Bearer nope"}}, 401, 40101},
		{"a SASL user", regReq{method: "GET", path: "/subjects", user: "alice", pass: "alice-pw"}, 200, 0},
		{"the super user over basic auth", regReq{method: "POST", path: "/subjects/orders-value/versions", body: registerBody(orderV1), user: "admin", pass: "admin-pw-1234"}, 200, 0},
		{"the admin token", regReq{method: "POST", path: "/subjects/payments-value/versions", body: registerBody(orderV1),
			header: map[string]string{"Authorization": "Bearer " + registryToken}}, 200, 0},
		// A browser that remembers the credentials sends them from
		// any site's page too.
		{"basic auth from another origin", regReq{method: "DELETE", path: "/subjects/payments-value", user: "admin", pass: "admin-pw-1234",
			header: map[string]string{"Origin": "http://evil.example"}}, 403, 40301},
		{"basic auth in a form", regReq{method: "POST", path: "/subjects/evil-value/versions", body: registerBody(orderV1), user: "admin", pass: "admin-pw-1234",
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 415, 415},
	} {
		got := regDo(t, c, s.base, tc.q)
		if got.status != tc.status || got.errorCode() != tc.code {
			t.Errorf("%s: %d %s, want %d with error_code %d", tc.name, got.status, got.body, tc.status, tc.code)
		}
		if tc.status == 401 && got.header.Get("WWW-Authenticate") != `Basic realm="strand"` {
			t.Errorf("%s: WWW-Authenticate %q, want Basic", tc.name, got.header.Get("WWW-Authenticate"))
		}
	}
	// The registry's own client, with basic auth.
	cl, err := sr.NewClient(sr.URLs(s.base), sr.BasicAuth("admin", "admin-pw-1234"))
	if err != nil {
		t.Fatal(err)
	}
	if subjects, err := cl.Subjects(context.Background()); err != nil || !slices.Equal(subjects, []string{"orders-value", "payments-value"}) {
		t.Fatalf("Subjects as admin = %v, %v", subjects, err)
	}
	// A verified password is remembered, but only for the credential
	// it was verified against: a changed password or a deleted user
	// is refused at the next request.
	alice := regReq{method: "GET", path: "/subjects", user: "alice", pass: "alice-pw"}
	for range 2 {
		if got := regDo(t, c, s.base, alice); got.status != 200 {
			t.Fatalf("alice: %d %s", got.status, got.body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	adm := kadm.NewClient(s.admin)
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-new"}}); err != nil || res["alice"].Err != nil {
		t.Fatalf("changing alice's password: %v %v", err, res["alice"].Err)
	}
	if got := regDo(t, c, s.base, alice); got.status != 401 {
		t.Errorf("alice's old password after the change: %d, want 401", got.status)
	}
	alice.pass = "alice-new"
	if got := regDo(t, c, s.base, alice); got.status != 200 {
		t.Errorf("alice's new password: %d %s", got.status, got.body)
	}
	if res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}, nil); err != nil || res["alice"].Err != nil {
		t.Fatalf("deleting alice: %v %v", err, res["alice"].Err)
	}
	if got := regDo(t, c, s.base, alice); got.status != 401 {
		t.Errorf("alice after her deletion: %d, want 401", got.status)
	}

	wrong, err := sr.NewClient(sr.URLs(s.base), sr.BasicAuth("admin", "wrong"))
	if err != nil {
		t.Fatal(err)
	}
	var re *sr.ResponseError
	if _, err := wrong.Subjects(context.Background()); !errors.As(err, &re) || re.ErrorCode != 40101 {
		t.Fatalf("Subjects with a wrong password = %v, want 40101", err)
	}
}

// TestRegistrySubjectACLs: what each user may do is what SUBJECT ACLs
// grant (literal, prefixed, DENY first), global config needs ALTER on
// the cluster, and the subject list and ids show only what the caller
// may read.
func TestRegistrySubjectACLs(t *testing.T) {
	s := startSecuredRegistry(t)
	c := http.DefaultClient
	lit, pre := kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
	allow, deny := kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny
	for i, err := range createACLs(t, s.admin,
		subjectACL("User:alice", "orders-value", lit, kmsg.ACLOperationWrite, allow),
		subjectACL("User:alice", "orders-value", lit, kmsg.ACLOperationAlter, allow),
		subjectACL("User:bob", "orders-", pre, kmsg.ACLOperationRead, allow),
		subjectACL("User:bob", "orders-secret", lit, kmsg.ACLOperationRead, deny),
		acl.Binding{ResourceType: kmsg.ACLResourceTypeCluster, ResourceName: acl.ClusterName, PatternType: lit,
			Principal: "User:carol", Host: "*", Operation: kmsg.ACLOperationAlter, Permission: allow},
	) {
		if err != nil {
			t.Fatalf("ACL %d: %v", i, err)
		}
	}
	// DescribeAcls lists them under their type.
	described, err := kadm.NewClient(s.admin).DescribeACLs(context.Background(), kadm.NewACLs().AnyResource().
		ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().AllowHosts().Deny().DenyHosts())
	n := 0
	for _, d := range described {
		err = errors.Join(err, d.Err)
		for _, b := range d.Described {
			if b.Type == acl.ResourceTypeSubject {
				n++
			}
		}
	}
	if err != nil || n != 4 {
		t.Fatalf("DescribeAcls: %d SUBJECT ACLs, %v; want 4", n, err)
	}

	admin := func(q regReq) regReq { q.user, q.pass = "admin", "admin-pw-1234"; return q }
	for _, subject := range []string{"orders-secret", "payments-value"} {
		if got := regDo(t, c, s.base, admin(regReq{method: "POST", path: "/subjects/" + subject + "/versions", body: registerBody(orderV1)})); got.status != 200 {
			t.Fatalf("admin registers %s: %d %s", subject, got.status, got.body)
		}
	}
	as := func(user string, q regReq) regReq { q.user, q.pass = user, user+"-pw"; return q }
	var ordersID int
	for _, tc := range []struct {
		name   string
		q      regReq
		status int
	}{
		{"alice registers with WRITE", as("alice", regReq{method: "POST", path: "/subjects/orders-value/versions", body: registerBody(orderV2)}), 200},
		{"alice registers elsewhere", as("alice", regReq{method: "POST", path: "/subjects/payments-value/versions", body: registerBody(orderV2)}), 403},
		{"WRITE is no READ", as("alice", regReq{method: "GET", path: "/subjects/orders-value/versions"}), 403},
		{"alice alters her subject's config", as("alice", regReq{method: "PUT", path: "/config/orders-value", body: `{"compatibility":"FULL"}`}), 200},
		{"alice alters the global config", as("alice", regReq{method: "PUT", path: "/config", body: `{"compatibility":"NONE"}`}), 403},
		{"alice deletes without DELETE", as("alice", regReq{method: "DELETE", path: "/subjects/orders-value"}), 403},
		{"bob reads by prefix", as("bob", regReq{method: "GET", path: "/subjects/orders-value/versions"}), 200},
		{"bob looks up by prefix", as("bob", regReq{method: "POST", path: "/subjects/orders-value", body: registerBody(orderV2)}), 200},
		{"bob denied the secret", as("bob", regReq{method: "GET", path: "/subjects/orders-secret/versions/latest"}), 403},
		{"bob outside the prefix", as("bob", regReq{method: "GET", path: "/subjects/payments-value/versions"}), 403},
		{"bob registers with READ", as("bob", regReq{method: "POST", path: "/subjects/orders-value/versions", body: registerBody(orderV1)}), 403},
		{"bob alters a config with READ", as("bob", regReq{method: "PUT", path: "/config/orders-value", body: `{"compatibility":"NONE"}`}), 403},
		{"carol alters the global config with cluster ALTER", as("carol", regReq{method: "PUT", path: "/config", body: `{"compatibility":"NONE"}`}), 200},
		{"carol alters the global mode", as("carol", regReq{method: "PUT", path: "/mode", body: `{"mode":"READWRITE"}`}), 200},
		{"carol reads no subject", as("carol", regReq{method: "GET", path: "/subjects/orders-value/versions"}), 403},
		{"anyone reads the types", as("carol", regReq{method: "GET", path: "/schemas/types"}), 200},
	} {
		got := regDo(t, c, s.base, tc.q)
		if got.status != tc.status {
			t.Errorf("%s: %s %s: %d %s, want %d", tc.name, tc.q.method, tc.q.path, got.status, got.body, tc.status)
		}
		if tc.status == 403 && got.errorCode() != 40301 {
			t.Errorf("%s: error_code %d, want 40301", tc.name, got.errorCode())
		}
		if strings.HasPrefix(tc.name, "bob looks up") {
			var v struct{ ID int }
			_ = json.Unmarshal([]byte(got.body), &v)
			ordersID = v.ID
		}
	}

	list := func(user string) []string {
		t.Helper()
		got := regDo(t, c, s.base, as(user, regReq{method: "GET", path: "/subjects"}))
		var out []string
		if err := json.Unmarshal([]byte(got.body), &out); got.status != 200 || err != nil {
			t.Fatalf("GET /subjects as %s: %d %s", user, got.status, got.body)
		}
		return out
	}
	if got := list("bob"); !slices.Equal(got, []string{"orders-value"}) {
		t.Errorf("bob's subjects: %q, want only orders-value (READ by prefix, the secret denied)", got)
	}
	if got := list("carol"); len(got) != 0 {
		t.Errorf("carol's subjects: %q, want none", got)
	}

	// By id: READ on some subject that holds it. orders-secret and
	// payments-value hold orderV1's id, which bob may read neither of.
	v1 := regDo(t, c, s.base, admin(regReq{method: "GET", path: "/subjects/payments-value/versions/1"}))
	var reg struct{ ID int }
	if err := json.Unmarshal([]byte(v1.body), &reg); err != nil || reg.ID == 0 || ordersID == 0 || reg.ID == ordersID {
		t.Fatalf("ids: v1 %s, orders-value v2 %d", v1.body, ordersID)
	}
	for _, tc := range []struct {
		user   string
		id     int
		status int
	}{{"bob", ordersID, 200}, {"bob", reg.ID, 403}, {"carol", ordersID, 403}, {"admin", reg.ID, 200}} {
		q := as(tc.user, regReq{method: "GET", path: "/schemas/ids/" + strconv.Itoa(tc.id)})
		if tc.user == "admin" {
			q = admin(q)
		}
		if got := regDo(t, c, s.base, q); got.status != tc.status {
			t.Errorf("GET /schemas/ids/%d as %s: %d %s, want %d", tc.id, tc.user, got.status, got.body, tc.status)
		}
	}
}

// TestRegistryBrowserSafety: no page of another site can make a
// mutation, whatever credentials the browser holds: a form or text
// body is refused, a foreign Origin is refused, and no CORS preflight
// is answered. The loopback default also refuses a rebinding Host, a
// proxy's request and a cross-site read.
func TestRegistryBrowserSafety(t *testing.T) {
	a := startWith(t, agent.Config{DataDir: t.TempDir(), SchemaRegistryListen: "127.0.0.1:0"}, nil)
	base := "http://" + a.RegistryAddr()
	_, port, _ := net.SplitHostPort(a.RegistryAddr())
	c := http.DefaultClient
	register := func(h map[string]string) regReq {
		return regReq{method: "POST", path: "/subjects/x-value/versions", body: registerBody(orderV1), header: h}
	}
	for _, tc := range []struct {
		name   string
		q      regReq
		status int
	}{
		{"a form", register(map[string]string{"Content-Type": "application/x-www-form-urlencoded"}), 415},
		{"text/plain", register(map[string]string{"Content-Type": "text/plain"}), 415},
		{"no Content-Type", register(map[string]string{"Content-Type": ""}), 415},
		{"JSON from another origin", register(map[string]string{"Origin": "http://evil.example"}), 403},
		{"a delete from another origin", regReq{method: "DELETE", path: "/subjects/x-value", header: map[string]string{"Origin": "http://evil.example"}}, 403},
		{"a rebinding Host", regReq{method: "GET", path: "/subjects", header: map[string]string{"Host": "evil.example:" + port}}, 403},
		{"through a proxy", regReq{method: "GET", path: "/subjects", header: map[string]string{"X-Forwarded-For": "203.0.113.7"}}, 403},
		{"a cross-site read", regReq{method: "GET", path: "/subjects", header: map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}}, 403},
		{"a preflight", regReq{method: "OPTIONS", path: "/subjects/x-value/versions", header: map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}}, 405},
		{"application/json", register(map[string]string{"Content-Type": "application/json; charset=utf-8"}), 200},
		{"Confluent's media type from its own origin", register(map[string]string{"Origin": base}), 200},
	} {
		got := regDo(t, c, base, tc.q)
		if got.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, got.status, got.body, tc.status)
		}
		for k := range got.header {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("%s: answered with %s", tc.name, k)
			}
		}
	}
	got := regDo(t, c, base, regReq{method: "GET", path: "/subjects/x-value/versions"})
	if got.status != 200 || strings.TrimSpace(got.body) != "[1]" {
		t.Errorf("after the refusals: %d %s, want version 1 alone", got.status, got.body)
	}
}

// TestRegistryClientCertificate: with --http-tls the registry serves
// TLS with the HTTP port's certificate; a client certificate is its
// Kafka principal, which SUBJECT ACLs authorize, and a client without
// one is asked to authenticate.
func TestRegistryClientCertificate(t *testing.T) {
	pki := newTestPKI(t)
	cfg := pki.serve(agent.Config{DataDir: t.TempDir(), HTTPTLS: true, Authorizer: "standard", SuperUsers: "User:ANONYMOUS",
		SchemaRegistryListen: "127.0.0.1:0"}, true)
	cfg.TLSClientAuth = "" // the Kafka listener is PLAINTEXT: its ANONYMOUS is the super user
	a := startWith(t, cfg, nil)
	url := "https://" + a.RegistryAddr()
	withCert, err := sr.NewClient(sr.URLs(url), sr.DialTLSConfig(pki.clientTLS(t, true)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var re *sr.ResponseError
	if _, err := withCert.CreateSchema(ctx, "tls-value", sr.Schema{Schema: orderV1}); !errors.As(err, &re) || re.ErrorCode != 40301 {
		t.Fatalf("User:CN=client registers without an ACL: %v, want 40301", err)
	}
	cn := "User:" + "CN=client"
	for _, err := range createACLs(t, client(t, a.KafkaAddr()),
		subjectACL(cn, "tls-", kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow),
		subjectACL(cn, "tls-", kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)) {
		if err != nil {
			t.Fatal(err)
		}
	}
	s, err := withCert.CreateSchema(ctx, "tls-value", sr.Schema{Schema: orderV1})
	if err != nil {
		t.Fatalf("User:CN=client registers with WRITE: %v", err)
	}
	if got, err := withCert.SchemaByID(ctx, s.ID); err != nil || got.Schema == "" {
		t.Fatalf("User:CN=client reads id %d: %+v, %v", s.ID, got, err)
	}
	noCert, err := sr.NewClient(sr.URLs(url), sr.DialTLSConfig(pki.clientTLS(t, false)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noCert.Subjects(ctx); !errors.As(err, &re) || re.ErrorCode != 40101 {
		t.Fatalf("without a certificate: %v, want 40101", err)
	}
	other := pki.ca.Client(t, "other", pkix.Name{CommonName: "other"})
	otherCl, err := sr.NewClient(sr.URLs(url), sr.DialTLSConfig(pki.ca.ClientTLS(t, &other)))
	if err != nil {
		t.Fatal(err)
	}
	if subjects, err := otherCl.Subjects(ctx); err != nil || len(subjects) != 0 {
		t.Fatalf("User:CN=other lists %v, %v; want none", subjects, err)
	}
	// Plain HTTP is not served on the TLS port.
	if resp, err := http.Get("http://" + a.RegistryAddr() + "/subjects"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP was served on the TLS registry port")
		}
	}
}

// logAtLevel is a file log under dir that an older build bootstrapped at
// metadata level: what an agent of this build meets on a cluster not
// yet upgraded. It returns the log's URL.
func logAtLevel(t *testing.T, dir string, level int16) string {
	t.Helper()
	logURL := "file://" + filepath.ToSlash(filepath.Join(dir, "log"))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	vlog, err := logurl.OpenVirtual(ctx, logURL, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer vlog.Close()
	old, err := replica.Open(ctx, replica.Config{Dir: filepath.Join(dir, "old-meta"), Log: vlog, WriterID: "old", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := old.Propose(ctx, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{
		{Name: meta.FeatureMetadata, Level: level}}}); err != nil {
		t.Fatal(err)
	}
	return logURL
}

// TestRegistryBelowLevel6: on a cluster whose log is at metadata level
// 5 (agents of an older build may still read it) a registration is
// refused with what to raise and writes nothing, as is a SUBJECT ACL;
// once the level is raised both work.
func TestRegistryBelowLevel6(t *testing.T) {
	dir := t.TempDir()
	logURL := logAtLevel(t, dir, meta.MetadataLevel5)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()

	a := startWith(t, agent.Config{DataDir: filepath.Join(dir, "agent"), Log: logURL, SchemaRegistryListen: "127.0.0.1:0"}, nil)
	if got := a.Replica().Features().MetadataLevel(); got != meta.MetadataLevel5 {
		t.Fatalf("level %d, want 5", got)
	}
	base := "http://" + a.RegistryAddr()
	got := regDo(t, http.DefaultClient, base, regReq{method: "POST", path: "/subjects/old-value/versions", body: registerBody(orderV1)})
	if got.status != 500 || !strings.Contains(got.body, "strand.metadata.version") || !strings.Contains(got.body, "6") {
		t.Fatalf("register at level 5: %d %s, want 500 naming strand.metadata.version 6", got.status, got.body)
	}
	if got := regDo(t, http.DefaultClient, base, regReq{method: "GET", path: "/subjects"}); got.status != 200 || strings.TrimSpace(got.body) != "[]" {
		t.Fatalf("subjects after the refusal: %d %s, want []", got.status, got.body)
	}
	kcl := client(t, a.KafkaAddr())
	errs := createACLs(t, kcl, subjectACL("User:alice", "old-value", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow))
	if !errors.Is(errs[0], kerr.InvalidRequest) || !strings.Contains(errs[0].Error(), "strand.metadata.version 6") {
		t.Fatalf("SUBJECT ACL at level 5: %v, want INVALID_REQUEST naming the level", errs[0])
	}

	res, err := kadm.NewClient(kcl).UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: meta.FeatureMetadata, MaxVersionLevel: meta.MetadataLevel6, UpgradeType: 1})
	if err != nil || res.Error() != nil {
		t.Fatalf("raising strand.metadata.version to 6: %v, %v", err, res.Error())
	}
	if got := regDo(t, http.DefaultClient, base, regReq{method: "POST", path: "/subjects/old-value/versions", body: registerBody(orderV1)}); got.status != 200 {
		t.Fatalf("register at level 6: %d %s", got.status, got.body)
	}
	if errs := createACLs(t, kcl, subjectACL("User:alice", "old-value", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)); errs[0] != nil {
		t.Fatalf("SUBJECT ACL at level 6: %v", errs[0])
	}
}

// TestRegistryOffByDefault: the Config zero value serves no registry
// (many agents to a machine in tests must not collide), and a bad
// address is refused at start.
func TestRegistryOffByDefault(t *testing.T) {
	a := startWith(t, agent.Config{DataDir: t.TempDir()}, nil)
	if a.RegistryAddr() != "" {
		t.Fatalf("registry at %s with the zero Config", a.RegistryAddr())
	}
	cfg := agent.Config{DataDir: t.TempDir(), SchemaRegistryListen: "8081"}
	cfg.SetDefaults()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "schema-registry-listen") {
		t.Fatalf("schema-registry-listen 8081: %v, want refused", err)
	}
}

// BenchmarkRegistryRead: a read of a subject's latest version, by the
// loopback default and by basic auth (a SCRAM key derivation per
// request, as SASL PLAIN pays per connection).
func BenchmarkRegistryRead(b *testing.B) {
	s := startSecuredRegistry(b)
	c := &http.Client{}
	if got := regDo(b, c, s.base, regReq{method: "POST", path: "/subjects/bench-value/versions", body: registerBody(orderV1), user: "admin", pass: "admin-pw-1234"}); got.status != 200 {
		b.Fatalf("register: %d %s", got.status, got.body)
	}
	for _, bc := range []struct {
		name string
		q    regReq
	}{
		{"token", regReq{method: "GET", path: "/subjects/bench-value/versions/latest", header: map[string]string{"Authorization": "Bearer " + registryToken}}},
		{"basic-auth", regReq{method: "GET", path: "/subjects/bench-value/versions/latest", user: "admin", pass: "admin-pw-1234"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got := regDo(b, c, s.base, bc.q); got.status != 200 {
					b.Fatalf("%d %s", got.status, got.body)
				}
			}
		})
	}
}
