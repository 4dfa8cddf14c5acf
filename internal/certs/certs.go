// Package certs owns TLS configuration read from PEM files: a server's
// certificate, key and client CA, reloaded when the files change so a
// rotated certificate takes effect without a restart; the client
// certificate policy (Kafka's ssl.client.auth); and the client side the
// CLI and tests dial with.
package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// ClientAuth is Kafka's ssl.client.auth: whether a TLS listener asks
// for a client certificate.
type ClientAuth uint8

const (
	// ClientAuthNone asks for no client certificate.
	ClientAuthNone ClientAuth = iota
	// ClientAuthRequested asks for one and verifies it if given.
	ClientAuthRequested
	// ClientAuthRequired refuses a handshake without a valid one.
	ClientAuthRequired
)

var clientAuthNames = [...]string{"none", "requested", "required"}

func (c ClientAuth) String() string {
	if int(c) < len(clientAuthNames) {
		return clientAuthNames[c]
	}
	return fmt.Sprintf("ClientAuth(%d)", uint8(c))
}

// ParseClientAuth parses ssl.client.auth's values; "" is none.
func ParseClientAuth(s string) (ClientAuth, error) {
	if s == "" {
		return ClientAuthNone, nil
	}
	for i, n := range clientAuthNames {
		if strings.EqualFold(s, n) {
			return ClientAuth(i), nil
		}
	}
	return 0, fmt.Errorf("certs: client auth %q: want none, requested or required", s)
}

func (c ClientAuth) tlsType() tls.ClientAuthType {
	switch c {
	case ClientAuthRequested:
		return tls.VerifyClientCertIfGiven
	case ClientAuthRequired:
		return tls.RequireAndVerifyClientCert
	}
	return tls.NoClientCert
}

// ServerFiles names a TLS server's files.
type ServerFiles struct {
	// CertFile holds the certificate chain (leaf first), KeyFile its
	// private key, both PEM.
	CertFile string
	KeyFile  string
	// ClientCAFile holds the CAs client certificates must chain to;
	// required unless ClientAuth is none.
	ClientCAFile string
	ClientAuth   ClientAuth
}

// Validate reports files that cannot make a server.
func (f ServerFiles) Validate() error {
	switch {
	case f.CertFile == "" || f.KeyFile == "":
		return errors.New("certs: a TLS listener needs a certificate file and a key file")
	case f.ClientAuth != ClientAuthNone && f.ClientCAFile == "":
		return fmt.Errorf("certs: client auth %v needs a client CA file", f.ClientAuth)
	}
	return nil
}

// Server hands out a TLS server configuration built from ServerFiles,
// rebuilt when the files' contents change. It reads the files at every
// handshake: a few small reads next to a handshake's public-key
// operations, and no watcher to miss a rename or a same-second rewrite.
// Files that do not parse (a rotation caught between writing the
// certificate and the key) keep the previous configuration in use. Safe
// for concurrent use.
type Server struct {
	files ServerFiles
	log   *slog.Logger

	mu struct {
		sync.Mutex
		cur *loaded
		// failing is the last reload error, so it is logged once per
		// change rather than per handshake.
		failing string
	}
}

// loaded is one generation of the files and the configuration built
// from them.
type loaded struct {
	cert, key, ca []byte
	cfg           *tls.Config
	// certs are the certificates of cert and ca, parsed once per
	// generation for Certificates.
	certs []Certificate
}

// Certificate is one certificate a server presents or trusts, for the
// expiry metric.
type Certificate struct {
	// File is the PEM file it came from.
	File string
	// Kind is "certificate" for the served (leaf) certificate, "chain"
	// for an intermediate served after it, "client_ca" for a CA that
	// client certificates are checked against.
	Kind     string
	Subject  string
	NotAfter time.Time
}

// Certificates returns the certificates the server presents and trusts
// now: the files are read again first, as a handshake reads them, so a
// rotation shows without waiting for a client.
func (s *Server) Certificates() []Certificate {
	s.current()
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.mu.cur.certs)
}

// NewServer reads and checks the files once, so a mistake fails at
// start rather than at the first client.
func NewServer(files ServerFiles, logger *slog.Logger) (*Server, error) {
	if err := files.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{files: files, log: logger}
	raw, err := s.read()
	if err != nil {
		return nil, err
	}
	if s.mu.cur, err = s.build(raw); err != nil {
		return nil, err
	}
	return s, nil
}

// Config returns the configuration a TLS listener serves with: TLS 1.2
// or newer, each handshake served by the files' current contents.
func (s *Server) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.current(), nil
		},
	}
}

// current returns the configuration for the files as they are now, or
// the last good one.
func (s *Server) current() *tls.Config {
	raw, err := s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && raw.same(s.mu.cur) {
		return s.mu.cur.cfg
	}
	var l *loaded
	if err == nil {
		l, err = s.build(raw)
	}
	if err != nil {
		if msg := err.Error(); msg != s.mu.failing {
			s.mu.failing = msg
			s.log.Error("certs: reloading TLS files failed; serving the previous ones", "err", err)
		}
		return s.mu.cur.cfg
	}
	s.mu.cur, s.mu.failing = l, ""
	s.log.Info("certs: TLS files reloaded", "cert", s.files.CertFile, "not_after", l.cfg.Certificates[0].Leaf.NotAfter)
	return l.cfg
}

func (s *Server) read() (*loaded, error) {
	var l loaded
	var err error
	if l.cert, err = os.ReadFile(s.files.CertFile); err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	if l.key, err = os.ReadFile(s.files.KeyFile); err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	if s.files.ClientCAFile != "" {
		if l.ca, err = os.ReadFile(s.files.ClientCAFile); err != nil {
			return nil, fmt.Errorf("certs: %w", err)
		}
	}
	return &l, nil
}

func (l *loaded) same(o *loaded) bool {
	return o != nil && bytes.Equal(l.cert, o.cert) && bytes.Equal(l.key, o.key) && bytes.Equal(l.ca, o.ca)
}

func (s *Server) build(l *loaded) (*loaded, error) {
	pair, err := tls.X509KeyPair(l.cert, l.key)
	if err != nil {
		return nil, fmt.Errorf("certs: %s and %s: %w", s.files.CertFile, s.files.KeyFile, err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
		ClientAuth:   s.files.ClientAuth.tlsType(),
	}
	if l.ca != nil {
		if cfg.ClientCAs, err = pool(l.ca, s.files.ClientCAFile); err != nil {
			return nil, err
		}
	}
	l.certs = nil
	for i, der := range pair.Certificate {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("certs: %s: %w", s.files.CertFile, err)
		}
		kind := "chain"
		if i == 0 {
			kind = "certificate"
		}
		l.certs = append(l.certs, Certificate{File: s.files.CertFile, Kind: kind, Subject: c.Subject.String(), NotAfter: c.NotAfter})
	}
	for rest := l.ca; len(rest) > 0; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			// AppendCertsFromPEM skips it too: it is not trusted,
			// so it has no expiry to report.
			continue
		}
		l.certs = append(l.certs, Certificate{File: s.files.ClientCAFile, Kind: "client_ca", Subject: c.Subject.String(), NotAfter: c.NotAfter})
	}
	l.cfg = cfg
	return l, nil
}

func pool(pem []byte, name string) (*x509.CertPool, error) {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("certs: %s holds no PEM certificate", name)
	}
	return p, nil
}

// ClientFiles names what a TLS client presents and trusts.
type ClientFiles struct {
	// CAFile holds the CAs the server's certificate must chain to;
	// empty means the system's.
	CAFile string
	// CertFile and KeyFile are the client certificate for mTLS; both or
	// neither.
	CertFile string
	KeyFile  string
}

// ClientConfig builds a TLS 1.2+ client configuration from f, read once.
func ClientConfig(f ClientFiles) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CAFile != "" {
		b, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("certs: %w", err)
		}
		if cfg.RootCAs, err = pool(b, f.CAFile); err != nil {
			return nil, err
		}
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("certs: a client certificate needs both a certificate file and a key file")
	}
	if f.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("certs: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
