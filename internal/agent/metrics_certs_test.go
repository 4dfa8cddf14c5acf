package agent_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"path/filepath"
	"testing"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/certs/certstest"
)

// TestCertExpiryMetric: strand_tls_certificate_expiry_timestamp_seconds
// has the expiry of the SSL listener's certificate and of its client CA,
// none for the PLAINTEXT listener, and the rotated certificate's at the
// next scrape.
func TestCertExpiryMetric(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	server := ca.Server(t, "server")
	server.CopyTo(t, certFile, keyFile)
	a := startWith(t, agent.Config{DataDir: t.TempDir(), Listeners: "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		TLSCertFile: certFile, TLSKeyFile: keyFile, TLSClientCAFile: ca.CertFile, TLSClientAuth: "requested"}, nil)
	const name = "strand_tls_certificate_expiry_timestamp_seconds"
	expiry := func(labels map[string]string) (float64, bool) {
		return sample(parseScrape(t, scrapeBody(t, a)), name, labels)
	}
	served := func(subject string) map[string]string {
		return map[string]string{"listener": "SSL", "file": certFile, "kind": "certificate", "subject": subject}
	}
	if got, ok := expiry(served("CN=localhost")); !ok || got != float64(server.Cert.NotAfter.Unix()) {
		t.Errorf("the SSL listener's certificate: %v %v, want %d", got, ok, server.Cert.NotAfter.Unix())
	}
	if got, ok := expiry(map[string]string{"listener": "SSL", "file": ca.CertFile, "kind": "client_ca", "subject": ca.Cert.Subject.String()}); !ok || got != float64(ca.Cert.NotAfter.Unix()) {
		t.Errorf("the SSL listener's client CA: %v %v, want %d", got, ok, ca.Cert.NotAfter.Unix())
	}
	for _, m := range parseScrape(t, scrapeBody(t, a))[name].GetMetric() {
		if hasLabels(m, map[string]string{"listener": "PLAINTEXT"}) {
			t.Errorf("a sample for the PLAINTEXT listener: %v", m)
		}
	}

	rotated, err := ca.Sign("rotated", pkix.Name{CommonName: "rotated.example"}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		t.Fatal(err)
	}
	rotated.CopyTo(t, certFile, keyFile)
	if got, ok := expiry(served("CN=rotated.example")); !ok || got != float64(rotated.Cert.NotAfter.Unix()) {
		t.Errorf("after rotation: %v %v, want %d", got, ok, rotated.Cert.NotAfter.Unix())
	}
	if _, ok := expiry(served("CN=localhost")); ok {
		t.Error("the replaced certificate is still reported")
	}
}
