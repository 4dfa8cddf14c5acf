package faultproxy_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/testservers/faultproxy"
)

// testTimeout is a deadlock guard, not a speed expectation.
const testTimeout = 10 * time.Second

// server accepts one connection and answers each line it reads with
// "ack:" and the line; a line sent on say goes out unasked, as a server's
// ping or window update would.
type server struct {
	addr string
	say  chan string
	got  chan string // every line read, in order
}

func startServer(t *testing.T) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &server{addr: ln.Addr().String(), say: make(chan string), got: make(chan string, 16)}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		go func() {
			for {
				select {
				case m := <-s.say:
					if _, err := io.WriteString(c, m); err != nil {
						return
					}
				case <-done:
					return
				}
			}
		}()
		buf := make([]byte, 1024)
		var pending []byte
		for {
			n, err := c.Read(buf)
			pending = append(pending, buf[:n]...)
			for {
				i := bytes.IndexByte(pending, '\n')
				if i < 0 {
					break
				}
				line := string(pending[:i])
				pending = pending[i+1:]
				s.got <- line
				if _, err := io.WriteString(c, "ack:"+line+"\n"); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return s
}

// dial connects to addr, with the deadlock guard as the connection's
// deadline.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(testTimeout)); err != nil {
		t.Fatal(err)
	}
	return c
}

func readFull(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return string(b)
}

func send(t *testing.T, c net.Conn, line string) {
	t.Helper()
	if _, err := io.WriteString(c, line); err != nil {
		t.Fatalf("sending %q: %v", line, err)
	}
}

func hasLine(line string) func([]byte) bool {
	return func(b []byte) bool { return bytes.Contains(b, []byte(line)) }
}

// TestHoldAfterServerTalks: bytes the server sends on an armed connection
// before any request is held still reach the client, and the answer to
// the request held after them still reaches Release.
func TestHoldAfterServerTalks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s := startServer(t)
	p, err := faultproxy.Start(s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	c := dial(t, p.Addr())
	// One round trip so the proxy has the connection open.
	send(t, c, "hello\n")
	if got := readFull(t, c, len("ack:hello\n")); got != "ack:hello\n" {
		t.Fatalf("reply %q", got)
	}

	held := p.HoldRequests(hasLine("zombie\n"), nil)
	s.say <- "ping\n"
	if got := readFull(t, c, len("ping\n")); got != "ping\n" {
		t.Fatalf("unasked server bytes on an armed connection arrived as %q", got)
	}
	// Bytes that do not match pass.
	send(t, c, "other\n")
	if got := readFull(t, c, len("ack:other\n")); got != "ack:other\n" {
		t.Fatalf("reply to an unmatched request %q", got)
	}
	send(t, c, "zombie\n")
	select {
	case <-held.Got():
	case <-ctx.Done():
		t.Fatal("the request was never held")
	}
	// The client's side is cut once the request is held.
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the client's connection still delivers bytes after the hold")
	}
	for _, want := range []string{"hello", "other"} {
		if got := <-s.got; got != want {
			t.Fatalf("server read %q, want %q", got, want)
		}
	}
	select {
	case got := <-s.got:
		t.Fatalf("server read %q before Release", got)
	default:
	}

	reply, err := held.Release(ctx, false, hasLine("ack:zombie\n"))
	if err != nil {
		t.Fatalf("Release: %v (got %q)", err, reply)
	}
	select {
	case got := <-s.got:
		if got != "zombie" {
			t.Fatalf("server read %q after Release, want zombie", got)
		}
	case <-ctx.Done():
		t.Fatal("the server never read the released request")
	}
}

// startEcho starts a server that answers each line on any number of
// connections with "ack:" and the line, and returns its address.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, "ack:"+line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestDownUp: Down cuts the open connections and turns new ones away on
// the same port; after Up, connections reach the server again.
func TestDownUp(t *testing.T) {
	p, err := faultproxy.Start(startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	// roundTrip reports whether a line comes back answered.
	roundTrip := func(c net.Conn) bool {
		if _, err := io.WriteString(c, "x\n"); err != nil {
			return false
		}
		b := make([]byte, len("ack:x\n"))
		_, err := io.ReadFull(c, b)
		return err == nil && string(b) == "ack:x\n"
	}

	open := dial(t, p.Addr())
	if !roundTrip(open) {
		t.Fatal("no answer through the proxy")
	}
	p.Down()
	if roundTrip(open) {
		t.Fatal("a connection open before Down still gets answers")
	}
	if roundTrip(dial(t, p.Addr())) {
		t.Fatal("a connection made while down gets answers")
	}
	p.Up()
	if !roundTrip(dial(t, p.Addr())) {
		t.Fatal("no answer after Up")
	}
}

// TestDropConns: every open connection is reset; a new one passes.
func TestDropConns(t *testing.T) {
	p, err := faultproxy.Start(startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	a, b := dial(t, p.Addr()), dial(t, p.Addr())
	for _, c := range []net.Conn{a, b} {
		send(t, c, "x\n")
		if got := readFull(t, c, len("ack:x\n")); got != "ack:x\n" {
			t.Fatalf("answer %q", got)
		}
	}
	if n := p.DropConns(); n != 2 {
		t.Fatalf("DropConns closed %d connections, want 2", n)
	}
	for _, c := range []net.Conn{a, b} {
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a dropped connection still delivers bytes")
		}
	}
	c := dial(t, p.Addr())
	send(t, c, "y\n")
	if got := readFull(t, c, len("ack:y\n")); got != "ack:y\n" {
		t.Fatalf("answer after the drop %q", got)
	}
}

// TestSetDelay: with a delay each way, a round trip takes at least twice
// the delay (a lower bound, which no scheduler can break) and its bytes
// arrive intact; after SetDelay(0) the proxy forwards at once again.
func TestSetDelay(t *testing.T) {
	p, err := faultproxy.Start(startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	c := dial(t, p.Addr())
	const d = 50 * time.Millisecond
	p.SetDelay(d)
	start := time.Now()
	send(t, c, "slow\n")
	if got := readFull(t, c, len("ack:slow\n")); got != "ack:slow\n" {
		t.Fatalf("answer %q", got)
	}
	if took := time.Since(start); took < 2*d {
		t.Fatalf("round trip took %v with a delay of %v each way", took, d)
	}
	p.SetDelay(0)
	send(t, c, "fast\n")
	if got := readFull(t, c, len("ack:fast\n")); got != "ack:fast\n" {
		t.Fatalf("answer %q", got)
	}
}
