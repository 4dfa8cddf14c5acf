package kafka

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// gatedHandler serves Heartbeat: each request announces itself on started
// and waits for its generation to be released. Its response carries the
// request's generation in ThrottleMillis, so a test can tell responses
// apart.
type gatedHandler struct {
	started chan int32 // generation of each request whose handler started
	mu      struct {
		sync.Mutex
		gates   map[int32]chan struct{}
		inOrder []int32 // generations, in the order their InOrder ran
	}
	useInOrder bool
}

func newGatedHandler(capacity int, useInOrder bool) *gatedHandler {
	g := &gatedHandler{started: make(chan int32, capacity), useInOrder: useInOrder}
	g.mu.gates = make(map[int32]chan struct{})
	return g
}

func (g *gatedHandler) gate(gen int32) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	ch, ok := g.mu.gates[gen]
	if !ok {
		ch = make(chan struct{})
		g.mu.gates[gen] = ch
	}
	return ch
}

func (g *gatedHandler) release(gen int32) { close(g.gate(gen)) }

func (g *gatedHandler) handle(ctx context.Context, r *Request) (kmsg.Response, error) {
	req := r.Body.(*kmsg.HeartbeatRequest)
	g.started <- req.Generation
	select {
	case <-g.gate(req.Generation):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if g.useInOrder {
		err := r.InOrder(ctx, func() {
			g.mu.Lock()
			g.mu.inOrder = append(g.mu.inOrder, req.Generation)
			g.mu.Unlock()
		})
		if err != nil {
			return nil, err
		}
	}
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ThrottleMillis = req.Generation
	return resp, nil
}

func heartbeatFrame(corr, gen int32) []byte {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group = "g"
	req.MemberID = "m"
	req.Generation = gen
	return frameFor(corr, req)
}

// readHeartbeat reads one Heartbeat v4 response and returns its
// correlation id and the generation it answers.
func readHeartbeat(t *testing.T, c net.Conn) (corr, gen int32) {
	t.Helper()
	corr, gen, err := readHeartbeatErr(c)
	if err != nil {
		t.Fatal(err)
	}
	return corr, gen
}

// readHeartbeats reads n Heartbeat responses in a goroutine and sends
// {correlation id, generation} pairs on the result; a read error ends it
// early (the test's receive then reports the missing responses).
func readHeartbeats(c net.Conn, n int) <-chan [2]int32 {
	out := make(chan [2]int32, n)
	go func() {
		defer close(out)
		for range n {
			corr, gen, err := readHeartbeatErr(c)
			if err != nil {
				return
			}
			out <- [2]int32{corr, gen}
		}
	}()
	return out
}

func readHeartbeatErr(c net.Conn) (corr, gen int32, err error) {
	frame, err := readFrameErr(c)
	if err != nil {
		return 0, 0, err
	}
	resp := kmsg.NewPtrHeartbeatResponse()
	corr, err = decodeResponseErr(frame, resp, 4)
	return corr, resp.ThrottleMillis, err
}

func waitStarted(t *testing.T, g *gatedHandler, n int) []int32 {
	t.Helper()
	var gens []int32
	for range n {
		select {
		case gen := <-g.started:
			gens = append(gens, gen)
		case <-time.After(guard):
			t.Fatalf("%d of %d handlers started", len(gens), n)
		}
	}
	return gens
}

// Fifty requests sent back to back on one connection are handled
// concurrently and finish in a random order; the responses still come back
// in request order, and InOrder sections run in request order.
func TestPipelinedResponsesInOrder(t *testing.T) {
	const n = 50
	g := newGatedHandler(n, true)
	ts := startServer(t, Config{
		MaxInFlightPerConn: 64,
		Registry:           withHandlers(t, registration{12, 0, 4, g.handle}),
	})
	c := dial(t, ts.addr)
	var stream []byte
	for i := range int32(n) {
		stream = append(stream, heartbeatFrame(1000+i, i*7)...)
	}
	write(t, c, stream)

	// Every handler runs at once: none waits for an earlier one.
	waitStarted(t, g, n)
	seed := time.Now().UnixNano()
	t.Logf("release order seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for _, i := range rng.Perm(n) {
		g.release(int32(i) * 7)
	}
	for i := range int32(n) {
		corr, gen := readHeartbeat(t, c)
		if corr != 1000+i || gen != i*7 {
			t.Fatalf("response %d: correlation %d generation %d, want %d and %d", i, corr, gen, 1000+i, i*7)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, gen := range g.mu.inOrder {
		if gen != int32(i)*7 {
			t.Fatalf("InOrder sections ran in order %v", g.mu.inOrder)
		}
	}
	if len(g.mu.inOrder) != n {
		t.Fatalf("%d InOrder sections ran, want %d", len(g.mu.inOrder), n)
	}
}

// Requests that skip InOrder pass their turn on only after every earlier
// request had its turn: here requests 0, 3, 6 and 9 call InOrder after
// waiting for their gate, the others return at once.
func TestInOrderAcrossSkippingRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 12
		g := newGatedHandler(n, true)
		var second atomic.Int32
		h := func(ctx context.Context, r *Request) (kmsg.Response, error) {
			req := r.Body.(*kmsg.HeartbeatRequest)
			if req.Generation%3 != 0 {
				return req.ResponseKind(), nil
			}
			resp, err := g.handle(ctx, r)
			if err := r.InOrder(ctx, func() {}); errors.Is(err, ErrInOrderTwice) {
				second.Add(1)
			}
			return resp, err
		}
		client, _, _ := pipeServer(t, Config{Registry: withHandlers(t, registration{12, 0, 4, h})})
		var stream []byte
		for i := range int32(n) {
			stream = append(stream, heartbeatFrame(i, i)...)
		}
		go client.Write(stream)
		responses := readHeartbeats(client, n)
		inOrder := func() []int32 {
			synctest.Wait()
			g.mu.Lock()
			defer g.mu.Unlock()
			return append([]int32(nil), g.mu.inOrder...)
		}
		for _, step := range []struct {
			release int32
			want    []int32
		}{
			{9, nil},
			{3, nil},
			{0, []int32{0, 3}},
			{6, []int32{0, 3, 6, 9}},
		} {
			g.release(step.release)
			if got := inOrder(); len(got) != len(step.want) || (len(got) > 0 && got[len(got)-1] != step.want[len(got)-1]) {
				t.Fatalf("after releasing %d: InOrder ran for %v, want %v", step.release, got, step.want)
			}
		}
		for i := range int32(n) {
			if r, ok := <-responses; !ok || r[0] != i {
				t.Fatalf("response %d: %v (read ok %v)", i, r, ok)
			}
		}
		if second.Load() != 4 {
			t.Errorf("%d second InOrder calls failed with ErrInOrderTwice, want 4", second.Load())
		}
	})
}

// A nil response (Produce with acks=0) writes nothing; later responses
// still go out in order.
func TestNoResponseForAcksZero(t *testing.T) {
	produce := func(_ context.Context, r *Request) (kmsg.Response, error) {
		req := r.Body.(*kmsg.ProduceRequest)
		if req.Acks == 0 {
			return nil, nil
		}
		return req.ResponseKind(), nil
	}
	ts := startServer(t, Config{Registry: withHandlers(t, registration{0, 3, 11, produce})})
	c := dial(t, ts.addr)
	var stream []byte
	for i, acks := range []int16{-1, 0, 0, 1, 0} {
		req := kmsg.NewPtrProduceRequest()
		req.Version = 9
		req.Acks = acks
		req.TimeoutMillis = 1000
		stream = append(stream, frameFor(int32(i), req)...)
	}
	write(t, c, stream)
	for _, want := range []int32{0, 3} {
		corr := decodeResponse(t, readFrame(t, c), kmsg.NewPtrProduceResponse(), 9)
		if corr != want {
			t.Fatalf("correlation id %d, want %d", corr, want)
		}
	}
	checkAPIVersions(t, c, ts.Server)
	// All six requests are accounted for, the acks=0 ones with no bytes out.
	var silent int
	for _, st := range ts.obs.requests() {
		if st.Key == 0 && st.BytesOut == 0 && st.Err == nil {
			silent++
		}
	}
	if silent != 3 {
		t.Errorf("%d acks=0 requests reported with no response, want 3", silent)
	}
}

// pipeServer serves one end of a net.Pipe inside a synctest bubble.
func pipeServer(t *testing.T, cfg Config) (client net.Conn, s *Server, served <-chan error) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = discardLogger
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc := servePipe(t, s)
	return pc.c, s, pc.result
}

// pipeConn is the client end of a net.Pipe that s serves.
type pipeConn struct {
	c      net.Conn
	result chan error // ServeConn's result
}

func servePipe(t *testing.T, s *Server) *pipeConn {
	t.Helper()
	client, server := net.Pipe()
	pc := &pipeConn{c: client, result: make(chan error, 1)}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		pc.result <- s.ServeConn(context.Background(), server)
	}()
	t.Cleanup(func() {
		client.Close()
		<-finished
	})
	return pc
}

// With MaxInFlightPerConn requests unanswered, the server stops reading
// the connection until a response is written.
func TestPipeliningIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxInFlight, n = 4, 10
		g := newGatedHandler(n, false)
		client, _, _ := pipeServer(t, Config{
			MaxInFlightPerConn: maxInFlight,
			Registry:           withHandlers(t, registration{12, 0, 4, g.handle}),
		})
		var stream []byte
		for i := range int32(n) {
			stream = append(stream, heartbeatFrame(i, i)...)
		}
		var sent atomic.Bool
		go func() {
			client.Write(stream) // net.Pipe: returns once the server read it all
			sent.Store(true)
		}()
		synctest.Wait()
		if len(g.started) != maxInFlight || sent.Load() {
			t.Fatalf("%d handlers started (stream fully read: %v), want %d and the rest unread", len(g.started), sent.Load(), maxInFlight)
		}

		// Answering a later request frees nothing: its response waits
		// behind request 0's.
		g.release(3)
		synctest.Wait()
		if len(g.started) != maxInFlight {
			t.Fatalf("%d handlers started after a later request finished, want %d", len(g.started), maxInFlight)
		}

		// The response to request 0 is written once the client reads:
		// exactly one slot frees.
		g.release(0)
		responses := readHeartbeats(client, n)
		synctest.Wait()
		if len(g.started) != maxInFlight+1 || len(responses) != 1 {
			t.Fatalf("after one response: %d started, %d responses; want %d and 1", len(g.started), len(responses), maxInFlight+1)
		}
		for i := range int32(n) {
			if i != 0 && i != 3 {
				g.release(i)
			}
		}
		for i := range int32(n) {
			if r, ok := <-responses; !ok || r[0] != i || r[1] != i {
				t.Fatalf("response %d: %v (read ok %v)", i, r, ok)
			}
		}
		synctest.Wait()
		if !sent.Load() {
			t.Fatal("stream not fully read")
		}
	})
}

// A connection owed a response is not idle, however long its handler
// takes; once answered, it is closed after IdleTimeout of silence.
func TestIdleTimeoutWaitsForOwedResponses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = time.Minute
		g := newGatedHandler(1, false)
		client, _, served := pipeServer(t, Config{
			IdleTimeout: idle,
			Registry:    withHandlers(t, registration{12, 0, 4, g.handle}),
		})
		go client.Write(heartbeatFrame(1, 1))
		<-g.started
		time.Sleep(10 * idle)
		synctest.Wait()
		if len(served) != 0 {
			t.Fatalf("connection closed while a response was owed: %v", <-served)
		}

		g.release(1)
		start := time.Now()
		if corr, _ := readHeartbeat(t, client); corr != 1 {
			t.Fatalf("correlation id %d", corr)
		}
		// Just short of IdleTimeout after the response: still open.
		time.Sleep(idle - time.Second)
		synctest.Wait()
		if len(served) != 0 {
			t.Fatalf("closed %v after the response, before IdleTimeout: %v", time.Since(start), <-served)
		}
		if err := <-served; !errors.Is(err, ErrIdleTimeout) {
			t.Fatalf("close reason %v, want ErrIdleTimeout", err)
		}
		if d := time.Since(start); d != idle {
			t.Errorf("closed %v after the last response, want %v", d, idle)
		}
		if _, err := client.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("client read after idle close: %v, want EOF", err)
		}
	})
}
