package agent_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/agent"
)

// The connection settings reach the Kafka server, and /metrics counts the
// connections they close under their reasons.
func TestConnectionSettingsReachServer(t *testing.T) {
	t.Run("max connections per IP", func(t *testing.T) {
		a := startWith(t, agent.Config{DataDir: t.TempDir(), MaxConnectionsPerIP: 1}, nil)
		first := dialFrom(t, a.KafkaAddr(), "127.0.0.1")
		apiVersions(t, first)
		expectEOF(t, dialFrom(t, a.KafkaAddr(), "127.0.0.1"))
		apiVersions(t, dialFrom(t, a.KafkaAddr(), "127.0.0.2"))
		apiVersions(t, first)
		checkMetrics(t, a.HTTPAddr(), []metricCheck{
			{name: "strand_kafka_connections_closed_total", labels: map[string]string{"reason": "too_many_conns_per_ip"}},
		})
	})
	t.Run("per-IP overrides", func(t *testing.T) {
		a := startWith(t, agent.Config{DataDir: t.TempDir(), MaxConnectionsPerIPOverrides: "127.0.0.2:0"}, nil)
		apiVersions(t, dialFrom(t, a.KafkaAddr(), "127.0.0.1"))
		expectEOF(t, dialFrom(t, a.KafkaAddr(), "127.0.0.2"))
	})
	t.Run("connections max idle", func(t *testing.T) {
		a := startWith(t, agent.Config{DataDir: t.TempDir(), ConnectionsMaxIdle: 200 * time.Millisecond}, nil)
		c := dialFrom(t, a.KafkaAddr(), "127.0.0.1")
		apiVersions(t, c)
		expectEOF(t, c)
		checkMetrics(t, a.HTTPAddr(), []metricCheck{
			{name: "strand_kafka_connections_closed_total", labels: map[string]string{"reason": "idle_timeout"}},
		})
	})
}

// dialFrom connects to addr from the loopback address from.
func dialFrom(t *testing.T, addr, from string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: opTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// apiVersions round-trips an ApiVersions request on c.
func apiVersions(t *testing.T, c net.Conn) {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strand-test", "1.0"
	c.SetDeadline(time.Now().Add(opTimeout))
	if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(body[4:]); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions: %v, error code %d", err, resp.ErrorCode)
	}
}

// expectEOF asserts the agent closed c.
func expectEOF(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(opTimeout))
	n, err := c.Read(make([]byte, 1))
	if n > 0 || !(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("read on a connection the agent should close: %d bytes, %v", n, err)
	}
}
