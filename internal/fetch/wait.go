package fetch

import (
	"context"
	"time"
)

// Notifier reports state changes; *replica.Replica is one (Changed is closed
// after each apply batch).
type Notifier interface {
	Changed() <-chan struct{}
}

// Wait is the long poll of a Fetch with MaxWaitMs: it returns true as soon
// as cond holds, or false once maxWait has passed without it. cond is
// checked first, then after every change n reports; no timer loop. If n
// also has an Err method (a halted replica reports one), a non-nil Err
// ends the wait with that error, as does ctx.
func Wait(ctx context.Context, n Notifier, maxWait time.Duration, cond func() bool) (bool, error) {
	errer, _ := n.(interface{ Err() error })
	var timeout <-chan time.Time
	if maxWait > 0 {
		t := time.NewTimer(maxWait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		// Take the channel before reading state: a change after cond
		// reads it then closes this channel, so none is missed.
		changed := n.Changed()
		if cond() {
			return true, nil
		}
		if errer != nil {
			if err := errer.Err(); err != nil {
				return false, err
			}
		}
		if timeout == nil {
			return false, nil
		}
		select {
		case <-changed:
		case <-timeout:
			return cond(), nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}
