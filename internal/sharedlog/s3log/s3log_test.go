package s3log_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/strandkafka/strand/internal/objstore/s3obj"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/backendtest"
	"github.com/strandkafka/strand/internal/sharedlog/loglettest"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
	"github.com/strandkafka/strand/internal/sharedlog/metastoretest"
	"github.com/strandkafka/strand/internal/sharedlog/s3log"
	"github.com/strandkafka/strand/internal/sharedlog/slotlog"
	"github.com/strandkafka/strand/internal/sharedlog/slotlog/crashtest"
)

const (
	bucket = "strand-log"
	region = "us-east-1"
	maxPos = sharedlog.Pos(math.MaxUint64)
)

var conformance = loglettest.Options{
	Entries:            200,
	Appenders:          8,
	AppendsPerAppender: 50,
	MaxEntryBytes:      1 << 20,
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fakeS3 starts an in-process gofakes3 with the bucket made and returns
// its endpoint.
func fakeS3(t testing.TB) string {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	return srv.URL
}

func config(endpoint, prefix string) s3obj.Config {
	return s3obj.Config{
		Bucket:          bucket,
		Prefix:          prefix,
		Endpoint:        endpoint,
		Region:          region,
		PathStyle:       true,
		AccessKeyID:     "test",
		SecretAccessKey: "test",
	}
}

var prefixes atomic.Int64

// newPrefix returns a prefix no other test in this process uses.
func newPrefix(t testing.TB) string {
	return fmt.Sprintf("%s/%d/", strings.ReplaceAll(t.Name(), "/", "."), prefixes.Add(1))
}

func open(t testing.TB, cfg s3obj.Config, opts s3log.Options) *slotlog.Loglet {
	t.Helper()
	l, err := s3log.Open(testCtx(t), cfg, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestConformance(t *testing.T) {
	endpoint := fakeS3(t)
	for _, tc := range []struct {
		name string
		opts s3log.Options
	}{
		{"no-grace", s3log.Options{TrimGrace: -1}},
		{"default", s3log.Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conformance.Run(t, func(t *testing.T) sharedlog.Loglet {
				return open(t, config(endpoint, newPrefix(t)), tc.opts)
			})
			conformance.RunDurable(t, func(t *testing.T, dir string) sharedlog.Loglet {
				l, err := s3log.Open(testCtx(t), config(endpoint, strings.TrimPrefix(dir, "/")+"/"), tc.opts)
				if err != nil {
					t.Fatal(err)
				}
				return l
			})
		})
	}
}

// TestDeletesBelowTrim: with no grace period, a trim deletes the slot
// objects below the trim point and keeps the rest.
func TestDeletesBelowTrim(t *testing.T) {
	ctx := testCtx(t)
	endpoint := fakeS3(t)
	cfg := config(endpoint, newPrefix(t))
	cfg.MaxKeysPerList = 3 // deletion pages through the listing
	l := open(t, cfg, s3log.Options{TrimGrace: -1})
	for i := range 12 {
		if _, err := l.Append(ctx, fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.PrefixTrim(ctx, 9); err != nil {
		t.Fatal(err)
	}
	objs := listKeys(t, endpoint, cfg.Prefix+"slots/")
	if len(objs) != 3 {
		t.Fatalf("%d slot objects after trimming 12 to 9: %v", len(objs), objs)
	}
	if es, err := l.ReadNext(ctx, 9, maxPos); err != nil || len(es) != 3 || string(es[0].Data) != "e9" {
		t.Fatalf("ReadNext(9) = (%v, %v)", es, err)
	}
}

// listKeys lists the keys under prefix with a plain client.
func listKeys(t *testing.T, endpoint, prefix string) []string {
	t.Helper()
	st, err := s3obj.New(testCtx(t), config(endpoint, ""))
	if err != nil {
		t.Fatal(err)
	}
	infos, err := st.List(testCtx(t), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, in := range infos {
		keys = append(keys, in.Key)
	}
	return keys
}

func TestMetaStore(t *testing.T) {
	endpoint := fakeS3(t)
	metastoretest.Run(t, func(t *testing.T) func(t *testing.T) sharedlog.MetaStore {
		prefix := newPrefix(t)
		return func(t *testing.T) sharedlog.MetaStore {
			ms, err := s3log.NewMetaStore(testCtx(t), config(endpoint, prefix))
			if err != nil {
				t.Fatal(err)
			}
			return ms
		}
	})
}

// loseReplies passes requests to the server and, for every every-th
// conditional PUT, throws the reply away and reports a failure: the
// write happened, the client cannot know.
type loseReplies struct {
	next    http.RoundTripper
	every   int64
	n, lost atomic.Int64
}

func (l *loseReplies) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPut || (r.Header.Get("If-None-Match") == "" && r.Header.Get("If-Match") == "") {
		return l.next.RoundTrip(r)
	}
	resp, err := l.next.RoundTrip(r)
	if err != nil || l.n.Add(1)%l.every != 0 {
		return resp, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	l.lost.Add(1)
	return nil, errors.New("injected: connection reset after the request was applied")
}

// TestAmbiguousAppends loses the reply of every third conditional PUT
// after the server applied it: each append is retried at its slot and
// recognised by its token, so every append succeeds and no payload is in
// two slots (nor, by If-None-Match, two payloads in one).
func TestAmbiguousAppends(t *testing.T) {
	ctx := testCtx(t)
	endpoint := fakeS3(t)
	rt := &loseReplies{next: http.DefaultTransport, every: 3}
	cfg := config(endpoint, newPrefix(t))
	faulty := cfg
	faulty.HTTPClient = &http.Client{Transport: rt}
	l := open(t, faulty, s3log.Options{RetryBackoff: time.Millisecond})
	const appenders, per = 4, 40
	acked := backendtest.AppendConcurrently(t, ctx, []sharedlog.Loglet{l}, appenders, per)
	if rt.lost.Load() < appenders*per/4 {
		t.Fatalf("only %d replies lost", rt.lost.Load())
	}
	backendtest.CheckDense(t, ctx, open(t, cfg, s3log.Options{}), acked, appenders*per)
}

// TestAmbiguousCAS loses the reply of every conditional PUT of the
// chain once: CAS still reports the truth.
func TestAmbiguousCAS(t *testing.T) {
	ctx := testCtx(t)
	endpoint := fakeS3(t)
	rt := &loseReplies{next: http.DefaultTransport, every: 2}
	cfg := config(endpoint, newPrefix(t))
	faulty := cfg
	faulty.HTTPClient = &http.Client{Transport: rt}
	ms, err := s3log.NewMetaStore(ctx, faulty)
	if err != nil {
		t.Fatal(err)
	}
	clean, err := s3log.NewMetaStore(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for v := uint64(1); v <= 6; v++ {
		next := sharedlog.Chain{Version: v, Segments: []sharedlog.Segment{{URL: fmt.Sprintf("mem://x/%d", v)}}}
		if err := ms.CAS(ctx, v-1, next); err != nil {
			t.Fatalf("CAS(%d): %v", v-1, err)
		}
		got, err := clean.Get(ctx)
		if err != nil || got.Version != v {
			t.Fatalf("Get after CAS(%d) = (%+v, %v)", v-1, got, err)
		}
	}
	if rt.lost.Load() == 0 {
		t.Fatal("no reply was lost")
	}
	stale := sharedlog.Chain{Version: 6, Segments: []sharedlog.Segment{{URL: "mem://stale"}}}
	if err := ms.CAS(ctx, 5, stale); !errors.Is(err, sharedlog.ErrConflict) {
		t.Fatalf("stale CAS = %v, want ErrConflict", err)
	}
}

// TestTwoAgents: two clients, as two agents have, append to one log at
// once; positions are dense and unique.
func TestTwoAgents(t *testing.T) {
	ctx := testCtx(t)
	cfg := config(fakeS3(t), newPrefix(t))
	agents := []sharedlog.Loglet{open(t, cfg, s3log.Options{}), open(t, cfg, s3log.Options{})}
	const appenders, per = 4, 40
	acked := backendtest.AppendConcurrently(t, ctx, agents, appenders, per)
	backendtest.CheckDense(t, ctx, agents[1], acked, len(agents)*appenders*per)
}

func s3URL(endpoint, path string) string {
	q := url.Values{"endpoint": {endpoint}, "region": {region}, "path-style": {"true"}}
	return (&url.URL{Scheme: "s3", Host: bucket, Path: "/" + path, RawQuery: q.Encode()}).String()
}

// TestVirtualLogMigration moves a VirtualLog whose chain is in a file
// from a file loglet to S3 while it holds entries, then opens a
// VirtualLog kept wholly in S3 and lets it add a segment; both read back
// every entry in order.
func TestVirtualLogMigration(t *testing.T) {
	ctx := testCtx(t)
	endpoint := fakeS3(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	fileLog := (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String()

	var want [][]byte
	appendN := func(v *sharedlog.VirtualLog, tag string, n int) {
		t.Helper()
		for i := range n {
			data := fmt.Appendf(nil, "%s/%d", tag, i)
			p, err := v.Append(ctx, data)
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			if p != sharedlog.Pos(len(want)) {
				t.Fatalf("Append landed at %d, want %d", p, len(want))
			}
			want = append(want, data)
		}
	}
	readAll := func(v *sharedlog.VirtualLog) {
		t.Helper()
		var got [][]byte
		for p := sharedlog.Pos(0); p < sharedlog.Pos(len(want)); {
			es, err := v.ReadNext(ctx, p, maxPos)
			if err != nil || len(es) == 0 {
				t.Fatalf("ReadNext(%d) = (%d entries, %v)", p, len(es), err)
			}
			for _, e := range es {
				got = append(got, e.Data)
			}
			p += sharedlog.Pos(len(es))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("entry %d = %q, want %q", i, got[i], want[i])
			}
		}
	}

	v, err := logurl.OpenVirtual(ctx, fileLog, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	appendN(v, "file", 10)
	target := s3URL(endpoint, strings.TrimSuffix(newPrefix(t), "/")+"/seg-00000002")
	if err := v.Reconfigure(ctx, target); err != nil {
		t.Fatalf("Reconfigure to %s: %v", target, err)
	}
	appendN(v, "s3", 10)
	if c := v.Chain(); len(c.Segments) != 2 || c.Active().URL != target || c.Segments[0].End != 10 {
		t.Fatalf("chain after migration = %+v", c)
	}
	readAll(v)
	v.Close()
	if v, err = logurl.OpenVirtual(ctx, fileLog, sharedlog.VirtualOptions{}); err != nil {
		t.Fatal(err)
	}
	readAll(v)
	appendN(v, "reopened", 3)
	v.Close()

	want = nil
	logURL := s3URL(endpoint, strings.TrimSuffix(newPrefix(t), "/"))
	w, err := logurl.OpenVirtual(ctx, logURL, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	appendN(w, "first", 5)
	if first := w.Chain().Active().URL; !strings.Contains(first, "/"+s3log.FirstSegment+"?") {
		t.Fatalf("first segment %q", first)
	}
	next, err := sharedlog.DefaultNextURL(w.Chain())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Reconfigure(ctx, next); err != nil {
		t.Fatalf("Reconfigure to %s: %v", next, err)
	}
	appendN(w, "second", 5)
	readAll(w)
	other, err := logurl.OpenVirtual(ctx, logURL, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if c := other.Chain(); len(c.Segments) != 2 || c.Active().URL != next {
		t.Fatalf("second handle's chain = %+v", c)
	}
	readAll(other)
}

// TestCrash kills a child process appending with every window full, then
// checks the log from a fresh handle (crashtest). gofakes3 runs in this
// process, so the crash takes only the client down.
func TestCrash(t *testing.T) {
	spec := crashtest.Spec()
	if spec == "" {
		spec = fakeS3(t) + " " + newPrefix(t)
	}
	crashtest.Run(t, spec, func(t testing.TB, spec string) sharedlog.Loglet {
		f, err := crashtest.SplitSpec(spec, 2)
		if err != nil {
			t.Fatal(err)
		}
		l, err := s3log.Open(testCtx(t), config(f[0], f[1]), s3log.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

// TestSealSeenByAnotherAgent: an agent whose view predates another
// agent's seal meets the seal object in the slot it writes and fails
// with ErrSealed; its CheckTail then reports the sealed tail.
func TestSealSeenByAnotherAgent(t *testing.T) {
	ctx := testCtx(t)
	cfg := config(fakeS3(t), newPrefix(t))
	a, b := open(t, cfg, s3log.Options{}), open(t, cfg, s3log.Options{})
	for i := range 3 {
		if _, err := a.Append(ctx, fmt.Appendf(nil, "a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if tail, _, err := b.CheckTail(ctx); err != nil || tail != 3 {
		t.Fatalf("CheckTail = (%d, %v), want 3", tail, err)
	}
	if err := a.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if p, err := b.Append(ctx, []byte("late")); !errors.Is(err, sharedlog.ErrSealed) {
		t.Fatalf("Append after another agent's seal = (%d, %v), want ErrSealed", p, err)
	}
	if tail, sealed, err := b.CheckTail(ctx); err != nil || tail != 3 || !sealed {
		t.Fatalf("CheckTail = (%d, %v, %v), want (3, sealed)", tail, sealed, err)
	}
}
