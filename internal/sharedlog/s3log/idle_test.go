package s3log_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/backendtest"
	"github.com/strandkafka/strand/internal/sharedlog/s3log"
)

// TestIdleCost: an agent following an idle S3 log costs at most
// backendtest.IdleBudget requests a minute, counted by the fake S3, and
// sees another agent's append one poll interval after a fetch waits.
func TestIdleCost(t *testing.T) {
	ctx := testCtx(t)
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	h, requests := backendtest.Counting(gofakes3.New(backend).Server())
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg := config(srv.URL, newPrefix(t))
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func(t *testing.T) *sharedlog.VirtualLog {
		t.Helper()
		ms, err := s3log.NewMetaStore(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		opener := func(ctx context.Context, url string) (sharedlog.Loglet, error) {
			seg := cfg
			seg.Prefix += url + "/"
			return s3log.Open(ctx, seg, s3log.Options{Clock: clk})
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
