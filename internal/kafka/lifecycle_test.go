package kafka

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestIdleTimeoutClosesIdleConn(t *testing.T) {
	ts := startServer(t, Config{IdleTimeout: 50 * time.Millisecond})
	tests := []struct {
		name  string
		first bool // send one request before going quiet
	}{
		{name: "never spoke"},
		{name: "after a request", first: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, ts.addr)
			if tt.first {
				checkAPIVersions(t, c, ts.Server)
			}
			expectClosed(t, c)
			if cc := ts.obs.waitClose(t); !errors.Is(cc.reason, ErrIdleTimeout) {
				t.Fatalf("close reason %v, want ErrIdleTimeout", cc.reason)
			}
		})
	}
}

func TestClientCloseIsClean(t *testing.T) {
	ts := startServer(t, Config{})
	c := dial(t, ts.addr)
	checkAPIVersions(t, c, ts.Server)
	c.Close()
	if cc := ts.obs.waitClose(t); cc.reason != nil {
		t.Fatalf("close reason %v, want nil", cc.reason)
	}
}

// Shutdown stops accepting, lets requests already read finish and be
// answered, then closes their connections.
func TestShutdownDeliversInFlight(t *testing.T) {
	const n = 3
	g := newGatedHandler(n, false)
	ts := startServer(t, Config{Registry: withHandlers(t, registration{12, 0, 4, g.handle})})
	c := dial(t, ts.addr)
	idle := dial(t, ts.addr)
	checkAPIVersions(t, idle, ts.Server)
	var stream []byte
	for i := range int32(n) {
		stream = append(stream, heartbeatFrame(i, i)...)
	}
	write(t, c, stream)
	waitStarted(t, g, n)

	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		shutdown <- ts.Shutdown(ctx)
	}()
	// Serve returning shows Shutdown has begun.
	if err := <-ts.served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve returned %v, want ErrServerClosed", err)
	}
	ts.served <- nil // for the cleanup
	if nc, err := net.DialTimeout("tcp", ts.addr, guard); err == nil {
		nc.Close()
		t.Fatal("dial succeeded after Shutdown began")
	}
	// The idle connection goes at once, while requests are in flight on
	// the other.
	expectClosed(t, idle)
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned %v with handlers still running", err)
	default:
	}

	for i := range int32(n) {
		g.release(i)
	}
	for i := range int32(n) {
		if corr, gen := readHeartbeat(t, c); corr != i || gen != i {
			t.Fatalf("response %d: correlation %d generation %d", i, corr, gen)
		}
	}
	expectClosed(t, c)
	if err := <-shutdown; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for range 2 {
		if cc := ts.obs.waitClose(t); !errors.Is(cc.reason, ErrServerClosed) {
			t.Errorf("close reason %v, want ErrServerClosed", cc.reason)
		}
	}
	if got := ts.NumConns(); got != 0 {
		t.Errorf("%d connections open after Shutdown", got)
	}
}

// When Shutdown's context ends first, the connections are closed at once
// and handlers' contexts are canceled.
func TestShutdownDeadlineForcesClose(t *testing.T) {
	started := make(chan struct{})
	canceled := make(chan error, 1)
	stuck := func(ctx context.Context, r *Request) (kmsg.Response, error) {
		close(started)
		<-ctx.Done()
		canceled <- context.Cause(ctx)
		return nil, ctx.Err()
	}
	ts := startServer(t, Config{Registry: withHandlers(t, registration{12, 0, 4, stuck})})
	c := dial(t, ts.addr)
	write(t, c, heartbeatFrame(1, 1))
	<-started

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ts.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v, want context.Canceled", err)
	}
	expectClosed(t, c)
	select {
	case cause := <-canceled:
		if !errors.Is(cause, ErrServerClosed) {
			t.Errorf("handler context cause %v, want ErrServerClosed", cause)
		}
	case <-time.After(guard):
		t.Fatal("handler context not canceled")
	}
}

// Canceling Serve's context closes the listener and its connections.
func TestServeContextCancel(t *testing.T) {
	s, err := New(Config{Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	c := dial(t, ln.Addr().String())
	checkAPIVersions(t, c, s)
	cancel()
	if err := <-served; !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve: %v, want context.Canceled", err)
	}
	expectClosed(t, c)
	s.Close()
}

func TestMaxConns(t *testing.T) {
	ts := startServer(t, Config{MaxConns: 1})
	first := dial(t, ts.addr)
	checkAPIVersions(t, first, ts.Server)

	second := dial(t, ts.addr)
	expectClosed(t, second)
	if cc := ts.obs.waitClose(t); !errors.Is(cc.reason, ErrTooManyConns) {
		t.Fatalf("close reason %v, want ErrTooManyConns", cc.reason)
	}
	checkAPIVersions(t, first, ts.Server)

	first.Close()
	if cc := ts.obs.waitClose(t); cc.reason != nil {
		t.Fatalf("close reason %v, want nil", cc.reason)
	}
	checkAPIVersions(t, dial(t, ts.addr), ts.Server)
}

// A failing or panicking handler closes its own connection only.
func TestHandlerFailureClosesConn(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name       string
		h          Handler
		wantReason error
	}{
		{
			name:       "error",
			h:          func(context.Context, *Request) (kmsg.Response, error) { return nil, errBoom },
			wantReason: errBoom,
		},
		{
			name:       "panic",
			h:          func(context.Context, *Request) (kmsg.Response, error) { panic("boom") },
			wantReason: ErrHandlerPanic,
		},
		{
			name:       "wrong response key",
			h:          func(context.Context, *Request) (kmsg.Response, error) { return kmsg.NewPtrFetchResponse(), nil },
			wantReason: nil, // any reason; checked below
		},
		{
			name:       "response that cannot be encoded",
			h:          func(context.Context, *Request) (kmsg.Response, error) { return panickyResponse{}, nil },
			wantReason: ErrHandlerPanic,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, Config{Registry: withHandlers(t, registration{3, 0, 12, tt.h})})
			c := dial(t, ts.addr)
			req := kmsg.NewPtrMetadataRequest()
			req.Version = 12
			write(t, c, frameFor(1, req))
			cc := ts.obs.waitClose(t)
			if cc.reason == nil || (tt.wantReason != nil && !errors.Is(cc.reason, tt.wantReason)) {
				t.Fatalf("close reason %v, want %v", cc.reason, tt.wantReason)
			}
			checkAPIVersions(t, dial(t, ts.addr), ts.Server)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{name: "zero value", cfg: Config{}, ok: true},
		{name: "negative request size", cfg: Config{MaxRequestBytes: -1}},
		{name: "queue below request size", cfg: Config{MaxRequestBytes: 1 << 20, MaxQueuedRequestBytes: 1 << 10}},
		{name: "zero in flight is default", cfg: Config{MaxInFlightPerConn: 0}, ok: true},
		{name: "negative in flight", cfg: Config{MaxInFlightPerConn: -1}},
		{name: "in flight above limit", cfg: Config{MaxInFlightPerConn: maxInFlightPerConnLimit + 1}},
		{name: "negative conns", cfg: Config{MaxConns: -1}},
		{name: "idle disabled", cfg: Config{IdleTimeout: -1}, ok: true},
		{name: "negative conns per IP", cfg: Config{MaxConnsPerIP: -2}},
		{name: "no conns per IP without overrides", cfg: Config{MaxConnsPerIP: NoConnsPerIP}},
		{
			name: "no conns per IP but overrides",
			cfg:  Config{MaxConnsPerIP: NoConnsPerIP, MaxConnsPerIPOverrides: map[netip.Addr]int{netip.MustParseAddr("10.0.0.1"): 3}},
			ok:   true,
		},
		{name: "negative override", cfg: Config{MaxConnsPerIPOverrides: map[netip.Addr]int{netip.MustParseAddr("10.0.0.1"): -1}}},
		{name: "zero override refuses an address", cfg: Config{MaxConnsPerIPOverrides: map[netip.Addr]int{netip.MustParseAddr("10.0.0.1"): 0}}, ok: true},
		{name: "negative frame timeout", cfg: Config{FrameTimeout: -time.Second}},
		{name: "negative frame rate", cfg: Config{MinFrameRate: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate: %v, want ok %v", err, tt.ok)
			}
			if _, nerr := New(tt.cfg); (nerr == nil) != tt.ok {
				t.Fatalf("New: %v, want ok %v", nerr, tt.ok)
			}
		})
	}
}

// panickyResponse is a Metadata response whose encoding panics.
type panickyResponse struct{ *kmsg.MetadataResponse }

func (panickyResponse) AppendTo([]byte) []byte { panic("cannot encode") }
func (panickyResponse) Key() int16             { return 3 }
func (panickyResponse) SetVersion(int16)       {}
func (panickyResponse) IsFlexible() bool       { return true }
