package kafka

// SASL authentication on listeners whose protocol is SASL_PLAINTEXT or
// SASL_SSL, as Kafka's SaslServerAuthenticator does it:
//
//   - Before a connection authenticates only ApiVersions, SaslHandshake
//     and SaslAuthenticate are answered; any other request closes it
//     unanswered, as Kafka's IllegalSaslStateException does.
//   - SaslHandshake v1 picks the mechanism and SaslAuthenticate carries
//     the exchange's tokens. After SaslHandshake v0 (kafka-python 2.0)
//     the tokens come unframed: a 4-byte size and the token, both ways,
//     with no request header; PLAIN's success is an empty token.
//   - A failed exchange is answered SASL_AUTHENTICATION_FAILED (an
//     unframed one is not answered) and the connection closed, after a
//     delay that doubles with each failure from the same address
//     (connection.failed.authentication.delay.ms, bounded).
//   - KIP-368: with a session lifetime (connections.max.reauth.ms) a
//     request on a session past it closes the connection; a
//     SaslHandshake on an authenticated connection starts a
//     re-authentication with the same mechanism and principal.
//
// PLAIN checks the password against the SCRAM credentials in the
// replicated database (SCRAM-SHA-512's, else SCRAM-SHA-256's): it derives
// the stored key from the password with the credential's salt and
// iterations and compares. One user store serves every mechanism and
// every agent, where Kafka's PLAIN reads a static JAAS file per broker.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/meta"
)

// SASL mechanism names, as clients send them.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// DefaultSASLMechanisms is sasl.enabled.mechanisms when none are
// configured: every mechanism this build serves.
var DefaultSASLMechanisms = []string{MechanismPlain, MechanismScramSHA256, MechanismScramSHA512}

// Defaults and bounds of the failed-authentication delay.
const (
	// DefaultFailedAuthDelay is connection.failed.authentication.delay.ms.
	DefaultFailedAuthDelay = 100 * time.Millisecond
	// maxFailedAuthDelay bounds the delay however often an address fails.
	maxFailedAuthDelay = 5 * time.Second
	// failedAuthWindow is how long an address's failures are remembered.
	failedAuthWindow = time.Minute
	// maxFailedAuthAddrs bounds the addresses remembered.
	maxFailedAuthAddrs = 10000
	// saslMaxReceiveBytes is sasl.server.max.receive.size: the largest
	// frame a connection that has not authenticated may send.
	saslMaxReceiveBytes = 512 << 10
)

// SASLConfig configures authentication on SASL listeners.
type SASLConfig struct {
	// Mechanisms is sasl.enabled.mechanisms; nil means
	// DefaultSASLMechanisms.
	Mechanisms []string
	// SessionLifetime is connections.max.reauth.ms: a connection must
	// re-authenticate within it of authenticating, or it is closed at
	// its next request. Zero: sessions do not expire.
	SessionLifetime time.Duration
	// FailedAuthDelay is connection.failed.authentication.delay.ms: how
	// long a failed attempt waits before it is answered and the
	// connection closed; each further failure from the same address
	// within a minute doubles it, up to 5s. Zero means
	// DefaultFailedAuthDelay; negative, none.
	FailedAuthDelay time.Duration
}

func (c SASLConfig) withDefaults() SASLConfig {
	if c.Mechanisms == nil {
		c.Mechanisms = DefaultSASLMechanisms
	}
	if c.FailedAuthDelay == 0 {
		c.FailedAuthDelay = DefaultFailedAuthDelay
	}
	return c
}

func (c SASLConfig) validate() error {
	for _, m := range c.Mechanisms {
		if !slices.Contains(DefaultSASLMechanisms, m) {
			return fmt.Errorf("%w: SASL mechanism %q (want %s)", errInvalidConfig, m, strings.Join(DefaultSASLMechanisms, ", "))
		}
	}
	if c.SessionLifetime < 0 {
		return fmt.Errorf("%w: SASL session lifetime %v < 0", errInvalidConfig, c.SessionLifetime)
	}
	return nil
}

// Close reasons of SASL connections.
var (
	// ErrSASLState: a request the connection's SASL state does not
	// allow (anything but ApiVersions and the SASL APIs before it
	// authenticated), or an exchange out of order.
	ErrSASLState = errors.New("kafka: request not allowed in the connection's SASL state")
	// ErrAuthFailed: the client failed to authenticate.
	ErrAuthFailed = errors.New("kafka: SASL authentication failed")
	// ErrSessionExpired: a request on a session past its lifetime
	// (KIP-368) without re-authenticating.
	ErrSessionExpired = errors.New("kafka: SASL session expired")
)

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// saslState is a connection's progress through SASL, in Conn.mu.
type saslState struct {
	// mechanism is set by SaslHandshake; exchange is the exchange under
	// way, nil until its first token.
	mechanism string
	exchange  saslExchange
	// handshaken: SaslHandshake was answered and the exchange has not
	// ended. raw: it was v0, so the tokens come unframed.
	handshaken bool
	raw        bool
	// user is who the connection authenticated as, "" before;
	// expires is when its session ends, zero for never.
	user    string
	expires time.Time
}

// saslExchange is one mechanism's server side of an exchange.
type saslExchange interface {
	// step takes the client's next token and returns the server's.
	// done says the exchange is over and user authenticated; an error
	// is a failed attempt, its text for the client.
	step(in []byte) (out []byte, user string, done bool, err error)
}

// saslAdmit reports whether a request with key may run in the
// connection's SASL state; an error closes the connection unanswered.
// Called by the reader before the request's handler starts.
func (c *Conn) saslAdmit(key int16) error {
	if !c.listener.Protocol.SASL() {
		return nil
	}
	now := c.srv.cfg.Deps.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	st := &c.mu.sasl
	expired := st.user != "" && !st.expires.IsZero() && !now.Before(st.expires)
	switch {
	case key == saslHandshakeKey && !st.handshaken:
		return nil
	case key == saslAuthenticateKey && st.handshaken && !st.raw:
		return nil
	case st.handshaken:
		return fmt.Errorf("%w: key %d (%s) during a SASL exchange", ErrSASLState, key, kmsg.NameForKey(key))
	case expired:
		return fmt.Errorf("%w: key %d (%s) %v after the session ended", ErrSessionExpired, key, kmsg.NameForKey(key), now.Sub(st.expires))
	case key == apiVersionsKey, st.user != "":
		return nil
	}
	return fmt.Errorf("%w: key %d (%s) before authentication", ErrSASLState, key, kmsg.NameForKey(key))
}

// saslRaw reports whether the next frame is an unframed SASL token.
func (c *Conn) saslRaw() bool {
	if !c.listener.Protocol.SASL() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.sasl.handshaken && c.mu.sasl.raw
}

// maxFrameBytes is the largest frame the connection may send now: Kafka
// bounds what a client that has not authenticated can make it read.
func (c *Conn) maxFrameBytes() int32 {
	limit := c.srv.cfg.MaxRequestBytes
	if !c.listener.Protocol.SASL() {
		return limit
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.sasl.user == "" {
		return min(limit, saslMaxReceiveBytes)
	}
	return limit
}

// saslHandshake starts an exchange with mechanism; version 0 makes its
// tokens unframed. A non-nil error is the response's code and message.
func (c *Conn) saslHandshake(mechanism string, version int16) (*kerr.Error, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := &c.mu.sasl
	if st.user != "" {
		// KIP-368: a re-authentication keeps the mechanism, and needs
		// the framed tokens its lifetime travels in.
		if mechanism != st.mechanism {
			return kerr.UnsupportedSaslMechanism, fmt.Sprintf("re-authentication must use %s, not %s", st.mechanism, mechanism)
		}
		if version < 1 {
			return kerr.IllegalSaslState, "re-authentication needs SaslHandshake v1"
		}
	}
	st.mechanism, st.exchange = mechanism, nil
	st.handshaken, st.raw = true, version == 0
	return nil, ""
}

// saslStep runs one token of the exchange. On success it returns the
// server's token and, when the exchange is over, the session lifetime;
// the connection's principal is then the user.
func (c *Conn) saslStep(db MetaDB, in []byte) (out []byte, lifetime time.Duration, done bool, err error) {
	c.mu.Lock()
	st := &c.mu.sasl
	if !st.handshaken {
		c.mu.Unlock()
		return nil, 0, false, fmt.Errorf("%w: SaslAuthenticate before SaslHandshake", ErrSASLState)
	}
	if st.exchange == nil {
		st.exchange = newSASLExchange(st.mechanism, db)
	}
	ex, mech, prev := st.exchange, st.mechanism, st.user
	c.mu.Unlock()

	// Outside the lock: PLAIN derives a key, thousands of hashes.
	// Requests of one connection run their steps in order (InOrder), so
	// no two steps of one exchange overlap.
	out, user, done, err := ex.step(in)
	if err != nil {
		return nil, 0, false, fmt.Errorf("%w: %s: %v", ErrAuthFailed, mech, err)
	}
	if !done {
		return out, 0, false, nil
	}
	if prev != "" && user != prev {
		return nil, 0, false, fmt.Errorf("%w: cannot change principals during re-authentication", ErrAuthFailed)
	}
	lifetime = c.srv.cfg.SASL.SessionLifetime
	now := c.srv.cfg.Deps.now()
	c.mu.Lock()
	st.exchange, st.handshaken, st.raw = nil, false, false
	st.user = user
	st.expires = time.Time{}
	if lifetime > 0 {
		st.expires = now.Add(lifetime)
	}
	c.mu.principal = auth.User(user)
	c.mu.Unlock()
	return out, lifetime, true, nil
}

func newSASLExchange(mechanism string, db MetaDB) saslExchange {
	switch mechanism {
	case MechanismScramSHA256:
		return newScramExchange(meta.ScramSHA256, db)
	case MechanismScramSHA512:
		return newScramExchange(meta.ScramSHA512, db)
	}
	return &plainExchange{db: db}
}

// authThrottle slows down repeated failures: each failed attempt from an
// address within failedAuthWindow of its last one doubles the delay
// before it is answered, up to maxFailedAuthDelay.
type authThrottle struct {
	base time.Duration
	mu   struct {
		sync.Mutex
		byAddr map[netip.Addr]failedAuths
	}
}

type failedAuths struct {
	count int
	last  time.Time
}

func newAuthThrottle(base time.Duration) *authThrottle {
	t := &authThrottle{base: base}
	t.mu.byAddr = make(map[netip.Addr]failedAuths)
	return t
}

// failed records a failure from addr at now and returns how long to wait
// before answering it.
func (t *authThrottle) failed(addr netip.Addr, now time.Time) time.Duration {
	if t.base <= 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.mu.byAddr[addr]
	if !ok && len(t.mu.byAddr) >= maxFailedAuthAddrs {
		for a, g := range t.mu.byAddr {
			if now.Sub(g.last) > failedAuthWindow {
				delete(t.mu.byAddr, a)
			}
		}
		if len(t.mu.byAddr) >= maxFailedAuthAddrs {
			// Every remembered address failed within the window: a
			// flood from many addresses. Start over rather than grow.
			clear(t.mu.byAddr)
		}
	}
	if now.Sub(f.last) > failedAuthWindow {
		f.count = 0
	}
	f.count++
	f.last = now
	t.mu.byAddr[addr] = f
	d := t.base
	for i := 1; i < f.count && d < maxFailedAuthDelay; i++ {
		d *= 2
	}
	return min(d, maxFailedAuthDelay)
}

// succeeded forgets addr's failures.
func (t *authThrottle) succeeded(addr netip.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.mu.byAddr, addr)
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
