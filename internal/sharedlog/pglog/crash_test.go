package pglog_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog/internal/backendtest"
	"github.com/strandkafka/strand/internal/sharedlog/pglog"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// TestServerCrash kills the server (kill -9 of postgres and its backends) while
// appenders run and restarts it; backendtest.AppendAcrossCrash checks
// that every acknowledged append survived at its position, densely and
// once, and that the writer keeps going once the server is back.
func TestServerCrash(t *testing.T) {
	srv, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		testproc.SkipOrFail(t, err)
	}
	defer srv.Stop()
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("log", "crash")
	u.RawQuery = q.Encode()
	ctx := testCtx(t)
	l, err := pglog.OpenURL(ctx, u.String(), pglog.Options{AttemptTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	backendtest.AppendAcrossCrash(t, ctx, l, srv.Crash, func() any { return l.Stats() })
}
