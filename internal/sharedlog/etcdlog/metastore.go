package etcdlog

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// MetaStore is a sharedlog.MetaStore in one etcd key, <path>\x00chain.
// The chain's version is the key's etcd version (the count of puts since
// it was created), so CAS is a transaction comparing Version(key) with
// the expected chain version: etcd picks exactly one winner per version.
// Safe for concurrent use.
type MetaStore struct {
	key string
	// acquire returns a client for one operation and its release.
	acquire func() (*clientv3.Client, func(), error)
}

var _ sharedlog.MetaStore = (*MetaStore)(nil)

// NewMetaStore returns the register of the VirtualLog at path, reached
// through cli, which the caller keeps and closes.
func NewMetaStore(cli *clientv3.Client, path string) (*MetaStore, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	return &MetaStore{key: chainKey(path), acquire: func() (*clientv3.Client, func(), error) {
		return cli, func() {}, nil
	}}, nil
}

// OpenMetaStoreURL returns the register of the VirtualLog an etcd:// URL
// names. It holds no client between calls: each Get or CAS makes one and
// closes it, so the store needs no Close (a VirtualLog touches its
// MetaStore only when reconfiguring or trimming).
func OpenMetaStoreURL(rawURL string) (*MetaStore, error) {
	tg, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return &MetaStore{key: chainKey(tg.Path), acquire: func() (*clientv3.Client, func(), error) {
		cli, err := NewClient(tg.Endpoints)
		if err != nil {
			return nil, nil, err
		}
		return cli, func() { cli.Close() }, nil
	}}, nil
}

func (m *MetaStore) Get(ctx context.Context) (sharedlog.Chain, error) {
	if err := ctx.Err(); err != nil {
		return sharedlog.Chain{}, err
	}
	cli, release, err := m.acquire()
	if err != nil {
		return sharedlog.Chain{}, err
	}
	defer release()
	resp, err := cli.Get(ctx, m.key)
	if err != nil {
		return sharedlog.Chain{}, fmt.Errorf("etcdlog: MetaStore %q get: %w", m.key, err)
	}
	if len(resp.Kvs) == 0 {
		return sharedlog.Chain{}, nil
	}
	kv := resp.Kvs[0]
	c, err := sharedlog.DecodeChain(kv.Value)
	if err != nil {
		return sharedlog.Chain{}, fmt.Errorf("etcdlog: MetaStore %q: %w", m.key, err)
	}
	if c.Version != uint64(kv.Version) {
		return sharedlog.Chain{}, fmt.Errorf("%w: MetaStore %q key at etcd version %d holds chain version %d",
			sharedlog.ErrInvalidChain, m.key, kv.Version, c.Version)
	}
	return c, nil
}

func (m *MetaStore) CAS(ctx context.Context, expect uint64, next sharedlog.Chain) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sharedlog.CheckCAS(expect, next); err != nil {
		return err
	}
	enc, err := sharedlog.EncodeChain(next)
	if err != nil {
		return err
	}
	cli, release, err := m.acquire()
	if err != nil {
		return err
	}
	defer release()
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(m.key), "=", int64(expect))).
		Then(clientv3.OpPut(m.key, string(enc))).
		Else(clientv3.OpGet(m.key, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return fmt.Errorf("etcdlog: MetaStore %q CAS: %w", m.key, err)
	}
	if resp.Succeeded {
		return nil
	}
	var cur int64
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		cur = kvs[0].Version
	}
	return fmt.Errorf("CAS expecting version %d, stored %d: %w", expect, cur, sharedlog.ErrConflict)
}
