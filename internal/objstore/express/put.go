package express

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/objstore"
)

// PutOptions tunes one PutExpress.
type PutOptions struct {
	// HedgeAfter: when the pair has not both acknowledged by then, the
	// third zone is written too (0: only when one of the pair fails).
	HedgeAfter time.Duration
	// MayHedge is asked before a hedge on time starts, and spends the
	// caller's hedge budget when it says yes; nil allows every hedge.
	// A third write after a failure asks nobody: without it the flush
	// fails.
	MayHedge func() bool
}

// PutResult is how a PutExpress went.
type PutResult struct {
	// Key is the key to commit: the bucket key with the two zones that
	// acknowledged first.
	Key string
	// Third: a third zone was written, on time or after a failure.
	Third bool
	// Settled is closed once no write of this call still runs. Until
	// then a write may still read data, which the caller must not reuse.
	Settled <-chan struct{}
}

// zoneResult is how the writes to one zone ended.
type zoneResult struct {
	zone int
	err  error
}

// PutExpress writes data, the object of the data object key key, to two
// zones (package doc) and returns once two acknowledged, or with an error
// once that can no longer happen. With three zones it rotates the pair
// and writes the third when one of the pair fails or is slow (opts). A
// failed call may have left copies in some zones: orphans for the gc's
// reconciler, which finds them by listing.
func (s *Store) PutExpress(ctx context.Context, key string, data []byte, opts PutOptions) (PutResult, error) {
	bucket, err := BucketKey(key)
	if err != nil {
		return PutResult{}, err
	}
	n := len(s.cfg.Zones)
	first := int(s.next.Add(1)-1) % n
	order := make([]int, n)
	for i := range order {
		order[i] = (first + i) % n
	}
	ctx, cancel := context.WithCancel(ctx)
	// results has room for every zone, so no write blocks once the call
	// has returned.
	results := make(chan zoneResult, n)
	settled := make(chan struct{})
	started, running := 0, 0
	start := func() {
		z := order[started]
		started++
		running++
		go func() { results <- zoneResult{zone: z, err: s.putZone(ctx, z, bucket, data)} }()
	}
	start()
	start()
	res := PutResult{Settled: settled}
	third := func() {
		if started < n {
			res.Third = true
			s.thirds.Add(1)
			start()
		}
	}
	hedge := make(chan struct{}, 1)
	var timer clock.Timer
	if opts.HedgeAfter > 0 && n > 2 {
		timer = s.cfg.Clock.AfterFunc(opts.HedgeAfter, func() { hedge <- struct{}{} })
	}
	var acked []int
	var errs []error
	// Wait while two acknowledgements are still possible.
	for len(acked) < 2 && running > 0 && len(acked)+running+n-started >= 2 {
		select {
		case r := <-results:
			running--
			if r.err != nil {
				errs = append(errs, fmt.Errorf("zone %s: %w", s.cfg.Zones[r.zone].Name, r.err))
				third()
				continue
			}
			acked = append(acked, r.zone)
		case <-hedge:
			if opts.MayHedge == nil || opts.MayHedge() {
				third()
			}
		}
	}
	clock.Stop(timer)
	cancel()
	// What still runs was cancelled; it reports into results, which has
	// room, and settles the call when the last one is back.
	go func(left int) {
		for range left {
			<-results
		}
		close(settled)
	}(running)
	if len(acked) < 2 {
		if err := ctx.Err(); err != nil && len(errs) == 0 {
			errs = append(errs, err)
		}
		return res, fmt.Errorf("express: %s acknowledged by %d of %d zones: %w", bucket, len(acked), n, errors.Join(errs...))
	}
	res.Key, err = Key(bucket, acked)
	return res, err
}

// putZone writes data to one zone's bucket, retrying with the same key
// and bytes. The key is this write's alone, so ErrExists means an earlier
// try landed though its reply was lost.
func (s *Store) putZone(ctx context.Context, z int, bucket string, data []byte) error {
	var err error
	for attempt := range s.cfg.PutAttempts {
		if attempt > 0 {
			if clock.Sleep(ctx, s.cfg.Clock, putBackoff<<(attempt-1)) != nil {
				break
			}
		}
		actx, cancel := context.WithTimeout(ctx, s.cfg.PutTimeout)
		err = s.cfg.Zones[z].Store.PutIfAbsent(actx, bucket, data)
		cancel()
		if err == nil || errors.Is(err, objstore.ErrExists) {
			s.puts[z].Add(1)
			s.putBytes[z].Add(int64(len(data)))
			return nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err == nil {
		err = context.Cause(ctx)
	}
	return err
}
