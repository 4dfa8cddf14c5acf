package objstore

import (
	"context"
	"sync/atomic"
)

// OpCounts is what Counting saw for one kind of operation.
type OpCounts struct {
	// Requests counts calls, failed ones included: a failed request is
	// still billed by a real store.
	Requests int64
	// Errors counts calls that returned an error, sentinels included.
	Errors int64
	// Bytes is payload moved: bytes handed to Put and PutIfAbsent (counted
	// whether or not they succeeded) and bytes returned by Get.
	Bytes int64
}

// Counts is a snapshot of a Counting store's counters, indexed by Op.
type Counts struct {
	Ops [numOps]OpCounts
}

// Op returns the counts for one kind of operation.
func (c Counts) Op(op Op) OpCounts {
	if !op.valid() {
		return OpCounts{}
	}
	return c.Ops[op]
}

// Requests is the total number of calls.
func (c Counts) Requests() int64 {
	var n int64
	for _, o := range c.Ops {
		n += o.Requests
	}
	return n
}

// BytesIn is the payload sent to the store by Put and PutIfAbsent.
func (c Counts) BytesIn() int64 { return c.Ops[OpPut].Bytes + c.Ops[OpPutIfAbsent].Bytes }

// BytesOut is the payload returned by Get.
func (c Counts) BytesOut() int64 { return c.Ops[OpGet].Bytes }

// Sub returns c minus an earlier snapshot: the activity between the two.
func (c Counts) Sub(earlier Counts) Counts {
	var d Counts
	for i := range c.Ops {
		d.Ops[i] = OpCounts{
			Requests: c.Ops[i].Requests - earlier.Ops[i].Requests,
			Errors:   c.Ops[i].Errors - earlier.Ops[i].Errors,
			Bytes:    c.Ops[i].Bytes - earlier.Ops[i].Bytes,
		}
	}
	return d
}

// Counting is a Store that counts the calls made through it, per kind of
// operation, with the bytes they moved. A call is counted once however
// many requests the backend below makes for it (SDK retries are not
// seen). Safe for concurrent use; counters are atomics, so Snapshot
// never blocks a request.
type Counting struct {
	s   Store
	ops [numOps]struct {
		requests, errors, bytes atomic.Int64
	}
}

var _ Store = (*Counting)(nil)

// WithCounters returns a Counting store in front of s.
func WithCounters(s Store) *Counting { return &Counting{s: s} }

// Snapshot returns the counters as they are now. Counters are read one by
// one, so a snapshot taken during traffic may split a call (request
// counted, bytes not yet); take a later snapshot for exact totals.
func (c *Counting) Snapshot() Counts {
	var out Counts
	for i := range c.ops {
		out.Ops[i] = OpCounts{
			Requests: c.ops[i].requests.Load(),
			Errors:   c.ops[i].errors.Load(),
			Bytes:    c.ops[i].bytes.Load(),
		}
	}
	return out
}

func (c *Counting) note(op Op, nbytes int, err error) {
	o := &c.ops[op]
	o.requests.Add(1)
	if err != nil {
		o.errors.Add(1)
	}
	if nbytes > 0 {
		o.bytes.Add(int64(nbytes))
	}
}

func (c *Counting) Put(ctx context.Context, key string, data []byte) error {
	err := c.s.Put(ctx, key, data)
	c.note(OpPut, len(data), err)
	return err
}

func (c *Counting) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := c.s.PutIfAbsent(ctx, key, data)
	c.note(OpPutIfAbsent, len(data), err)
	return err
}

func (c *Counting) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	out, err := c.s.Get(ctx, key, offset, length)
	c.note(OpGet, len(out), err)
	return out, err
}

func (c *Counting) Delete(ctx context.Context, key string) error {
	err := c.s.Delete(ctx, key)
	c.note(OpDelete, 0, err)
	return err
}

func (c *Counting) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	out, err := c.s.List(ctx, prefix)
	c.note(OpList, 0, err)
	return out, err
}
