package e2e

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/kafka"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// TestBadInput sends bad bytes to a whole agent over raw TCP. Each case
// either closes its connection, counted under the expected reason in
// /metrics, or gets the expected answer on a connection that stays
// usable; after each, a separate franz-go client still produces and
// consumes. internal/kafka tests the same cases against the bare server;
// this checks the agent wires them up the same way.
func TestBadInput(t *testing.T) {
	a := startAgent(t, agent.Config{HTTPListen: "127.0.0.1:0"})
	addr := a.KafkaAddr()
	const probeTopic, crcTopic = "probe", "badcrc"
	createTopic(t, addr, probeTopic, 1)
	createTopic(t, addr, crcTopic, 1)

	sizeOnly := func(size int32) []byte { return kbin.AppendInt32(nil, size) }
	frame := func(body []byte) []byte { return append(sizeOnly(int32(len(body))), body...) }
	header := func(key, version int16) []byte {
		b := kbin.AppendInt16(nil, key)
		b = kbin.AppendInt16(b, version)
		b = kbin.AppendInt32(b, 1)     // correlation id
		return kbin.AppendInt16(b, -1) // null client id
	}

	tests := []struct {
		name string
		// send is written raw; a case with do instead talks kmsg.
		send []byte
		// wantClosed is the close reason label the agent must count.
		wantClosed string
		do         func(t *testing.T, c *rawConn)
	}{
		{name: "negative size", send: sizeOnly(-1), wantClosed: "frame_size"},
		{name: "zero size", send: sizeOnly(0), wantClosed: "frame_size"},
		{name: "size over the request limit", send: sizeOnly(kafka.DefaultMaxRequestBytes + 1), wantClosed: "frame_size"},
		{name: "garbage after a valid size", send: frame([]byte("\x7f\x7f\x7f\x7fgarbage!garbage!")), wantClosed: "unknown_api_key"},
		{name: "frame shorter than a header", send: frame([]byte("abc")), wantClosed: "malformed_request"},
		{
			// Metadata v1: a topic array claiming 2^31-1 entries.
			name:       "garbage body of a known key",
			send:       frame(append(header(3, 1), 0x7f, 0xff, 0xff, 0xff, 'x')),
			wantClosed: "malformed_request",
		},
		{name: "unknown api key", send: frame(header(9999, 0)), wantClosed: "unknown_api_key"},
		// LeaderAndIsr is inter-broker: kmsg knows it, an agent never serves it.
		{name: "known key never served", send: frame(append(header(4, 0), kmsg.NewPtrLeaderAndISRRequest().AppendTo(nil)...)), wantClosed: "unknown_api_key"},
		{name: "unsupported version of a known key", send: frame(header(3, 99)), wantClosed: "unsupported_version"},
		{
			name: "ApiVersions v99",
			do: func(t *testing.T, c *rawConn) {
				req := kmsg.NewPtrApiVersionsRequest()
				req.Version = 99
				resp := kmsg.NewPtrApiVersionsResponse()
				resp.Version = 0 // KIP-511: the answer is always v0
				c.roundTrip(t, req, resp)
				if resp.ErrorCode != kerr.UnsupportedVersion.Code {
					t.Errorf("ApiVersions v99: error %d, want UNSUPPORTED_VERSION", resp.ErrorCode)
				}
				if len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MaxVersion < 3 {
					t.Errorf("ApiVersions v99: keys %+v, want key 18's range only", resp.ApiKeys)
				}
				// The client retries at the version it was told, on
				// the same connection.
				req = kmsg.NewPtrApiVersionsRequest()
				req.Version = resp.ApiKeys[0].MaxVersion
				req.ClientSoftwareName, req.ClientSoftwareVersion = "e2e", "1"
				resp = kmsg.NewPtrApiVersionsResponse()
				resp.Version = req.Version
				c.roundTrip(t, req, resp)
				if resp.ErrorCode != 0 || len(resp.ApiKeys) < 5 {
					t.Errorf("ApiVersions v%d retry: error %d, %d keys", req.Version, resp.ErrorCode, len(resp.ApiKeys))
				}
			},
		},
		{
			name: "Produce with a bad CRC",
			do: func(t *testing.T, c *rawConn) {
				o := batchtest.Options{Records: 3, ValueBytes: 20, FirstTimestamp: time.Now().UnixMilli()}
				good := batchtest.Build(t, o)
				bad := append([]byte(nil), good...)
				bad[len(bad)-1] ^= 0xff // inside the records: the CRC no longer matches

				for _, step := range []struct {
					records  []byte
					wantCode int16
				}{
					{bad, kerr.CorruptMessage.Code},
					// The connection is still usable, and nothing of the
					// bad batch took an offset.
					{good, 0},
				} {
					req := kmsg.NewPtrProduceRequest()
					req.Version = 7
					req.Acks = -1
					req.TimeoutMillis = int32(opTimeout / time.Millisecond)
					rt := kmsg.NewProduceRequestTopic()
					rt.Topic = crcTopic
					rp := kmsg.NewProduceRequestTopicPartition()
					rp.Partition = 0
					rp.Records = step.records
					rt.Partitions = append(rt.Partitions, rp)
					req.Topics = append(req.Topics, rt)
					resp := kmsg.NewPtrProduceResponse()
					resp.Version = req.Version
					c.roundTrip(t, req, resp)
					if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
						t.Fatalf("produce response %+v: want one partition", resp)
					}
					p := resp.Topics[0].Partitions[0]
					if p.ErrorCode != step.wantCode {
						t.Fatalf("produce: error %d, want %d", p.ErrorCode, step.wantCode)
					}
					if step.wantCode == 0 && p.BaseOffset != 0 {
						t.Errorf("good batch after the bad one at offset %d, want 0", p.BaseOffset)
					}
				}
				if end := endOffsets(t, addr, crcTopic)[0]; end != int64(o.Records) {
					t.Errorf("%s ends at %d, want %d", crcTopic, end, o.Records)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := closedConns(t, a.HTTPAddr())
			c := dialRaw(t, addr)
			if tt.do != nil {
				tt.do(t, c)
			} else {
				c.write(t, tt.send)
				c.expectClosed(t)
			}
			if tt.wantClosed != "" {
				waitClosedCount(t, a.HTTPAddr(), tt.wantClosed, before[tt.wantClosed]+1)
			}
			checkRoundTrip(t, addr, probeTopic)
			for reason, n := range closedConns(t, a.HTTPAddr()) {
				want := before[reason]
				if reason == tt.wantClosed {
					want++
				}
				// "client" counts the clean closes of probe clients.
				if reason != "client" && n != want {
					t.Errorf("connections closed for %q: %v, want %v", reason, n, want)
				}
			}
		})
	}
}

// waitClosedCount waits until the agent has counted n connections closed
// for reason. The agent counts a close after the socket is shut, so the
// client's EOF can come first; /metrics is polled, a few ms apart, until
// the count arrives or opTimeout passes.
func waitClosedCount(t *testing.T, httpAddr, reason string, n float64) {
	t.Helper()
	deadline := time.Now().Add(opTimeout)
	for {
		got := closedConns(t, httpAddr)[reason]
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections closed for %q: %v after %v, want %v", reason, got, opTimeout, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closedConns reads strand_kafka_connections_closed_total by reason.
func closedConns(t *testing.T, httpAddr string) map[string]float64 {
	t.Helper()
	out := make(map[string]float64)
	f := scrape(t, httpAddr)["strand_kafka_connections_closed_total"]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		out[label(m, "reason")] += m.GetCounter().GetValue()
	}
	return out
}

// scrape reads an agent's /metrics.
func scrape(t *testing.T, httpAddr string) map[string]*dto.MetricFamily {
	t.Helper()
	_, body := httpGet(t, "http://"+httpAddr+"/metrics")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// rawConn is a Kafka connection without a client library.
type rawConn struct {
	nc   net.Conn
	corr int32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, opTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{nc: nc}
}

func (c *rawConn) write(t *testing.T, b []byte) {
	t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(opTimeout))
	if _, err := c.nc.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// roundTrip sends req and decodes the answer into resp, whose version
// the caller sets.
func (c *rawConn) roundTrip(t *testing.T, req kmsg.Request, resp kmsg.Response) {
	t.Helper()
	c.corr++
	c.write(t, kmsg.NewRequestFormatter(kmsg.FormatterClientID("e2e")).AppendRequest(nil, req, c.corr))
	c.nc.SetReadDeadline(time.Now().Add(opTimeout))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		t.Fatalf("%s v%d: reading the response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.nc, body); err != nil {
		t.Fatalf("%s v%d: reading the response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if len(body) < 4 || int32(binary.BigEndian.Uint32(body)) != c.corr {
		t.Fatalf("response correlation id: got frame %x, want %d", body[:min(len(body), 8)], c.corr)
	}
	body = body[4:]
	if resp.IsFlexible() && resp.Key() != 18 {
		body = body[1:] // header tags; none are sent
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decoding %s v%d response: %v", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
}

// expectClosed reads until the agent closes the connection; any byte of
// response fails the test.
func (c *rawConn) expectClosed(t *testing.T) {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(opTimeout))
	var buf [64]byte
	n, err := c.nc.Read(buf[:])
	switch {
	case n > 0:
		t.Fatalf("got %d response bytes %x, want the connection closed", n, buf[:n])
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
	default:
		t.Fatalf("read: %v, want the connection closed", err)
	}
}
