//go:build !unix

package filelog

import (
	"os"
	"path/filepath"
)

// lockDir only creates dir/LOCK: without flock, exclusion is the caller's
// job on this platform.
func lockDir(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
}
