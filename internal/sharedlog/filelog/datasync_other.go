//go:build !linux

package filelog

// Datasync is Sync where fdatasync(2) is not offered (macOS's does not
// flush the drive's cache either way).
func (f osFile) Datasync() error { return f.Sync() }
