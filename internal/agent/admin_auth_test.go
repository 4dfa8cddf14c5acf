package agent_test

import (
	"context"
	"crypto/x509/pkix"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/certs"
	"github.com/strandkafka/strand/internal/certs/certstest"
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
	ca := certstest.NewCA(t, "ca")
	server := ca.Server(t, "server")
	admin := ca.Client(t, "admin", pkix.Name{CommonName: "admin"})
	a := startWith(t, agent.Config{DataDir: t.TempDir(), HTTPTLS: true,
		TLSCertFile: server.CertFile, TLSKeyFile: server.KeyFile, TLSClientCAFile: ca.CertFile}, nil)
	base := "https://" + a.HTTPAddr()
	client := func(f certs.ClientFiles) *http.Client {
		cfg, err := certs.ClientConfig(f)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	withCert := client(certs.ClientFiles{CAFile: ca.CertFile, CertFile: admin.CertFile, KeyFile: admin.KeyFile})
	noCert := client(certs.ClientFiles{CAFile: ca.CertFile})
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
