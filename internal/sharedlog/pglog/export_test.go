package pglog

import "context"

// OnWaitBlocked makes every WaitTail caller of l call f when it starts to
// wait for a wake-up. Set it before the first WaitTail.
func OnWaitBlocked(l *Loglet, f func()) { l.waitBlocked = f }

// Channel returns l's NOTIFY channel.
func Channel(l *Loglet) string { return l.channel }

// ListenerPID waits until l's listener listens on a connection whose
// server process is not notPID, and returns that process's id.
func ListenerPID(ctx context.Context, l *Loglet, notPID uint32) (uint32, error) {
	for {
		l.mu.Lock()
		pid, ch := l.mu.listenPID, l.mu.changed
		l.mu.Unlock()
		if pid != 0 && pid != notPID {
			return pid, nil
		}
		// The listener wakes waiters when it starts listening.
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// StartListener starts l's listener, as the first WaitTail does.
func StartListener(l *Loglet) error {
	_, err := l.changedCh(context.Background())
	return err
}

// ListenerDone returns a channel closed when l's listener has stopped,
// or nil if it never started.
func ListenerDone(l *Loglet) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.listenDone
}
