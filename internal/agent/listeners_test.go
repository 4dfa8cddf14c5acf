package agent_test

import (
	"context"
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
	ca := certstest.NewCA(t, "ca")
	server := ca.Server(t, "server")
	alice := ca.Client(t, "alice", pkix.Name{CommonName: "alice"})
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a, err := agent.Start(ctx, agent.Config{
		DataDir:                     t.TempDir(),
		Listeners:                   "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,internal://127.0.0.1:0",
		ListenerSecurityProtocolMap: "INTERNAL:PLAINTEXT",
		AdvertisedListeners:         "INTERNAL://internal.example:19092",
		TLSCertFile:                 server.CertFile,
		TLSKeyFile:                  server.KeyFile,
		TLSClientCAFile:             ca.CertFile,
		TLSClientAuth:               "required",
	}, quietLogger())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { stop(t, a) })
	if a.KafkaAddr() != a.ListenerAddr("PLAINTEXT") {
		t.Errorf("KafkaAddr %s is not the first listener's %s", a.KafkaAddr(), a.ListenerAddr("PLAINTEXT"))
	}
	tlsCfg, err := certs.ClientConfig(certs.ClientFiles{CAFile: ca.CertFile, CertFile: alice.CertFile, KeyFile: alice.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
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
	ca := certstest.NewCA(t, "ca")
	server := ca.Server(t, "server")
	logURL := "mem://" + t.Name()
	var agents []*agent.Agent
	for node := range int32(2) {
		agents = append(agents, startWith(t, agent.Config{
			DataDir: t.TempDir(), NodeID: node + 1, Log: logURL,
			Listeners:   "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
			TLSCertFile: server.CertFile, TLSKeyFile: server.KeyFile,
		}, nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for _, a := range agents {
		if err := a.Replica().Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tlsCfg, err := certs.ClientConfig(certs.ClientFiles{CAFile: ca.CertFile})
	if err != nil {
		t.Fatal(err)
	}
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
