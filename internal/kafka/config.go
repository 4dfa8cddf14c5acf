package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
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
	// DefaultMaxConns bounds open client connections.
	DefaultMaxConns = 10000
	// DefaultMaxHeldResponseBytes bounds the memory of Fetch and Metadata
	// responses built and not yet written (respbudget.go): room for two
	// fetches of Kafka's default fetch.max.bytes (50 MiB of records,
	// counted twice with the writer's copy) at once.
	DefaultMaxHeldResponseBytes = 200 << 20
)

// Config configures a Server. The zero value is usable: every zero field
// takes its default.
type Config struct {
	// Listen is the address ListenAndServe binds.
	Listen string
	// MaxRequestBytes is the largest request frame accepted (not counting
	// the 4-byte size). A larger frame closes the connection.
	MaxRequestBytes int32
	// MaxQueuedRequestBytes bounds the request bytes held in memory, read
	// but not yet handled, across all connections. A reader that would
	// exceed it waits. Must be at least MaxRequestBytes.
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
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registry == nil {
		c.Registry = DefaultRegistry()
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
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
	}
	return nil
}

// maxInFlightPerConnLimit keeps a misconfiguration from turning the
// per-connection bound into no bound.
const maxInFlightPerConnLimit = 1024

// minHeldResponseBytes keeps the response budget above a few batches, so
// fetches that wait for it still make progress at a useful pace.
const minHeldResponseBytes = 4 << 20
