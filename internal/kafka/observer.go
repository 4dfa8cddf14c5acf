package kafka

import (
	"time"

	"github.com/strandkafka/strand/internal/meta"
)

// Observer is told what the server did, for metrics (a Prometheus adapter
// lives with the agent). Calls come from connection goroutines, so an
// implementation must be safe for concurrent use and must not block.
type Observer interface {
	// RequestDone is called once per request that passed header checks,
	// after its response was written, or dropped because the connection
	// closed first (then Err is set).
	RequestDone(c *Conn, st RequestStats)
	// ConnClosed is called once per connection when it closes. reason is
	// nil when the client closed it between requests, and otherwise wraps
	// the cause: one of the package's sentinel errors (ErrFrameSize,
	// ErrIdleTimeout, ErrFrameTimeout, ErrServerClosed, ErrTooManyConns,
	// ...), a handler's error or an I/O error. A connection refused at
	// accept is reported here too, with ErrTooManyConns or
	// ErrTooManyConnsPerIP.
	ConnClosed(c *Conn, reason error)
}

// RequestStats describes one finished request.
type RequestStats struct {
	Key     int16
	Version int16
	// BytesIn is the request frame size, including its 4-byte length.
	BytesIn int
	// BytesOut is the response frame size, 0 if nothing was written.
	BytesOut int
	// Latency runs from the request frame being read to its response
	// being written (or dropped), so it includes waiting behind earlier
	// responses of the same connection.
	Latency time.Duration
	// Err is set if the handler failed or the connection closed before
	// the response was written.
	Err error
	// ErrorCode is the first non-zero Kafka error code in the response
	// (top level first), or 0.
	ErrorCode int16
	// Throttle is how long a client quota throttled the client after
	// this request (quotas.go), 0 if it did not.
	Throttle time.Duration
}

// WaitObserver is an Observer also told what each long-polling Fetch
// did while it waited, once its wait ends. The server finds it by type
// assertion.
type WaitObserver interface {
	FetchWaited(c *Conn, st WaitStats)
}

// WaitStats counts the work of one long-polling Fetch's wait: how often
// apply woke it and how many partitions it read again on those wake-ups.
// A wait should wake only for its own partitions and re-read only those
// that changed.
type WaitStats struct {
	Wakeups             int
	PartitionsRechecked int
}

// ConnOpenObserver is an Observer also told of each connection the
// server took (past its connection limits, before any TLS handshake),
// so connections opened can be counted beside those closed. The server
// finds it by type assertion.
type ConnOpenObserver interface {
	ConnOpened(c *Conn)
}

// TopicObserver is an Observer also told the record traffic of each
// topic, as Kafka's BrokerTopicMetrics count it: the record-batch bytes
// and records of the partitions a Produce wrote (acks=0 ones once
// handed to the pipeline, others once committed), and of the partitions
// a Fetch answer carries. Calls come once per topic of a request, from
// the handler's goroutine, so an implementation must be cheap: no lock
// shared by all connections. The server finds it by type assertion.
type TopicObserver interface {
	TopicProduced(id meta.TopicID, bytes, records int64)
	TopicFetched(id meta.TopicID, bytes, records int64)
}

type nopObserver struct{}

func (nopObserver) RequestDone(*Conn, RequestStats) {}
func (nopObserver) ConnClosed(*Conn, error)         {}
