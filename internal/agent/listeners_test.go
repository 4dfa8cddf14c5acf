package agent_test

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/certs"
	"github.com/strandkafka/strand/internal/certs/certstest"
)

// TestListenersAnswerWithTheirOwnAddress starts an agent with a
// PLAINTEXT, an SSL (mTLS) and a custom-named plaintext listener:
// records produced over one are consumed over the others, and each
// listener's Metadata names the agent at that listener's address.
func TestListenersAnswerWithTheirOwnAddress(t *testing.T) {
	pki := newTestPKI(t)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a := startWith(t, pki.serve(agent.Config{
		DataDir:                     t.TempDir(),
		Listeners:                   "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,internal://127.0.0.1:0",
		ListenerSecurityProtocolMap: "INTERNAL:PLAINTEXT",
		AdvertisedListeners:         "INTERNAL://internal.example:19092",
	}, true), nil)
	if a.KafkaAddr() != a.ListenerAddr("PLAINTEXT") {
		t.Errorf("KafkaAddr %s is not the first listener's %s", a.KafkaAddr(), a.ListenerAddr("PLAINTEXT"))
	}
	tlsCfg := pki.clientTLS(t, true)
	sslAddr := a.ListenerAddr("SSL")

	for _, tc := range []struct {
		name, addr string
		opts       []kgo.Opt
		want       string
	}{
		{"PLAINTEXT", a.KafkaAddr(), nil, a.KafkaAddr()},
		{"SSL", sslAddr, []kgo.Opt{kgo.DialTLSConfig(tlsCfg)}, sslAddr},
		{"INTERNAL", a.ListenerAddr("INTERNAL"), nil, "internal.example:19092"},
	} {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, client(t, tc.addr, tc.opts...))
		if err != nil {
			t.Fatalf("%s: Metadata: %v", tc.name, err)
		}
		var got []string
		for _, b := range resp.Brokers {
			got = append(got, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("%s listener's Metadata names brokers %v, want [%s]", tc.name, got, tc.want)
		}
		if tc.name == "INTERNAL" {
			continue // its advertised host does not resolve: a client would go there next
		}
		cl := client(t, tc.addr, tc.opts...)
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey, fc.CoordinatorKeys = "g", []string{"g"}
		fcr, err := fc.RequestWith(ctx, cl)
		if err != nil || len(fcr.Coordinators) != 1 {
			t.Fatalf("%s: FindCoordinator: %+v, %v", tc.name, fcr, err)
		}
		if c := fcr.Coordinators[0]; net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))) != tc.want {
			t.Errorf("%s listener's FindCoordinator names %s:%d, want %s", tc.name, c.Host, c.Port, tc.want)
		}
		dcr, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
		if err != nil || len(dcr.Brokers) != 1 {
			t.Fatalf("%s: DescribeCluster: %+v, %v", tc.name, dcr, err)
		}
		if b := dcr.Brokers[0]; net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) != tc.want {
			t.Errorf("%s listener's DescribeCluster names %s:%d, want %s", tc.name, b.Host, b.Port, tc.want)
		}
	}

	const topic = "over-tls"
	createTopic(t, a.KafkaAddr(), topic, 1)
	rs := []*kgo.Record{{Topic: topic, Value: []byte("sealed")}, {Topic: topic, Value: []byte("delivered")}}
	cl := client(t, sslAddr, kgo.DialTLSConfig(tlsCfg))
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce over SSL: %v", err)
	}
	// Consumed last: a long-polling consumer on the agent delays other
	// clients' Metadata (seen on main too).
	checkRecords(t, a.KafkaAddr(), topic, rs)

	// A plaintext client on the SSL port is closed, not answered.
	c, err := net.Dial("tcp", sslAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(opTimeout))
	if b, err := io.ReadAll(c); err != nil || len(b) > 7 {
		t.Errorf("plaintext client on the SSL listener: read %d bytes, %v; want at most an alert, then EOF", len(b), err)
	}
}

func TestListenerConfigErrors(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	server := ca.Server(t, "server")
	for name, cfg := range map[string]agent.Config{
		"unknown protocol":         {Listeners: "CLIENT://127.0.0.1:0"},
		"bad map protocol":         {Listeners: "CLIENT://127.0.0.1:0", ListenerSecurityProtocolMap: "CLIENT:TLS"},
		"named twice":              {Listeners: "PLAINTEXT://127.0.0.1:0,plaintext://127.0.0.1:0"},
		"one port twice":           {Listeners: "PLAINTEXT://127.0.0.1:9,SSL://127.0.0.1:9"},
		"not a URL":                {Listeners: "127.0.0.1:9092"},
		"both listen flags":        {Listeners: "PLAINTEXT://127.0.0.1:0", KafkaListen: "127.0.0.1:0"},
		"advertise with listeners": {Listeners: "PLAINTEXT://127.0.0.1:0", Advertise: "a.example:9092"},
		"advertised unknown":       {Listeners: "PLAINTEXT://127.0.0.1:0", AdvertisedListeners: "SSL://a.example:9093"},
		"advertised wildcard":      {Listeners: "PLAINTEXT://127.0.0.1:0", AdvertisedListeners: "PLAINTEXT://:9092"},
		"SSL without cert":         {Listeners: "SSL://127.0.0.1:0"},
		"client auth without CA":   {Listeners: "SSL://127.0.0.1:0", TLSCertFile: server.CertFile, TLSKeyFile: server.KeyFile, TLSClientAuth: "required"},
		"client auth unknown":      {Listeners: "SSL://127.0.0.1:0", TLSCertFile: server.CertFile, TLSKeyFile: server.KeyFile, TLSClientAuth: "maybe"},
	} {
		cfg.DataDir = t.TempDir()
		cfg.SetDefaults()
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, cfg)
		}
	}
}

// TestListenersOfEveryAgent: two agents on one log, each with a
// PLAINTEXT and an SSL listener. Metadata from either listener of
// either agent names both agents at that listener's addresses, which
// the heartbeats carried through the log.
func TestListenersOfEveryAgent(t *testing.T) {
	pki := newTestPKI(t)
	logURL := "mem://" + t.Name()
	var agents []*agent.Agent
	for node := range int32(2) {
		agents = append(agents, startWith(t, pki.serve(agent.Config{
			DataDir: t.TempDir(), NodeID: node + 1, Log: logURL,
			Listeners: "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		}, false), nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for _, a := range agents {
		if err := a.Replica().Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tlsCfg := pki.clientTLS(t, false)
	for _, listener := range []string{"PLAINTEXT", "SSL"} {
		want := agents[0].ListenerAddr(listener) + "," + agents[1].ListenerAddr(listener)
		for i, a := range agents {
			var opts []kgo.Opt
			if listener == "SSL" {
				opts = append(opts, kgo.DialTLSConfig(tlsCfg))
			}
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, client(t, a.ListenerAddr(listener), opts...))
			if err != nil {
				t.Fatalf("agent %d %s: Metadata: %v", i+1, listener, err)
			}
			var got []string
			for _, b := range resp.Brokers {
				got = append(got, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
			}
			slices.Sort(got)
			w := strings.Split(want, ",")
			slices.Sort(w)
			if !slices.Equal(got, w) {
				t.Errorf("agent %d's %s listener names brokers %v, want %v", i+1, listener, got, w)
			}
		}
	}
}

// testPKI is a CA with a server certificate for the agent's TLS
// listeners and a client certificate (CN=client) for mTLS.
type testPKI struct {
	ca             *certstest.CA
	server, client certstest.Pair
}

func newTestPKI(tb testing.TB) testPKI {
	tb.Helper()
	ca := certstest.NewCA(tb, "ca")
	return testPKI{ca: ca, server: ca.Server(tb, "server"), client: ca.Client(tb, "client", pkix.Name{CommonName: "client"})}
}

// serve sets cfg's TLS files to the server certificate, with client
// certificates required when mTLS.
func (p testPKI) serve(cfg agent.Config, mTLS bool) agent.Config {
	cfg.TLSCertFile, cfg.TLSKeyFile = p.server.CertFile, p.server.KeyFile
	if mTLS {
		cfg.TLSClientCAFile, cfg.TLSClientAuth = p.ca.CertFile, "required"
	}
	return cfg
}

// clientTLS is a client configuration trusting the CA, presenting the
// client certificate when withCert.
func (p testPKI) clientTLS(tb testing.TB, withCert bool) *tls.Config {
	tb.Helper()
	f := certs.ClientFiles{CAFile: p.ca.CertFile}
	if withCert {
		f.CertFile, f.KeyFile = p.client.CertFile, p.client.KeyFile
	}
	cfg, err := certs.ClientConfig(f)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}
