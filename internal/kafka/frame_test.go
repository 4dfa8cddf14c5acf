package kafka

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestParseHeader(t *testing.T) {
	id := "client-1"
	tests := []struct {
		name     string
		frame    []byte // without the size
		want     Header
		wantBody int // body length
		wantErr  error
	}{
		{
			name:  "v1 header, null client id",
			frame: rawFrame(3, 4, 7, []byte{0, 0, 0, 0, 1})[4:],
			want:  Header{Key: 3, Version: 4, CorrelationID: 7}, wantBody: 5,
		},
		{
			name:  "v1 header with client id",
			frame: append(appendHeader(nil, Header{Key: 3, Version: 8, CorrelationID: -5, ClientID: &id}), 9, 9),
			want:  Header{Key: 3, Version: 8, CorrelationID: -5, ClientID: &id}, wantBody: 2,
		},
		{
			name:  "v2 header skips tags",
			frame: append(rawFrame(3, 9, 1, []byte{1, 4, 2, 'h', 'i'})[4:], 0xaa),
			want:  Header{Key: 3, Version: 9, CorrelationID: 1}, wantBody: 1,
		},
		{
			name:  "v2 header, empty client id",
			frame: []byte{0, 18, 0, 3, 0, 0, 0, 2, 0, 0, 0},
			want:  Header{Key: 18, Version: 3, CorrelationID: 2, ClientID: new(string)}, wantBody: 0,
		},
		{name: "short", frame: []byte{0, 3, 0, 4, 0, 0, 0}, wantErr: ErrMalformedRequest},
		{
			name:  "unknown key keeps the fixed fields",
			frame: []byte{3, 231, 0, 1, 0, 0, 0, 9},
			want:  Header{Key: 999, Version: 1, CorrelationID: 9}, wantErr: ErrUnknownAPIKey,
		},
		{
			name:  "v2 header without tags",
			frame: rawFrame(3, 9, 1, nil)[4:],
			want:  Header{Key: 3, Version: 9, CorrelationID: 1}, wantErr: ErrMalformedRequest,
		},
		{
			name:  "client id past the end",
			frame: []byte{0, 3, 0, 4, 0, 0, 0, 1, 0, 5, 'a'},
			want:  Header{Key: 3, Version: 4, CorrelationID: 1}, wantErr: ErrMalformedRequest,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, req, body, err := parseHeader(tt.frame, nil)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if h.Key != tt.want.Key || h.Version != tt.want.Version || h.CorrelationID != tt.want.CorrelationID ||
				(h.ClientID == nil) != (tt.want.ClientID == nil) || (h.ClientID != nil && *h.ClientID != *tt.want.ClientID) {
				t.Fatalf("header %+v, want %+v", h, tt.want)
			}
			if err != nil {
				return
			}
			if req.Key() != h.Key || req.GetVersion() != h.Version {
				t.Fatalf("request key %d v%d", req.Key(), req.GetVersion())
			}
			if len(body) != tt.wantBody {
				t.Fatalf("body %d bytes, want %d", len(body), tt.wantBody)
			}
		})
	}
}

// A connection's repeated client id is not allocated per request.
func TestParseHeaderReusesClientID(t *testing.T) {
	id := "same-client"
	frame := appendHeader(nil, Header{Key: 18, Version: 2, ClientID: &id})
	h1, _, _, err := parseHeader(frame, nil)
	if err != nil {
		t.Fatal(err)
	}
	h2, _, _, _ := parseHeader(frame, h1.ClientID)
	if h2.ClientID != h1.ClientID {
		t.Fatal("equal client id not reused")
	}
	if allocs := testing.AllocsPerRun(100, func() { parseHeader(frame, h1.ClientID) }); allocs > 1 {
		t.Errorf("%v allocations per parse with a known client id, want at most 1 (the request)", allocs)
	}
}

func TestAppendResponseHeader(t *testing.T) {
	tests := []struct {
		name    string
		resp    kmsg.Response
		version int16
		tagByte bool
	}{
		{name: "ApiVersions v3 is never flexible", resp: kmsg.NewPtrApiVersionsResponse(), version: 3},
		{name: "ApiVersions v0", resp: kmsg.NewPtrApiVersionsResponse(), version: 0},
		{name: "Metadata v8", resp: kmsg.NewPtrMetadataResponse(), version: 8},
		{name: "Metadata v9 is flexible", resp: kmsg.NewPtrMetadataResponse(), version: 9, tagByte: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.resp.SetVersion(tt.version)
			body := tt.resp.AppendTo(nil)
			frame := appendResponse([]byte("prefix"), 42, tt.resp)[len("prefix"):]
			wantLen := 4 + len(body)
			if tt.tagByte {
				wantLen++
			}
			if got := int(frame[0])<<24 | int(frame[1])<<16 | int(frame[2])<<8 | int(frame[3]); got != wantLen || len(frame) != 4+wantLen {
				t.Fatalf("size field %d, frame %d bytes; want %d", got, len(frame), 4+wantLen)
			}
			if corr := decodeResponse(t, frame[4:], tt.resp.RequestKind().ResponseKind(), tt.version); corr != 42 {
				t.Fatalf("correlation id %d", corr)
			}
		})
	}
}

func TestFrameBufPool(t *testing.T) {
	for _, tt := range []struct{ n, wantCap int }{
		{1, 512}, {512, 512}, {513, 640}, {640, 640}, {641, 768}, {897, 1024}, {4000, 4096},
		{1 << 16, 1 << 16}, {1<<16 + 1, 80 << 10}, {1 << 20, 1 << 20}, {5 << 20, 5 << 20},
		{5<<20 + 1, 6 << 20}, {1 << 23, 1 << 23}, {1<<23 + 1, 1<<23 + 1},
	} {
		p := getFrameBuf(tt.n)
		if len(*p) != tt.n || cap(*p) != tt.wantCap {
			t.Errorf("getFrameBuf(%d): len %d cap %d, want cap %d", tt.n, len(*p), cap(*p), tt.wantCap)
		}
		putFrameBuf(p)
	}
	// Every class's size maps back to that class, and classes grow.
	for c := range len(framePools) {
		n := frameClassBytes(c)
		if got := frameClass(n); got != c {
			t.Errorf("frameClass(frameClassBytes(%d) = %d) = %d", c, n, got)
		}
		if c > 0 && frameClass(n-1) != c && frameClassBytes(c-1) < n-1 {
			t.Errorf("frameClass(%d) = %d, want %d", n-1, frameClass(n-1), c)
		}
		if c > 0 && frameClassBytes(c-1) >= n {
			t.Errorf("class %d (%d B) not above class %d (%d B)", c, n, c-1, frameClassBytes(c-1))
		}
	}
	if n := frameClassBytes(len(framePools) - 1); n != maxPooledFrameBytes {
		t.Errorf("largest class %d B, want %d", n, maxPooledFrameBytes)
	}
}
