package etcdlog_test

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/backendtest"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

// TestVirtualPostgresToEtcd is the second migration of issue 6: a log on
// PostgreSQL moves to etcd while appends continue, then to a second etcd
// segment named by logurl.NextURL. The chain stays in PostgreSQL, where
// the log was created.
func TestVirtualPostgresToEtcd(t *testing.T) {
	ctx := testCtx(t)
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("log", fmt.Sprintf("etcd-migration-%s-%d", runID, paths.Add(1)))
	u.RawQuery = q.Encode()
	pgURL := u.String()
	v, err := logurl.OpenVirtual(ctx, pgURL, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := newPath()
	acked := backendtest.Migrate(t, ctx, v,
		func(sharedlog.Chain) (string, error) { return etcdURL(t, base+"/seg-00000002"), nil },
		logurl.NextURL,
	)
	backendtest.WantSchemes(t, v.Chain(), "postgres", "etcd", "etcd")
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	w, err := logurl.OpenVirtual(ctx, pgURL, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	backendtest.WantDense(t, ctx, w, acked)
}

// TestVirtualOverEtcd: a VirtualLog whose chain and segments all live in
// etcd, shared by two agents; the second waits for the first's appends
// through WaitTail (a watch) rather than polling.
func TestVirtualOverEtcd(t *testing.T) {
	ctx := testCtx(t)
	u := etcdURL(t, newPath())
	v, err := logurl.OpenVirtual(ctx, u, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	acked := backendtest.Migrate(t, ctx, v, logurl.NextURL)
	other, err := logurl.OpenVirtual(ctx, u, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	backendtest.WantDense(t, ctx, other, acked)
	tail := sharedlog.Pos(len(acked))
	woke := make(chan error, 1)
	go func() {
		got, err := other.WaitTail(ctx, tail)
		if err == nil && got <= tail {
			err = fmt.Errorf("WaitTail(%d) returned tail %d", tail, got)
		}
		woke <- err
	}()
	if _, err := v.Append(ctx, []byte("wake")); err != nil {
		t.Fatal(err)
	}
	if err := <-woke; err != nil {
		t.Fatal(err)
	}
}
