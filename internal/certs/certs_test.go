package certs_test

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/strandkafka/strand/internal/certs"
	"github.com/strandkafka/strand/internal/certs/certstest"
)

// serve accepts TLS connections with cfg until the test ends,
// completing each handshake.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				c.(*tls.Conn).Handshake()
				c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// servedSerial dials addr and returns the serial of the certificate it
// presents.
func servedSerial(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func TestServerReloadsRotatedFiles(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first.CopyTo(t, certFile, keyFile)

	s, err := certs.NewServer(certs.ServerFiles{CertFile: certFile, KeyFile: keyFile}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.Config())
	client, err := certs.ClientConfig(certs.ClientFiles{CAFile: ca.CertFile})
	if err != nil {
		t.Fatal(err)
	}
	wantServed := func(what string, p certstest.Pair) {
		t.Helper()
		if got, want := servedSerial(t, addr, client), p.Cert.SerialNumber.String(); got != want {
			t.Fatalf("%s: served serial %s, want %s", what, got, want)
		}
	}
	wantServed("at start", first)
	second.CopyTo(t, certFile, keyFile)
	wantServed("after rotation", second)

	// A rotation caught half way (a certificate that does not match
	// the key) keeps the last good pair in service.
	third := ca.Server(t, "third")
	b, err := os.ReadFile(third.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	wantServed("with a mismatched pair", second)
	third.CopyTo(t, certFile, keyFile)
	wantServed("after the pair was completed", third)
}

func TestServerRefusesOldTLSAndBadFiles(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	p := ca.Server(t, "server")
	s, err := certs.NewServer(certs.ServerFiles{CertFile: p.CertFile, KeyFile: p.KeyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.Config())
	client, _ := certs.ClientConfig(certs.ClientFiles{CAFile: ca.CertFile})
	client.MinVersion, client.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if c, err := tls.Dial("tcp", addr, client); err == nil {
		c.Close()
		t.Fatal("a TLS 1.1 client was served")
	}

	for name, f := range map[string]certs.ServerFiles{
		"no key":              {CertFile: p.CertFile},
		"client auth, no CA":  {CertFile: p.CertFile, KeyFile: p.KeyFile, ClientAuth: certs.ClientAuthRequired},
		"key is not the cert": {CertFile: p.CertFile, KeyFile: ca.Client(t, "c", pkix.Name{CommonName: "c"}).KeyFile},
		"CA is not PEM":       {CertFile: p.CertFile, KeyFile: p.KeyFile, ClientCAFile: p.KeyFile, ClientAuth: certs.ClientAuthRequired},
		"missing file":        {CertFile: p.CertFile + ".gone", KeyFile: p.KeyFile},
	} {
		if _, err := certs.NewServer(f, nil); err == nil {
			t.Errorf("%s: NewServer accepted %+v", name, f)
		}
	}
	for _, s := range []string{"none", "REQUESTED", "required", ""} {
		if _, err := certs.ParseClientAuth(s); err != nil {
			t.Errorf("ParseClientAuth(%q): %v", s, err)
		}
	}
	if _, err := certs.ParseClientAuth("optional"); err == nil {
		t.Error("ParseClientAuth(optional) accepted")
	}
}
