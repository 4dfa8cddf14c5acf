package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Handler serves one API key. It runs in its own goroutine, concurrently
// with the connection's other requests; responses are still written in
// request order. Use Request.InOrder for work that must happen in request
// order.
//
// It returns the response to write, whose version the server sets to the
// request's. A nil response with a nil error writes nothing (Produce with
// acks=0). A non-nil error closes the connection: return one only for a
// protocol violation; a Kafka error code belongs in the response.
//
// ctx is canceled when the connection closes or the server is closed
// without grace. Byte slices in req.Body alias the frame buffer, which is
// reused once the handler returns: copy what must outlive the call.
type Handler func(ctx context.Context, req *Request) (kmsg.Response, error)

// Header is a request header (v1, or v2 for flexible versions, whose tags
// are skipped).
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	// ClientID is nil when the client sent a null client id.
	ClientID *string
}

// Request is one decoded request handed to a Handler.
type Request struct {
	Header
	// Body is the decoded request, its version set to Header.Version.
	Body kmsg.Request
	// Conn is the connection it came on.
	Conn *Conn
	// Deps is the server's Config.Deps.
	Deps *Deps

	order orderGate
	// throttle is how long a quota the handler checked (Fetch's
	// consumer_byte_rate) throttles the client; waited is how long the
	// handler was parked (quotas.go). The handler's goroutine only.
	throttle time.Duration
	waited   time.Duration
	// rawSASL marks a SaslAuthenticate made from an unframed token
	// (after SaslHandshake v0): its answer is written unframed.
	rawSASL bool
	// closeAfter, set by closeAfterResponse, closes the connection
	// once the response is written.
	closeAfter error
}

// closeAfterResponse closes the connection, with reason, once this
// request's response is written: Kafka answers a failed authentication
// before it closes.
func (r *Request) closeAfterResponse(reason error) { r.closeAfter = reason }

// ErrInOrderTwice is returned by a second InOrder call for one request.
var ErrInOrderTwice = errors.New("kafka: InOrder called twice for one request")

// InOrder runs fn once every earlier request on this connection has run
// its InOrder section or returned without one. A handler that must hand
// work to a shared pipeline in request order (Produce batches of an
// idempotent producer, offset commits) calls InOrder for the hand-off and
// then waits for the outcome concurrently with later requests. Call it at
// most once per request, before the handler returns; it returns ctx.Err()
// without running fn if ctx ends first.
func (r *Request) InOrder(ctx context.Context, fn func()) error {
	g := &r.order
	if g.used.Swap(true) {
		return ErrInOrderTwice
	}
	start := time.Now()
	select {
	case <-g.prev:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.waitedSince(start)
	fn()
	g.release()
	return nil
}

// orderGate chains a connection's requests: each waits on its
// predecessor's mine channel. mine is closed after InOrder's fn ran, or
// once the handler has returned and prev is closed; so a closed mine means
// every request up to this one had its turn.
type orderGate struct {
	prev <-chan struct{}
	mine chan struct{}
	once sync.Once
	used atomic.Bool
}

func (g *orderGate) release() { g.once.Do(func() { close(g.mine) }) }

// Registry maps API keys to handlers and the versions they serve. Build one
// with NewRegistry or DefaultRegistry and Register; a Server snapshots it at
// New. A Registry is not safe for concurrent Register calls.
type Registry struct {
	byKey [kmsg.MaxKey + 1]regEntry
}

type regEntry struct {
	ok         bool
	minVersion int16
	maxVersion int16
	handler    Handler
}

// builtin holds the handlers registered by the NN_name.go files' init
// functions.
var builtin Registry

// regKey registers a built-in handler. It is called from init in the file
// of that API key and panics on a programming error.
func regKey(key, minVersion, maxVersion int16, h Handler) {
	if err := builtin.Register(key, minVersion, maxVersion, h); err != nil {
		panic(err)
	}
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return new(Registry) }

// DefaultRegistry returns a copy of the built-in handlers, which a caller
// (a test) may extend or override.
func DefaultRegistry() *Registry {
	r := builtin
	return &r
}

// ErrBadRegistration is returned by Register for a key or version range
// that cannot be served.
var ErrBadRegistration = errors.New("kafka: bad handler registration")

// Register serves key at versions [minVersion, maxVersion] with h,
// replacing any earlier handler for key. kmsg must know the key and every
// version in the range, since it decodes the requests.
func (r *Registry) Register(key, minVersion, maxVersion int16, h Handler) error {
	req := kmsg.RequestForKey(key)
	switch {
	case req == nil:
		return fmt.Errorf("%w: key %d unknown to kmsg", ErrBadRegistration, key)
	case h == nil:
		return fmt.Errorf("%w: key %d: nil handler", ErrBadRegistration, key)
	case minVersion < 0 || minVersion > maxVersion:
		return fmt.Errorf("%w: key %d: bad version range %d-%d", ErrBadRegistration, key, minVersion, maxVersion)
	case maxVersion > req.MaxVersion():
		return fmt.Errorf("%w: key %d: version %d above kmsg's %d", ErrBadRegistration, key, maxVersion, req.MaxVersion())
	}
	r.byKey[key] = regEntry{ok: true, minVersion: minVersion, maxVersion: maxVersion, handler: h}
	return nil
}

// Unregister stops serving key.
func (r *Registry) Unregister(key int16) {
	if key >= 0 && int(key) < len(r.byKey) {
		r.byKey[key] = regEntry{}
	}
}

// lookup returns key's entry; ok is false for an unserved key.
func (r *Registry) lookup(key int16) regEntry {
	if key < 0 || int(key) >= len(r.byKey) {
		return regEntry{}
	}
	return r.byKey[key]
}

func (e regEntry) serves(version int16) bool {
	return e.ok && version >= e.minVersion && version <= e.maxVersion
}

// APIVersions returns the served keys and version ranges sorted by key, as
// ApiVersions reports them.
func (r *Registry) APIVersions() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for key, e := range r.byKey {
		if !e.ok {
			continue
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey = int16(key)
		k.MinVersion = e.minVersion
		k.MaxVersion = e.maxVersion
		out = append(out, k)
	}
	return out
}
