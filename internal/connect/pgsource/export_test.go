package pgsource

// StartFromSlot makes tasks ask the server to stream from the slot's
// confirmed LSN rather than from their committed offset, so that a
// test sees the server resend what is already committed.
func StartFromSlot(b bool) { startFromSlot.Store(b) }
