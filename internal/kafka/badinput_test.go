package kafka

import (
	"errors"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Each bad input closes its connection with the expected reason, or gets
// the expected error response; either way a second, well-behaved
// connection is still served.
func TestBadInput(t *testing.T) {
	const maxRequestBytes = 1024

	metadataV4 := func() kmsg.Request {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 4
		return req
	}
	flexibleAPIVersions := func(headerTags []byte) []byte {
		// ApiVersions v3: header v2 with tags, then the body.
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		req.ClientSoftwareName = "a"
		req.ClientSoftwareVersion = "1"
		return rawFrame(18, 3, 5, append(headerTags, req.AppendTo(nil)...))
	}
	sizeOnly := func(size int32) []byte { return kbin.AppendInt32(nil, size) }

	tests := []struct {
		name string
		send []byte
		// closeWrite half-closes after sending, so the server sees EOF.
		closeWrite bool
		wantReason error // the connection must close with this
		// wantResponse, if set, is checked instead of a close.
		wantResponse func(t *testing.T, frame []byte)
	}{
		{name: "negative size", send: sizeOnly(-1), wantReason: ErrFrameSize},
		{name: "min int32 size", send: sizeOnly(-1 << 31), wantReason: ErrFrameSize},
		{name: "zero size", send: sizeOnly(0), wantReason: ErrFrameSize},
		{name: "size over limit", send: sizeOnly(maxRequestBytes + 1), wantReason: ErrFrameSize},
		{name: "max int32 size", send: sizeOnly(1<<31 - 1), wantReason: ErrFrameSize},
		{name: "garbage shorter than a header", send: append(sizeOnly(3), "abc"...), wantReason: ErrMalformedRequest},
		{
			name:       "client id longer than the frame",
			send:       append(sizeOnly(12), 0, 18, 0, 3, 0, 0, 0, 1, 0, 100, 'a', 'b'),
			wantReason: ErrMalformedRequest,
		},
		{name: "unknown key 999", send: rawFrame(999, 0, 1, nil), wantReason: ErrUnknownAPIKey},
		{name: "unknown key 1000", send: rawFrame(1000, 3, 1, []byte{1, 2, 3}), wantReason: ErrUnknownAPIKey},
		{name: "negative key", send: rawFrame(-1, 0, 1, nil), wantReason: ErrUnknownAPIKey},
		// LeaderAndIsr is inter-broker: kmsg knows it, Strand never serves it.
		{name: "kmsg key not served (LeaderAndIsr)", send: frameFor(1, kmsg.NewPtrLeaderAndISRRequest()), wantReason: ErrUnknownAPIKey},
		{name: "version below the served range", send: rawFrame(3, 1, 1, []byte{0, 0, 0, 0}), wantReason: ErrUnsupportedVersion},
		{name: "version above the served range", send: rawFrame(3, 13, 1, []byte{1, 0, 0}), wantReason: ErrUnsupportedVersion},
		{name: "version above kmsg's", send: rawFrame(3, 99, 1, nil), wantReason: ErrUnsupportedVersion},
		{
			name:       "body too short for its schema",
			send:       rawFrame(3, 4, 1, []byte{0, 0, 0, 5}), // five topics, none sent
			wantReason: ErrMalformedRequest,
		},
		{
			name:       "bad header tags",
			send:       flexibleAPIVersions([]byte{1, 0, 50}), // one tag claiming 50 bytes
			wantReason: ErrMalformedRequest,
		},
		{
			name:       "truncated frame",
			send:       frameFor(1, metadataV4())[:12],
			closeWrite: true,
			wantReason: io.ErrUnexpectedEOF,
		},
		{
			name:       "truncated size",
			send:       []byte{0, 0},
			closeWrite: true,
			wantReason: io.ErrUnexpectedEOF,
		},
		{name: "ApiVersions v99", send: rawFrame(18, 99, 9, nil), wantResponse: checkTooNewAPIVersions(9)},
		{name: "ApiVersions v-1", send: rawFrame(18, -1, 9, []byte{0xff}), wantResponse: checkTooNewAPIVersions(9)},
		{
			name: "ApiVersions v5 as kgo sends it",
			send: func() []byte {
				req := kmsg.NewPtrApiVersionsRequest()
				req.Version = 5
				req.ClientSoftwareName = "kgo"
				req.ClientSoftwareVersion = "1"
				return frameFor(9, req)
			}(),
			wantResponse: checkTooNewAPIVersions(9),
		},
		{name: "ApiVersions v99 with a bad tag section", send: rawFrame(18, 99, 9, []byte{7}), wantResponse: checkTooNewAPIVersions(9)},
		{name: "header tags skipped", send: flexibleAPIVersions([]byte{2, 0, 1, 'x', 9, 0}), wantResponse: func(t *testing.T, frame []byte) {
			resp := kmsg.NewPtrApiVersionsResponse()
			if corr := decodeResponse(t, frame, resp, 3); corr != 5 || resp.ErrorCode != 0 {
				t.Fatalf("corr %d error %d, want 5 and 0", corr, resp.ErrorCode)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, Config{
				MaxRequestBytes: maxRequestBytes,
				Registry:        withHandlers(t, registration{3, 4, 12, metadataHandler}),
			})
			c := dial(t, ts.addr)
			write(t, c, tt.send)
			if tt.closeWrite {
				c.(*net.TCPConn).CloseWrite()
			}
			if tt.wantResponse != nil {
				tt.wantResponse(t, readFrame(t, c))
				checkAPIVersions(t, c, ts.Server) // still open
			} else {
				expectClosed(t, c)
				cc := ts.obs.waitClose(t)
				if !errors.Is(cc.reason, tt.wantReason) {
					t.Fatalf("close reason %v, want %v", cc.reason, tt.wantReason)
				}
			}
			checkAPIVersions(t, dial(t, ts.addr), ts.Server)
		})
	}
}

func checkTooNewAPIVersions(wantCorr int32) func(t *testing.T, frame []byte) {
	return func(t *testing.T, frame []byte) {
		t.Helper()
		resp := kmsg.NewPtrApiVersionsResponse()
		if corr := decodeResponse(t, frame, resp, 0); corr != wantCorr {
			t.Fatalf("correlation id %d, want %d", corr, wantCorr)
		}
		if resp.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("error code %d, want UNSUPPORTED_VERSION", resp.ErrorCode)
		}
		assertKeys(t, resp.ApiKeys, []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 4}})
	}
}

// A client that breaks the protocol on one connection does not disturb a
// pipelined conversation on another.
func TestBadClientDoesNotDisturbOthers(t *testing.T) {
	ts := startServer(t, Config{MaxRequestBytes: 1024})
	good := dial(t, ts.addr)
	checkAPIVersions(t, good, ts.Server)
	for i, frame := range [][]byte{rawFrame(999, 0, 1, nil), kbin.AppendInt32(nil, 1<<20), {0, 0, 0, 3, 'x', 'y', 'z'}} {
		bad := dial(t, ts.addr)
		write(t, bad, frame)
		expectClosed(t, bad)
		if cc := ts.obs.waitClose(t); cc.reason == nil {
			t.Fatalf("bad frame %d: closed without a reason", i)
		}
		checkAPIVersions(t, good, ts.Server)
	}
}
