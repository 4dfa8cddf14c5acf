package dynamolog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/dynamolog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/backendtest"
	"github.com/strandkafka/strand/internal/sharedlog/loglettest"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
	"github.com/strandkafka/strand/internal/sharedlog/metastoretest"
	"github.com/strandkafka/strand/internal/sharedlog/slotlog"
	"github.com/strandkafka/strand/internal/sharedlog/slotlog/crashtest"
	"github.com/strandkafka/strand/internal/testservers/dynalitetest"
)

const (
	table  = "strand_test"
	maxPos = sharedlog.Pos(math.MaxUint64)
)

// conformance is the suite's default size, with entries as large as an
// item holds.
var conformance = loglettest.Options{
	Entries:            200,
	Appenders:          8,
	AppendsPerAppender: 50,
	MaxEntryBytes:      dynamolog.DefaultMaxEntryBytes,
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func config(srv *dynalitetest.Server) dynamolog.Config {
	return dynamolog.Config{
		Table:           table,
		Endpoint:        srv.Endpoint,
		Region:          dynalitetest.Region,
		AccessKeyID:     "test",
		SecretAccessKey: "test",
	}
}

func connect(t testing.TB, cfg dynamolog.Config) *dynamolog.DB {
	t.Helper()
	db, err := dynamolog.Connect(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	return db
}

var (
	logIDs atomic.Int64
	// runID keeps runs apart on a server that outlives them
	// (dynalitetest.EndpointEnv).
	runID = slotlog.NewToken()
)

// newLogID returns a log id no other test uses.
func newLogID(t testing.TB) string {
	return fmt.Sprintf("%x/%s/%d", runID[:6], strings.ReplaceAll(t.Name(), "/", "."), logIDs.Add(1))
}

func openLoglet(t testing.TB, db *dynamolog.DB, id string, opts dynamolog.Options) *slotlog.Loglet {
	t.Helper()
	l, err := db.Loglet(id, opts)
	if err != nil {
		t.Fatalf("Loglet: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestConformance(t *testing.T) {
	srv := dynalitetest.Start(t)
	db := connect(t, config(srv))
	for _, tc := range []struct {
		name string
		opts dynamolog.Options
	}{
		// No grace: trims delete at once, and every acknowledgement
		// rereads the trim point, so the deletion paths run.
		{"no-grace", dynamolog.Options{TrimGrace: -1}},
		{"default", dynamolog.Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conformance.Run(t, func(t *testing.T) sharedlog.Loglet {
				return openLoglet(t, db, newLogID(t), tc.opts)
			})
			conformance.RunDurable(t, func(t *testing.T, dir string) sharedlog.Loglet {
				// A new connection each time, as a restarted process has.
				l, err := connect(t, config(srv)).Loglet(dir, tc.opts)
				if err != nil {
					t.Fatal(err)
				}
				return l
			})
		})
	}
}

// TestMaxEntry: an entry of DefaultMaxEntryBytes fits an item (the
// server enforces 400 KB), and one byte more is refused before writing.
func TestMaxEntry(t *testing.T) {
	ctx := testCtx(t)
	db := connect(t, config(dynalitetest.Start(t)))
	id := newLogID(t)
	id += strings.Repeat("x", dynamolog.MaxLogIDBytes-len(id)) // the largest key
	l := openLoglet(t, db, id, dynamolog.Options{})
	big := bytes.Repeat([]byte{0xa5}, dynamolog.DefaultMaxEntryBytes)
	if p, err := l.Append(ctx, big); err != nil || p != 0 {
		t.Fatalf("Append of %d bytes = (%d, %v)", len(big), p, err)
	}
	if _, err := l.Append(ctx, append(big, 0)); !errors.Is(err, slotlog.ErrEntryTooLarge) || !errors.Is(err, sharedlog.ErrRejected) {
		t.Fatalf("Append of one byte more = %v, want ErrEntryTooLarge, rejected", err)
	}
	es, err := l.ReadNext(ctx, 0, maxPos)
	if err != nil || len(es) != 1 || !bytes.Equal(es[0].Data, big) {
		t.Fatalf("ReadNext = (%d entries, %v)", len(es), err)
	}
}

func TestMetaStore(t *testing.T) {
	srv := dynalitetest.Start(t)
	metastoretest.Run(t, func(t *testing.T) func(t *testing.T) sharedlog.MetaStore {
		name := newLogID(t)
		return func(t *testing.T) sharedlog.MetaStore {
			ms, err := connect(t, config(srv)).MetaStore(name)
			if err != nil {
				t.Fatal(err)
			}
			return ms
		}
	})
}

// loseReplies passes requests to the server and, for every every-th
// conditional write, throws the reply away and reports a failure: the
// write happened, the client cannot know.
type loseReplies struct {
	next     http.RoundTripper
	every    int64
	n, lost  atomic.Int64
	forWrite func(target string) bool
}

func (l *loseReplies) RoundTrip(r *http.Request) (*http.Response, error) {
	if !l.forWrite(r.Header.Get("X-Amz-Target")) {
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

// TestAmbiguousAppends loses the reply of every third PutItem after the
// server applied it: each append is retried at its slot and recognised
// by its token, so every append succeeds and no payload is in two slots
// (nor, by the server's condition, two payloads in one).
func TestAmbiguousAppends(t *testing.T) {
	ctx := testCtx(t)
	srv := dynalitetest.Start(t)
	rt := &loseReplies{
		next:     http.DefaultTransport,
		every:    3,
		forWrite: func(target string) bool { return strings.HasSuffix(target, ".PutItem") },
	}
	cfg := config(srv)
	cfg.HTTPClient = &http.Client{Transport: rt}
	id := newLogID(t)
	l := openLoglet(t, connect(t, cfg), id, dynamolog.Options{RetryBackoff: time.Millisecond})
	const appenders, per = 4, 30
	acked := backendtest.AppendConcurrently(t, ctx, []sharedlog.Loglet{l}, appenders, per)
	if rt.lost.Load() < appenders*per/4 {
		t.Fatalf("only %d replies lost", rt.lost.Load())
	}
	// Read back through a clean connection.
	check := openLoglet(t, connect(t, config(srv)), id, dynamolog.Options{})
	backendtest.CheckDense(t, ctx, check, acked, appenders*per)
}

// TestAmbiguousCAS loses the reply of every second chain write after the
// server applied it: CAS still reports the truth.
func TestAmbiguousCAS(t *testing.T) {
	ctx := testCtx(t)
	srv := dynalitetest.Start(t)
	rt := &loseReplies{
		next:     http.DefaultTransport,
		every:    2,
		forWrite: func(target string) bool { return strings.HasSuffix(target, ".PutItem") },
	}
	faulty := config(srv)
	faulty.HTTPClient = &http.Client{Transport: rt}
	name := newLogID(t)
	ms, err := connect(t, faulty).MetaStore(name)
	if err != nil {
		t.Fatal(err)
	}
	clean, err := connect(t, config(srv)).MetaStore(name)
	if err != nil {
		t.Fatal(err)
	}
	for v := uint64(1); v <= 6; v++ {
		next := sharedlog.Chain{Version: v, Segments: []sharedlog.Segment{{URL: fmt.Sprintf("mem://x/%d", v)}}}
		if err := ms.CAS(ctx, v-1, next); err != nil {
			t.Fatalf("CAS(%d): %v", v-1, err)
		}
		if got, err := clean.Get(ctx); err != nil || got.Version != v {
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

// TestTwoAgents: two connections, as two agents have, append to one log
// at once; positions are dense and unique.
func TestTwoAgents(t *testing.T) {
	ctx := testCtx(t)
	srv := dynalitetest.Start(t)
	id := newLogID(t)
	agents := []sharedlog.Loglet{
		openLoglet(t, connect(t, config(srv)), id, dynamolog.Options{}),
		openLoglet(t, connect(t, config(srv)), id, dynamolog.Options{}),
	}
	const appenders, per = 4, 25
	acked := backendtest.AppendConcurrently(t, ctx, agents, appenders, per)
	backendtest.CheckDense(t, ctx, agents[1], acked, len(agents)*appenders*per)
}

func dynamoURL(srv *dynalitetest.Server, path string) string {
	q := url.Values{"endpoint": {srv.Endpoint}, "region": {dynalitetest.Region}}
	return (&url.URL{Scheme: "dynamodb", Host: table, Path: "/" + path, RawQuery: q.Encode()}).String()
}

func setCredentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
}

// TestVirtualLogMigration moves a VirtualLog whose chain is in a file
// from a file loglet to DynamoDB while it holds entries, then opens a
// VirtualLog kept wholly in DynamoDB and lets it add a segment of its
// own; both read back every entry in order.
func TestVirtualLogMigration(t *testing.T) {
	ctx := testCtx(t)
	srv := dynalitetest.Start(t)
	setCredentials(t)
	dir := t.TempDir()
	fileLog := (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()

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
	target := dynamoURL(srv, newLogID(t)+"/seg-00000002")
	if err := v.Reconfigure(ctx, target); err != nil {
		t.Fatalf("Reconfigure to %s: %v", target, err)
	}
	appendN(v, "dynamo", 10)
	if c := v.Chain(); len(c.Segments) != 2 || c.Active().URL != target || c.Segments[0].End != 10 {
		t.Fatalf("chain after migration = %+v", c)
	}
	readAll(v)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened from the chain file: the opener reaches DynamoDB.
	if v, err = logurl.OpenVirtual(ctx, fileLog, sharedlog.VirtualOptions{}); err != nil {
		t.Fatal(err)
	}
	readAll(v)
	appendN(v, "reopened", 3)
	v.Close()

	// A log kept wholly in DynamoDB: chain and segments.
	want = nil
	logURL := dynamoURL(srv, newLogID(t))
	w, err := logurl.OpenVirtual(ctx, logURL, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	appendN(w, "first", 5)
	first := w.Chain().Active().URL
	if !strings.HasSuffix(strings.SplitN(first, "?", 2)[0], "/"+dynamolog.FirstSegment) {
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

func TestParseURL(t *testing.T) {
	tests := []struct {
		raw     string
		ok      bool
		path    string
		ep, reg string
	}{
		{"dynamodb://t/log", true, "log", "", ""},
		{"dynamodb://t/a/b/seg-00000001?endpoint=http://127.0.0.1:8000&region=eu-west-1", true, "a/b/seg-00000001", "http://127.0.0.1:8000", "eu-west-1"},
		{"dynamodb://t", false, "", "", ""},
		{"dynamodb://t/log?endpoint=ftp://x", false, "", "", ""},
		{"dynamodb://t/log?bogus=1", false, "", "", ""},
		{"dynamodb://u:p@t/log", false, "", "", ""},
		{"s3://t/log", false, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			tg, err := dynamolog.ParseURL(tt.raw)
			if (err == nil) != tt.ok {
				t.Fatalf("ParseURL = %v, want ok %v", err, tt.ok)
			}
			if err != nil {
				if !errors.Is(err, dynamolog.ErrBadURL) {
					t.Fatalf("error %v does not wrap ErrBadURL", err)
				}
				return
			}
			if tg.Path != tt.path || tg.Config.Endpoint != tt.ep || tg.Config.Region != tt.reg || tg.Config.Table != "t" {
				t.Fatalf("ParseURL = %+v", tg)
			}
			if again, err := dynamolog.ParseURL(tg.URL(tg.Path)); err != nil || again.Path != tg.Path || again.Config != tg.Config {
				t.Fatalf("URL round trip = (%+v, %v)", again, err)
			}
		})
	}
}

// TestCrash kills a child process appending with every window full, then
// checks the log from a fresh handle (crashtest).
func TestCrash(t *testing.T) {
	spec := crashtest.Spec()
	if spec == "" {
		srv := dynalitetest.Start(t)
		// Once in a CI run dynalite refused connections after the
		// child was killed mid-request: keep what it said.
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("dynalite's stderr:\n%s", srv.Stderr())
			}
		})
		spec = srv.Endpoint + " " + newLogID(t)
	}
	crashtest.Run(t, spec, func(t testing.TB, spec string) sharedlog.Loglet {
		f, err := crashtest.SplitSpec(spec, 2)
		if err != nil {
			t.Fatal(err)
		}
		cfg := dynamolog.Config{Table: table, Endpoint: f[0], Region: dynalitetest.Region, AccessKeyID: "test", SecretAccessKey: "test"}
		db, err := dynamolog.Connect(testCtx(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		l, err := db.Loglet(f[1], dynamolog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

// TestSealSeenByAnotherAgent: an agent whose view predates another
// agent's seal meets the seal item in the slot it writes and fails with
// ErrSealed; its CheckTail then reports the sealed tail.
func TestSealSeenByAnotherAgent(t *testing.T) {
	ctx := testCtx(t)
	srv := dynalitetest.Start(t)
	id := newLogID(t)
	a := openLoglet(t, connect(t, config(srv)), id, dynamolog.Options{})
	b := openLoglet(t, connect(t, config(srv)), id, dynamolog.Options{})
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
