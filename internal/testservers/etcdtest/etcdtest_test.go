package etcdtest_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/strandkafka/strand/internal/testservers/etcdtest"
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
