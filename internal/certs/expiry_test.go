package certs_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strandkafka/strand/internal/certs"
	"github.com/strandkafka/strand/internal/certs/certstest"
)

// TestCertificates: the server lists the certificate it serves and each
// CA of the client CA bundle with its expiry, and a rotated file shows
// at the next call, without a handshake.
func TestCertificates(t *testing.T) {
	ca, other := certstest.NewCA(t, "ca"), certstest.NewCA(t, "other")
	first := ca.Server(t, "first")
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "clients.pem")
	first.CopyTo(t, certFile, keyFile)
	var bundle []byte
	for _, f := range []string{ca.CertFile, other.CertFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bundle = append(bundle, b...)
	}
	if err := os.WriteFile(caFile, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := certs.NewServer(certs.ServerFiles{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile, ClientAuth: certs.ClientAuthRequested},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	want := []certs.Certificate{
		{File: certFile, Kind: "certificate", Subject: first.Cert.Subject.String(), NotAfter: first.Cert.NotAfter},
		{File: caFile, Kind: "client_ca", Subject: ca.Cert.Subject.String(), NotAfter: ca.Cert.NotAfter},
		{File: caFile, Kind: "client_ca", Subject: other.Cert.Subject.String(), NotAfter: other.Cert.NotAfter},
	}
	if got := s.Certificates(); !slices.EqualFunc(got, want, sameCert) {
		t.Fatalf("Certificates = %+v\nwant %+v", got, want)
	}

	rotated, err := ca.Sign("rotated", pkix.Name{CommonName: "rotated.example"}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		t.Fatal(err)
	}
	rotated.CopyTo(t, certFile, keyFile)
	want[0].Subject, want[0].NotAfter = "CN=rotated.example", rotated.Cert.NotAfter
	if got := s.Certificates(); !slices.EqualFunc(got, want, sameCert) {
		t.Fatalf("after rotation Certificates = %+v\nwant %+v", got, want)
	}
}

func sameCert(a, b certs.Certificate) bool {
	return a.File == b.File && a.Kind == b.Kind && a.Subject == b.Subject && a.NotAfter.Equal(b.NotAfter)
}
