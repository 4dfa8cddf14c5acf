package kafka

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkServe measures Heartbeat requests through one TCP connection:
// pipelined (the client writes ahead; the server bounds it) or one at a
// time. Bytes are request plus response frames.
func BenchmarkServe(b *testing.B) {
	for _, bc := range []struct {
		name      string
		pipelined bool
	}{{"pipelined", true}, {"serial", false}} {
		b.Run(bc.name, func(b *testing.B) {
			ts := startServer(b, Config{
				Registry: withHandlers(b, registration{12, 0, 4, nopHandler}),
				Observer: nopObserver{},
			})
			c := dial(b, ts.addr)
			req := kmsg.NewPtrHeartbeatRequest()
			req.Version = 4
			req.Group = "bench-group"
			req.MemberID = "bench-member"
			frame := frameFor(1, req)
			resp := req.ResponseKind()
			respBytes := len(appendResponse(nil, 1, resp))
			b.SetBytes(int64(len(frame) + respBytes))
			r := bufio.NewReaderSize(c, 64<<10)
			buf := make([]byte, respBytes)
			readOne := func() {
				if _, err := io.ReadFull(r, buf); err != nil {
					b.Error(err)
				} else if int(binary.BigEndian.Uint32(buf)) != respBytes-4 {
					b.Errorf("response size %d", binary.BigEndian.Uint32(buf))
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			if bc.pipelined {
				done := make(chan struct{})
				go func() {
					defer close(done)
					for range b.N {
						readOne()
					}
				}()
				w := bufio.NewWriterSize(c, 64<<10)
				for range b.N {
					w.Write(frame)
				}
				w.Flush()
				<-done
				return
			}
			for range b.N {
				c.Write(frame)
				readOne()
			}
		})
	}
}

func BenchmarkParseHeader(b *testing.B) {
	id := "bench-client"
	frame := append(appendHeader(nil, Header{Key: 1, Version: 11, CorrelationID: 9, ClientID: &id}), make([]byte, 100)...)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := parseHeader(frame, &id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServeLargeFrame measures Produce-shaped requests of several
// sizes, answered by a no-op handler, one at a time through one TCP
// connection: the cost of receiving a large frame. Bytes are request
// bytes.
func BenchmarkServeLargeFrame(b *testing.B) {
	for _, size := range []int{32 << 10, 1 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			ts := startServer(b, Config{
				Registry: withHandlers(b, registration{0, 3, 11, nopHandler}),
				Observer: nopObserver{},
			})
			c := dial(b, ts.addr)
			frame := frameFor(1, produceReq(9, 0, nil, rawPart{"bench", 0, make([]byte, size)}))
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			r := bufio.NewReader(c)
			for b.Loop() {
				// acks=0 would get no answer; the nop handler answers
				// every request, so each one round-trips.
				if _, err := c.Write(frame); err != nil {
					b.Fatal(err)
				}
				var size [4]byte
				if _, err := io.ReadFull(r, size[:]); err != nil {
					b.Fatal(err)
				}
				if _, err := r.Discard(int(binary.BigEndian.Uint32(size[:]))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
