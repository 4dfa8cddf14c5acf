package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/auth"
)

// Sentinel errors. A connection's close reason (Observer.ConnClosed,
// ServeConn's result) wraps one of them when it applies.
var (
	// ErrServerClosed: Shutdown or Close was called.
	ErrServerClosed = errors.New("kafka: server closed")
	// ErrFrameSize: a frame size <= 0 or above Config.MaxRequestBytes.
	ErrFrameSize = errors.New("kafka: request frame size out of range")
	// ErrMalformedRequest: a header or body that does not decode.
	ErrMalformedRequest = errors.New("kafka: malformed request")
	// ErrUnknownAPIKey: a key kmsg does not know or no handler serves.
	ErrUnknownAPIKey = errors.New("kafka: unknown or unserved API key")
	// ErrUnsupportedVersion: a version outside the served range.
	ErrUnsupportedVersion = errors.New("kafka: unsupported API version")
	// ErrIdleTimeout: nothing read or written for Config.IdleTimeout.
	ErrIdleTimeout = errors.New("kafka: connection idle timeout")
	// ErrTooManyConns: Config.MaxConns connections were already open.
	ErrTooManyConns = errors.New("kafka: too many connections")
	// ErrTooManyConnsPerIP: Config.MaxConnsPerIP (or its override)
	// connections from the client's address were already open.
	ErrTooManyConnsPerIP = errors.New("kafka: too many connections from one address")
	// ErrFrameTimeout: a request frame did not arrive within its deadline
	// (Config.FrameTimeout and MinFrameRate).
	ErrFrameTimeout = errors.New("kafka: request frame not received in time")
	// ErrHandlerPanic: a handler panicked; the panic was recovered.
	ErrHandlerPanic = errors.New("kafka: handler panic")
	// ErrTLSHandshake: a TLS listener's handshake failed (garbage, a
	// plaintext client, a refused client certificate) or did not finish
	// within Config.TLSHandshakeTimeout.
	ErrTLSHandshake = errors.New("kafka: TLS handshake failed")
)

// Server serves the Kafka protocol. Create it with New; it is safe for
// concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	obs     Observer
	reg     Registry // snapshot of cfg.Registry
	apiKeys []kmsg.ApiVersionsResponseApiKey
	// apiVersionsTooNew answers an ApiVersions request above the served
	// range; nil if ApiVersions is not served.
	apiVersionsTooNew *kmsg.ApiVersionsResponse
	budget            *byteBudget
	// authThrottle delays answers to failed SASL attempts (sasl.go).
	authThrottle *authThrottle
	// firstShareBytes is a frame's share of budget before its bytes
	// arrive.
	firstShareBytes int64
	// epoch is the base of connections' monotonic activity clocks.
	epoch time.Time

	// drain is closed by Shutdown and Close: readers stop taking requests.
	drain chan struct{}
	// wg counts Serve loops, connections and handler goroutines.
	wg         sync.WaitGroup
	nextConnID atomic.Uint64

	// refusals rate-limits the log line for connections refused at
	// accept.
	refusals logLimiter

	mu struct {
		sync.Mutex
		closed    bool
		listeners map[net.Listener]struct{}
		conns     map[*Conn]struct{}
		// perIP counts open connections by client address.
		perIP map[netip.Addr]int
		// byListener counts open connections by listener name.
		byListener map[string]int
	}
}

// New returns a server for cfg after applying defaults and validating it.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:             cfg,
		log:             cfg.Logger,
		obs:             cfg.Observer,
		reg:             *cfg.Registry,
		budget:          newByteBudget(cfg.MaxQueuedRequestBytes, int64(cfg.MaxRequestBytes)),
		firstShareBytes: firstShareBytes(cfg.MaxQueuedRequestBytes, cfg.MaxConns),
		epoch:           time.Now(),
		drain:           make(chan struct{}),
		authThrottle:    newAuthThrottle(cfg.SASL.FailedAuthDelay),
	}
	s.cfg.Deps.shared = newSharedState(cfg)
	s.apiKeys = s.reg.APIVersions()
	if e := s.reg.lookup(apiVersionsKey); e.ok {
		s.apiVersionsTooNew = apiVersionsUnsupported(e)
	}
	s.mu.listeners = make(map[net.Listener]struct{})
	s.mu.conns = make(map[*Conn]struct{})
	s.mu.perIP = make(map[netip.Addr]int)
	s.mu.byListener = make(map[string]int)
	return s, nil
}

// APIVersions returns the keys and versions this server serves, sorted by
// key. The caller must not modify the result.
func (s *Server) APIVersions() []kmsg.ApiVersionsResponseApiKey { return s.apiKeys }

// NumConns returns the number of open connections.
func (s *Server) NumConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.conns)
}

// ConnsByListener returns the number of open connections by listener
// name. A listener that has had connections stays in the map at 0; one
// that never had any is absent.
func (s *Server) ConnsByListener() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.mu.byListener)
}

// ListenAndServe listens on Config.Listen and serves until ctx ends or the
// server is shut down.
func (s *Server) ListenAndServe(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("kafka: listen: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Accept backoff after a temporary error (out of file descriptors), as
// net/http does.
const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// Serve accepts connections on ln until Shutdown or Close (it returns
// ErrServerClosed) or until ctx ends (it returns ctx.Err()). It closes ln.
// ctx is the parent of every handler's context: ending it closes ln and
// every connection it accepted at once; Shutdown is the graceful stop.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.ServeListener(ctx, ln, PlaintextListener)
}

// ServeListener is Serve for a listener that l describes: its
// connections carry l (Conn.Listener), which says whether they must
// authenticate.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener, l Listener) error {
	if err := l.check(); err != nil {
		ln.Close()
		return err
	}
	if !s.trackListener(ln) {
		ln.Close()
		return ErrServerClosed
	}
	defer s.wg.Done()
	defer s.untrackListener(ln)
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	s.log.Info("kafka: serving", "addr", ln.Addr().String(), "listener", l.Name, "protocol", l.Protocol.String())

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			switch {
			case s.closing():
				return ErrServerClosed
			case ctx.Err() != nil:
				return ctx.Err()
			case isTemporary(err):
				backoff = min(max(2*backoff, minAcceptBackoff), maxAcceptBackoff)
				s.log.Warn("kafka: accept failed; retrying", "err", err, "backoff", backoff)
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-ctx.Done():
				case <-s.drain:
				}
				t.Stop()
				continue
			default:
				return fmt.Errorf("kafka: accept: %w", err)
			}
		}
		backoff = 0
		setTCPOptions(nc)
		c, err := s.track(ctx, nc, l)
		if err != nil {
			continue
		}
		go s.serve(c)
	}
}

// ServeConn serves one already-accepted connection (a net.Pipe in tests and
// in-process simulations) and returns when it is closed, with the close
// reason: nil when the client closed it between requests.
func (s *Server) ServeConn(ctx context.Context, nc net.Conn) error {
	return s.ServeConnOn(ctx, nc, PlaintextListener)
}

// ServeConnOn is ServeConn for a connection accepted on a listener l
// describes.
func (s *Server) ServeConnOn(ctx context.Context, nc net.Conn, l Listener) error {
	return s.serveConn(ctx, nc, l, nil)
}

// ServeConnAs is ServeConnOn for a client inside this process that
// needs no authentication: every request on nc runs as principal p.
// Nothing on the network reaches it; the agent's web console serves its
// Kafka client through it (a net.Pipe), so the console works whatever
// security protocols the listeners demand. l must be a PLAINTEXT
// listener: a SASL one would ask p to authenticate.
func (s *Server) ServeConnAs(ctx context.Context, nc net.Conn, l Listener, p auth.Principal) error {
	if l.Protocol != auth.Plaintext {
		nc.Close()
		return fmt.Errorf("kafka: in-process connection on listener %s must be PLAINTEXT, not %v", l.Name, l.Protocol)
	}
	return s.serveConn(ctx, nc, l, &p)
}

// serveConn serves one connection, as principal p if not nil.
func (s *Server) serveConn(ctx context.Context, nc net.Conn, l Listener, p *auth.Principal) error {
	if err := l.check(); err != nil {
		nc.Close()
		return err
	}
	c, err := s.track(ctx, nc, l)
	if err != nil {
		return err
	}
	if p != nil {
		c.SetPrincipal(*p)
	}
	return s.serve(c)
}

// Shutdown stops the server gracefully: it closes the listeners, stops
// reading new requests, lets requests already read finish and their
// responses be written, then closes the connections. If ctx ends first, the
// rest are closed at once (handlers' contexts are canceled) and Shutdown
// returns ctx.Err() without waiting for handlers that ignore their context.
func (s *Server) Shutdown(ctx context.Context) error {
	conns := s.beginClose()
	for _, c := range conns {
		// Wake readers blocked waiting for a request; a reader checks
		// drain after every deadline it sets, so it cannot miss this.
		c.nc.SetReadDeadline(aLongTimeAgo)
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.closeConns()
		return ctx.Err()
	}
}

// Close closes the listeners and every connection at once, dropping
// responses not yet written. It does not wait.
func (s *Server) Close() error {
	s.beginClose()
	s.closeConns()
	return nil
}

var aLongTimeAgo = time.Unix(1, 0)

func (s *Server) beginClose() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.closed {
		s.mu.closed = true
		close(s.drain)
	}
	for ln := range s.mu.listeners {
		ln.Close()
	}
	conns := make([]*Conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	return conns
}

func (s *Server) closeConns() {
	s.mu.Lock()
	conns := make([]*Conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.closeWith(ErrServerClosed)
	}
}

func (s *Server) closing() bool {
	select {
	case <-s.drain:
		return true
	default:
		return false
	}
}

func (s *Server) trackListener(ln net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return false
	}
	s.mu.listeners[ln] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *Server) untrackListener(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.listeners, ln)
}

// track registers a new connection, or closes it if the server is closed
// or full, or its address has all the connections it may have. Like
// Kafka, the per-address limit is checked first.
func (s *Server) track(ctx context.Context, nc net.Conn, l Listener) (*Conn, error) {
	c := newConn(ctx, s, nc, l)
	// Held while the limits are read from the metadata, so Shutdown
	// waits for the read: an in-process connection made as the agent
	// stops (a client of its own reconnecting) must not read a replica
	// that closes after the server. Not closed yet under the lock means
	// Shutdown has not begun waiting.
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		c.closeWith(ErrServerClosed)
		s.obs.ConnClosed(c, ErrServerClosed)
		return nil, ErrServerClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	maxConns, perIP, overrides := s.connLimits() // dynamic (broker_limits.go)
	s.mu.Lock()
	var err error
	switch limit := connsPerIP(c.ip, perIP, overrides); {
	case s.mu.closed:
		err = ErrServerClosed
	case c.ip.IsValid() && s.mu.perIP[c.ip] >= limit:
		err = fmt.Errorf("%w: %v has %d", ErrTooManyConnsPerIP, c.ip, limit)
	case len(s.mu.conns) >= maxConns:
		err = fmt.Errorf("%w: limit %d", ErrTooManyConns, maxConns)
	default:
		s.mu.conns[c] = struct{}{}
		if c.ip.IsValid() {
			s.mu.perIP[c.ip]++
		}
		s.mu.byListener[l.Name]++
		s.wg.Add(1)
	}
	s.mu.Unlock()
	s.wg.Done() // the limits' read is over; a tracked conn holds its own
	if err != nil {
		c.closeWith(err)
		// A client retrying in a loop must not turn into a log line per
		// attempt.
		if ok, suppressed := s.refusals.allow(time.Now()); ok {
			s.log.Warn("kafka: connection refused", "remote", addrString(nc.RemoteAddr()), "err", err,
				"refusals_not_logged", suppressed)
		}
		s.obs.ConnClosed(c, err)
		return nil, err
	}
	if o, ok := s.obs.(ConnOpenObserver); ok {
		o.ConnOpened(c)
	}
	return c, nil
}

// connsPerIP is how many connections ip may have open where
// max.connections.per.ip is perIP with overrides.
func connsPerIP(ip netip.Addr, perIP int, overrides map[netip.Addr]int) int {
	if n, ok := overrides[ip]; ok {
		return n
	}
	return max(perIP, 0) // NoConnsPerIP: none
}

func (s *Server) untrack(c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.conns, c)
	if c.ip.IsValid() {
		if s.mu.perIP[c.ip]--; s.mu.perIP[c.ip] <= 0 {
			delete(s.mu.perIP, c.ip)
		}
	}
	s.mu.byListener[c.listener.Name]--
}

// remoteIP is a TCP connection's client address, or the zero Addr for
// others (net.Pipe), which per-address limits do not count.
func remoteIP(nc net.Conn) netip.Addr {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// logLimiter lets one log line through per refusalLogInterval and counts
// the ones it held back.
type logLimiter struct {
	mu         sync.Mutex
	next       time.Time
	suppressed int
}

const refusalLogInterval = time.Second

// allow reports whether to log now, and how many lines were held back
// since the last one logged.
func (l *logLimiter) allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Before(l.next) {
		l.suppressed++
		return false, 0
	}
	l.next = now.Add(refusalLogInterval)
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

func isTemporary(err error) bool {
	var ne interface{ Temporary() bool }
	return errors.As(err, &ne) && ne.Temporary()
}

func setTCPOptions(nc net.Conn) {
	if tc, ok := tcpConn(nc); ok {
		// Responses are written whole; Nagle would only add latency.
		tc.SetNoDelay(true)
		tc.SetKeepAlive(true)
	}
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
