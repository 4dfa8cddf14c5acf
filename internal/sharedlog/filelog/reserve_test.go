package filelog

import (
	"errors"
	"syscall"
	"testing"
)

// freeFile is an os file whose file system says it has free bytes.
type freeFile struct {
	File
	free int64
}

func (f freeFile) FreeBytes() (int64, error) { return f.free, nil }

// TestCheckReserve checks that the log refuses an append as a full disk
// would while less than freeReserve is free, so that the metadata
// database applying what it took is not the one to find the disk full.
func TestCheckReserve(t *testing.T) {
	for _, tc := range []struct {
		free int64
		full bool
	}{{0, true}, {freeReserve - 1, true}, {freeReserve, false}, {1 << 40, false}} {
		err := checkReserve(freeFile{free: tc.free})
		if got := errors.Is(err, syscall.ENOSPC); got != tc.full {
			t.Errorf("%d bytes free: %v, want ENOSPC %v", tc.free, err, tc.full)
		}
	}
	if err := checkReserve(nil); err != nil {
		t.Errorf("a file that cannot tell its free space: %v", err)
	}
}
