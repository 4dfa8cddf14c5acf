package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// trickle writes a frame header claiming size bytes, then prefix bytes of
// body at once, then one byte every interval until stop is closed or a
// write fails (the server closed the connection).
func trickle(c net.Conn, size int32, prefix int, interval time.Duration, stop <-chan struct{}) {
	b := binary.BigEndian.AppendUint32(nil, uint32(size))
	if _, err := c.Write(append(b, make([]byte, prefix)...)); err != nil {
		return
	}
	for {
		select {
		case <-stop:
			return
		case <-time.After(interval):
		}
		if _, err := c.Write([]byte{0}); err != nil {
			return
		}
	}
}

// apiVersionsErr sends an ApiVersions request and reads its answer, for
// goroutines other than the test's.
func apiVersionsErr(c net.Conn) error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strand-test", "1.0"
	if _, err := c.Write(frameFor(9, req)); err != nil {
		return err
	}
	frame, err := readFrameErr(c)
	if err != nil {
		return err
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	if _, err := decodeResponseErr(frame, resp, 3); err != nil {
		return err
	}
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		return errors.New("ApiVersions answered with an error or no keys")
	}
	return nil
}

// The reproduction: six connections each send a frame header
// claiming 100 MiB (the default MaxRequestBytes; six of them exceed the
// default MaxQueuedRequestBytes) and then one byte every 5 s. Another
// client's request is still answered at once, without the clock moving.
// The second case has each slow sender deliver its first MiB quickly
// before slowing down.
func TestTricklingFramesDoNotBlockOthers(t *testing.T) {
	for _, tt := range []struct {
		name   string
		prefix int
		// maxRequest and queued are the Config's; 0 takes the default.
		maxRequest int32
		queued     int64
	}{
		{name: "header only", prefix: 0},
		{name: "after a fast first MiB", prefix: 1 << 20},
		// The agent sizes both from its memory budget: request memory
		// twice the largest request, half of it for frames arriving.
		{name: "request memory twice the largest request", prefix: 0, maxRequest: 48 << 20, queued: 96 << 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, err := New(Config{Logger: discardLogger, MaxRequestBytes: tt.maxRequest, MaxQueuedRequestBytes: tt.queued})
				if err != nil {
					t.Fatal(err)
				}
				stop := make(chan struct{})
				var wg sync.WaitGroup
				defer wg.Wait()
				defer close(stop)
				var clients []net.Conn
				for range 6 {
					pc := servePipe(t, s)
					clients = append(clients, pc.c)
					wg.Go(func() { trickle(pc.c, s.cfg.MaxRequestBytes, tt.prefix, 5*time.Second, stop) })
				}
				time.Sleep(time.Minute) // twelve bytes each, well inside their frame deadlines
				synctest.Wait()

				answered := make(chan error, 1)
				client := servePipe(t, s).c
				clients = append(clients, client)
				go func() { answered <- apiVersionsErr(client) }()
				synctest.Wait()
				select {
				case err := <-answered:
					if err != nil {
						t.Fatal(err)
					}
				default:
					// Closed together, so that readers waiting for request
					// memory behind each other all unwind.
					for _, c := range clients {
						c.Close()
					}
					t.Fatal("a request was not answered while six connections trickled 100 MiB frames")
				}
				if got := s.NumConns(); got != 7 {
					t.Errorf("%d connections open, want the 6 slow ones still open and the fast one", got)
				}
			})
		})
	}
}

// A frame that keeps trickling is closed at its deadline, counted from
// its first byte: FrameTimeout plus its size at MinFrameRate. Bytes
// arriving meanwhile do not push it back.
func TestFrameDeadlineFromHeader(t *testing.T) {
	const (
		frameTimeout = 12 * time.Second
		rate         = 1 << 20
		size         = 20 << 20
	)
	for _, tt := range []struct {
		name string
		// send writes the start of a frame and returns; bytes it sends
		// later go on until stop.
		send         func(c net.Conn, stop <-chan struct{})
		wantDeadline time.Duration
	}{
		{
			name:         "body trickles",
			send:         func(c net.Conn, stop <-chan struct{}) { trickle(c, size, 0, 5*time.Second, stop) },
			wantDeadline: frameTimeout + size/rate*time.Second,
		},
		{
			// A size not yet whole has only the floor.
			name: "size trickles",
			send: func(c net.Conn, stop <-chan struct{}) {
				sizeBytes := binary.BigEndian.AppendUint32(nil, size)
				for i := range 4 {
					if i > 0 {
						select {
						case <-stop:
							return
						case <-time.After(5 * time.Second):
						}
					}
					if _, err := c.Write(sizeBytes[i : i+1]); err != nil {
						return
					}
				}
			},
			wantDeadline: frameTimeout,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				logs := &logRecorder{}
				obs := newTestObserver()
				s, err := New(Config{Logger: slog.New(logs), Observer: obs, FrameTimeout: frameTimeout, MinFrameRate: rate})
				if err != nil {
					t.Fatal(err)
				}
				pc := servePipe(t, s)
				stop := make(chan struct{})
				defer close(stop)
				start := time.Now()
				go tt.send(pc.c, stop)

				limit := time.NewTimer(3 * tt.wantDeadline)
				select {
				case err := <-pc.result:
					if !errors.Is(err, ErrFrameTimeout) {
						t.Fatalf("close reason %v, want ErrFrameTimeout", err)
					}
				case <-limit.C:
					t.Fatalf("connection still open %v after its frame began trickling; want it closed at %v", time.Since(start), tt.wantDeadline)
				}
				if d := time.Since(start); d != tt.wantDeadline {
					t.Errorf("closed %v after the frame's first byte, want %v", d, tt.wantDeadline)
				}
				if cc := <-obs.closes; !errors.Is(cc.reason, ErrFrameTimeout) {
					t.Errorf("observer close reason %v", cc.reason)
				}
				if !logs.has(slog.LevelWarn, "kafka: connection closed", ErrFrameTimeout.Error()) {
					t.Errorf("no warning logged for the frame timeout; logged:\n%s", logs)
				}
			})
		})
	}
}

// Frames arriving at once whose sizes together exceed
// MaxQueuedRequestBytes each take a growing share as their bytes arrive.
// However the shares interleave, one frame can always finish, so every
// request is answered.
func TestLargeFramesShareBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const frames, maxFrame = 10, 1 << 20
		s, err := New(Config{
			Logger:                discardLogger,
			MaxRequestBytes:       maxFrame,
			MaxQueuedRequestBytes: 2 * maxFrame,
			Registry:              withHandlers(t, registration{0, 3, 11, nopHandler}),
		})
		if err != nil {
			t.Fatal(err)
		}
		frame := frameFor(1, produceReq(9, -1, nil, rawPart{"t", 0, make([]byte, maxFrame-200)}))
		if len(frame)-4 > maxFrame {
			t.Fatalf("frame of %d bytes", len(frame)-4)
		}
		errs := make(chan error, frames)
		for range frames {
			c := servePipe(t, s).c
			go func() {
				// In pieces, a millisecond apart, so that every frame is
				// partly received before any is whole.
				for rest := frame; len(rest) > 0; rest = rest[min(len(rest), 64<<10):] {
					if _, err := c.Write(rest[:min(len(rest), 64<<10)]); err != nil {
						errs <- err
						return
					}
					time.Sleep(time.Millisecond)
				}
				_, err := readFrameErr(c)
				errs <- err
			}()
		}
		for range frames {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if free := s.budget.free(); free != 2*maxFrame {
			t.Errorf("%d bytes of the budget free after every request was answered, want %d", free, 2*maxFrame)
		}
	})
}

// One address may hold MaxConnsPerIP connections; the next is closed at
// accept while other addresses still connect, and closing one makes room.
func TestMaxConnsPerIP(t *testing.T) {
	other, limited := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	ts := startServer(t, Config{
		MaxConnsPerIP:          2,
		MaxConnsPerIPOverrides: map[netip.Addr]int{limited: 1},
	})
	from := func(a netip.Addr) net.Conn {
		t.Helper()
		d := net.Dialer{Timeout: guard, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, 0))}
		c, err := d.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatalf("dial from %v: %v", a, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	refused := func(c net.Conn) {
		t.Helper()
		expectClosed(t, c)
		if cc := ts.obs.waitClose(t); !errors.Is(cc.reason, ErrTooManyConnsPerIP) {
			t.Fatalf("close reason %v, want ErrTooManyConnsPerIP", cc.reason)
		}
	}

	loopback := netip.MustParseAddr("127.0.0.1")
	first, second := from(loopback), from(loopback)
	checkAPIVersions(t, first, ts.Server)
	checkAPIVersions(t, second, ts.Server)
	refused(from(loopback))
	checkAPIVersions(t, from(other), ts.Server)
	checkAPIVersions(t, from(limited), ts.Server)
	refused(from(limited))

	first.Close()
	if cc := ts.obs.waitClose(t); cc.reason != nil {
		t.Fatalf("close reason %v, want nil", cc.reason)
	}
	checkAPIVersions(t, from(loopback), ts.Server)
	checkAPIVersions(t, second, ts.Server)
}

// Only the override's addresses may connect with NoConnsPerIP.
func TestNoConnsPerIPAdmitsOverridesOnly(t *testing.T) {
	ts := startServer(t, Config{
		MaxConnsPerIP:          NoConnsPerIP,
		MaxConnsPerIPOverrides: map[netip.Addr]int{netip.MustParseAddr("127.0.0.1"): 5},
	})
	checkAPIVersions(t, dial(t, ts.addr), ts.Server)
	d := net.Dialer{Timeout: guard, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	c, err := d.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	expectClosed(t, c)
	if cc := ts.obs.waitClose(t); !errors.Is(cc.reason, ErrTooManyConnsPerIP) {
		t.Fatalf("close reason %v, want ErrTooManyConnsPerIP", cc.reason)
	}
}

func TestParseConnsPerIPOverrides(t *testing.T) {
	got, err := ParseConnsPerIPOverrides(" 10.0.0.1:200, ::1:50,[fe80::1]:0,::ffff:10.0.0.2:7,")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"10.0.0.1": 200, "::1": 50, "fe80::1": 0, "10.0.0.2": 7}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for a, n := range want {
		if got[netip.MustParseAddr(a)] != n {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	for _, bad := range []string{"10.0.0.1", "host.example:5", "10.0.0.1:-1", "10.0.0.1:x"} {
		if _, err := ParseConnsPerIPOverrides(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// logRecorder is a slog.Handler that keeps every record.
type logRecorder struct {
	mu      sync.Mutex
	records []string
	levels  []slog.Level
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, b.String())
	l.levels = append(l.levels, r.Level)
	return nil
}

// has reports a record at level whose text contains every part.
func (l *logRecorder) has(level slog.Level, parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
outer:
	for i, r := range l.records {
		if l.levels[i] != level {
			continue
		}
		for _, p := range parts {
			if !strings.Contains(r, p) {
				continue outer
			}
		}
		return true
	}
	return false
}

func (l *logRecorder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.records, "\n")
}

// Refused connections log one line a second, which carries how many
// were not logged since the last.
func TestRefusalLogLimit(t *testing.T) {
	var l logLimiter
	t0 := time.Unix(1000, 0)
	for i, step := range []struct {
		at         time.Duration
		ok         bool
		suppressed int
	}{
		{0, true, 0},
		{time.Millisecond, false, 0},
		{refusalLogInterval - 1, false, 0},
		{refusalLogInterval, true, 2},
		{refusalLogInterval + 1, false, 0},
		{10 * refusalLogInterval, true, 1},
	} {
		ok, n := l.allow(t0.Add(step.at))
		if ok != step.ok || n != step.suppressed {
			t.Fatalf("step %d at %v: allow = %v, %d; want %v, %d", i, step.at, ok, n, step.ok, step.suppressed)
		}
	}
}
