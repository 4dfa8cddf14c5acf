package agent

import "context"

// WaitSnapshots waits until the agent has taken n snapshots, periodic or
// requested, and returns the newest.
func (a *Agent) WaitSnapshots(ctx context.Context, n int) (SnapshotResult, error) {
	return a.snapshots.waitTaken(ctx, n)
}
