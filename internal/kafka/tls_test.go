package kafka

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/certs"
	"github.com/strandkafka/strand/internal/certs/certstest"
)

// tlsFixture is a CA, a server certificate and a client certificate
// for User:CN=alice,OU=eng.
type tlsFixture struct {
	ca     *certstest.CA
	server certstest.Pair
	alice  certstest.Pair
}

func newTLSFixture(t testing.TB) tlsFixture {
	ca := certstest.NewCA(t, "ca")
	return tlsFixture{
		ca:     ca,
		server: ca.Server(t, "server"),
		alice:  ca.Client(t, "alice", pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}}),
	}
}

// startTLSServer serves l on 127.0.0.1:0 with the fixture's server
// certificate and client auth ca.
func startTLSServer(t testing.TB, cfg Config, fx tlsFixture, l Listener, ca certs.ClientAuth) *testServer {
	t.Helper()
	files := certs.ServerFiles{CertFile: fx.server.CertFile, KeyFile: fx.server.KeyFile, ClientCAFile: fx.ca.CertFile, ClientAuth: ca}
	cs, err := certs.NewServer(files, discardLogger)
	if err != nil {
		t.Fatal(err)
	}
	l.TLS = cs.Config()
	obs := newTestObserver()
	cfg.Logger, cfg.Observer = discardLogger, obs
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, addr: ln.Addr().String(), obs: obs, served: make(chan error, 1)}
	go func() { ts.served <- s.ServeListener(context.Background(), ln, l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		s.Shutdown(ctx)
		<-ts.served
	})
	return ts
}

func (fx tlsFixture) clientConfig(t testing.TB, withCert bool) *tls.Config {
	t.Helper()
	f := certs.ClientFiles{CAFile: fx.ca.CertFile}
	if withCert {
		f.CertFile, f.KeyFile = fx.alice.CertFile, fx.alice.KeyFile
	}
	cfg, err := certs.ClientConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func apiVersionsOver(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(cfg), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	_, err = cl.Request(ctx, kmsg.NewPtrApiVersionsRequest())
	return err
}

func TestTLSClientCertificateIsThePrincipal(t *testing.T) {
	fx := newTLSFixture(t)
	for _, tc := range []struct {
		l    Listener
		want auth.Principal
	}{
		{Listener{Name: "SSL", Protocol: auth.SSL}, auth.User("CN=alice,OU=eng")},
		// On SASL_SSL the SASL exchange names the principal, not the
		// certificate.
		{Listener{Name: "SECURE", Protocol: auth.SASLSSL}, auth.Anonymous},
	} {
		t.Run(tc.l.Name, func(t *testing.T) {
			ts := startTLSServer(t, Config{}, fx, tc.l, certs.ClientAuthRequired)
			if err := apiVersionsOver(t, ts.addr, fx.clientConfig(t, true)); err != nil {
				t.Fatalf("ApiVersions over mTLS: %v", err)
			}
			ts.obs.mu.Lock()
			c := ts.obs.mu.conns[len(ts.obs.mu.conns)-1]
			ts.obs.mu.Unlock()
			if got := c.Principal(); got != tc.want {
				t.Errorf("principal %v, want %v", got, tc.want)
			}
			if got := c.Listener(); got.Name != tc.l.Name || got.Protocol != tc.l.Protocol {
				t.Errorf("listener %+v, want %+v", got, tc.l)
			}
		})
	}
}

func TestTLSRequiredClientCertificateRefused(t *testing.T) {
	fx := newTLSFixture(t)
	ts := startTLSServer(t, Config{}, fx, Listener{Name: "SSL", Protocol: auth.SSL}, certs.ClientAuthRequired)

	// No certificate at all.
	if err := apiVersionsOver(t, ts.addr, fx.clientConfig(t, false)); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if cc := ts.obs.waitClose(t); !errors.Is(cc.reason, ErrTLSHandshake) {
		t.Fatalf("close reason %v, want ErrTLSHandshake", cc.reason)
	}

	// A certificate from a CA the server does not trust.
	other := certstest.NewCA(t, "other")
	mallory := other.Client(t, "mallory", pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}})
	cfg, err := certs.ClientConfig(certs.ClientFiles{CAFile: fx.ca.CertFile, CertFile: mallory.CertFile, KeyFile: mallory.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	if err := apiVersionsOver(t, ts.addr, cfg); err == nil {
		t.Fatal("a client with an untrusted certificate was served")
	}
	if cc := ts.obs.waitClose(t); !errors.Is(cc.reason, ErrTLSHandshake) {
		t.Fatalf("close reason %v, want ErrTLSHandshake", cc.reason)
	}
	if n := len(ts.obs.requests()); n != 0 {
		t.Fatalf("%d requests served to refused clients", n)
	}
}

// TestTLSHandshakeGarbage: garbage, a plaintext Kafka client and a
// client that sends nothing are each closed with ErrTLSHandshake, and
// the listener still serves a good client afterwards.
func TestTLSHandshakeGarbage(t *testing.T) {
	fx := newTLSFixture(t)
	ts := startTLSServer(t, Config{TLSHandshakeTimeout: 50 * time.Millisecond}, fx,
		Listener{Name: "SSL", Protocol: auth.SSL}, certs.ClientAuthRequested)
	garbage := make([]byte, 4096)
	rand.Read(garbage)
	// A TLS record header announcing a handshake, then garbage.
	fakeHello := append([]byte{0x16, 0x03, 0x01, 0x00, 0x40}, garbage[:64]...)
	for name, send := range map[string][]byte{
		"garbage":    garbage,
		"plaintext":  frameFor(1, kmsg.NewPtrApiVersionsRequest()),
		"fake hello": fakeHello,
		"silent":     nil,
	} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, ts.addr)
			if send != nil {
				write(t, c, send)
			}
			expectClosedAfterAlert(t, c)
			if cc := ts.obs.waitClose(t); !errors.Is(cc.reason, ErrTLSHandshake) {
				t.Fatalf("close reason %v, want ErrTLSHandshake", cc.reason)
			}
			if CloseReason(ErrTLSHandshake) != "tls_handshake" {
				t.Fatal("TLS handshake failures are not counted apart")
			}
		})
	}
	if err := apiVersionsOver(t, ts.addr, fx.clientConfig(t, true)); err != nil {
		t.Fatalf("a good client after the garbage: %v", err)
	}
}

func TestListenerTLSMustMatchProtocol(t *testing.T) {
	s, err := New(Config{Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, l := range []Listener{
		{Name: "SSL", Protocol: auth.SSL},
		{Name: "PLAINTEXT", Protocol: auth.Plaintext, TLS: &tls.Config{}},
	} {
		a, b := net.Pipe()
		defer b.Close()
		if err := s.ServeConnOn(context.Background(), a, l); err == nil || errors.Is(err, ErrTLSHandshake) {
			t.Errorf("%s with TLS %v: served (%v)", l.Protocol, l.TLS != nil, err)
		}
	}
}

// FuzzTLSHandshake feeds arbitrary bytes to a TLS listener's
// connection: it must end, with ErrTLSHandshake or a clean close, never
// panic or hang.
func FuzzTLSHandshake(f *testing.F) {
	fx := newTLSFixture(f)
	cs, err := certs.NewServer(certs.ServerFiles{CertFile: fx.server.CertFile, KeyFile: fx.server.KeyFile,
		ClientCAFile: fx.ca.CertFile, ClientAuth: certs.ClientAuthRequested}, discardLogger)
	if err != nil {
		f.Fatal(err)
	}
	l := Listener{Name: "SSL", Protocol: auth.SSL, TLS: cs.Config()}
	s, err := New(Config{Logger: discardLogger, TLSHandshakeTimeout: time.Second})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 1, 0, 0, 1, 0})
	f.Add([]byte{0x16, 0x03, 0x03, 0xff, 0xff})
	f.Add(frameFor(1, kmsg.NewPtrApiVersionsRequest()))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, b := net.Pipe()
		// net.Pipe does not buffer: drain what the server answers so it
		// never waits on us.
		go io.Copy(io.Discard, b)
		go func() {
			b.Write(in)
			b.Close()
		}()
		err := s.ServeConnOn(context.Background(), a, l)
		if err != nil && !errors.Is(err, ErrTLSHandshake) {
			t.Fatalf("ServeConnOn: %v", err)
		}
	})
}

// expectClosedAfterAlert asserts the server closed c, after at most a
// TLS alert record.
func expectClosedAfterAlert(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(guard))
	b, err := io.ReadAll(c)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatal("the connection was not closed")
	case len(b) > 7:
		t.Fatalf("read %d bytes, more than an alert, from a connection that should be closed", len(b))
	}
}

// TestShutdownDuringTLSHandshake: a client that never finishes its
// handshake does not hold up a graceful shutdown, and its close reason
// is the shutdown, not a failed handshake.
func TestShutdownDuringTLSHandshake(t *testing.T) {
	fx := newTLSFixture(t)
	cs, err := certs.NewServer(certs.ServerFiles{CertFile: fx.server.CertFile, KeyFile: fx.server.KeyFile}, discardLogger)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Logger: discardLogger, TLSHandshakeTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	defer b.Close()
	served := make(chan error, 1)
	go func() {
		served <- s.ServeConnOn(context.Background(), a, Listener{Name: "SSL", Protocol: auth.SSL, TLS: cs.Config()})
	}()
	// Half a ClientHello's record header: the handshake waits for more.
	if _, err := b.Write([]byte{0x16, 0x03}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case err := <-served:
		if !errors.Is(err, ErrServerClosed) {
			t.Fatalf("close reason %v, want ErrServerClosed", err)
		}
	case <-time.After(guard):
		t.Fatal("the connection outlived Shutdown")
	}
}
