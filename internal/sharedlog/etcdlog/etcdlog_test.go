package etcdlog_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/etcdlog"
	"github.com/strandkafka/strand/internal/sharedlog/loglettest"
	"github.com/strandkafka/strand/internal/sharedlog/metastoretest"
	"github.com/strandkafka/strand/internal/testservers/etcdtest"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Run(&pgMain{m}))
}

// pgMain lets the migration tests have a PostgreSQL server too.
type pgMain struct{ m *testing.M }

func (p *pgMain) Run() int { return pgtest.Run(p.m) }

// runID keeps this run's paths apart from earlier runs' on a cluster that
// outlives them (STRAND_TEST_ETCD_ENDPOINTS).
var runID = func() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

var paths atomic.Int64

func newPath() string { return fmt.Sprintf("/strand-test/%s/%d", runID, paths.Add(1)) }

func etcdURL(t testing.TB, path string) string {
	return "etcd://" + strings.Join(etcdtest.Endpoints(t), ",") + path
}

func newClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	if len(endpoints) == 0 {
		endpoints = etcdtest.Endpoints(t)
	}
	cli, err := etcdlog.NewClient(endpoints)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// suiteOptions size the conformance suite for a network backend whose
// requests stop at 1.5 MiB.
var suiteOptions = loglettest.Options{
	Entries:            100,
	Appenders:          8,
	AppendsPerAppender: 25,
	MaxEntryBytes:      512 << 10,
	Timeout:            time.Minute,
}

func TestConformance(t *testing.T) {
	suiteOptions.Run(t, func(t *testing.T) sharedlog.Loglet {
		l, err := etcdlog.OpenURL(testCtx(t), etcdURL(t, newPath()), etcdlog.Options{MaxEntryBytes: 512 << 10})
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

// TestConformanceSharedClient runs the suite on loglets sharing a client,
// with batches of a few entries so group commits span several.
func TestConformanceSharedClient(t *testing.T) {
	cli := newClient(t)
	o := suiteOptions
	o.Entries = 50
	o.Run(t, func(t *testing.T) sharedlog.Loglet {
		l, err := etcdlog.Open(testCtx(t), cli, newPath(), etcdlog.Options{MaxEntryBytes: 512 << 10, MaxBatchEntries: 3})
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

func TestDurable(t *testing.T) {
	suiteOptions.RunDurable(t, func(t *testing.T, dir string) sharedlog.Loglet {
		sum := sha256.Sum256([]byte(dir))
		p := fmt.Sprintf("/strand-test/%s/durable-%x", runID, sum[:8])
		l, err := etcdlog.OpenURL(testCtx(t), etcdURL(t, p), etcdlog.Options{MaxEntryBytes: 512 << 10})
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

// TestHandlesShareALoglet: handles racing on one loglet (agents appending
// through their own clients) get dense, distinct positions, and a seal
// through one stops the others.
func TestHandlesShareALoglet(t *testing.T) {
	ctx := testCtx(t)
	u := etcdURL(t, newPath())
	const handles, each = 3, 20
	var hs [handles]*etcdlog.Loglet
	for i := range hs {
		l, err := etcdlog.OpenURL(ctx, u, etcdlog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		hs[i] = l
	}
	seen := make(chan sharedlog.Pos, handles*each)
	errc := make(chan error, handles)
	for i, l := range hs {
		go func() {
			for j := range each {
				pos, err := l.Append(ctx, fmt.Appendf(nil, "h%d-%d", i, j))
				if err != nil {
					errc <- err
					return
				}
				seen <- pos
			}
			errc <- nil
		}()
	}
	for range handles {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	close(seen)
	got := map[sharedlog.Pos]bool{}
	for p := range seen {
		if got[p] || p >= handles*each {
			t.Fatalf("position %d handed out twice or past the tail", p)
		}
		got[p] = true
	}
	lost := int64(0)
	for _, l := range hs {
		lost += l.Stats().Lost
	}
	t.Logf("transactions that lost their slot to another handle: %d", lost)
	if err := hs[0].Seal(ctx); err != nil {
		t.Fatal(err)
	}
	for _, l := range hs[1:] {
		if _, err := l.Append(ctx, []byte("late")); !errors.Is(err, sharedlog.ErrSealed) {
			t.Fatalf("append through another handle after Seal = %v, want ErrSealed", err)
		}
	}
	tail, sealed, err := hs[2].CheckTail(ctx)
	if err != nil || tail != handles*each || !sealed {
		t.Fatalf("CheckTail = (%d, %v, %v), want (%d, true, nil)", tail, sealed, err, handles*each)
	}
}

func TestEntryTooLarge(t *testing.T) {
	ctx := testCtx(t)
	l, err := etcdlog.OpenURL(ctx, etcdURL(t, newPath()), etcdlog.Options{MaxEntryBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(ctx, make([]byte, 11)); !errors.Is(err, etcdlog.ErrEntryTooLarge) || !errors.Is(err, sharedlog.ErrRejected) {
		t.Fatalf("Append of 11 bytes with MaxEntryBytes 10 = %v, want ErrEntryTooLarge, rejected", err)
	}
	if pos, err := l.Append(ctx, make([]byte, 10)); err != nil || pos != 0 {
		t.Fatalf("Append of 10 bytes = (%d, %v), want (0, nil)", pos, err)
	}
}

// TestLargestEntry: the default limit, 1 MiB, fits etcd's default
// request limit with the keys and header.
func TestLargestEntry(t *testing.T) {
	ctx := testCtx(t)
	l, err := etcdlog.OpenURL(ctx, etcdURL(t, newPath()), etcdlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	if _, err := l.Append(ctx, big); err != nil {
		t.Fatal(err)
	}
	es, err := l.ReadNext(ctx, 0, 1)
	if err != nil || len(es) != 1 || string(es[0].Data) != string(big) {
		t.Fatalf("reading the 1 MiB entry back: %d entries, %v", len(es), err)
	}
}

func TestMetaStore(t *testing.T) {
	t.Run("client", func(t *testing.T) {
		metastoretest.Run(t, func(t *testing.T) func(t *testing.T) sharedlog.MetaStore {
			p := newPath()
			return func(t *testing.T) sharedlog.MetaStore {
				ms, err := etcdlog.NewMetaStore(newClient(t), p)
				if err != nil {
					t.Fatal(err)
				}
				return ms
			}
		})
	})
	t.Run("url", func(t *testing.T) {
		metastoretest.Run(t, func(t *testing.T) func(t *testing.T) sharedlog.MetaStore {
			u := etcdURL(t, newPath())
			return func(t *testing.T) sharedlog.MetaStore {
				ms, err := etcdlog.OpenMetaStoreURL(u)
				if err != nil {
					t.Fatal(err)
				}
				return ms
			}
		})
	})
}

func TestParseURL(t *testing.T) {
	tests := []struct {
		url       string
		endpoints []string
		path      string
	}{
		{"etcd://127.0.0.1:2379/strand/log", []string{"127.0.0.1:2379"}, "/strand/log"},
		{"etcd://a:1,b:2,c:3/x", []string{"a:1", "b:2", "c:3"}, "/x"},
		{"etcd://a/x", nil, ""},             // no port
		{"etcd://a:1/", nil, ""},            // no path
		{"etcd://a:1/x/../y", nil, ""},      // unclean
		{"etcd://a:1/x?dial=1", nil, ""},    // options
		{"etcd://u:p@a:1/x", nil, ""},       // credentials
		{"postgres://a:1/x?log=y", nil, ""}, // scheme
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			tg, err := etcdlog.ParseURL(tt.url)
			if tt.path == "" {
				if !errors.Is(err, etcdlog.ErrBadOptions) {
					t.Fatalf("ParseURL = (%+v, %v), want ErrBadOptions", tg, err)
				}
				return
			}
			if err != nil || tg.Path != tt.path || strings.Join(tg.Endpoints, " ") != strings.Join(tt.endpoints, " ") {
				t.Fatalf("ParseURL = (%+v, %v), want endpoints %v, path %q", tg, err, tt.endpoints, tt.path)
			}
		})
	}
}

// TestNestedPathsDoNotMix: a loglet whose path lies under another's
// (/a and /a/e) must not count or read the other's keys.
func TestNestedPathsDoNotMix(t *testing.T) {
	ctx := testCtx(t)
	base := newPath()
	cli := newClient(t)
	outer, err := etcdlog.Open(ctx, cli, base, etcdlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Close()
	inner, err := etcdlog.Open(ctx, cli, base+"/e", etcdlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	for range 3 {
		if _, err := inner.Append(ctx, []byte("inner")); err != nil {
			t.Fatal(err)
		}
	}
	if tail, _, err := outer.CheckTail(ctx); err != nil || tail != 0 {
		t.Fatalf("outer tail = (%d, %v), want 0", tail, err)
	}
	if pos, err := outer.Append(ctx, []byte("outer")); err != nil || pos != 0 {
		t.Fatalf("outer Append = (%d, %v), want 0", pos, err)
	}
}
