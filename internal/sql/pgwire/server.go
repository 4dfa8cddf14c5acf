// Package pgwire owns the server side of PostgreSQL's frontend/backend
// protocol, version 3.0, over github.com/jackc/pgx/v5/pgproto3's message
// codecs: the startup (SSLRequest answered with TLS on the agent's
// certificates, GSSENCRequest refused, CancelRequest, StartupMessage),
// authentication (SCRAM-SHA-256 against Strand's SCRAM users, or trust
// where the agent allows it: auth.go), the simple and extended query
// protocols with their error recovery, cancellation of a running
// statement, and the limits that keep a connection's memory bounded.
//
// It runs no SQL: each connection's statements go to a Session of the
// Engine it is given (engine.go), which parses, types and runs them.
//
// Limits: a message body over Config.MaxMessageBytes is refused with
// 08P01 and the connection closed (pgproto3 checks the length before
// reading the body); more than Config.MaxConnections sessions get 53300;
// a connection has Config.StartupTimeout to finish its startup and
// authentication; each connection keeps at most maxPrepared named
// statements and maxPortals portals.
package pgwire

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/clock"
)

// Defaults for the Config fields left zero.
const (
	DefaultMaxConnections  = 100 // PostgreSQL's max_connections
	DefaultMaxMessageBytes = 16 << 20
	DefaultStartupTimeout  = time.Minute // PostgreSQL's authentication_timeout
)

// refusalSlack is how many connections beyond MaxConnections are read
// far enough to be told 53300; past that a connection is closed at once,
// so a flood cannot hold a goroutine per socket.
const refusalSlack = 16

// Config configures a Server.
type Config struct {
	Engine Engine
	Auth   Auth
	// TLS, when set, answers SSLRequest with 'S' and a handshake; nil
	// answers 'N' (the client may go on in plain text or give up).
	TLS *tls.Config
	// MaxConnections bounds the open sessions; MaxMessageBytes the body
	// of one message; StartupTimeout the time from accept to the end of
	// authentication. Zero: the defaults above.
	MaxConnections  int
	MaxMessageBytes int
	StartupTimeout  time.Duration
	Logger          *slog.Logger
	// Clock sets the startup deadline; nil is the wall clock.
	Clock clock.Clock
}

// Server serves the protocol on listeners. Safe for concurrent use.
type Server struct {
	cfg Config

	mu struct {
		sync.Mutex
		// conns are the connections past accept; sessions counts those
		// that reached a session (the ones MaxConnections bounds).
		conns    map[*conn]struct{}
		sessions int
		// byPID finds a connection for a CancelRequest.
		byPID   map[uint32]*conn
		nextPID uint32
		lns     []net.Listener
		closed  bool
	}
	wg sync.WaitGroup
}

// NewServer returns a server; call Serve with a listener.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Engine == nil || cfg.Auth == nil {
		return nil, errors.New("pgwire: a server needs an Engine and an Auth")
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.StartupTimeout <= 0 {
		cfg.StartupTimeout = DefaultStartupTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	s := &Server{cfg: cfg}
	s.mu.conns = make(map[*conn]struct{})
	s.mu.byPID = make(map[uint32]*conn)
	return s, nil
}

// Serve accepts connections on ln until it is closed or the server is.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		ln.Close()
		return net.ErrClosed
	}
	s.mu.lns = append(s.mu.lns, ln)
	s.mu.Unlock()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.mu.closed
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		c, ok := s.track(nc)
		if !ok {
			nc.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(c)
			c.serve()
		}()
	}
}

// Close stops accepting, tells every session the server is going away
// (57P01) and closes the connections, then waits for them.
func (s *Server) Close() error {
	s.mu.Lock()
	s.mu.closed = true
	lns := s.mu.lns
	conns := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	for _, c := range conns {
		c.shutdown()
	}
	s.wg.Wait()
	return nil
}

// track registers an accepted connection, false if the server is
// closed or already holds as many as it will read.
func (s *Server) track(nc net.Conn) (*conn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed || len(s.mu.conns) >= s.cfg.MaxConnections+refusalSlack {
		return nil, false
	}
	s.mu.nextPID++
	if s.mu.nextPID == 0 {
		s.mu.nextPID = 1
	}
	c := newConn(s, nc, s.mu.nextPID)
	s.mu.conns[c] = struct{}{}
	s.mu.byPID[c.pid] = c
	return c, true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.conns, c)
	delete(s.mu.byPID, c.pid)
	if c.counted {
		s.mu.sessions--
	}
}

// admit counts c as a session, false if MaxConnections are open.
func (s *Server) admit(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.sessions >= s.cfg.MaxConnections {
		return false
	}
	s.mu.sessions++
	c.counted = true
	return true
}

// cancel cancels the running statement of the connection pid whose
// secret is key; a wrong key is ignored, as PostgreSQL does, so a
// stranger learns nothing.
func (s *Server) cancel(pid uint32, key []byte) {
	s.mu.Lock()
	c := s.mu.byPID[pid]
	s.mu.Unlock()
	if c == nil || subtle.ConstantTimeCompare(c.secret[:], key) != 1 {
		return
	}
	c.cancelRunning()
}

// newSecret is a connection's cancel key.
func newSecret() [4]byte {
	var b [4]byte
	rand.Read(b[:])
	return b
}

// statementContext is a context for one statement that a CancelRequest
// can cancel.
func statementContext(parent context.Context) (context.Context, context.CancelCauseFunc) {
	return context.WithCancelCause(parent)
}
