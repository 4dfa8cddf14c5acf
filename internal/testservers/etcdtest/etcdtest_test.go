package etcdtest_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/strandkafka/strand/internal/testservers/etcdtest"
	"github.com/strandkafka/strand/internal/testservers/testproc"
)

func TestMain(m *testing.M) { os.Exit(etcdtest.Run(m)) }

func TestServer(t *testing.T) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcdtest.Endpoints(t), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	k := fmt.Sprintf("etcdtest/%s/%d", t.Name(), time.Now().UnixNano())
	resp, err := cli.Txn(t.Context()).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).Then(clientv3.OpPut(k, "v")).Commit()
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Succeeded {
		t.Fatalf("first create of %q did not succeed", k)
	}
	resp, err = cli.Txn(t.Context()).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).Then(clientv3.OpPut(k, "w")).Commit()
	if err != nil || resp.Succeeded {
		t.Fatalf("second create of %q = (%v, %v), want a failed compare", k, resp.Succeeded, err)
	}
}

// TestPauseKill checks the faults a history test injects: a paused etcd
// answers nothing until resumed, and a killed one keeps what it
// committed when restarted.
func TestPauseKill(t *testing.T) {
	srv, err := etcdtest.Start()
	if err != nil {
		testproc.SkipOrFail(t, err)
	}
	defer srv.Stop()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	get := func(timeout time.Duration) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		resp, err := cli.Get(ctx, "kept")
		if err != nil || len(resp.Kvs) == 0 {
			return "", err
		}
		return string(resp.Kvs[0].Value), nil
	}
	if _, err := cli.Put(t.Context(), "kept", "v"); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	// Bounded only so an etcd that answers fails the test quickly.
	if _, err := get(300 * time.Millisecond); err == nil {
		srv.Resume()
		t.Fatal("a paused etcd answered")
	}
	srv.Resume()
	if _, err := get(10 * time.Second); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	srv.Kill()
	if _, err := get(time.Second); err == nil {
		t.Fatal("a killed etcd answered")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if v, err := get(10 * time.Second); err != nil || v != "v" {
		t.Fatalf("after Restart: %q, %v", v, err)
	}
}
