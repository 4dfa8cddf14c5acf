package sharedlog_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/loglettest"
)

// virtualLoglet presents a VirtualLog as a Loglet, so the Loglet
// conformance suite can run against it: Seal seals the whole log (the
// active segment is sealed and no segment follows). With every > 0 it
// also reconfigures the log to a fresh memlog after every that many
// successful appends, so the suite's reads, trims, seals and concurrent
// appends all run across segment boundaries and against reconfigurations
// in flight.
type virtualLoglet struct {
	*sharedlog.VirtualLog
	every  int64
	prefix string
	n, seq atomic.Int64

	mu  sync.Mutex
	err error // the first unexpected Reconfigure error
}

func (l *virtualLoglet) Seal(ctx context.Context) error {
	return sharedlog.SealVirtual(ctx, l.VirtualLog)
}

func (l *virtualLoglet) Append(ctx context.Context, entry []byte) (sharedlog.Pos, error) {
	p, err := l.VirtualLog.Append(ctx, entry)
	if err != nil || l.every == 0 || l.n.Add(1)%l.every != 0 {
		return p, err
	}
	url := fmt.Sprintf("%s/%d", l.prefix, l.seq.Add(1))
	rerr := l.Reconfigure(ctx, url)
	// A Seal or Close racing with the reconfiguration is the suite's doing.
	if rerr != nil && !errors.Is(rerr, sharedlog.ErrSealed) && !errors.Is(rerr, sharedlog.ErrClosed) && ctx.Err() == nil {
		l.mu.Lock()
		if l.err == nil {
			l.err = fmt.Errorf("Reconfigure(%s): %w", url, rerr)
		}
		l.mu.Unlock()
	}
	return p, nil
}

func TestVirtualConformance(t *testing.T) {
	tests := []struct {
		name  string
		every int64
	}{
		// The first segment is empty and sealed; the suite runs on the
		// second, which starts at position 0.
		{"reconfigured once", 0},
		{"reconfigured every 7 appends", 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cases atomic.Int64
			loglettest.Options{Entries: 100}.Run(t, func(t *testing.T) sharedlog.Loglet {
				ctx := testCtx(t)
				prefix := fmt.Sprintf("mem://conformance/%d", cases.Add(1))
				reg := newMemLoglets()
				v, err := sharedlog.OpenVirtual(ctx, sharedlog.NewMemMetaStore(), reg.open, testOpts(prefix+"/0"))
				if err != nil {
					t.Fatal(err)
				}
				mustReconfigure(t, ctx, v, prefix+"/1")
				l := &virtualLoglet{VirtualLog: v, every: tt.every, prefix: prefix + "/r"}
				t.Cleanup(func() {
					if l.err != nil {
						t.Error(l.err)
					}
					if tt.every > 0 && !t.Failed() {
						t.Logf("%d segments", len(v.Chain().Segments))
					}
				})
				return l
			})
		})
	}
}
