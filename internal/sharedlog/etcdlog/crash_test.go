package etcdlog_test

import (
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog/etcdlog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/backendtest"
	"github.com/strandkafka/strand/internal/testservers/etcdtest"
	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// TestServerCrash kills the server (kill -9 of etcd) while
// appenders run and restarts it; backendtest.AppendAcrossCrash checks
// that every acknowledged append survived at its position, densely and
// once, and that the writer keeps going once the server is back.
func TestServerCrash(t *testing.T) {
	srv, err := etcdtest.Start()
	if err != nil {
		testproc.SkipOrFail(t, err)
	}
	defer srv.Stop()
	ctx := testCtx(t)
	l, err := etcdlog.OpenURL(ctx, "etcd://"+srv.Endpoint()+"/crash", etcdlog.Options{AttemptTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	backendtest.AppendAcrossCrash(t, ctx, l, srv.Crash, func() any { return l.Stats() })
}
