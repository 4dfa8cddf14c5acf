package pgsource

import "context"

// StartFromSlot makes tasks ask the server to stream from the slot's
// confirmed LSN rather than from their committed offset, so that a
// test sees the server resend what is already committed.
func StartFromSlot(b bool) { startFromSlot.Store(b) }

// SnapshotParts makes snapshots commit every rows rows and call hook
// after each part (nil: none); 0 rows restores the default.
func SnapshotParts(rows int64, hook func(ctx context.Context, rows int)) {
	if rows == 0 {
		rows = defaultSnapshotTxnRecords
	}
	snapshotTxnRecords.Store(rows)
	if hook == nil {
		snapshotCommitted.Store(nil)
	} else {
		snapshotCommitted.Store(&hook)
	}
}
