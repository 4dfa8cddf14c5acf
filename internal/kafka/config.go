package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/strandkafka/strand/internal/quota"
)

// Defaults for Config fields left zero. They follow the Java broker's
// defaults where one exists.
const (
	// DefaultListen is where `strand serve` listens with no flags.
	DefaultListen = "127.0.0.1:9092"
	// DefaultMaxRequestBytes is socket.request.max.bytes.
	DefaultMaxRequestBytes = 100 << 20
	// DefaultMaxQueuedRequestBytes bounds request bytes held across all
	// connections. Kafka's queued.max.request.bytes is unbounded by
	// default; a bound is cheap insurance against many large producers.
	DefaultMaxQueuedRequestBytes = 512 << 20
	// DefaultIdleTimeout is connections.max.idle.ms.
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultMaxInFlightPerConn is how many requests of one connection may
	// be read ahead of their responses. Clients rarely pipeline more than 5
	// (max.in.flight.requests.per.connection).
	DefaultMaxInFlightPerConn = 16
	// DefaultMaxConns bounds open client connections (max.connections,
	// which Kafka leaves unbounded).
	DefaultMaxConns = 10000
	// DefaultMaxHeldResponseBytes bounds the memory of Fetch and Metadata
	// responses built and not yet written (respbudget.go): room for four
	// fetches of Kafka's default fetch.max.bytes (50 MiB of records) at
	// once.
	DefaultMaxHeldResponseBytes = 200 << 20
	// DefaultMaxConnsPerIP is max.connections.per.ip. Kafka's default is
	// unbounded, but Kafka does not bound the total either: with
	// DefaultMaxConns and no per-address bound one client could hold every
	// connection. A tenth of them still leaves room for many clients
	// behind one NAT address.
	DefaultMaxConnsPerIP = 1000
	// DefaultFrameTimeout and DefaultMinFrameRate make a request frame's
	// deadline: 30 s (Kafka clients' default request.timeout.ms, so no
	// default-configured client still waits on a frame cut at its floor)
	// plus its size at 1 MiB/s (8 Mbit/s). A 100 MiB produce gets 130 s,
	// four times what a client with the default request.timeout.ms allows
	// itself; a client on a slower link that sends frames that large has
	// raised its own timeout and should get MinFrameRate lowered too.
	DefaultFrameTimeout = 30 * time.Second
	DefaultMinFrameRate = 1 << 20
	// DefaultTLSHandshakeTimeout bounds a TLS handshake: far more than
	// a handshake takes, little for a connection that sends nothing.
	DefaultTLSHandshakeTimeout = 10 * time.Second
)

// DefaultFetchSessionSlots is Kafka's
// max.incremental.fetch.session.cache.slots default.
const DefaultFetchSessionSlots = fetchSessionSlots

// NoFetchSessions as Config.FetchSessionSlots keeps no fetch session
// (Kafka's max.incremental.fetch.session.cache.slots=0).
const NoFetchSessions = -1

// NoConnsPerIP as Config.MaxConnsPerIP admits only the addresses
// MaxConnsPerIPOverrides names (Kafka's max.connections.per.ip=0).
const NoConnsPerIP = -1

// Config configures a Server. The zero value is usable: every zero field
// takes its default.
type Config struct {
	// Listen is the address ListenAndServe binds.
	Listen string
	// MaxRequestBytes is the largest request frame accepted (not counting
	// the 4-byte size). A larger frame closes the connection.
	MaxRequestBytes int32
	// MaxQueuedRequestBytes bounds the request bytes held in memory, read
	// but not yet handled, across all connections. A frame's share grows
	// as its bytes arrive; a reader that would exceed the bound waits.
	// Frames still arriving share at most MaxQueuedRequestBytes minus
	// MaxRequestBytes (the rest keeps room to finish any one of them), so
	// keep it at least twice MaxRequestBytes: below that, large frames
	// are reserved whole from their header. Must be at least
	// MaxRequestBytes.
	MaxQueuedRequestBytes int64
	// IdleTimeout closes a connection that has sent nothing and is owed
	// nothing for this long. It also bounds how long one response write
	// may stall. Negative disables it.
	IdleTimeout time.Duration
	// MaxInFlightPerConn is how many requests of one connection may be
	// read before the oldest one's response is written.
	MaxInFlightPerConn int
	// MaxConns bounds open connections; one more is closed at accept.
	MaxConns int
	// MaxHeldResponseBytes bounds the memory of Fetch and Metadata
	// responses from before they are built until they are written, across
	// all connections (respbudget.go): a fetch that finds it short waits
	// at most its MaxWaitMillis and returns less.
	MaxHeldResponseBytes int64
	// FetchSessionSlots bounds the fetch sessions (KIP-227) the agent
	// keeps (max.incremental.fetch.session.cache.slots,
	// fetch_session.go); NoFetchSessions keeps none.
	FetchSessionSlots int
	// MaxConnsPerIP bounds open connections from one client address
	// (max.connections.per.ip); one more is closed at accept. Connections
	// without an IP address (net.Pipe) are not counted.
	MaxConnsPerIP int
	// MaxConnsPerIPOverrides replaces MaxConnsPerIP for the addresses it
	// names (max.connections.per.ip.overrides); 0 refuses an address.
	// ParseConnsPerIPOverrides reads Kafka's "addr:n,addr:n" form.
	MaxConnsPerIPOverrides map[netip.Addr]int
	// FrameTimeout plus the frame's size at MinFrameRate bytes per second
	// is how long a request frame may take to arrive, counted from its
	// first byte, not reset by later ones. A connection that misses it is
	// closed (ErrFrameTimeout). Time spent waiting for
	// MaxQueuedRequestBytes is not counted against the client.
	FrameTimeout time.Duration
	MinFrameRate int64
	// TLSHandshakeTimeout bounds the TLS handshake of a connection on a
	// TLS listener; one that does not finish in time is closed
	// (ErrTLSHandshake).
	TLSHandshakeTimeout time.Duration
	// Logger receives connection and protocol-violation events. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Registry is the set of served API keys. Nil means DefaultRegistry().
	// The server takes a snapshot at New; later changes do not affect it.
	Registry *Registry
	// Deps is handed to every handler.
	Deps Deps
	// Observer is told about every finished request and closed
	// connection, for metrics. Nil means none.
	Observer Observer
	// Quota is how client quotas are measured (quota.window.num,
	// quota.window.size.seconds); zero fields are Kafka's defaults.
	Quota quota.Config
	// SASL configures authentication on SASL listeners (sasl.go).
	SASL SASLConfig
}

var errInvalidConfig = errors.New("kafka: invalid config")

func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxQueuedRequestBytes == 0 {
		c.MaxQueuedRequestBytes = max(DefaultMaxQueuedRequestBytes, int64(c.MaxRequestBytes))
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxInFlightPerConn == 0 {
		c.MaxInFlightPerConn = DefaultMaxInFlightPerConn
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxHeldResponseBytes == 0 {
		c.MaxHeldResponseBytes = DefaultMaxHeldResponseBytes
	}
	if c.FetchSessionSlots == 0 {
		c.FetchSessionSlots = DefaultFetchSessionSlots
	}
	if c.MaxConnsPerIP == 0 {
		c.MaxConnsPerIP = DefaultMaxConnsPerIP
	}
	if c.FrameTimeout == 0 {
		c.FrameTimeout = DefaultFrameTimeout
	}
	if c.MinFrameRate == 0 {
		c.MinFrameRate = DefaultMinFrameRate
	}
	if c.TLSHandshakeTimeout == 0 {
		c.TLSHandshakeTimeout = DefaultTLSHandshakeTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registry == nil {
		c.Registry = DefaultRegistry()
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	c.SASL = c.SASL.withDefaults()
	return c
}

// Validate reports a config that New would refuse, after defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.MaxRequestBytes < 0:
		return fmt.Errorf("%w: MaxRequestBytes %d < 0", errInvalidConfig, c.MaxRequestBytes)
	case c.MaxQueuedRequestBytes < int64(c.MaxRequestBytes):
		return fmt.Errorf("%w: MaxQueuedRequestBytes %d < MaxRequestBytes %d: a largest request could never be read",
			errInvalidConfig, c.MaxQueuedRequestBytes, c.MaxRequestBytes)
	case c.MaxInFlightPerConn < 1 || c.MaxInFlightPerConn > maxInFlightPerConnLimit:
		return fmt.Errorf("%w: MaxInFlightPerConn %d not in [1, %d]", errInvalidConfig, c.MaxInFlightPerConn, maxInFlightPerConnLimit)
	case c.MaxConns < 1:
		return fmt.Errorf("%w: MaxConns %d < 1", errInvalidConfig, c.MaxConns)
	case c.MaxHeldResponseBytes < minHeldResponseBytes:
		return fmt.Errorf("%w: MaxHeldResponseBytes %d < %d", errInvalidConfig, c.MaxHeldResponseBytes, minHeldResponseBytes)
	case c.FetchSessionSlots < 1 && c.FetchSessionSlots != NoFetchSessions:
		return fmt.Errorf("%w: FetchSessionSlots %d < 1", errInvalidConfig, c.FetchSessionSlots)
	case c.MaxConnsPerIP < 1 && c.MaxConnsPerIP != NoConnsPerIP:
		return fmt.Errorf("%w: MaxConnsPerIP %d < 1", errInvalidConfig, c.MaxConnsPerIP)
	case c.MaxConnsPerIP == NoConnsPerIP && len(c.MaxConnsPerIPOverrides) == 0:
		return fmt.Errorf("%w: MaxConnsPerIP is NoConnsPerIP but no override admits any address", errInvalidConfig)
	case c.FrameTimeout < 0:
		return fmt.Errorf("%w: FrameTimeout %v < 0", errInvalidConfig, c.FrameTimeout)
	case c.MinFrameRate < 0:
		return fmt.Errorf("%w: MinFrameRate %d < 0", errInvalidConfig, c.MinFrameRate)
	case c.TLSHandshakeTimeout < 0:
		return fmt.Errorf("%w: TLSHandshakeTimeout %v < 0", errInvalidConfig, c.TLSHandshakeTimeout)
	}
	if err := c.SASL.validate(); err != nil {
		return err
	}
	for a, n := range c.MaxConnsPerIPOverrides {
		if n < 0 || !a.IsValid() {
			return fmt.Errorf("%w: MaxConnsPerIPOverrides %v: %d", errInvalidConfig, a, n)
		}
	}
	return nil
}

// ParseConnsPerIPOverrides parses max.connections.per.ip.overrides:
// comma-separated addr:n pairs, e.g. "10.0.0.1:200,::1:50" (the count
// follows the last colon, so IPv6 addresses need no brackets). Kafka also
// takes host names, resolved once at startup; these are IP addresses
// only, so the limit cannot silently follow a DNS change.
func ParseConnsPerIPOverrides(s string) (map[netip.Addr]int, error) {
	out := make(map[netip.Addr]int)
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		i := strings.LastIndexByte(pair, ':')
		if i < 0 {
			return nil, fmt.Errorf("%q: want addr:n", pair)
		}
		a, err := netip.ParseAddr(strings.Trim(pair[:i], "[]"))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", pair, err)
		}
		n, err := strconv.Atoi(pair[i+1:])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: the count must be a number >= 0", pair)
		}
		out[a.Unmap()] = n
	}
	return out, nil
}

// maxInFlightPerConnLimit keeps a misconfiguration from turning the
// per-connection bound into no bound.
const maxInFlightPerConnLimit = 1024

// minHeldResponseBytes keeps the response budget above a few batches, so
// fetches that wait for it still make progress at a useful pace.
const minHeldResponseBytes = 4 << 20
