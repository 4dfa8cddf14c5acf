package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/strandkafka/strand/internal/certs/certstest"
)

// secureCluster is a kfake broker that requires a client certificate
// from ca and SCRAM-SHA-512 as admin/secret.
func secureCluster(t *testing.T) (brokers string, ca *certstest.CA, client certstest.Pair) {
	t.Helper()
	ca = certstest.NewCA(t, "ca")
	server := ca.Server(t, "server")
	client = ca.Client(t, "client", pkix.Name{CommonName: "cli"})
	pair, err := tls.LoadX509KeyPair(server.CertFile, server.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	brokers = newCluster(t,
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "admin", "secret"))
	return brokers, ca, client
}

func TestSecurityFlags(t *testing.T) {
	brokers, ca, client := secureCluster(t)
	passFile := filepath.Join(t.TempDir(), "pass")
	if err := os.WriteFile(passFile, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--tls-ca", ca.CertFile, "--tls-cert", client.CertFile, "--tls-key", client.KeyFile,
		"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "admin"}
	mustRun(t, brokers, "", append([]string{"topic", "create", "sec", "-p", "1", "--sasl-password-file", passFile}, flags...)...)
	mustRun(t, brokers, "hello\n", append([]string{"produce", "sec", "--sasl-password", "secret"}, flags...)...)

	// The same from the environment alone.
	t.Setenv("STRAND_TLS_CA", ca.CertFile)
	t.Setenv("STRAND_TLS_CERT", client.CertFile)
	t.Setenv("STRAND_TLS_KEY", client.KeyFile)
	t.Setenv("STRAND_SASL_MECHANISM", "scram-sha-512")
	t.Setenv("STRAND_SASL_USER", "admin")
	t.Setenv("STRAND_SASL_PASSWORD", "secret")
	if r := mustRun(t, brokers, "", "consume", "sec", "--from-beginning", "-n", "1"); r.stdout != "hello\n" {
		t.Fatalf("consume over mTLS and SCRAM: %q", r.stdout)
	}

	// A wrong password is refused.
	if r := run(t, brokers, "", "topic", "list", "--sasl-password", "wrong", "--timeout", "5s"); r.err == nil || errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("a wrong password: %v, want a refusal\n%s", r.err, r.stdout)
	}
	// So is a client without a certificate.
	os.Unsetenv("STRAND_TLS_CERT")
	os.Unsetenv("STRAND_TLS_KEY")
	if r := run(t, brokers, "", "topic", "list", "--timeout", "5s"); r.err == nil || !strings.Contains(r.err.Error(), "certificate required") {
		t.Fatalf("a client without a certificate: %v, want the TLS alert certificate required\n%s", r.err, r.stdout)
	}
}

func TestSecurityFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    SecurityOptions
		want string
	}{
		{"mechanism unknown", SecurityOptions{SASLMechanism: "GSSAPI", SASLUser: "u", SASLPassword: "p"}, "want PLAIN"},
		{"no password", SecurityOptions{SASLMechanism: "PLAIN", SASLUser: "u"}, "needs --sasl-user and a password"},
		{"user without mechanism", SecurityOptions{SASLUser: "u"}, "needs --sasl-mechanism"},
		{"both passwords", SecurityOptions{SASLMechanism: "PLAIN", SASLUser: "u", SASLPassword: "p", SASLPasswordFile: "f"}, "not both"},
		{"cert without key", SecurityOptions{TLSCert: "c.pem"}, "both a certificate file and a key file"},
		{"missing CA", SecurityOptions{TLSCA: filepath.Join(t.TempDir(), "none.pem")}, "none.pem"},
	} {
		_, err := tc.o.Opts()
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want usage error mentioning %q", tc.name, err, tc.want)
		}
	}
}

// TestAdminToken: the admin commands send the bearer token of
// --admin-token-file, or of STRAND_ADMIN_TOKEN, and say a POST is JSON
// even without a body, as the agent wants of every mutating call.
func TestAdminToken(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: Content-Type %q, want application/json", r.Method, r.URL.Path, ct)
		}
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runLog(t, "snapshot", "--http", addr, "--admin-token-file", tokenFile, "--json")
	t.Setenv("STRAND_ADMIN_TOKEN", "from-env")
	runLog(t, "snapshot", "--http", addr, "--json")
	if want := []string{"Bearer from-file", "Bearer from-env"}; !slices.Equal(got, want) {
		t.Fatalf("Authorization headers %q, want %q", got, want)
	}
}
