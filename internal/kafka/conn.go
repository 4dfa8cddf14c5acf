package kafka

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/auth"
)

// Conn is one client connection. Handlers get it through Request.Conn for
// per-connection state.
type Conn struct {
	srv *Server
	nc  net.Conn
	id  uint64
	// ip is the client's address, zero for connections that have none.
	ip netip.Addr
	// listener is the listener the connection was accepted on.
	listener Listener

	// ctx is every handler's context on this connection. It is canceled,
	// with the close reason as cause, when the connection is closed.
	ctx    context.Context
	cancel context.CancelCauseFunc

	// slots holds one token per request read but not yet answered; its
	// capacity is Config.MaxInFlightPerConn.
	slots chan struct{}
	// inflight counts queued requests, for the idle check.
	inflight atomic.Int32
	// lastWriteNanos is when a response was last written, relative to
	// srv.epoch, for the idle check.
	lastWriteNanos atomic.Int64
	// mutedUntil, relative to srv.epoch, is when a client throttled by a
	// quota may send again: the reader takes no request before
	// (quotas.go).
	mutedUntil atomic.Int64

	closeOnce       sync.Once
	reason          error // set once, in closeWith
	stopParentWatch func() bool
	writerDone      chan struct{}

	// Reader goroutine only.
	sizeBuf      [4]byte
	lastClientID *string
	lastOrder    <-chan struct{}

	// Writer goroutine only. splices are record bytes written between
	// the bytes of wbuf (splice.go), spliceBytes their total; iov is
	// the scratch list of pieces a flush writes.
	wbuf        []byte
	splices     []splice
	spliceBytes int
	iov         net.Buffers
	batch       []written

	// commits lets an OffsetFetch wait for the commits sent before it.
	commits commitsInFlight

	mu struct {
		sync.Mutex
		softwareName    string
		softwareVersion string
		// principal is who the client is: auth.Anonymous until a client
		// certificate or a SASL exchange says otherwise.
		principal auth.Principal
		// sasl is the connection's SASL progress (sasl.go).
		sasl saslState
		// rack is the client.rack the client last sent, idZone the
		// zone its client.id names (zones.go).
		rack     string
		idZone   string
		clientID string
	}
}

// call is a request between being read and its response being written.
type call struct {
	hdr   Header
	start time.Time

	// frame and share are released when the handler returns; the share
	// keeps the frame's size.
	frame *[]byte
	share frameShare

	// done is closed once resp and err are set.
	done chan struct{}
	resp kmsg.Response
	err  error
	// throttle is how long a quota throttled the client after it.
	throttle time.Duration
	// rawSASL: resp is a SaslAuthenticate answer to write as an
	// unframed token. closeAfter closes the connection once resp is
	// written.
	rawSASL    bool
	closeAfter error
}

type written struct {
	p     *call
	bytes int
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Write batching: responses that are ready back to back go out in one
// write, up to maxCoalesceBytes. A write buffer grown past
// maxRetainedWriteBytes (a large fetch) is dropped after use so idle
// connections do not pin it.
const (
	maxCoalesceBytes      = 64 << 10
	maxRetainedWriteBytes = 1 << 20
)

// Internal reader outcomes that are not close reasons.
var (
	errClientClosed = errors.New("kafka: client closed the connection")
	errDrained      = errors.New("kafka: connection drained for shutdown")
	errConnClosed   = errors.New("kafka: connection closed")
)

func newConn(ctx context.Context, s *Server, nc net.Conn, l Listener) *Conn {
	if l.TLS != nil {
		// The handshake runs in serve, on the connection's goroutine.
		nc = tls.Server(nc, l.TLS)
	}
	c := &Conn{
		srv:        s,
		nc:         nc,
		id:         s.nextConnID.Add(1),
		ip:         remoteIP(nc),
		listener:   l,
		slots:      make(chan struct{}, s.cfg.MaxInFlightPerConn),
		writerDone: make(chan struct{}),
		lastOrder:  closedChan,
	}
	c.mu.principal = auth.Anonymous
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	// The parent ending (Serve's ctx) must also wake a reader blocked in
	// Read, which only closing the socket does.
	c.stopParentWatch = context.AfterFunc(ctx, func() {
		c.closeWith(fmt.Errorf("%w: %w", ErrServerClosed, context.Cause(ctx)))
	})
	return c
}

// ID is unique among the server's connections.
func (c *Conn) ID() uint64 { return c.id }

// RemoteAddr is the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// LocalAddr is the address the client connected to.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// ClientSoftware returns the name and version the client sent in
// ApiVersions v3+ (KIP-511), or empty strings.
func (c *Conn) ClientSoftware() (name, version string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.softwareName, c.mu.softwareVersion
}

func (c *Conn) setClientSoftware(name, version string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.softwareName, c.mu.softwareVersion = name, version
}

// Listener is the listener the connection was accepted on.
func (c *Conn) Listener() Listener { return c.listener }

// Principal is who the client is: auth.Anonymous until it authenticated.
func (c *Conn) Principal() auth.Principal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.principal
}

// SetPrincipal records who the client authenticated as (a client
// certificate's subject, a SASL exchange's user).
func (c *Conn) SetPrincipal(p auth.Principal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.principal = p
}

// closeWith closes the connection; the first call's reason sticks. A nil
// reason means the client closed it cleanly.
func (c *Conn) closeWith(reason error) {
	c.closeOnce.Do(func() {
		c.stopParentWatch()
		c.reason = reason
		cause := reason
		if cause == nil {
			cause = errConnClosed
		}
		c.cancel(cause)
		c.nc.Close()
	})
}

// serve runs the connection until it closes and returns the close reason.
func (s *Server) serve(c *Conn) error {
	defer s.wg.Done()
	if err := c.handshake(); err != nil {
		return s.finish(c, err)
	}

	// The queue never blocks the reader: a request is queued only while
	// holding a slot, and the writer frees the slot only after taking the
	// request off the queue.
	queue := make(chan *call, cap(c.slots))
	go c.writeLoop(queue)
	err := c.readLoop(queue)
	close(queue)
	switch {
	case errors.Is(err, errDrained):
		// Graceful: the writer answers what was read, then we close.
	case errors.Is(err, errClientClosed):
		c.closeWith(nil)
	default:
		c.closeWith(err)
	}
	<-c.writerDone
	return s.finish(c, ErrServerClosed)
}

// finish closes c (reason, unless it was closed already), stops tracking
// it, and reports and returns its close reason.
func (s *Server) finish(c *Conn, reason error) error {
	c.closeWith(reason)
	// Before the observer hears of it, so a client that saw the close
	// reported can connect again at once.
	s.untrack(c)
	// Kafka releases the records of a closed connection's share
	// sessions: a consumer killed with -9 gets them redelivered at once.
	if sh := s.cfg.Deps.Shares; sh != nil {
		sh.ConnClosed(c.ID())
	}

	reason = c.reason
	lvl := slog.LevelInfo
	switch {
	case reason == nil, errors.Is(reason, ErrServerClosed), errors.Is(reason, ErrIdleTimeout):
		lvl = slog.LevelDebug
	case errors.Is(reason, ErrFrameTimeout):
		// A slow or stalled client holding request memory.
		lvl = slog.LevelWarn
	case errors.Is(reason, ErrHandlerPanic):
		lvl = slog.LevelError
	}
	s.log.Log(c.ctx, lvl, "kafka: connection closed", "conn", c.id, "remote", addrString(c.nc.RemoteAddr()), "reason", reason)
	s.obs.ConnClosed(c, reason)
	return reason
}

func (c *Conn) readLoop(queue chan<- *call) error {
	for {
		select {
		case c.slots <- struct{}{}:
		case <-c.ctx.Done():
			return context.Cause(c.ctx)
		case <-c.srv.drain:
			return errDrained
		}
		if _, err := c.waitUnmuted(); err != nil {
			<-c.slots
			return err
		}
		p, err := c.readRequest()
		if err != nil {
			<-c.slots
			return err
		}
		c.inflight.Add(1)
		queue <- p
	}
}

// readRequest reads, checks and decodes one request, and starts its
// handler.
func (c *Conn) readRequest() (*call, error) {
	s := c.srv
	first, err := c.readSize()
	if err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(c.sizeBuf[:]))
	if limit := c.maxFrameBytes(); size <= 0 || size > limit {
		// Kafka: InvalidReceiveException, connection closed.
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameSize, size, limit)
	}
	// A request begun as its client became throttled waits out the mute
	// before its body is read, holding no memory, as Kafka reads nothing
	// from a muted channel. The wait is not the client's: the frame's
	// deadline starts after it.
	waited, err := c.waitUnmuted()
	if err != nil {
		return nil, err
	}
	if waited {
		first = time.Now()
	}
	p := new(call)
	p.share.sizeBytes = int64(size)
	if err := c.readBody(p, c.frameDeadline(first, size)); err != nil {
		p.releaseFrame(s)
		return nil, err
	}
	s.budget.received(&p.share)
	p.start = time.Now()
	if err := c.dispatch(p); err != nil {
		p.releaseFrame(s)
		return nil, err
	}
	return p, nil
}

func (p *call) releaseFrame(s *Server) {
	s.budget.release(&p.share)
	if p.frame != nil {
		putFrameBuf(p.frame)
		p.frame = nil
	}
}

// dispatch checks the header against the registry, decodes the body and
// starts the handler. On error nothing was started.
func (c *Conn) dispatch(p *call) error {
	s := c.srv
	frame := *p.frame
	if c.saslRaw() {
		return c.dispatchRawSASL(p)
	}
	h, req, body, err := parseHeader(frame, c.lastClientID)
	if h.ClientID != nil {
		if c.lastClientID == nil || *c.lastClientID != *h.ClientID {
			c.noteClientID(*h.ClientID)
		}
		c.lastClientID = h.ClientID
	}
	p.hdr = h
	e := s.reg.lookup(h.Key)
	if len(frame) >= fixedHeaderBytes && h.Key == apiVersionsKey && e.ok && !e.serves(h.Version) {
		// KIP-511: answered at v0 without parsing the rest, so a client
		// from the future learns which version to retry with.
		p.releaseFrame(s)
		p.resp = s.apiVersionsTooNew
		p.done = closedChan
		return nil
	}
	// Key and version first, so the reason names the real problem even
	// when the rest of the header (whose layout depends on the version)
	// does not parse either.
	switch {
	case len(frame) < fixedHeaderBytes, req == nil:
		return err
	case !e.ok:
		return fmt.Errorf("%w: key %d (%s) is not served", ErrUnknownAPIKey, h.Key, kmsg.NameForKey(h.Key))
	case !e.serves(h.Version):
		return fmt.Errorf("%w: key %d (%s) v%d, served v%d-v%d",
			ErrUnsupportedVersion, h.Key, kmsg.NameForKey(h.Key), h.Version, e.minVersion, e.maxVersion)
	case err != nil:
		return err
	}
	if err := c.saslAdmit(h.Key); err != nil {
		return err
	}
	if err := decodeBody(req, body); err != nil {
		return err
	}
	s.cfg.Deps.shared.noteRequest(h.Key, p.share.sizeBytes)
	c.start(p, e.handler, &Request{Header: h, Body: req, Conn: c, Deps: &s.cfg.Deps})
	return nil
}

// dispatchRawSASL starts a frame that is an unframed SASL token as a
// SaslAuthenticate v0 whose answer is written unframed.
func (c *Conn) dispatchRawSASL(p *call) error {
	s := c.srv
	e := s.reg.lookup(saslAuthenticateKey)
	if !e.ok {
		return fmt.Errorf("%w: an unframed SASL token, but SaslAuthenticate is not served", ErrSASLState)
	}
	p.hdr = Header{Key: saslAuthenticateKey}
	p.rawSASL = true
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = *p.frame
	c.start(p, e.handler, &Request{Header: p.hdr, Body: req, Conn: c, Deps: &s.cfg.Deps, rawSASL: true})
	return nil
}

// start runs r's handler h in its turn of the connection's order.
func (c *Conn) start(p *call, h Handler, r *Request) {
	s := c.srv
	r.order.prev = c.lastOrder
	r.order.mine = make(chan struct{})
	c.lastOrder = r.order.mine
	p.done = make(chan struct{})
	s.wg.Add(1)
	go c.handle(h, r, p)
}

func (c *Conn) handle(h Handler, r *Request, p *call) {
	defer c.srv.wg.Done()
	resp, err := c.call(h, r)
	if err == nil {
		var hold time.Duration
		p.throttle, hold = c.enforceQuotas(r, p, resp, time.Since(p.start))
		if hold > 0 {
			c.delayResponse(hold)
		}
	}
	p.releaseFrame(c.srv)
	p.resp, p.err = resp, err
	p.closeAfter = r.closeAfter
	close(p.done)
	// A request that did not run InOrder passes its turn on, but only
	// once every earlier request has had its turn.
	<-r.order.prev
	r.order.release()
}

// call runs h, turning a panic into an error so one bad request closes one
// connection rather than the agent.
func (c *Conn) call(h Handler, r *Request) (resp kmsg.Response, err error) {
	defer func() {
		if v := recover(); v != nil {
			c.srv.log.Error("kafka: handler panic", "key", r.Key, "version", r.Version, "conn", c.id,
				"panic", v, "stack", string(debug.Stack()))
			resp, err = nil, fmt.Errorf("%w: key %d v%d: %v", ErrHandlerPanic, r.Key, r.Version, v)
		}
	}()
	resp, err = h(c.ctx, r)
	switch {
	case err != nil:
		return nil, fmt.Errorf("key %d (%s) v%d: %w", r.Key, kmsg.NameForKey(r.Key), r.Version, err)
	case resp == nil:
		return nil, nil
	case resp.Key() != r.Key:
		return nil, fmt.Errorf("kafka: handler for key %d returned a key %d response", r.Key, resp.Key())
	}
	resp.SetVersion(r.Version)
	return resp, nil
}

// readSize reads the next frame's size and returns when its first byte
// was read, where the frame's deadline starts. It closes the connection
// only when it has been idle (nothing read or written, no response owed)
// for IdleTimeout.
func (c *Conn) readSize() (first time.Time, err error) {
	idle := c.srv.cfg.IdleTimeout
	deadline := c.deadlineFrom(time.Now())
	got := 0
	for {
		c.nc.SetReadDeadline(deadline)
		// After setting the deadline, so a concurrent Shutdown's
		// deadline in the past is never overwritten unseen.
		if got == 0 && c.srv.closing() {
			return first, errDrained
		}
		n, err := c.nc.Read(c.sizeBuf[got:])
		if got == 0 && n > 0 {
			first = time.Now()
			// Until the size is whole the frame has its deadline's floor.
			deadline = c.frameDeadline(first, 0)
		}
		got += n
		if got == len(c.sizeBuf) {
			return first, nil
		}
		switch {
		case err == nil:
		case isTimeout(err) && got == 0 && c.srv.closing():
			return first, errDrained
		case isTimeout(err) && got == 0 && c.inflight.Load() > 0:
			// The client is waiting for us, not idle.
			deadline = c.deadlineFrom(time.Now())
		case isTimeout(err) && got == 0 && idle > 0 && time.Now().Before(c.lastWrite().Add(idle)):
			deadline = c.lastWrite().Add(idle)
		case isTimeout(err) && got == 0:
			return first, fmt.Errorf("%w: nothing read or written for %v", ErrIdleTimeout, idle)
		case isTimeout(err) && time.Now().Before(deadline):
			// Shutdown's wake-up: a frame already begun is finished.
		case isTimeout(err):
			return first, fmt.Errorf("%w: %d of 4 size bytes in %v", ErrFrameTimeout, got, c.srv.cfg.FrameTimeout)
		case errors.Is(err, io.EOF) && got == 0:
			return first, errClientClosed
		case errors.Is(err, io.EOF):
			return first, fmt.Errorf("reading frame size: %w", io.ErrUnexpectedEOF)
		default:
			return first, fmt.Errorf("reading frame size: %w", err)
		}
	}
}

// frameDeadline is when a frame of size bytes whose first byte was read
// at first must have arrived: FrameTimeout for the round trip and stalls
// a healthy client has, plus the transfer at MinFrameRate. It is fixed at
// the header, so a client sending a byte now and then cannot hold a
// frame's memory and its connection open indefinitely.
func (c *Conn) frameDeadline(first time.Time, size int32) time.Time {
	cfg := &c.srv.cfg
	return first.Add(cfg.FrameTimeout + time.Duration(int64(size)*int64(time.Second)/cfg.MinFrameRate))
}

// readBody reads p's frame body by its deadline. The frame's buffer and
// its share of the request budget grow as its bytes arrive (see
// byteBudget); time spent waiting for the budget moves the deadline back,
// since the client was not the one holding things up. A request already
// being received is finished even during Shutdown.
func (c *Conn) readBody(p *call, deadline time.Time) error {
	size := int(p.share.sizeBytes)
	var buf []byte
	got := 0
	setDeadline := true
	for got < size {
		if got == len(buf) {
			waited, err := c.growFrame(p, got)
			if err != nil {
				return err
			}
			buf = *p.frame
			if waited > 0 {
				deadline = deadline.Add(waited)
				setDeadline = true
			}
		}
		if setDeadline {
			c.nc.SetReadDeadline(deadline)
			setDeadline = false
		}
		n, err := c.nc.Read(buf[got:])
		got += n
		switch {
		case err == nil:
		case isTimeout(err) && time.Now().Before(deadline):
			// Shutdown's wake-up: keep reading.
			setDeadline = true
		case isTimeout(err):
			return fmt.Errorf("%w: %d of %d request bytes by the frame's deadline", ErrFrameTimeout, got, size)
		case errors.Is(err, io.EOF):
			return fmt.Errorf("%w: %d of %d request bytes", io.ErrUnexpectedEOF, got, size)
		default:
			return fmt.Errorf("reading request: %w", err)
		}
	}
	return nil
}

// growFrame grows p's share of the budget (to the next rung, see
// nextShare) and its buffer, which holds the got bytes received so far.
func (c *Conn) growFrame(p *call, got int) (time.Duration, error) {
	s := c.srv
	sh := &p.share
	want := nextShare(sh.sizeBytes, sh.heldBytes, s.firstShareBytes) - sh.heldBytes
	waited, err := s.budget.grow(sh, want, c.ctx.Done(), s.drain)
	if err != nil {
		if c.ctx.Err() != nil {
			return 0, context.Cause(c.ctx)
		}
		return 0, errDrained
	}
	n := int(sh.heldBytes)
	switch old := p.frame; {
	case old == nil:
		p.frame = getFrameBuf(n)
	case cap(*old) >= n:
		*old = (*old)[:n]
	default:
		p.frame = getFrameBuf(n)
		copy(*p.frame, (*old)[:got])
		putFrameBuf(old)
	}
	return waited, nil
}

func (c *Conn) deadlineFrom(t time.Time) time.Time {
	if c.srv.cfg.IdleTimeout < 0 {
		return time.Time{}
	}
	return t.Add(c.srv.cfg.IdleTimeout)
}

func (c *Conn) lastWrite() time.Time {
	return c.srv.epoch.Add(time.Duration(c.lastWriteNanos.Load()))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// writeLoop writes responses in request order until the queue is closed
// and drained.
func (c *Conn) writeLoop(queue <-chan *call) {
	defer close(c.writerDone)
	var next *call
	for {
		p := next
		next = nil
		if p == nil {
			var ok bool
			if p, ok = <-queue; !ok {
				c.flush()
				return
			}
		}
		select {
		case <-p.done:
		case <-c.ctx.Done():
		}
		switch {
		case c.ctx.Err() != nil:
			c.finish(p, 0, context.Cause(c.ctx))
			continue
		case p.err != nil:
			c.closeWith(p.err)
			c.finish(p, 0, p.err)
			continue
		case p.resp == nil:
			c.finish(p, 0, nil)
		default:
			n, err := c.appendResponse(p)
			if err != nil {
				c.closeWith(err)
				c.finish(p, 0, err)
				continue
			}
			c.batch = append(c.batch, written{p: p, bytes: n})
			if p.closeAfter != nil {
				c.flush()
				c.closeWith(p.closeAfter)
				continue
			}
		}
		if len(c.wbuf)+c.spliceBytes < maxCoalesceBytes {
			select {
			case n, ok := <-queue:
				if !ok {
					c.flush()
					return
				}
				next = n
				if isClosed(n.done) {
					continue
				}
			default:
			}
		}
		c.flush()
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// appendResponse encodes p's response into the write buffer and returns
// its size. A handler can build a response kmsg cannot encode (a nil
// pointer where a struct is needed); that closes the connection, not the
// agent.
func (c *Conn) appendResponse(p *call) (n int, err error) {
	start, spliced, splicedBytes := len(c.wbuf), len(c.splices), c.spliceBytes
	defer func() {
		if v := recover(); v != nil {
			c.wbuf = c.wbuf[:start]
			clear(c.splices[spliced:])
			c.splices, c.spliceBytes = c.splices[:spliced], splicedBytes
			err = fmt.Errorf("%w: encoding key %d v%d response: %v", ErrHandlerPanic, p.hdr.Key, p.hdr.Version, v)
		}
	}()
	if a, ok := p.resp.(*kmsg.SASLAuthenticateResponse); ok && p.rawSASL {
		c.wbuf = kbin.AppendInt32(c.wbuf, int32(len(a.SASLAuthBytes)))
		c.wbuf = append(c.wbuf, a.SASLAuthBytes...)
	} else if f, ok := unwrapResponse(p.resp).(*kmsg.FetchResponse); ok {
		c.wbuf, c.splices = appendSpliced(c.wbuf, p.hdr.CorrelationID, f, c.splices)
		for _, s := range c.splices[spliced:] {
			c.spliceBytes += len(s.data)
		}
	} else {
		c.wbuf = appendResponse(c.wbuf, p.hdr.CorrelationID, p.resp)
	}
	return len(c.wbuf) - start + c.spliceBytes - splicedBytes, nil
}

// write writes the buffered responses: the write buffer, with the
// spliced records between its pieces.
func (c *Conn) write() error {
	if len(c.splices) == 0 {
		_, err := c.nc.Write(c.wbuf)
		return err
	}
	prev := 0
	for _, s := range c.splices {
		c.iov = append(c.iov, c.wbuf[prev:s.at], s.data)
		prev = s.at
	}
	c.iov = append(c.iov, c.wbuf[prev:])
	// WriteTo consumes its copy of the list; the scratch keeps its
	// array, cleared so it does not keep the records alive.
	iov := c.iov
	_, err := iov.WriteTo(c.nc)
	clear(c.iov)
	c.iov = c.iov[:0]
	return err
}

func (c *Conn) flush() {
	if len(c.batch) == 0 {
		return
	}
	var err error
	if c.ctx.Err() != nil {
		err = context.Cause(c.ctx)
	} else {
		c.nc.SetWriteDeadline(c.deadlineFrom(time.Now()))
		if err = c.write(); err != nil {
			if isTimeout(err) {
				err = fmt.Errorf("%w: response write stalled: %v", ErrIdleTimeout, err)
			} else {
				err = fmt.Errorf("writing responses: %w", err)
			}
			c.closeWith(err)
		} else {
			c.lastWriteNanos.Store(int64(time.Since(c.srv.epoch)))
		}
	}
	for i, w := range c.batch {
		if err != nil {
			c.finish(w.p, 0, err)
		} else {
			c.finish(w.p, w.bytes, nil)
		}
		c.batch[i] = written{}
	}
	c.batch = c.batch[:0]
	clear(c.splices)
	c.splices, c.spliceBytes = c.splices[:0], 0
	c.wbuf = c.wbuf[:0]
	if cap(c.wbuf) > maxRetainedWriteBytes {
		c.wbuf = nil
	}
}

// finish accounts for a request that was answered or dropped and frees its
// slot.
func (c *Conn) finish(p *call, bytesOut int, err error) {
	// A request dropped as its connection closed may still be in its
	// handler, which sets the throttle: read it only once it is through.
	var throttle time.Duration
	select {
	case <-p.done:
		throttle = p.throttle
	default:
	}
	c.srv.obs.RequestDone(c, RequestStats{
		Key:      p.hdr.Key,
		Version:  p.hdr.Version,
		BytesIn:  4 + int(p.share.sizeBytes),
		BytesOut: bytesOut,
		Latency:  time.Since(p.start),
		Throttle: throttle,
		Err:      err,
		ErrorCode: func() int16 {
			if err != nil || p.resp == nil {
				return 0
			}
			return firstErrorCode(p.resp)
		}(),
	})
	releaseHeld(p)
	c.inflight.Add(-1)
	<-c.slots
}
