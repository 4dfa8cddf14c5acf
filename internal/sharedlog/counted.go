package sharedlog

import "context"

// Operation names Counted and CountedMetaStore report: one per method
// that reaches the backend.
const (
	OpAppend     = "append"
	OpCheckTail  = "check_tail"
	OpReadNext   = "read_next"
	OpTailMoved  = "tail_moved"
	OpWaitTail   = "wait_tail"
	OpSeal       = "seal"
	OpPrefixTrim = "prefix_trim"
	OpChainGet   = "chain_get"
	OpChainCAS   = "chain_cas"
)

// Counted returns ll with count called once per operation, before it
// starts, with the Op name. It keeps ll's optional powers (TailWaiter,
// TailProber) and adds none: a VirtualLog over it polls as it would
// over ll. count must be safe for concurrent use and must not block.
//
// An operation is not always one request: the caller knows its
// backend's cost (S3: a check_tail is a LIST and a GET, a read_next a
// LIST and a GET per entry, a tail_moved one GET).
func Counted(ll Loglet, count func(op string)) Loglet {
	c := counted{ll: ll, count: count}
	tw, waits := ll.(TailWaiter)
	tp, probes := ll.(TailProber)
	switch {
	case waits && probes:
		return countedWaiterProber{countedWaiter{c, tw}, tp}
	case waits:
		return countedWaiter{c, tw}
	case probes:
		return countedProber{c, tp}
	}
	return c
}

type counted struct {
	ll    Loglet
	count func(op string)
}

func (c counted) Append(ctx context.Context, entry []byte) (Pos, error) {
	c.count(OpAppend)
	return c.ll.Append(ctx, entry)
}

func (c counted) CheckTail(ctx context.Context) (Pos, bool, error) {
	c.count(OpCheckTail)
	return c.ll.CheckTail(ctx)
}

func (c counted) ReadNext(ctx context.Context, from, max Pos) ([]Entry, error) {
	c.count(OpReadNext)
	return c.ll.ReadNext(ctx, from, max)
}

func (c counted) Seal(ctx context.Context) error {
	c.count(OpSeal)
	return c.ll.Seal(ctx)
}

func (c counted) PrefixTrim(ctx context.Context, before Pos) error {
	c.count(OpPrefixTrim)
	return c.ll.PrefixTrim(ctx, before)
}

func (c counted) Close() error { return c.ll.Close() }

type countedWaiter struct {
	counted
	tw TailWaiter
}

func (c countedWaiter) WaitTail(ctx context.Context, after Pos) (Pos, error) {
	c.count(OpWaitTail)
	return c.tw.WaitTail(ctx, after)
}

type countedProber struct {
	counted
	tp TailProber
}

func (c countedProber) TailMoved(ctx context.Context, tail Pos) (bool, error) {
	c.count(OpTailMoved)
	return c.tp.TailMoved(ctx, tail)
}

type countedWaiterProber struct {
	countedWaiter
	tp TailProber
}

func (c countedWaiterProber) TailMoved(ctx context.Context, tail Pos) (bool, error) {
	c.count(OpTailMoved)
	return c.tp.TailMoved(ctx, tail)
}

// CountedMetaStore returns ms with count called once per Get (OpChainGet)
// and CAS (OpChainCAS), as Counted does for a loglet.
func CountedMetaStore(ms MetaStore, count func(op string)) MetaStore {
	return countedMetaStore{ms: ms, count: count}
}

type countedMetaStore struct {
	ms    MetaStore
	count func(op string)
}

func (c countedMetaStore) Get(ctx context.Context) (Chain, error) {
	c.count(OpChainGet)
	return c.ms.Get(ctx)
}

func (c countedMetaStore) CAS(ctx context.Context, expect uint64, next Chain) error {
	c.count(OpChainCAS)
	return c.ms.CAS(ctx, expect, next)
}
