// Package certstest makes throwaway certificate authorities and the
// certificates they sign, written as PEM files, for tests of TLS
// listeners and clients.
package certstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/certs"
)

// CA is a certificate authority whose certificate is at CertFile.
type CA struct {
	Cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	CertFile string
	dir      string
}

// Pair is a certificate and key written as PEM files.
type Pair struct {
	Cert     *x509.Certificate
	CertFile string
	KeyFile  string
}

var serial atomic.Int64

// NewCA makes a CA named name under t.TempDir().
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := NewCAIn(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// NewCAIn makes a CA named name whose files go in dir, for callers that
// are not tests (the compatibility matrix's runner).
func NewCAIn(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Strand tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{Cert: cert, key: key, dir: dir, CertFile: filepath.Join(dir, name+"-ca.pem")}
	return ca, writePEM(ca.CertFile, "CERTIFICATE", der)
}

// Server signs a server certificate for localhost, 127.0.0.1 and ::1,
// written as name.pem and name-key.pem.
func (ca *CA) Server(t testing.TB, name string) Pair {
	t.Helper()
	return ca.sign(t, name, pkix.Name{CommonName: "localhost"}, x509.ExtKeyUsageServerAuth)
}

// Client signs a client certificate for subject, written as name.pem
// and name-key.pem.
func (ca *CA) Client(t testing.TB, name string, subject pkix.Name) Pair {
	t.Helper()
	return ca.sign(t, name, subject, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) sign(t testing.TB, name string, subject pkix.Name, usage x509.ExtKeyUsage) Pair {
	t.Helper()
	p, err := ca.Sign(name, subject, usage)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Sign signs a certificate for subject with usage (server certificates
// also name localhost, 127.0.0.1 and ::1), written as name.pem and
// name-key.pem beside the CA's.
func (ca *CA) Sign(name string, subject pkix.Name, usage x509.ExtKeyUsage) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return Pair{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	p := Pair{Cert: cert, CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+"-key.pem")}
	if err := writePEM(p.CertFile, "CERTIFICATE", der); err != nil {
		return Pair{}, err
	}
	return p, writePEM(p.KeyFile, "PRIVATE KEY", keyDER)
}

// CopyTo writes p's files over certFile and keyFile (a rotation), each
// through a rename so a reader never sees half a file.
func (p Pair) CopyTo(t testing.TB, certFile, keyFile string) {
	t.Helper()
	for _, f := range [][2]string{{p.CertFile, certFile}, {p.KeyFile, keyFile}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		tmp := f[1] + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, f[1]); err != nil {
			t.Fatal(err)
		}
	}
}

func nextSerial() *big.Int {
	return big.NewInt(time.Now().UnixNano() + serial.Add(1))
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// ClientTLS is a TLS client configuration (certs.ClientConfig) that
// trusts ca and presents client, or no certificate when client is nil.
func (ca *CA) ClientTLS(tb testing.TB, client *Pair) *tls.Config {
	tb.Helper()
	f := certs.ClientFiles{CAFile: ca.CertFile}
	if client != nil {
		f.CertFile, f.KeyFile = client.CertFile, client.KeyFile
	}
	cfg, err := certs.ClientConfig(f)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}
