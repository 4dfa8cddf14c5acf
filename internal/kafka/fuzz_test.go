package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzSeedRequests are valid requests of several keys and versions.
func fuzzSeedRequests() []kmsg.Request {
	var reqs []kmsg.Request
	for _, v := range []int16{0, 2, 3, 4} {
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version = v
		r.ClientSoftwareName = "kgo"
		r.ClientSoftwareVersion = "1.0"
		reqs = append(reqs, r)
	}
	for _, v := range []int16{0, 4, 9, 12} {
		r := kmsg.NewPtrMetadataRequest()
		r.Version = v
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr("orders")
		r.Topics = append(r.Topics, t)
		reqs = append(reqs, r)
	}
	for _, v := range []int16{3, 7, 9} {
		r := kmsg.NewPtrProduceRequest()
		r.Version = v
		r.Acks = -1
		t := kmsg.NewProduceRequestTopic()
		t.Topic = "orders"
		p := kmsg.NewProduceRequestTopicPartition()
		p.Records = bytes.Repeat([]byte{0x42}, 61)
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		reqs = append(reqs, r)
	}
	for _, v := range []int16{4, 11, 12} {
		r := kmsg.NewPtrFetchRequest()
		r.Version = v
		t := kmsg.NewFetchRequestTopic()
		t.Topic = "orders"
		t.Partitions = append(t.Partitions, kmsg.NewFetchRequestTopicPartition())
		r.Topics = append(r.Topics, t)
		reqs = append(reqs, r)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 4
	hb.Group = "g"
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version = 8
	oc.Group = "g"
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 4
	fc.CoordinatorKeys = []string{"g"}
	return append(reqs, hb, oc, fc)
}

func fuzzSeedStreams() [][]byte {
	var all []byte
	var streams [][]byte
	for i, req := range fuzzSeedRequests() {
		f := frameFor(int32(i), req)
		streams = append(streams, f)
		all = append(all, f...)
	}
	streams = append(streams,
		all,
		rawFrame(18, 99, 1, nil),
		append(rawFrame(18, 3, 1, []byte{0}), rawFrame(999, 0, 2, nil)...),
		[]byte{0xff, 0xff, 0xff, 0xff},
		[]byte{0, 0, 0, 3, 'a', 'b', 'c'},
		all[:len(all)/2],
	)
	return streams
}

// fuzzRegistry serves every key kmsg knows at every version with an empty
// response, so fuzzing reaches every request decoder and response encoder.
func fuzzRegistry(t testing.TB) *Registry {
	r := DefaultRegistry()
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil || key == apiVersionsKey {
			continue
		}
		if err := r.Register(key, 0, req.MaxVersion(), nopHandler); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// FuzzServeFrame feeds arbitrary bytes to a connection as its request
// stream. The server must not panic or leak goroutines; its responses must
// answer the stream's requests in order, one each, until it either waits
// for more bytes (then every complete request was answered) or closes the
// connection (then a prefix was).
func FuzzServeFrame(f *testing.F) {
	for _, s := range fuzzSeedStreams() {
		f.Add(s)
	}
	reg := fuzzRegistry(f)
	f.Fuzz(func(t *testing.T, stream []byte) {
		synctest.Test(t, func(t *testing.T) {
			s, err := New(Config{
				Logger:                discardLogger,
				MaxRequestBytes:       64 << 10,
				MaxQueuedRequestBytes: 256 << 10,
				MaxInFlightPerConn:    4,
				Registry:              reg,
			})
			if err != nil {
				t.Fatal(err)
			}
			client, server := net.Pipe()
			served := make(chan error, 1)
			go func() { served <- s.ServeConn(context.Background(), server) }()
			go client.Write(stream)
			var responses []int32
			readDone := make(chan error, 1)
			go func() {
				for {
					frame, err := readFrameErr(client)
					if err != nil {
						readDone <- err
						return
					}
					if len(frame) < 4 {
						readDone <- errors.New("response frame too short for a correlation id")
						return
					}
					responses = append(responses, int32(binary.BigEndian.Uint32(frame)))
				}
			}()
			synctest.Wait() // the server has read all it will, answered all it can

			closedByServer := len(served) == 1
			client.Close()
			reason := <-served
			if errors.Is(reason, ErrHandlerPanic) || errors.Is(reason, errDecoderPanic) {
				t.Fatalf("panic serving %x: %v", stream, reason)
			}
			if err := <-readDone; !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
				t.Fatalf("reading responses: %v", err)
			}

			requests := completeFrameCorrelations(stream, 64<<10)
			if len(responses) > len(requests) {
				t.Fatalf("%d responses to %d complete requests", len(responses), len(requests))
			}
			for i, corr := range responses {
				if corr != requests[i] {
					t.Fatalf("response %d has correlation id %d, want %d", i, corr, requests[i])
				}
			}
			if !closedByServer && len(responses) != len(requests) {
				t.Fatalf("server waits for more input with %d of %d requests answered", len(responses), len(requests))
			}
		})
	})
}

// completeFrameCorrelations returns the correlation ids of the stream's
// complete frames, up to the first whose size is out of range or that is
// too short to carry one.
func completeFrameCorrelations(stream []byte, maxRequestBytes int32) []int32 {
	var out []int32
	for len(stream) >= 4 {
		size := int32(binary.BigEndian.Uint32(stream))
		if size <= 0 || size > maxRequestBytes || int(size) > len(stream)-4 || size < fixedHeaderBytes {
			break
		}
		out = append(out, int32(binary.BigEndian.Uint32(stream[8:])))
		stream = stream[4+size:]
	}
	return out
}

// FuzzParseHeader: no panics; a header that parses re-encodes to one that
// parses the same, with the same body.
func FuzzParseHeader(f *testing.F) {
	for _, s := range fuzzSeedStreams() {
		if len(s) > 4 {
			f.Add(s[4:])
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, req, body, err := parseHeader(frame, nil)
		if err != nil {
			if len(frame) >= fixedHeaderBytes && h.CorrelationID != int32(binary.BigEndian.Uint32(frame[4:])) {
				t.Fatal("fixed fields not set on error")
			}
			return
		}
		if req == nil || req.Key() != h.Key || req.GetVersion() != h.Version {
			t.Fatalf("request %v for header %+v", req, h)
		}
		if len(body) > len(frame)-fixedHeaderBytes {
			t.Fatalf("body of %d bytes from a %d-byte frame", len(body), len(frame))
		}
		again := append(appendHeader(nil, h), body...)
		h2, _, body2, err := parseHeader(again, h.ClientID)
		if err != nil {
			t.Fatalf("re-encoded header does not parse: %v", err)
		}
		if h2 != h { // equal client ids reuse the pointer
			t.Fatalf("header %+v re-parsed as %+v", h, h2)
		}
		if !bytes.Equal(body, body2) {
			t.Fatal("body changed on re-encoding")
		}
	})
}
