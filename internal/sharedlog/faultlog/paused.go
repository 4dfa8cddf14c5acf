package faultlog

import (
	"context"
	"sync"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// PausedLog is a sharedlog.Log whose reads a test can hold: while paused,
// ReadNext blocks, so a replica over it applies nothing, like an agent
// that fell behind. Appends and the rest pass through.
type PausedLog struct {
	sharedlog.Log
	mu struct {
		sync.Mutex
		resume chan struct{} // nil while reading
	}
}

// Paused wraps log, reading.
func Paused(log sharedlog.Log) *PausedLog { return &PausedLog{Log: log} }

// Pause holds reads until Resume.
func (p *PausedLog) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.resume == nil {
		p.mu.resume = make(chan struct{})
	}
}

// Resume lets held and later reads go on.
func (p *PausedLog) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.resume != nil {
		close(p.mu.resume)
		p.mu.resume = nil
	}
}

// ReadNext waits while the log is paused, then reads.
func (p *PausedLog) ReadNext(ctx context.Context, from, max sharedlog.Pos) ([]sharedlog.Entry, error) {
	p.mu.Lock()
	resume := p.mu.resume
	p.mu.Unlock()
	if resume != nil {
		select {
		case <-resume:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return p.Log.ReadNext(ctx, from, max)
}

// WaitTail passes through; the wrapped log must be a TailWaiter.
func (p *PausedLog) WaitTail(ctx context.Context, after sharedlog.Pos) (sharedlog.Pos, error) {
	return p.Log.(sharedlog.TailWaiter).WaitTail(ctx, after)
}
