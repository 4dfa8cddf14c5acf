package agent_test

import (
	"bytes"
	"context"
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
// with headers, through client.
func call(t *testing.T, client *http.Client, method, base, path string, header map[string]string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
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

func TestAdminTokenGuardsMutatingCalls(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startWith(t, agent.Config{DataDir: t.TempDir(), AdminTokenFile: tokenFile}, nil)
	base := "http://" + a.HTTPAddr()
	c := http.DefaultClient
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
		{http.MethodPost, agent.PathSnapshot, map[string]string{"Authorization": "Bearer s3cret-token"}, http.StatusOK},
		{http.MethodGet, agent.PathLogStatus, nil, http.StatusOK},
		{http.MethodGet, "/healthz", nil, http.StatusOK},
		{http.MethodGet, "/metrics", nil, http.StatusOK},
	} {
		if got := call(t, c, tc.method, base, tc.path, tc.header); got != tc.want {
			t.Errorf("%s %s %v: %d, want %d", tc.method, tc.path, tc.header, got, tc.want)
		}
	}
	// A rotated token file takes effect at the next call.
	if err := os.WriteFile(tokenFile, []byte("rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := call(t, c, http.MethodPost, base, agent.PathSnapshot, map[string]string{"Authorization": "Bearer s3cret-token"}); got != http.StatusUnauthorized {
		t.Errorf("the old token after rotation: %d, want 401", got)
	}
	if got := call(t, c, http.MethodPost, base, agent.PathSnapshot, map[string]string{"Authorization": "Bearer rotated"}); got != http.StatusOK {
		t.Errorf("the rotated token: %d, want 200", got)
	}
}

// TestAdminRefusesUnauthenticatedOffLoopback: with no token and no
// client certificates, an agent whose HTTP listens beyond loopback
// takes no mutating call.
func TestAdminRefusesUnauthenticatedOffLoopback(t *testing.T) {
	a := startWith(t, agent.Config{DataDir: t.TempDir(), HTTPListen: "0.0.0.0:0"}, nil)
	_, port, _ := net.SplitHostPort(a.HTTPAddr())
	base := "http://127.0.0.1:" + port
	if got := call(t, http.DefaultClient, http.MethodPost, base, agent.PathSnapshot, nil); got != http.StatusForbidden {
		t.Errorf("POST %s: %d, want 403", agent.PathSnapshot, got)
	}
	if got := call(t, http.DefaultClient, http.MethodGet, base, "/healthz", nil); got != http.StatusOK {
		t.Errorf("/healthz: %d, want 200", got)
	}
}

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
