package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"maps"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
)

// saslAgent is a testAgent that also serves a SASL_PLAINTEXT listener,
// which its Metadata advertises (the agent's Port is taken from each
// connection's local address), a data path, strand.metadata.version 4 and the
// user saslUser (password saslPassword) for both SCRAM mechanisms.
type saslAgent struct {
	*testAgent
	saslAddr   string
	principals *principalObserver
}

const (
	saslUser     = "alice"
	saslPassword = "alice-secret"
)

var saslListener = Listener{Name: "SASL_PLAINTEXT", Protocol: auth.SASLPlaintext}

func newSASLAgent(t *testing.T, opts ...agentOption) *saslAgent {
	t.Helper()
	obs := &principalObserver{testObserver: newTestObserver(), byKey: map[int16]auth.Principal{}, handshakes: map[uint64]int{}, recorded: make(chan struct{})}
	opts = append([]agentOption{func(c *agentConfig) {
		c.Server.Deps.Cluster.Host, c.Server.Deps.Cluster.Port = "", 0
		c.Server.Observer = obs
		c.Server.SASL.FailedAuthDelay = -1
	}, withDataPath(t, &dataPath{})}, opts...)
	a := newTestAgent(t, opts...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go a.Server.ServeListener(context.Background(), ln, saslListener)
	res, err := a.Replica.Propose(a.ctx(t), meta.FinalizeFeatures{Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel4}}})
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	sa := &saslAgent{testAgent: a, saslAddr: ln.Addr().String(), principals: obs}
	sa.createUser(t, saslUser, saslPassword)
	return sa
}

// createUser sets user's SCRAM-SHA-256 and SCRAM-SHA-512 credentials
// through kadm over the plaintext listener.
func (a *saslAgent) createUser(t *testing.T, user, password string) {
	t.Helper()
	res, err := a.Admin.AlterUserSCRAMs(a.ctx(t), nil, []kadm.UpsertSCRAM{
		{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: password},
		{User: user, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: password},
	})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("AlterUserSCRAMs: %v", err)
	}
}

// client is a kgo client of the SASL listener authenticating with m.
func (a *saslAgent) client(t *testing.T, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.saslAddr), kgo.SASL(m),
		kgo.RequestRetries(0), kgo.RetryTimeout(guard), kgo.RecordDeliveryTimeout(guard)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// principalObserver records the principal of each API key's last
// request on the SASL listener.
type principalObserver struct {
	*testObserver
	mu         sync.Mutex
	byKey      map[int16]auth.Principal
	handshakes map[uint64]int // by connection
	// recorded is closed, and replaced, whenever byKey changes.
	recorded chan struct{}
}

func (o *principalObserver) RequestDone(c *Conn, st RequestStats) {
	o.mu.Lock()
	if c.Listener() == saslListener {
		o.byKey[st.Key] = c.Principal()
		close(o.recorded)
		o.recorded = make(chan struct{})
	}
	if st.Key == saslHandshakeKey {
		o.handshakes[c.ID()]++
	}
	o.mu.Unlock()
	o.testObserver.RequestDone(c, st)
}

func (o *principalObserver) handshakesPerConn() map[uint64]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.handshakes)
}

// forget drops what was recorded for key.
func (o *principalObserver) forget(key int16) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.byKey, key)
}

// await returns the principal of key's next request recorded after
// forget: RequestDone runs once the response is written, so a client
// can have its answer before the observer has the request.
func (o *principalObserver) await(t *testing.T, key int16) auth.Principal {
	t.Helper()
	for {
		o.mu.Lock()
		p, ok := o.byKey[key]
		ch := o.recorded
		o.mu.Unlock()
		if ok {
			return p
		}
		select {
		case <-ch:
		case <-t.Context().Done():
			t.Fatalf("no request of key %d recorded", key)
		}
	}
}

func (o *principalObserver) principal(key int16) auth.Principal {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byKey[key]
}

func mechanisms(user, password string) map[string]sasl.Mechanism {
	return map[string]sasl.Mechanism{
		MechanismPlain:       plain.Auth{User: user, Pass: password}.AsMechanism(),
		MechanismScramSHA256: scram.Auth{User: user, Pass: password}.AsSha256Mechanism(),
		MechanismScramSHA512: scram.Auth{User: user, Pass: password}.AsSha512Mechanism(),
	}
}

// TestSASLProduceConsume: kgo authenticates with each mechanism
// (franz-go's own pkg/sasl) over the SASL listener, produces and reads
// back, and its requests run as User:alice.
func TestSASLProduceConsume(t *testing.T) {
	a := newSASLAgent(t)
	a.createTopic(t, "secured", 1, nil)
	for name, m := range mechanisms(saslUser, saslPassword) {
		t.Run(name, func(t *testing.T) {
			cl := a.client(t, m, kgo.ConsumeTopics("secured"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			ctx := a.ctx(t)
			a.principals.forget(0)
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "secured", Value: []byte(name)}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			if got := a.principals.await(t, 0); got != auth.User(saslUser) {
				t.Fatalf("Produce ran as %v, want User:%s", got, saslUser)
			}
			var got []string
			for len(got) == 0 {
				fs := cl.PollFetches(ctx)
				if err := fs.Err0(); err != nil {
					t.Fatalf("fetch: %v", err)
				}
				fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			}
			if got[0] == "" {
				t.Fatalf("read back %q", got)
			}
		})
	}
}

// TestSASLWrongPassword: a wrong password or an unknown user fails
// with SASL_AUTHENTICATION_FAILED for every mechanism, and no request
// gets through.
func TestSASLWrongPassword(t *testing.T) {
	a := newSASLAgent(t)
	for _, who := range []struct{ user, password string }{{saslUser, "wrong"}, {"mallory", saslPassword}} {
		for name, m := range mechanisms(who.user, who.password) {
			t.Run(who.user+"/"+name, func(t *testing.T) {
				cl := a.client(t, m)
				_, err := kadm.NewClient(cl).ListTopics(a.ctx(t))
				if !errors.Is(err, kerr.SaslAuthenticationFailed) {
					t.Fatalf("ListTopics with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
				}
				if p := a.principals.principal(3); p != (auth.Principal{}) {
					t.Fatalf("a Metadata request ran as %v", p)
				}
			})
		}
	}
}

// handshake sends SaslHandshake at version and checks it is accepted.
func handshake(t *testing.T, c net.Conn, version int16, mechanism string) {
	t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = version, mechanism
	resp := roundTrip(t, c, 1, req).(*kmsg.SASLHandshakeResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("SaslHandshake v%d %s: error %d, mechanisms %v", version, mechanism, resp.ErrorCode, resp.SupportedMechanisms)
	}
}

// authenticatePlain runs a PLAIN exchange in SaslAuthenticate v1.
func authenticatePlain(t *testing.T, c net.Conn, user, password string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	handshake(t, c, 1, MechanismPlain)
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version = 1
	req.SASLAuthBytes = []byte("\x00" + user + "\x00" + password)
	return roundTrip(t, c, 2, req).(*kmsg.SASLAuthenticateResponse)
}

func metadataV1() kmsg.Request {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 1
	return req
}

// TestSASLRequestsBeforeAuth: before authenticating, ApiVersions and the
// SASL APIs are answered and anything else closes the connection
// unanswered, as Kafka's SaslServerAuthenticator does; so does a
// SaslAuthenticate before SaslHandshake, and an unknown mechanism after
// its answer. Without SASL the SASL APIs answer ILLEGAL_SASL_STATE.
func TestSASLRequestsBeforeAuth(t *testing.T) {
	a := newSASLAgent(t)

	t.Run("metadata", func(t *testing.T) {
		c := dial(t, a.saslAddr)
		checkAPIVersions(t, c, a.Server)
		write(t, c, frameFor(3, metadataV1()))
		expectClosed(t, c)
	})
	t.Run("after handshake", func(t *testing.T) {
		c := dial(t, a.saslAddr)
		handshake(t, c, 1, MechanismScramSHA512)
		write(t, c, frameFor(3, metadataV1()))
		expectClosed(t, c)
	})
	t.Run("large frame", func(t *testing.T) {
		// sasl.server.max.receive.size: 512 KiB before authentication.
		c := dial(t, a.saslAddr)
		write(t, c, binary.BigEndian.AppendUint32(nil, saslMaxReceiveBytes+1))
		expectClosed(t, c)
	})
	t.Run("authenticate first", func(t *testing.T) {
		c := dial(t, a.saslAddr)
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SASLAuthBytes = []byte("\x00alice\x00alice-secret")
		write(t, c, frameFor(3, req))
		expectClosed(t, c)
	})
	t.Run("unknown mechanism", func(t *testing.T) {
		c := dial(t, a.saslAddr)
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Version, req.Mechanism = 1, "GSSAPI"
		resp := roundTrip(t, c, 1, req).(*kmsg.SASLHandshakeResponse)
		if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(resp.SupportedMechanisms) != 3 {
			t.Fatalf("GSSAPI handshake: %+v", resp)
		}
		expectClosed(t, c)
	})
	t.Run("wrong password closes", func(t *testing.T) {
		c := dial(t, a.saslAddr)
		if resp := authenticatePlain(t, c, saslUser, "nope"); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("wrong password: error %d", resp.ErrorCode)
		}
		expectClosed(t, c)
	})
	t.Run("authenticated", func(t *testing.T) {
		c := dial(t, a.saslAddr)
		if resp := authenticatePlain(t, c, saslUser, saslPassword); resp.ErrorCode != 0 {
			t.Fatalf("PLAIN: error %d %v", resp.ErrorCode, resp.ErrorMessage)
		}
		if resp := roundTrip(t, c, 3, metadataV1()).(*kmsg.MetadataResponse); len(resp.Brokers) != 1 {
			t.Fatalf("Metadata after authenticating: %+v", resp)
		}
	})
	t.Run("no SASL on plaintext", func(t *testing.T) {
		c := dial(t, a.addr)
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Version, req.Mechanism = 1, MechanismPlain
		if resp := roundTrip(t, c, 1, req).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("SaslHandshake on PLAINTEXT: error %d", resp.ErrorCode)
		}
		checkAPIVersions(t, c, a.Server)
	})
}

// writeToken writes an unframed SASL token; readToken reads one.
func writeToken(t *testing.T, c net.Conn, tok []byte) {
	t.Helper()
	write(t, c, binary.BigEndian.AppendUint32(nil, uint32(len(tok))))
	write(t, c, tok)
}

func readToken(t *testing.T, c net.Conn) []byte { t.Helper(); return readFrame(t, c) }

// TestSASLHandshakeV0: after SaslHandshake v0 the tokens come unframed,
// as kafka-python 2.0 sends them: PLAIN's success is an empty token,
// SCRAM's two answers are the server's messages; then the connection
// serves requests. A failure closes the connection unanswered.
func TestSASLHandshakeV0(t *testing.T) {
	a := newSASLAgent(t)
	t.Run("plain", func(t *testing.T) {
		c := dial(t, a.saslAddr)
		handshake(t, c, 0, MechanismPlain)
		writeToken(t, c, []byte("\x00"+saslUser+"\x00"+saslPassword))
		if tok := readToken(t, c); len(tok) != 0 {
			t.Fatalf("PLAIN success token %q, want empty", tok)
		}
		roundTrip(t, c, 3, metadataV1())
	})
	t.Run("scram", func(t *testing.T) {
		c := dial(t, a.saslAddr)
		handshake(t, c, 0, MechanismScramSHA256)
		conv := newScramClient(t, meta.ScramSHA256, saslUser, saslPassword)
		first, err := conv.Step("")
		if err != nil {
			t.Fatal(err)
		}
		writeToken(t, c, []byte(first))
		final, err := conv.Step(string(readToken(t, c)))
		if err != nil {
			t.Fatal(err)
		}
		writeToken(t, c, []byte(final))
		if _, err := conv.Step(string(readToken(t, c))); err != nil || !conv.Valid() {
			t.Fatalf("server final message does not verify: %v", err)
		}
		roundTrip(t, c, 3, metadataV1())
	})
	t.Run("wrong password", func(t *testing.T) {
		c := dial(t, a.saslAddr)
		handshake(t, c, 0, MechanismPlain)
		writeToken(t, c, []byte("\x00"+saslUser+"\x00wrong"))
		expectClosed(t, c)
	})
}

// withSessionLifetime sets connections.max.reauth.ms and has the agent
// tell time by clk.
func withSessionLifetime(d time.Duration, clk *clock.Fake) agentOption {
	return func(c *agentConfig) {
		c.Server.SASL.SessionLifetime = d
		c.Server.Deps.Now = clk.Now
	}
}

// TestSASLReauthentication (KIP-368): SaslAuthenticate v1 reports the
// session lifetime; a re-authentication on the same connection extends
// the session; a request past the session's end closes the connection;
// a re-authentication may not change the user.
func TestSASLReauthentication(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	a := newSASLAgent(t, withSessionLifetime(time.Hour, clk))
	a.createUser(t, "bob", "bob-secret")

	c := dial(t, a.saslAddr)
	resp := authenticatePlain(t, c, saslUser, saslPassword)
	if resp.ErrorCode != 0 || resp.SessionLifetimeMillis != time.Hour.Milliseconds() {
		t.Fatalf("authenticate: error %d, session lifetime %dms, want %d", resp.ErrorCode, resp.SessionLifetimeMillis, time.Hour.Milliseconds())
	}
	clk.Advance(50 * time.Minute)
	roundTrip(t, c, 3, metadataV1())
	if resp := authenticatePlain(t, c, saslUser, saslPassword); resp.ErrorCode != 0 {
		t.Fatalf("re-authenticate: error %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	clk.Advance(50 * time.Minute) // 100 minutes after the first, 50 after the second
	roundTrip(t, c, 4, metadataV1())
	clk.Advance(11 * time.Minute)
	write(t, c, frameFor(5, metadataV1()))
	expectClosed(t, c)
	for {
		if r := a.principals.waitClose(t).reason; errors.Is(r, ErrSessionExpired) {
			break
		}
	}

	c = dial(t, a.saslAddr)
	if resp := authenticatePlain(t, c, saslUser, saslPassword); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: error %d", resp.ErrorCode)
	}
	if resp := authenticatePlain(t, c, "bob", "bob-secret"); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authenticating as another user: error %d, want SASL_AUTHENTICATION_FAILED", resp.ErrorCode)
	}
	expectClosed(t, c)
}

// TestSASLReauthenticationKgo: kgo re-authenticates in place. With a
// session lifetime of 1s kgo's pessimism (at least 1s) has it
// re-authenticate before every request after the first; the agent's
// clock stands still, so no session ends, and every produce must go
// through on a connection that authenticated more than once.
func TestSASLReauthenticationKgo(t *testing.T) {
	a := newSASLAgent(t, withSessionLifetime(time.Second, clock.NewFake(time.Unix(1_700_000_000, 0))))
	a.createTopic(t, "reauth", 1, nil)
	cl := a.client(t, mechanisms(saslUser, saslPassword)[MechanismScramSHA512])
	for n := range 4 {
		if err := cl.ProduceSync(a.ctx(t), &kgo.Record{Topic: "reauth", Value: []byte(strconv.Itoa(n))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", n, err)
		}
	}
	most := 0
	for _, n := range a.principals.handshakesPerConn() {
		most = max(most, n)
	}
	if most < 3 {
		t.Fatalf("at most %d SaslHandshakes on one connection over 4 produces: kgo did not re-authenticate in place", most)
	}
}

// newScramClient is xdg-go/scram's client side of an exchange.
func newScramClient(t testing.TB, m meta.ScramMechanism, user, password string) *xscram.ClientConversation {
	t.Helper()
	cl, err := hashOf(m).NewClientUnprepped(user, password, "")
	if err != nil {
		t.Fatal(err)
	}
	return cl.NewConversation()
}
