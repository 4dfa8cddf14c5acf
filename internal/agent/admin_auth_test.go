package agent_test

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/testservers/pgtest"
	"github.com/twmb/franz-go/pkg/kgo"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/strandkafka/strand/internal/agent"
)

// call sends method path to base (http://host:port or https://...)
// with headers, through client. A POST says its body is JSON, as the
// CLI's do, unless the headers say otherwise; a "Host" header sets the
// request's Host.
func call(t *testing.T, client *http.Client, method, base, path string, header map[string]string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// The HTTP endpoints that name topics, groups, records or the cluster's
// layout, none open to an unauthenticated caller, and those that are.
var (
	guardedGETs = []string{agent.PathLogStatus, agent.PathZones, "/v1/topics/t/storage", "/v1/topics/t/compaction", "/v1/share-groups/g/state",
		"/debug/pprof/cmdline", "/console/", "/console/topics", "/console/topics/t",
		"/console/topics/t/records?partition=0", "/console/groups", "/console/groups/g", "/console/api/throughput"}
	openGETs = []string{"/healthz", "/readyz", "/metrics", "/console/login", "/console/static/style.css"}
)

func TestAdminTokenGuardsCalls(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startWith(t, agent.Config{DataDir: t.TempDir(), AdminTokenFile: tokenFile}, nil)
	createTopic(t, a.KafkaAddr(), "t", 1)
	base := "http://" + a.HTTPAddr()
	c := http.DefaultClient
	good := map[string]string{"Authorization": "Bearer s3cret-token"}
	for _, tc := range []struct {
		method, path string
		header       map[string]string
		want         int
	}{
		{http.MethodPost, agent.PathSnapshot, nil, http.StatusUnauthorized},
		{http.MethodPost, agent.PathSnapshot, map[string]string{"Authorization": "Bearer wrong"}, http.StatusUnauthorized},
		{http.MethodPost, agent.PathSnapshot, map[string]string{"Authorization": "Basic s3cret-token"}, http.StatusUnauthorized},
		{http.MethodPost, agent.PathLogMigrate, nil, http.StatusUnauthorized},
		{http.MethodPost, agent.PathStorageVerify, nil, http.StatusUnauthorized},
		{http.MethodPost, agent.PathSnapshot, good, http.StatusOK},
		{http.MethodGet, agent.PathLogStatus, good, http.StatusOK},
		{http.MethodGet, "/v1/topics/t/storage", good, http.StatusOK},
		{http.MethodGet, "/console/topics/t", good, http.StatusOK},
	} {
		if got := call(t, c, tc.method, base, tc.path, tc.header); got != tc.want {
			t.Errorf("%s %s %v: %d, want %d", tc.method, tc.path, tc.header, got, tc.want)
		}
	}
	for _, path := range guardedGETs {
		if got := call(t, c, http.MethodGet, base, path, nil); got != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, got)
		}
	}
	for _, path := range openGETs {
		if got := call(t, c, http.MethodGet, base, path, nil); got != http.StatusOK {
			t.Errorf("GET %s without the token: %d, want 200", path, got)
		}
	}
	// A rotated token file takes effect at the next call.
	if err := os.WriteFile(tokenFile, []byte("rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := call(t, c, http.MethodPost, base, agent.PathSnapshot, good); got != http.StatusUnauthorized {
		t.Errorf("the old token after rotation: %d, want 401", got)
	}
	if got := call(t, c, http.MethodPost, base, agent.PathSnapshot, map[string]string{"Authorization": "Bearer rotated"}); got != http.StatusOK {
		t.Errorf("the rotated token: %d, want 200", got)
	}
}

// TestAdminRefusesUnauthenticatedOffLoopback: with no token and no
// client certificates, an agent whose HTTP listens beyond loopback
// takes no call that names anything but health and metrics.
func TestAdminRefusesUnauthenticatedOffLoopback(t *testing.T) {
	a := startWith(t, agent.Config{DataDir: t.TempDir(), HTTPListen: "0.0.0.0:0"}, nil)
	_, port, _ := net.SplitHostPort(a.HTTPAddr())
	base := "http://127.0.0.1:" + port
	if got := call(t, http.DefaultClient, http.MethodPost, base, agent.PathSnapshot, nil); got != http.StatusForbidden {
		t.Errorf("POST %s: %d, want 403", agent.PathSnapshot, got)
	}
	for _, path := range guardedGETs {
		if got := call(t, http.DefaultClient, http.MethodGet, base, path, nil); got != http.StatusForbidden {
			t.Errorf("GET %s: %d, want 403", path, got)
		}
	}
	for _, path := range openGETs {
		if got := call(t, http.DefaultClient, http.MethodGet, base, path, nil); got != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", path, got)
		}
	}
}

// TestLoopbackIsNoCredential: the loopback default (no token, HTTP on
// 127.0.0.1) takes no call a web page could make: not a cross-site form
// or fetch (text/plain parses as JSON; /v1/snapshot needs no body), not
// one addressed to a rebinding name (the attacker sets Host and Origin
// alike), not one a reverse proxy forwarded. Its own tools still work.
func TestLoopbackIsNoCredential(t *testing.T) {
	a := startWith(t, agent.Config{DataDir: t.TempDir(), HTTPAllowedHosts: "strand.internal"}, nil)
	_, port, _ := net.SplitHostPort(a.HTTPAddr())
	base := "http://" + a.HTTPAddr()
	c := http.DefaultClient
	rebound := "evil.example:" + port
	for _, tc := range []struct {
		name, method, path string
		header             map[string]string
		want               int
	}{
		{"cross-site text/plain", http.MethodPost, agent.PathSnapshot,
			map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"text/plain without Origin", http.MethodPost, agent.PathSnapshot, map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"form without Origin", http.MethodPost, agent.PathLogMigrate, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"no Content-Type", http.MethodPost, agent.PathSnapshot, map[string]string{"Content-Type": ""}, http.StatusUnsupportedMediaType},
		{"JSON from a foreign Origin", http.MethodPost, agent.PathSnapshot, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"rebinding POST", http.MethodPost, agent.PathSnapshot, map[string]string{"Host": rebound, "Origin": "http://" + rebound}, http.StatusForbidden},
		{"rebinding status", http.MethodGet, agent.PathLogStatus, map[string]string{"Host": rebound}, http.StatusForbidden},
		{"rebinding console", http.MethodGet, "/console/topics", map[string]string{"Host": rebound}, http.StatusForbidden},
		{"rebinding pprof", http.MethodGet, "/debug/pprof/cmdline", map[string]string{"Host": rebound}, http.StatusForbidden},
		{"through a proxy", http.MethodGet, "/console/topics", map[string]string{"X-Forwarded-For": "203.0.113.7"}, http.StatusForbidden},
		{"through a proxy, Forwarded", http.MethodPost, agent.PathSnapshot, map[string]string{"Forwarded": "for=203.0.113.7"}, http.StatusForbidden},
		{"another site's image tag", http.MethodGet, "/debug/pprof/cmdline", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, http.StatusForbidden},
		{"another site's fetch", http.MethodGet, "/console/topics", map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}, http.StatusForbidden},
		{"a link from another site", http.MethodGet, "/console/topics", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, http.StatusOK},
		{"loopback address", http.MethodPost, agent.PathSnapshot, nil, http.StatusOK},
		{"localhost", http.MethodGet, agent.PathLogStatus, map[string]string{"Host": "localhost:" + port}, http.StatusOK},
		{"an allowed host", http.MethodGet, "/console/topics", map[string]string{"Host": "strand.internal:" + port}, http.StatusOK},
		{"own Origin", http.MethodPost, agent.PathSnapshot, map[string]string{"Origin": base}, http.StatusOK},
	} {
		if got := call(t, c, tc.method, base, tc.path, tc.header); got != tc.want {
			t.Errorf("%s: %s %s %v: %d, want %d", tc.name, tc.method, tc.path, tc.header, got, tc.want)
		}
	}

	// A console form from a rebinding page: its Origin matches the Host
	// it chose, so only the Host check stops it.
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/console/topics", strings.NewReader("name=rebound&partitions=1"))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = rebound
	req.Header.Set("Origin", "http://"+rebound)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("console form from a rebinding page: %d, want 403", resp.StatusCode)
	}
	if got := call(t, c, http.MethodGet, base, "/console/topics/rebound", nil); got != http.StatusNotFound {
		t.Errorf("the topic the refused form names: console page %d, want 404", got)
	}
}

// TestAdminClientCertificate: with --http-tls and no authorizer, a
// client certificate from the CA may do what its principal may do over
// Kafka, which is everything.
func TestAdminClientCertificate(t *testing.T) {
	pki := newTestPKI(t)
	cfg := pki.serve(agent.Config{DataDir: t.TempDir(), HTTPTLS: true}, true)
	cfg.TLSClientAuth = "" // for Kafka listeners; HTTP asks for certificates anyway
	a := startWith(t, cfg, nil)
	base := "https://" + a.HTTPAddr()
	withCert := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.clientTLS(t, true)}}
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.clientTLS(t, false)}}
	if got := call(t, withCert, http.MethodPost, base, agent.PathSnapshot, nil); got != http.StatusOK {
		t.Errorf("with a client certificate: %d, want 200", got)
	}
	if got := call(t, noCert, http.MethodPost, base, agent.PathSnapshot, nil); got != http.StatusUnauthorized && got != http.StatusForbidden {
		t.Errorf("without a client certificate: %d, want 401 or 403", got)
	}
	if got := call(t, noCert, http.MethodGet, base, agent.PathLogStatus, nil); got != http.StatusUnauthorized && got != http.StatusForbidden {
		t.Errorf("log status without a client certificate: %d, want 401 or 403", got)
	}
	if got := call(t, noCert, http.MethodGet, base, "/healthz", nil); got != http.StatusOK {
		t.Errorf("/healthz without a certificate: %d, want 200", got)
	}
	// Plain HTTP to the TLS port is not served.
	if resp, err := http.Get("http://" + a.HTTPAddr() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP was served on the TLS port")
		}
	}
}

// TestAdminCertificateIsItsKafkaPrincipal: with the authorizer on, a
// client certificate is the principal the Kafka SSL listener names it
// (User:CN=...), and may do over HTTP what that principal may do over
// Kafka: one the ACLs grant nothing can neither snapshot, migrate, read
// the status or a profile, nor see the console; a super user can.
func TestAdminCertificateIsItsKafkaPrincipal(t *testing.T) {
	pki := newTestPKI(t)
	cfg := pki.serve(agent.Config{DataDir: t.TempDir(), HTTPTLS: true, Authorizer: "standard", SuperUsers: "User:CN=root"}, true)
	cfg.TLSClientAuth = ""
	a := startWith(t, cfg, nil)
	base := "https://" + a.HTTPAddr()
	root := pki.ca.Client(t, "root", pkix.Name{CommonName: "root"})
	nobody := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.clientTLS(t, true)}} // CN=client
	super := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ca.ClientTLS(t, &root)}}
	for _, tc := range []struct{ method, path string }{
		{http.MethodPost, agent.PathSnapshot},
		{http.MethodPost, agent.PathLogMigrate},
		{http.MethodPost, agent.PathStorageVerify},
		{http.MethodGet, agent.PathLogStatus},
		{http.MethodGet, "/v1/topics/t/storage"},
		{http.MethodGet, "/debug/pprof/cmdline"},
		{http.MethodGet, "/console/"},
		{http.MethodGet, "/console/topics"},
	} {
		if got := call(t, nobody, tc.method, base, tc.path, nil); got != http.StatusForbidden {
			t.Errorf("%s %s as User:CN=client, granted nothing: %d, want 403", tc.method, tc.path, got)
		}
	}
	for _, tc := range []struct{ method, path string }{
		{http.MethodPost, agent.PathSnapshot},
		{http.MethodGet, agent.PathLogStatus},
		{http.MethodGet, "/console/topics"},
	} {
		if got := call(t, super, tc.method, base, tc.path, nil); got != http.StatusOK {
			t.Errorf("%s %s as the super user User:CN=root: %d, want 200", tc.method, tc.path, got)
		}
	}
	if got := call(t, nobody, http.MethodGet, base, "/metrics", nil); got != http.StatusOK {
		t.Errorf("/metrics as User:CN=client: %d, want 200", got)
	}
	// The six admin API refusals are the authorizer's, counted by the
	// authorization log; the console's two are for want of a super
	// user, which no ACL grants, and are not.
	resp, err := nobody.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	body := string(b)
	var denials float64
	for _, m := range parseScrape(t, body)["strand_authorization_denials_total"].GetMetric() {
		denials += m.GetCounter().GetValue()
	}
	if denials != 6 {
		t.Errorf("admin API denials counted: %v, want 6", denials)
	}
}

// TestConsoleOff: with NoConsole (--console=false) no console page is
// served, not even to a caller the loopback default would take, and /
// does not send anyone to it; the admin API still answers.
func TestConsoleOff(t *testing.T) {
	a := startWith(t, agent.Config{DataDir: t.TempDir(), NoConsole: true}, nil)
	base := "http://" + a.HTTPAddr()
	for _, path := range []string{"/", "/console/", "/console/topics", "/console/login", "/console/static/style.css"} {
		if got := call(t, http.DefaultClient, http.MethodGet, base, path, nil); got != http.StatusNotFound {
			t.Errorf("GET %s with the console off: %d, want 404", path, got)
		}
	}
	if got := call(t, http.DefaultClient, http.MethodGet, base, agent.PathLogStatus, nil); got != http.StatusOK {
		t.Errorf("GET %s with the console off: %d, want 200", agent.PathLogStatus, got)
	}
}

// TestLogPasswordStaysOutOfTheChain: a password in the --log URL (or a
// --log-password-file) opens every segment but is neither stored in the
// chain nor logged, and a migration to a URL with a password is refused.
// The test server trusts every password, so the chain is what is checked.
func TestLogPasswordStaysOutOfTheChain(t *testing.T) {
	const secret = "hunter2-secret"
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), secret)
	q := u.Query()
	q.Set("log", fmt.Sprintf("password-%d", time.Now().UnixNano()))
	u.RawQuery = q.Encode()
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := startWith(t, agent.Config{DataDir: t.TempDir(), Log: u.String(), SnapshotInterval: agent.SnapshotsOff}, logger)

	st := adminOK[agent.LogStatus](t, http.MethodGet, a.HTTPAddr(), agent.PathLogStatus, "")
	for _, s := range st.Chain.Segments {
		// RedactURL shows a stored password as xxxxx.
		if strings.Contains(s.URL, secret) || strings.Contains(s.URL, "xxxxx") {
			t.Errorf("the chain stores a password: segment %q", s.URL)
		}
	}

	to := *u
	q.Set("log", q.Get("log")+"-next")
	to.RawQuery = q.Encode()
	code, body := adminCall(t, http.MethodPost, a.HTTPAddr(), agent.PathLogMigrate, `{"to":"`+to.String()+`"}`)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "password") || strings.Contains(string(body), secret) {
		t.Errorf("migrate to a URL with a password: %d %s, want 400 naming the password, not showing it", code, body)
	}
	// Without it, the segment opens with the --log URL's password.
	to.User = url.User(u.User.Username())
	adminOK[agent.MigrateResult](t, http.MethodPost, a.HTTPAddr(), agent.PathLogMigrate, `{"to":"`+to.String()+`"}`)
	createTopic(t, a.KafkaAddr(), "after-migrate", 1)
	produce(t, a.KafkaAddr(), []*kgo.Record{{Topic: "after-migrate", Value: []byte("x")}})

	if strings.Contains(logs.String(), secret) {
		t.Errorf("the logs show the password:\n%s", logs.String())
	}
}

// lockedBuffer is a bytes.Buffer safe for the agent's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestHTTPAllowedHostsValidate: an allowed host with a port or a scheme
// would match no Host header, so it is refused at start.
func TestHTTPAllowedHostsValidate(t *testing.T) {
	for _, bad := range []string{"strand.internal:9644", "http://strand.internal", "a.example,[::1]:9644"} {
		cfg := agent.Config{DataDir: t.TempDir(), HTTPAllowedHosts: bad}
		cfg.SetDefaults()
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "http-allowed-hosts") {
			t.Errorf("http-allowed-hosts %q: %v, want it refused", bad, err)
		}
	}
	cfg := agent.Config{DataDir: t.TempDir(), HTTPAllowedHosts: "strand.internal, 10.0.0.5"}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Errorf("host names without ports: %v", err)
	}
}
