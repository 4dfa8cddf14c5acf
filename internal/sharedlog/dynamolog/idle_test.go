package dynamolog_test

import (
	"context"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/dynamolog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/backendtest"
	"github.com/strandkafka/strand/internal/testservers/dynalitetest"
)

// TestIdleCost: an agent following an idle DynamoDB log costs at most
// backendtest.IdleBudget requests a minute, counted by a proxy in front
// of dynalite, and sees another agent's append one poll interval after
// a fetch waits.
func TestIdleCost(t *testing.T) {
	ctx := testCtx(t)
	srv := dynalitetest.Start(t)
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	h, requests := backendtest.Counting(httputil.NewSingleHostReverseProxy(target))
	proxy := httptest.NewServer(h)
	t.Cleanup(proxy.Close)
	cfg := config(srv)
	cfg.Endpoint = proxy.URL
	db := connect(t, cfg)
	logID := newLogID(t)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func(t *testing.T) *sharedlog.VirtualLog {
		t.Helper()
		ms, err := db.MetaStore(logID)
		if err != nil {
			t.Fatal(err)
		}
		opener := func(ctx context.Context, url string) (sharedlog.Loglet, error) {
			return db.Loglet(logID+"/"+url, dynamolog.Options{Clock: clk})
		}
		v, err := sharedlog.OpenVirtual(ctx, ms, opener, sharedlog.VirtualOptions{InitialURL: "seg-0", Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Close() })
		return v
	}
	backendtest.CheckIdle(t, ctx, clk, open, requests)
}
