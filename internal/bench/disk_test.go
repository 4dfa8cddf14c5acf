package bench

import (
	"context"
	"errors"
	"os"
	"testing"
)

func TestDiskBandwidth(t *testing.T) {
	dir := t.TempDir()
	res, err := DiskBandwidth(context.Background(), dir, 4<<20+5, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != 4<<20+5 || res.ChunkBytes != 1<<20 {
		t.Errorf("wrote %d bytes in %d-byte chunks, want %d in %d", res.Bytes, res.ChunkBytes, 4<<20+5, 1<<20)
	}
	if res.BytesPerSec <= 0 || res.FsyncsPerSec <= 0 || res.MeanFsyncMs <= 0 {
		t.Errorf("rates not positive: %+v", res)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("left %d files behind", len(entries))
	}
	for _, sizes := range [][2]int{{0, 1}, {1, 0}, {1, 2}} {
		if _, err := DiskBandwidth(context.Background(), dir, int64(sizes[0]), sizes[1]); !errors.Is(err, ErrBadDiskSize) {
			t.Errorf("DiskBandwidth(total %d, chunk %d) = %v, want ErrBadDiskSize", sizes[0], sizes[1], err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := DiskBandwidth(ctx, dir, 1<<20, 1<<20); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: err = %v", err)
	}
}
