package kafka

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/strandkafka/strand/internal/auth"
)

// handshake runs the TLS handshake of a connection on a TLS listener
// before any request is read, so a client that sends garbage, speaks
// plaintext or offers a refused certificate is closed at once, and one
// that sends nothing at all after TLSHandshakeTimeout. On an SSL
// listener a client certificate names the principal; on SASL_SSL the
// SASL exchange does.
func (c *Conn) handshake() error {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return nil
	}
	c.nc.SetDeadline(time.Now().Add(c.srv.cfg.TLSHandshakeTimeout))
	// After setting the deadline, so a concurrent Shutdown's deadline in
	// the past is never overwritten unseen.
	if c.srv.closing() {
		return ErrServerClosed
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.srv.cfg.TLSHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		if c.srv.closing() {
			return ErrServerClosed
		}
		return fmt.Errorf("%w: %w", ErrTLSHandshake, err)
	}
	c.nc.SetDeadline(time.Time{})
	st := tc.ConnectionState()
	if c.listener.Protocol == auth.SSL && len(st.PeerCertificates) > 0 {
		c.SetPrincipal(auth.CertificatePrincipal(st.PeerCertificates[0]))
	}
	return nil
}

// tcpConn is the TCP connection under nc, if there is one.
func tcpConn(nc net.Conn) (*net.TCPConn, bool) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	t, ok := nc.(*net.TCPConn)
	return t, ok
}
