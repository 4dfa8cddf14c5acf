package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A request frame:
//
//	size          int32   bytes that follow; 0 < size <= MaxRequestBytes
//	api key       int16
//	api version   int16
//	correlation   int32
//	client id     nullable string (int16 length, -1 = null)
//	header tags   tagged fields, only when the request version is flexible
//	body          the request, as kmsg decodes it
//
// A response frame:
//
//	size          int32
//	correlation   int32
//	header tags   one 0 byte when the response is flexible, except ApiVersions,
//	              whose response header is never flexible (clients parse it
//	              before they know the broker's versions)
//	body          the response, as kmsg encodes it

const (
	// fixedHeaderBytes is key, version and correlation id.
	fixedHeaderBytes = 8
	apiVersionsKey   = 18
)

// parseHeader parses a request frame's header. It returns the header and,
// for a key kmsg knows, an empty request of that key at the header's
// version, plus the body that follows the header. The fixed fields of h are
// set whenever the frame holds fixedHeaderBytes, even with an error.
// prevClientID, if equal to the frame's client id, is reused so a
// connection does not allocate its client id per request.
func parseHeader(frame []byte, prevClientID *string) (h Header, req kmsg.Request, body []byte, err error) {
	if len(frame) < fixedHeaderBytes {
		return h, nil, nil, fmt.Errorf("%w: %d-byte frame is shorter than a request header", ErrMalformedRequest, len(frame))
	}
	h.Key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	req = kmsg.RequestForKey(h.Key)
	if req == nil {
		return h, nil, nil, fmt.Errorf("%w: key %d", ErrUnknownAPIKey, h.Key)
	}
	req.SetVersion(h.Version)

	b := kbin.Reader{Src: frame[fixedHeaderBytes:]}
	if n := b.Int16(); n >= 0 {
		id := b.Span(int(n))
		switch {
		case !b.Ok():
		case prevClientID != nil && string(id) == *prevClientID:
			h.ClientID = prevClientID
		default:
			s := string(id)
			h.ClientID = &s
		}
	}
	if req.IsFlexible() {
		skipTags(&b)
	}
	if err := b.Complete(); err != nil {
		return h, req, nil, fmt.Errorf("%w: key %d v%d header: %v", ErrMalformedRequest, h.Key, h.Version, err)
	}
	return h, req, b.Src, nil
}

// skipTags is kmsg.SkipTags on the concrete reader: through kmsg's
// interface parameter the reader escapes, one allocation per request.
func skipTags(b *kbin.Reader) {
	for n := b.Uvarint(); n > 0 && b.Ok(); n-- {
		b.Uvarint() // tag
		b.Span(int(b.Uvarint()))
	}
}

// appendHeader appends the header parseHeader reads (without the frame
// size), for tests and fuzzing.
func appendHeader(dst []byte, h Header) []byte {
	dst = kbin.AppendInt16(dst, h.Key)
	dst = kbin.AppendInt16(dst, h.Version)
	dst = kbin.AppendInt32(dst, h.CorrelationID)
	dst = kbin.AppendNullableString(dst, h.ClientID)
	if req := kmsg.RequestForKey(h.Key); req != nil {
		req.SetVersion(h.Version)
		if req.IsFlexible() {
			dst = append(dst, 0)
		}
	}
	return dst
}

// errDecoderPanic marks a recovered kmsg panic, which fuzzing reports.
var errDecoderPanic = errors.New("kafka: request decoder panic")

// decodeBody decodes body into req. kmsg is not expected to panic on bad
// input, but a panic here would take the whole agent down for one client's
// bytes, so it is turned into an error.
func decodeBody(req kmsg.Request, body []byte) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %w: key %d v%d: %v", ErrMalformedRequest, errDecoderPanic, req.Key(), req.GetVersion(), v)
		}
	}()
	if err := req.ReadFrom(body); err != nil {
		return fmt.Errorf("%w: key %d v%d body: %v", ErrMalformedRequest, req.Key(), req.GetVersion(), err)
	}
	return nil
}

// appendResponse appends one response frame.
func appendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = kbin.AppendInt32(dst, correlationID)
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// Frame buffers are pooled by size class, up to maxPooledFrameBytes:
// four classes per power of two (512, 640, 768, 896, 1024, 1280 ...), so
// a buffer is at most a quarter larger than the frame share it holds
// (the request budget counts the share, not the buffer). Large produce
// requests are pooled too: allocating, faulting in and zeroing a fresh
// buffer for each one (and for each rung it climbs, see growFrame) was
// 3% of the agent's CPU at saturation. The pools hold nothing a GC cycle or two
// does not drop, and what they hold was in flight, within the budget,
// just before.
const (
	minPooledFrameShift = 9  // 512 B
	maxPooledFrameShift = 23 // 8 MiB
	maxPooledFrameBytes = 1 << maxPooledFrameShift
	// frameSubclasses is the classes per power of two.
	frameSubclassShift = 2
	frameSubclasses    = 1 << frameSubclassShift
)

var framePools [(maxPooledFrameShift-minPooledFrameShift)*frameSubclasses + 1]sync.Pool

// frameClass is the index of the smallest class of at least n bytes,
// 0 < n <= maxPooledFrameBytes.
func frameClass(n int) int {
	if n <= 1<<minPooledFrameShift {
		return 0
	}
	base := bits.Len(uint(n-1)) - 1 // 1<<base < n <= 1<<(base+1)
	step := 1 << (base - frameSubclassShift)
	j := (n - 1<<base + step - 1) / step // 1..frameSubclasses
	return (base-minPooledFrameShift)*frameSubclasses + j
}

// frameClassBytes is the size of class c.
func frameClassBytes(c int) int {
	base := minPooledFrameShift + c/frameSubclasses
	return 1<<base + (c%frameSubclasses)<<(base-frameSubclassShift)
}

// getFrameBuf returns a buffer of length n, n > 0.
func getFrameBuf(n int) *[]byte {
	if n > maxPooledFrameBytes {
		b := make([]byte, n)
		return &b
	}
	c := frameClass(n)
	if p, _ := framePools[c].Get().(*[]byte); p != nil {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n, frameClassBytes(c))
	return &b
}

func putFrameBuf(p *[]byte) {
	n := cap(*p)
	if n > maxPooledFrameBytes || n < 1<<minPooledFrameShift {
		return
	}
	if c := frameClass(n); frameClassBytes(c) == n {
		framePools[c].Put(p)
	}
}
