package pglog_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/loglettest"
	"github.com/strandkafka/strand/internal/sharedlog/metastoretest"
	"github.com/strandkafka/strand/internal/sharedlog/pglog"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// runID keeps this run's log ids apart from earlier runs' on a server
// that outlives them (STRAND_TEST_POSTGRES_URL).
var runID = func() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

var ids atomic.Int64

// newID returns a log id no other test uses.
func newID(t testing.TB) string {
	return fmt.Sprintf("test-%s-%d", runID, ids.Add(1))
}

// logURL returns the server's URL with the given query parameters set.
func logURL(t testing.TB, params ...string) string {
	t.Helper()
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func newPool(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// suiteOptions size the conformance suite for a network backend.
var suiteOptions = loglettest.Options{
	Entries:            100,
	Appenders:          8,
	AppendsPerAppender: 25,
	MaxEntryBytes:      1 << 20,
	Timeout:            time.Minute,
}

func TestConformance(t *testing.T) {
	suiteOptions.Run(t, func(t *testing.T) sharedlog.Loglet {
		l, err := pglog.OpenURL(testCtx(t), logURL(t, "log", newID(t)), pglog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

// TestConformanceSharedPool runs the suite on loglets that share one pool
// and a table prefix of their own, in a schema of their own.
func TestConformanceSharedPool(t *testing.T) {
	pool := newPool(t, 8)
	opts := pglog.Options{Schema: "strand_test_" + runID, TablePrefix: "shared"}
	o := suiteOptions
	o.Entries = 50
	o.Run(t, func(t *testing.T) sharedlog.Loglet {
		l, err := pglog.Open(testCtx(t), pool, newID(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

func TestDurable(t *testing.T) {
	suiteOptions.RunDurable(t, func(t *testing.T, dir string) sharedlog.Loglet {
		sum := sha256.Sum256([]byte(dir))
		id := fmt.Sprintf("durable-%s-%x", runID, sum[:8])
		l, err := pglog.OpenURL(testCtx(t), logURL(t, "log", id), pglog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

// TestHandlesShareALoglet: two handles (two agents) on one loglet append
// to one sequence, and a seal through one stops the other.
func TestHandlesShareALoglet(t *testing.T) {
	ctx := testCtx(t)
	u := logURL(t, "log", newID(t))
	var hs [2]*pglog.Loglet
	for i := range hs {
		l, err := pglog.OpenURL(ctx, u, pglog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		hs[i] = l
	}
	for i := range 10 {
		pos, err := hs[i%2].Append(ctx, []byte{byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		if pos != sharedlog.Pos(i) {
			t.Fatalf("append %d through handle %d landed at %d", i, i%2, pos)
		}
	}
	if err := hs[0].Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := hs[1].Append(ctx, []byte("late")); !errors.Is(err, sharedlog.ErrSealed) {
		t.Fatalf("append through the other handle after Seal = %v, want ErrSealed", err)
	}
	tail, sealed, err := hs[1].CheckTail(ctx)
	if err != nil || tail != 10 || !sealed {
		t.Fatalf("CheckTail = (%d, %v, %v), want (10, true, nil)", tail, sealed, err)
	}
}

func TestEntryTooLarge(t *testing.T) {
	ctx := testCtx(t)
	l, err := pglog.OpenURL(ctx, logURL(t, "log", newID(t)), pglog.Options{MaxEntryBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(ctx, make([]byte, 11)); !errors.Is(err, pglog.ErrEntryTooLarge) || !errors.Is(err, sharedlog.ErrRejected) {
		t.Fatalf("Append of 11 bytes with MaxEntryBytes 10 = %v, want ErrEntryTooLarge, rejected", err)
	}
	if pos, err := l.Append(ctx, make([]byte, 10)); err != nil || pos != 0 {
		t.Fatalf("Append of 10 bytes = (%d, %v), want (0, nil)", pos, err)
	}
}

func TestMetaStore(t *testing.T) {
	t.Run("pool", func(t *testing.T) {
		pool := newPool(t, 8)
		metastoretest.Run(t, func(t *testing.T) func(t *testing.T) sharedlog.MetaStore {
			name := newID(t)
			return func(t *testing.T) sharedlog.MetaStore {
				ms, err := pglog.NewMetaStore(pool, name, pglog.Options{})
				if err != nil {
					t.Fatal(err)
				}
				return ms
			}
		})
	})
	t.Run("url", func(t *testing.T) {
		metastoretest.Run(t, func(t *testing.T) func(t *testing.T) sharedlog.MetaStore {
			u := logURL(t, "log", newID(t), "table_prefix", "strand_url")
			return func(t *testing.T) sharedlog.MetaStore {
				ms, err := pglog.OpenMetaStoreURL(u)
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
		name, url string
		wantErr   bool
		wantLog   string
		wantOpts  pglog.Options
		wantConn  string
	}{
		{
			name:     "plain",
			url:      "postgres://u:p@db:5432/strand?log=agents&sslmode=disable",
			wantLog:  "agents",
			wantConn: "postgres://u:p@db:5432/strand?sslmode=disable&synchronous_commit=on",
		},
		{
			name:     "tables and setting",
			url:      "postgresql://db/strand?log=a%2Fseg-00000001&table_prefix=t&schema=s&synchronous_commit=remote_apply",
			wantLog:  "a/seg-00000001",
			wantOpts: pglog.Options{TablePrefix: "t", Schema: "s"},
			wantConn: "postgresql://db/strand?synchronous_commit=remote_apply",
		},
		{name: "no log", url: "postgres://db/strand", wantErr: true},
		{name: "other scheme", url: "mysql://db/strand?log=x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg, err := pglog.ParseURL(tt.url)
			if tt.wantErr {
				if !errors.Is(err, pglog.ErrBadOptions) {
					t.Fatalf("ParseURL = (%+v, %v), want ErrBadOptions", tg, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tg.LogID != tt.wantLog || tg.Options != tt.wantOpts || tg.ConnString != tt.wantConn {
				t.Fatalf("ParseURL = %+v, want log %q, options %+v, conn %q", tg, tt.wantLog, tt.wantOpts, tt.wantConn)
			}
		})
	}
}

func TestBadOptions(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts pglog.Options
	}{
		{"prefix with a quote", pglog.Options{TablePrefix: `x"; DROP TABLE y; --`}},
		{"upper-case schema", pglog.Options{Schema: "Strand"}},
		{"negative limit", pglog.Options{MaxBatchBytes: -1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, err := pglog.OpenURL(testCtx(t), logURL(t, "log", newID(t)), tt.opts)
			if err == nil {
				l.Close()
			}
			if !errors.Is(err, pglog.ErrBadOptions) {
				t.Fatalf("OpenURL with %+v = %v, want ErrBadOptions", tt.opts, err)
			}
		})
	}
}

func TestNextURL(t *testing.T) {
	seg := func(id string) string { return "postgres://db/strand?log=" + url.QueryEscape(id) + "&sslmode=disable" }
	tests := []struct {
		name    string
		chain   sharedlog.Chain
		want    string
		wantErr bool
	}{
		{
			name:  "numbered",
			chain: sharedlog.Chain{Version: 3, Segments: []sharedlog.Segment{{URL: seg("agents/seg-00000000")}}},
			want:  seg("agents/seg-00000004"),
		},
		{
			name:  "unnumbered",
			chain: sharedlog.Chain{Version: 1, Segments: []sharedlog.Segment{{URL: seg("agents")}}},
			want:  seg("agents-00000002"),
		},
		{name: "empty", chain: sharedlog.Chain{}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pglog.NextURL(tt.chain)
			if tt.wantErr != (err != nil) {
				t.Fatalf("NextURL = (%q, %v)", got, err)
			}
			if err != nil {
				return
			}
			gu, _ := url.Parse(got)
			wu, _ := url.Parse(tt.want)
			if gu.Query().Get("log") != wu.Query().Get("log") || gu.Host != wu.Host || gu.Path != wu.Path {
				t.Fatalf("NextURL = %q, want %q", got, tt.want)
			}
		})
	}
}
