package kafka

import (
	"context"
	"sync"
	"time"
)

// Metadata pacing. Answering the metadata of every partition costs CPU
// in proportion to its size (building, encoding, the error-code walk,
// writing), so a few connections asking for it in a loop can take an
// agent's CPU from everyone else: on a 2-core machine ten of them over
// 65,536 partitions made another client's produce p99 nine times worse.
// Large answers are therefore paced across the agent: one whose encoding
// passes metadataPacedBytes waits until metadataBytesPerSec allows it,
// like a Kafka request quota (which delays the response), but for one
// kind of request and for everyone. Small answers, what clients refreshing
// a few topics ask for, are not paced.
const (
	metadataPacedBytes  = 64 << 10
	metadataBytesPerSec = 64 << 20
	// metadataBurstBytes is what may go at once after a quiet spell.
	metadataBurstBytes = 16 << 20
)

// bytePacer is a token bucket of bytes whose takers wait for their turn:
// a take that finds the bucket short reserves its bytes anyway (the
// bucket goes into debt) and waits until the refill has paid them, so
// takers are served in the order they came at the bucket's rate.
type bytePacer struct {
	perSec, burst float64
	now           func() time.Time
	mu            struct {
		sync.Mutex
		tokens float64
		at     time.Time
	}
}

func newBytePacer(perSec, burst float64) *bytePacer {
	p := &bytePacer{perSec: perSec, burst: burst, now: time.Now}
	p.mu.tokens, p.mu.at = burst, p.now()
	return p
}

// take reserves n bytes and waits until they are paid, or until ctx ends
// or abort is closed (the bytes stay taken: the answer goes out anyway
// or the connection is gone).
func (p *bytePacer) take(ctx context.Context, n int64, abort <-chan struct{}) error {
	p.mu.Lock()
	now := p.now()
	p.mu.tokens = min(p.burst, p.mu.tokens+now.Sub(p.mu.at).Seconds()*p.perSec)
	p.mu.at = now
	p.mu.tokens -= float64(n)
	debt := -p.mu.tokens
	p.mu.Unlock()
	if debt <= 0 {
		return nil
	}
	return waitPaced(ctx, time.Duration(debt/p.perSec*float64(time.Second)), abort)
}

// waitPaced waits d, or until ctx ends (its cause) or abort is closed
// (nil: the answer goes out anyway).
func waitPaced(ctx context.Context, d time.Duration, abort <-chan struct{}) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-abort:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
