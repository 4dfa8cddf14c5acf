package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// guard bounds every wait in these tests; it only trips on a deadlock.
const guard = 10 * time.Second

var discardLogger = slog.New(slog.DiscardHandler)

// testObserver records what the server reports.
type testObserver struct {
	closes chan connClose
	// finished is signalled after each RequestDone.
	finished chan struct{}

	mu struct {
		sync.Mutex
		done []RequestStats
		// conns is every connection a request finished on, in order.
		conns []*Conn
		// waits is every long poll's WaitStats, in order.
		waits []WaitStats
	}
}

type connClose struct {
	c      *Conn
	reason error
}

func newTestObserver() *testObserver {
	return &testObserver{closes: make(chan connClose, 256), finished: make(chan struct{}, 1)}
}

func (o *testObserver) RequestDone(c *Conn, st RequestStats) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.mu.done = append(o.mu.done, st)
	o.mu.conns = append(o.mu.conns, c)
	select {
	case o.finished <- struct{}{}:
	default:
	}
}

func (o *testObserver) FetchWaited(_ *Conn, st WaitStats) {
	o.mu.Lock()
	o.mu.waits = append(o.mu.waits, st)
	o.mu.Unlock()
	select {
	case o.finished <- struct{}{}:
	default:
	}
}

// waitFetchWaited returns the WaitStats of the first long poll that
// ended, waiting for it.
func (o *testObserver) waitFetchWaited(t *testing.T) WaitStats {
	t.Helper()
	timeout := time.After(guard)
	for {
		o.mu.Lock()
		waits := o.mu.waits
		o.mu.Unlock()
		if len(waits) > 0 {
			return waits[0]
		}
		select {
		case <-o.finished:
		case <-timeout:
			t.Fatal("no long poll ended")
			return WaitStats{}
		}
	}
}

func (o *testObserver) ConnClosed(c *Conn, reason error) {
	select {
	case o.closes <- connClose{c, reason}:
	default:
		panic("testObserver: too many unread close events")
	}
}

func (o *testObserver) requests() []RequestStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]RequestStats(nil), o.mu.done...)
}

// waitClose returns the next connection close the server reports.
func (o *testObserver) waitClose(t *testing.T) connClose {
	t.Helper()
	select {
	case cc := <-o.closes:
		return cc
	case <-time.After(guard):
		t.Fatal("no connection close reported")
		return connClose{}
	}
}

// testServer is a server on 127.0.0.1:0, shut down at cleanup.
type testServer struct {
	*Server
	addr   string
	obs    *testObserver
	served chan error // Serve's result
}

func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	obs := newTestObserver()
	if cfg.Logger == nil {
		cfg.Logger = discardLogger
	}
	if cfg.Observer == nil {
		cfg.Observer = obs
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ts := &testServer{Server: s, addr: ln.Addr().String(), obs: obs, served: make(chan error, 1)}
	go func() { ts.served <- s.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown at cleanup: %v", err)
		}
		select {
		case <-ts.served:
		case <-time.After(guard):
			t.Error("Serve did not return after Shutdown")
		}
	})
	return ts
}

func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, guard)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var testFormatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("strand-test"))

// frameFor encodes req as a full request frame.
func frameFor(corr int32, req kmsg.Request) []byte {
	return testFormatter.AppendRequest(nil, req, corr)
}

// rawFrame builds a frame by hand: any key and version, null client id, no
// header tags, then rest.
func rawFrame(key, version int16, corr int32, rest []byte) []byte {
	b := []byte{0, 0, 0, 0}
	b = kbin.AppendInt16(b, key)
	b = kbin.AppendInt16(b, version)
	b = kbin.AppendInt32(b, corr)
	b = kbin.AppendInt16(b, -1)
	b = append(b, rest...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func write(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(guard))
	if _, err := c.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// readFrame reads one response frame body (after the size).
func readFrame(t *testing.T, c net.Conn) []byte {
	t.Helper()
	b, err := readFrameErr(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readFrameErr is readFrame for goroutines other than the test's.
func readFrameErr(c net.Conn) ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(guard))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, fmt.Errorf("reading response size: %w", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		return nil, fmt.Errorf("reading response: %w", err)
	}
	return b, nil
}

// decodeResponse decodes a response frame body into resp at version, and
// returns its correlation id.
func decodeResponse(t *testing.T, frame []byte, resp kmsg.Response, version int16) int32 {
	t.Helper()
	corr, err := decodeResponseErr(frame, resp, version)
	if err != nil {
		t.Fatal(err)
	}
	return corr
}

func decodeResponseErr(frame []byte, resp kmsg.Response, version int16) (int32, error) {
	resp.SetVersion(version)
	if len(frame) < 4 {
		return 0, fmt.Errorf("%d-byte response frame", len(frame))
	}
	corr := int32(binary.BigEndian.Uint32(frame))
	body := frame[4:]
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		b := kbin.Reader{Src: body}
		kmsg.SkipTags(&b)
		if err := b.Complete(); err != nil {
			return 0, fmt.Errorf("response header tags: %w", err)
		}
		body = b.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return 0, fmt.Errorf("decoding key %d v%d response: %w", resp.Key(), version, err)
	}
	return corr, nil
}

// roundTrip sends req and decodes the response at req's version.
func roundTrip(t *testing.T, c net.Conn, corr int32, req kmsg.Request) kmsg.Response {
	t.Helper()
	write(t, c, frameFor(corr, req))
	resp := req.ResponseKind()
	if got := decodeResponse(t, readFrame(t, c), resp, req.GetVersion()); got != corr {
		t.Fatalf("correlation id %d, want %d", got, corr)
	}
	return resp
}

// checkAPIVersions asserts c is served: ApiVersions v3 is answered with the
// server's table.
func checkAPIVersions(t *testing.T, c net.Conn, s *Server) {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName = "strand-test"
	req.ClientSoftwareVersion = "1.0"
	resp := roundTrip(t, c, 77, req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions error code %d", resp.ErrorCode)
	}
	assertKeys(t, resp.ApiKeys, s.APIVersions())
}

func assertKeys(t *testing.T, got, want []kmsg.ApiVersionsResponseApiKey) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d keys %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.ApiKey != w.ApiKey || g.MinVersion != w.MinVersion || g.MaxVersion != w.MaxVersion {
			t.Fatalf("key %d: got %d v%d-%d, want %d v%d-%d", i, g.ApiKey, g.MinVersion, g.MaxVersion, w.ApiKey, w.MinVersion, w.MaxVersion)
		}
	}
}

// expectClosed asserts the server closed c: a read ends with EOF or a reset
// rather than data or the guard timeout.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(guard))
	var b [1]byte
	n, err := c.Read(b[:])
	switch {
	case n > 0:
		t.Fatalf("read %d bytes from a connection that should be closed", n)
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
	default:
		t.Fatalf("read on a connection that should be closed: %v", err)
	}
}

// metadataHandler answers Metadata with this broker alone, found from the
// connection's local address, so kgo and kadm can discover it.
func metadataHandler(_ context.Context, r *Request) (kmsg.Response, error) {
	resp := r.Body.ResponseKind().(*kmsg.MetadataResponse)
	host, port, err := net.SplitHostPort(r.Conn.LocalAddr().String())
	if err != nil {
		return nil, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID = 0
	b.Host = host
	b.Port = int32(p)
	resp.Brokers = append(resp.Brokers, b)
	resp.ControllerID = 0
	resp.ClusterID = kmsg.StringPtr("strand-test")
	return resp, nil
}

// withHandlers returns the default registry plus extra registrations.
func withHandlers(t testing.TB, regs ...registration) *Registry {
	t.Helper()
	r := DefaultRegistry()
	for _, reg := range regs {
		if err := r.Register(reg.key, reg.minVersion, reg.maxVersion, reg.h); err != nil {
			t.Fatalf("Register: %v", err)
		}
	}
	return r
}

type registration struct {
	key, minVersion, maxVersion int16
	h                           Handler
}
