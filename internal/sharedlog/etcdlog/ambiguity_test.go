package etcdlog_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/etcdlog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/backendtest"
	"github.com/strandkafka/strand/internal/testservers/etcdtest"
	"github.com/strandkafka/strand/internal/testservers/faultproxy"
)

// proxied opens a loglet whose client reaches etcd through a fault
// proxy, and appends a first entry so the connection exists.
func proxied(t *testing.T) (*etcdlog.Loglet, *faultproxy.Proxy) {
	t.Helper()
	p, err := faultproxy.Start(etcdtest.Endpoints(t)[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	cli := newClient(t, p.Addr())
	l, err := etcdlog.Open(testCtx(t), cli, newPath(), etcdlog.Options{AttemptTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if pos, err := l.Append(testCtx(t), []byte("first")); err != nil || pos != 0 {
		t.Fatalf("first Append = (%d, %v)", pos, err)
	}
	return l, p
}

// wantLog checks the loglet holds exactly want, each entry once.
func wantLog(t *testing.T, l sharedlog.Loglet, want ...string) {
	t.Helper()
	backendtest.WantLog(t, testCtx(t), l, want...)
}

// TestLostTxnReply: the transaction is applied but the connection breaks
// before its reply arrives. The writer sends the identical transaction
// again, finds its own batch id in the slot, and the Append succeeds
// there without a second copy.
func TestLostTxnReply(t *testing.T) {
	l, p := proxied(t)
	fired := p.CutOnReply(rpcReply)
	pos, err := l.Append(testCtx(t), []byte("reply lost"))
	if err != nil {
		t.Fatalf("Append with its reply lost = %v, want the writer to resolve it", err)
	}
	select {
	case <-fired:
	default:
		t.Fatal("the fault never fired")
	}
	if pos != 1 {
		t.Fatalf("Append landed at %d, want 1", pos)
	}
	if st := l.Stats(); st.Ambiguous != 1 || st.Landed != 1 || st.NotLanded != 0 {
		t.Fatalf("stats %+v, want one ambiguous transaction that landed", st)
	}
	wantLog(t, l, "first", "reply lost")
}

// TestZombieTxn: the transaction is kept from etcd while the writer, its
// connection broken, sends it again on a new one, where it lands. Then
// the first copy reaches etcd, which runs it: its compare on the slot
// must fail, so the entry is in the log once.
func TestZombieTxn(t *testing.T) {
	l, p := proxied(t)
	held := p.HoldRequests(rpcRequest, rpcRequestEnded)
	pos, err := l.Append(testCtx(t), []byte("zombie"))
	if err != nil {
		t.Fatalf("Append whose first send was held = %v", err)
	}
	select {
	case <-held.Got():
	default:
		t.Fatal("nothing was held")
	}
	if pos != 1 {
		t.Fatalf("Append landed at %d, want 1", pos)
	}
	if st := l.Stats(); st.Ambiguous != 1 || st.NotLanded != 1 || st.Landed != 0 {
		t.Fatalf("stats %+v, want one ambiguous transaction that did not land", st)
	}
	// Deliver the first copy and wait for etcd's answer to it: a
	// response that ends its HTTP/2 stream.
	reply, err := held.Release(testCtx(t), false, streamEnded)
	if err != nil {
		t.Fatalf("releasing the held transaction: %v (got %d bytes back)", err, len(reply))
	}
	if !hasDataFrame(reply) {
		t.Fatalf("etcd answered the held transaction without a response message: %q", reply)
	}
	wantLog(t, l, "first", "zombie")
	if pos, err := l.Append(testCtx(t), []byte("after")); err != nil || pos != 2 {
		t.Fatalf("Append after the zombie = (%d, %v), want (2, nil)", pos, err)
	}
	wantLog(t, l, "first", "zombie", "after")
}

// http2Frames calls f for every whole HTTP/2 frame in b.
func http2Frames(b []byte, f func(typ, flags byte, stream uint32) bool) bool {
	for len(b) >= 9 {
		n := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
		if len(b) < 9+n {
			return false
		}
		if f(b[3], b[4], binary.BigEndian.Uint32(b[5:9])&0x7fffffff) {
			return true
		}
		b = b[9+n:]
	}
	return false
}

const (
	frameData      = 0x0
	frameHeaders   = 0x1
	frameRSTStream = 0x3
	flagEndStream  = 0x1
)

// streamEnded reports whether the server ended a stream: trailers
// (HEADERS with END_STREAM) or a reset.
func streamEnded(b []byte) bool {
	return http2Frames(b, func(typ, flags byte, stream uint32) bool {
		return stream != 0 && (typ == frameRSTStream || typ == frameHeaders && flags&flagEndStream != 0)
	})
}

func hasDataFrame(b []byte) bool {
	return http2Frames(b, func(typ, _ byte, stream uint32) bool { return stream != 0 && typ == frameData })
}

// rpcRequest matches bytes that open a call: HEADERS on a stream. The
// client's connection-level frames (pings, window updates) pass.
func rpcRequest(b []byte) bool {
	return http2Frames(b, func(typ, _ byte, stream uint32) bool { return stream != 0 && typ == frameHeaders })
}

// rpcReply matches bytes that answer a call: a frame on a stream. Pings
// and settings pass, so the cut hits a call whose work is done.
func rpcReply(b []byte) bool {
	return http2Frames(b, func(typ, _ byte, stream uint32) bool { return stream != 0 })
}

// rpcRequestEnded matches held bytes that hold a whole call: a frame
// ending its stream.
func rpcRequestEnded(b []byte) bool {
	return http2Frames(b, func(_, flags byte, stream uint32) bool { return stream != 0 && flags&flagEndStream != 0 })
}
