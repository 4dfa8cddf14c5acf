// Package faultproxy owns a TCP proxy that tests put between a client and
// a real server to break the connection at chosen moments: after the
// server has done the work but before the client hears of it ("applied,
// reply lost"), or before the request reaches the server, keeping it to
// deliver later, after the client has given up and moved on (a zombie
// request). Backends use it to check that they resolve ambiguous writes
// without writing twice.
//
// Faults are armed on the connections open at the time of the call; new
// connections, such as the one a client makes to retry, pass untouched.
// Three faults are not armed but act at once: Down cuts every connection
// and refuses new ones until Up, DropConns resets every open
// connection, and SetDelay slows every connection, open or new, until
// set back to 0.
package faultproxy

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// maxHeldBytes bounds what one held connection buffers.
const maxHeldBytes = 64 << 20

// Proxy forwards connections accepted on a loopback port to a target.
type Proxy struct {
	ln     net.Listener
	target string
	// delay is how long each chunk waits before it is forwarded, in
	// nanoseconds; see SetDelay.
	delay atomic.Int64

	mu struct {
		sync.Mutex
		links  map[*link]struct{}
		closed bool
		down   bool // see Down
	}
	wg sync.WaitGroup
}

// link is one proxied connection.
type link struct {
	client, server net.Conn
	// ended counts the directions that stopped copying; at two the
	// link is forgotten.
	ended atomic.Int32

	mu struct {
		sync.Mutex
		cutOnReply chan struct{} // armed: closed when the fault fires
		cutMatch   func([]byte) bool
		hold       *Held // armed: client bytes go here
	}
}

// Start listens on 127.0.0.1 and a free port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target}
	p.mu.links = make(map[*link]struct{})
	p.wg.Go(p.accept)
	return p, nil
}

// Addr returns the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting and closes every connection.
func (p *Proxy) Close() {
	p.cut(func() { p.mu.closed = true })
	p.ln.Close()
	p.wg.Wait()
}

// Down makes the server look stopped: every open connection is cut and
// every new one closed as soon as it is accepted, until Up. The proxy
// keeps its port, so the addresses that name it work again after Up, as
// a restarted server's would.
func (p *Proxy) Down() {
	p.cut(func() { p.mu.down = true })
}

// cut runs set under the lock, so no connection is added after it, and
// closes every open connection; it returns how many there were.
func (p *Proxy) cut(set func()) int {
	p.mu.Lock()
	set()
	links := p.mu.links
	p.mu.links = map[*link]struct{}{}
	p.mu.Unlock()
	for l := range links {
		l.client.Close()
		l.server.Close()
	}
	return len(links)
}

// Up ends Down: new connections reach the server again.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.down = false
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		if p.mu.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		if p.mu.down {
			p.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.mu.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.upstream(l); p.ended(l) })
		p.wg.Go(func() { p.downstream(l); p.ended(l) })
	}
}

// ended forgets l once both its directions stopped, so a proxy that
// sees many connections come and go holds only the open ones. A held
// request's link stays with its Held.
func (p *Proxy) ended(l *link) {
	if l.ended.Add(1) == 2 {
		p.mu.Lock()
		delete(p.mu.links, l)
		p.mu.Unlock()
	}
}

// wait sleeps for the delay SetDelay set, if any.
func (p *Proxy) wait() {
	if d := time.Duration(p.delay.Load()); d > 0 {
		time.Sleep(d)
	}
}

// SetDelay makes every chunk of bytes, either way, on every connection,
// open or new, wait d before it is forwarded, as a slow or congested
// network would; 0 ends the delay.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// DropConns closes both sides of every open connection at once, as a
// network that resets them would, and returns how many there were. New
// connections pass.
func (p *Proxy) DropConns() int {
	return p.cut(func() {})
}

// upstream copies client to server, diverting into a Held when armed.
func (p *Proxy) upstream(l *link) {
	buf := make([]byte, 32<<10)
	for {
		n, err := l.client.Read(buf)
		if n > 0 {
			l.mu.Lock()
			h := l.mu.hold
			l.mu.Unlock()
			if h != nil && (h.match == nil || h.owner() == l || h.match(buf[:n])) {
				// The request stops here; the client sees its connection
				// break, as on a partition, and the server side stays
				// open for Release.
				if h.add(l, buf[:n]) {
					l.client.Close()
					return
				}
				continue
			}
			p.wait()
			if _, werr := l.server.Write(buf[:n]); werr != nil {
				l.client.Close()
				return
			}
		}
		if err != nil {
			l.mu.Lock()
			held := l.mu.hold != nil
			l.mu.Unlock()
			if !held {
				l.server.Close()
			}
			return
		}
	}
}

// downstream copies server to client, cutting the link when armed.
func (p *Proxy) downstream(l *link) {
	buf := make([]byte, 32<<10)
	for {
		n, err := l.server.Read(buf)
		if n > 0 {
			l.mu.Lock()
			cut, h := l.mu.cutOnReply, l.mu.hold
			if cut != nil && (l.mu.cutMatch == nil || l.mu.cutMatch(buf[:n])) {
				l.mu.cutOnReply = nil
			} else {
				cut = nil
			}
			l.mu.Unlock()
			// Only the link whose request is held diverts the server's
			// bytes. An armed link that has held nothing yet, or will
			// never hold anything, still forwards: the server talks
			// between calls too (HTTP/2 PING acks, window updates,
			// settings), and a link that stopped reading here would
			// never deliver the answer to a request it holds later.
			if h != nil && h.owner() == l {
				// Until Release, what the server sends the cut client;
				// after it, the answer to the held request.
				h.replies <- append([]byte(nil), buf[:n]...)
				if err != nil {
					close(h.replies)
					return
				}
				continue
			}
			if cut != nil {
				l.client.Close()
				l.server.Close()
				close(cut)
				return
			}
			p.wait()
			if _, werr := l.client.Write(buf[:n]); werr != nil {
				if h != nil && h.owner() == l {
					// The hold took this link, and closed its client,
					// after the check above: the server's side is kept
					// for Release.
					h.replies <- append([]byte(nil), buf[:n]...)
					continue
				}
				l.server.Close()
				return
			}
		}
		if err != nil {
			l.mu.Lock()
			h := l.mu.hold
			l.mu.Unlock()
			if h != nil && h.owner() == l {
				close(h.replies)
			}
			l.client.Close()
			return
		}
	}
}

// links returns the open links.
func (p *Proxy) links() []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*link, 0, len(p.mu.links))
	for l := range p.mu.links {
		out = append(out, l)
	}
	return out
}

// CutOnReply arms the open connections: the next bytes the server sends
// on one of them for which match is true (any bytes, when match is nil)
// are dropped and both sides closed, so the client never learns the
// outcome of the request they answer. Bytes that do not match pass. The
// returned channel is closed when the cut happens, on the first
// connection it happens to.
func (p *Proxy) CutOnReply(match func(reply []byte) bool) <-chan struct{} {
	fired := make(chan struct{})
	var once sync.Once
	for _, l := range p.links() {
		ch := make(chan struct{})
		l.mu.Lock()
		l.mu.cutOnReply, l.mu.cutMatch = ch, match
		l.mu.Unlock()
		go func() {
			select {
			case <-ch:
				once.Do(func() { close(fired) })
			case <-fired:
			}
		}()
	}
	return fired
}

// Held is a request kept from the server by HoldRequests.
type Held struct {
	mu struct {
		sync.Mutex
		link *link
		data []byte
		over bool
	}
	got             chan struct{} // closed when the first bytes are held
	match, complete func([]byte) bool
	// replies carries what the server sends after Release; closed at
	// the server's EOF. Buffered so a server that answers with more
	// chunks than Release reads cannot wedge the proxy.
	replies chan []byte
}

// HoldRequests arms the open connections: the next bytes a client sends
// on one of them for which match is true (any bytes, when match is nil)
// are kept from the server, with what follows them until complete says
// the held bytes are a whole request (at once, when complete is nil);
// then the client's side of that connection is closed. Bytes that do not
// match pass. The server's side stays open until Release.
func (p *Proxy) HoldRequests(match, complete func(request []byte) bool) *Held {
	h := &Held{got: make(chan struct{}), replies: make(chan []byte, 1024), match: match, complete: complete}
	for _, l := range p.links() {
		l.mu.Lock()
		l.mu.hold = h
		l.mu.Unlock()
	}
	return h
}

// add holds b, read from l, and reports whether the request is complete
// (so the client's side may be cut).
func (h *Held) add(l *link, b []byte) (complete bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.link == nil {
		h.mu.link = l
		close(h.got)
	}
	if h.mu.link != l {
		// A second connection: drop it whole, as a partition would.
		l.server.Close()
		return true
	}
	if len(h.mu.data)+len(b) > maxHeldBytes {
		h.mu.over = true
		return true
	}
	h.mu.data = append(h.mu.data, b...)
	return h.complete == nil || h.complete(h.mu.data)
}

// owner returns the link whose request is held, nil before one is.
func (h *Held) owner() *link {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.link
}

// Got is closed once a request has been held.
func (h *Held) Got() <-chan struct{} { return h.got }

// Release sends the held bytes to the server and returns what the server
// answers: everything until it closes the connection, or until done says
// the answer is complete, or until ctx ends (the error then). With
// closeWrite the proxy half-closes the server connection after the held
// bytes, as a client that hung up would.
func (h *Held) Release(ctx context.Context, closeWrite bool, done func(reply []byte) bool) ([]byte, error) {
	h.mu.Lock()
	l, data, over := h.mu.link, h.mu.data, h.mu.over
	h.mu.Unlock()
	if l == nil {
		return nil, errors.New("faultproxy: nothing was held")
	}
	if over {
		return nil, errors.New("faultproxy: held request exceeded the buffer")
	}
	defer l.server.Close()
	if _, err := l.server.Write(data); err != nil {
		return nil, err
	}
	if tc, ok := l.server.(*net.TCPConn); ok && closeWrite {
		_ = tc.CloseWrite()
	}
	var reply []byte
	for {
		select {
		case b, ok := <-h.replies:
			if !ok {
				return reply, nil
			}
			reply = append(reply, b...)
			if done != nil && done(reply) {
				return reply, nil
			}
		case <-ctx.Done():
			return reply, ctx.Err()
		}
	}
}
