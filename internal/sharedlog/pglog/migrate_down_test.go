package pglog_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/backendtest"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
	"github.com/strandkafka/strand/internal/sharedlog/pglog"
)

// fileVirtual opens a VirtualLog whose chain and first segment are files
// in a new directory, returning its MetaStore beside it. wrap, if set,
// wraps each loglet it opens.
func fileVirtual(t *testing.T, wrap func(url string, l sharedlog.Loglet) sharedlog.Loglet) (*sharedlog.VirtualLog, sharedlog.MetaStore) {
	t.Helper()
	dir := t.TempDir()
	ms, err := sharedlog.OpenFileMetaStore(filepath.Join(dir, "chain.json"))
	if err != nil {
		t.Fatal(err)
	}
	open := logurl.Opener(dir)
	if wrap != nil {
		open = func(ctx context.Context, url string) (sharedlog.Loglet, error) {
			l, err := logurl.Opener(dir)(ctx, url)
			if err != nil {
				return nil, err
			}
			return wrap(url, l), nil
		}
	}
	v, err := sharedlog.OpenVirtual(testCtx(t), ms, open,
		sharedlog.VirtualOptions{InitialURL: "file:seg-00000000", NextURL: logurl.NextURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v, ms
}

func stored(t *testing.T, ms sharedlog.MetaStore) sharedlog.Chain {
	t.Helper()
	c, err := ms.Get(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// appendAcked appends each of data to v, recording it in acked.
func appendAcked(t *testing.T, ctx context.Context, v *sharedlog.VirtualLog, acked map[sharedlog.Pos]string, data ...string) {
	t.Helper()
	for _, d := range data {
		p, err := v.Append(ctx, []byte(d))
		if err != nil {
			t.Fatalf("Append(%q): %v", d, err)
		}
		acked[p] = d
	}
}

// downAfterCheck is a new segment's loglet that stops its server as its
// first CheckTail, the reconfiguration's check that it is empty, returns.
type downAfterCheck struct {
	sharedlog.Loglet
	once sync.Once
	down func()
}

func (l *downAfterCheck) CheckTail(ctx context.Context) (sharedlog.Pos, bool, error) {
	tail, sealed, err := l.Loglet.CheckTail(ctx)
	l.once.Do(l.down)
	return tail, sealed, err
}

// casHook runs before on the first CAS after it is armed.
type casHook struct {
	sharedlog.MetaStore
	once   sync.Once
	before func()
}

func (h *casHook) CAS(ctx context.Context, expect uint64, next sharedlog.Chain) error {
	if h.before != nil {
		h.once.Do(h.before)
	}
	return h.MetaStore.CAS(ctx, expect, next)
}

// TestVirtualMigrateWithPostgresDown moves live logs onto and off
// PostgreSQL while it is down at each step of the reconfiguration. Before
// the seal the move is refused and the log stays as it was; past it the
// move is finished, by the migration or by another agent once PostgreSQL
// is back. Nothing panics, and no acknowledged entry is lost.
func TestVirtualMigrateWithPostgresDown(t *testing.T) {
	t.Run("down before the check", func(t *testing.T) {
		ctx := testCtx(t)
		v, ms := fileVirtual(t, nil)
		acked := map[sharedlog.Pos]string{}
		appendAcked(t, ctx, v, acked, "a", "b")
		before := stored(t, ms)
		to, pg := viaProxy(t, logURL(t, "log", newID(t)+"/seg-1"))
		pg.Down()
		err := v.Reconfigure(ctx, to)
		if err == nil || !strings.Contains(err.Error(), "new segment") || strings.Contains(err.Error(), "sealed") {
			t.Fatalf("Reconfigure to a stopped PostgreSQL = %v, want the new segment's error, before any seal", err)
		}
		if after := stored(t, ms); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("stored chain %+v after the refused migration, was %+v", after, before)
		}
		appendAcked(t, ctx, v, acked, "c")
		pg.Up()
		if err := v.Reconfigure(ctx, to); err != nil {
			t.Fatalf("Reconfigure once PostgreSQL is back: %v", err)
		}
		appendAcked(t, ctx, v, acked, "d")
		backendtest.WantSchemes(t, stored(t, ms), "file", "postgres")
		backendtest.WantDense(t, ctx, v, acked)
	})

	t.Run("down between the check and the seal", func(t *testing.T) {
		// The target answered its check; the seal and the CAS are on
		// files, so the move completes, and the log waits for its new
		// segment's server.
		ctx := testCtx(t)
		to, pg := viaProxy(t, logURL(t, "log", newID(t)+"/seg-1"))
		v, ms := fileVirtual(t, func(url string, l sharedlog.Loglet) sharedlog.Loglet {
			if url != to {
				return l
			}
			return &downAfterCheck{Loglet: l, down: pg.Down}
		})
		acked := map[sharedlog.Pos]string{}
		appendAcked(t, ctx, v, acked, "a", "b")
		if err := v.Reconfigure(ctx, to); err != nil {
			t.Fatalf("Reconfigure with PostgreSQL stopped after its check: %v", err)
		}
		backendtest.WantSchemes(t, stored(t, ms), "file", "postgres")
		pg.Up()
		appendAcked(t, ctx, v, acked, "c")
		backendtest.WantDense(t, ctx, v, acked)
	})

	t.Run("down between the seal and the CAS", func(t *testing.T) {
		// The chain lives in PostgreSQL too: the seal lands, the CAS
		// does not. Another agent finishes the move once it is back.
		ctx := testCtx(t)
		u, pg := viaProxy(t, logURL(t, "log", newID(t)))
		pms, err := pglog.OpenMetaStoreURL(u)
		if err != nil {
			t.Fatal(err)
		}
		hook := &casHook{MetaStore: pms}
		first, err := pglog.FirstSegmentURL(u)
		if err != nil {
			t.Fatal(err)
		}
		opts := sharedlog.VirtualOptions{InitialURL: first, NextURL: logurl.NextURL}
		v, err := sharedlog.OpenVirtual(ctx, hook, logurl.Opener(""), opts)
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		acked := map[sharedlog.Pos]string{}
		appendAcked(t, ctx, v, acked, "a", "b")
		before := stored(t, pms)

		hook.before = pg.Down
		to := (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(t.TempDir(), "seg-1"))}).String()
		err = v.Reconfigure(ctx, to)
		if err == nil || !strings.Contains(err.Error(), "sealed") {
			t.Fatalf("Reconfigure with PostgreSQL stopped before the CAS = %v, want an error saying the log is sealed", err)
		}
		pg.Up()
		if after := stored(t, pms); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("stored chain %+v after the failed CAS, was %+v", after, before)
		}
		sealed, err := logurl.Open(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		defer sealed.Close()
		if tail, ok, err := sealed.CheckTail(ctx); err != nil || !ok || tail != 2 {
			t.Fatalf("first segment: tail %d, sealed %v, %v; want sealed at 2", tail, ok, err)
		}

		opts.StallTimeout = -1 // finish the move at once
		w, err := sharedlog.OpenVirtual(ctx, pms, logurl.Opener(""), opts)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		appendAcked(t, ctx, w, acked, "c")
		appendAcked(t, ctx, v, acked, "d")
		backendtest.WantSchemes(t, stored(t, pms), "postgres", "postgres")
		backendtest.WantDense(t, ctx, w, acked)
		// (v's reads are left out: its pool still holds the connections
		// Down cut, and pglog's reads fail once per stale connection.)
	})
}
