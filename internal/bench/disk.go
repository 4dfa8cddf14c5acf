package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"time"
)

// DiskResult is one measurement of fsync'd sequential write bandwidth.
type DiskResult struct {
	Bytes         int64   `json:"bytes"`
	ChunkBytes    int     `json:"chunk_bytes"`
	Seconds       float64 `json:"seconds"`
	BytesPerSec   float64 `json:"bytes_per_sec"`
	FsyncsPerSec  float64 `json:"fsyncs_per_sec"`
	MeanFsyncMs   float64 `json:"mean_fsync_ms"`
	IngestPercent float64 `json:"ingest_percent_of_disk,omitempty"`
}

// ErrBadDiskSize: the sizes given to DiskBandwidth are unusable.
var ErrBadDiskSize = errors.New("bench: disk bandwidth sizes must be positive, with total >= chunk")

// DiskBandwidth writes totalBytes of random data to a new file in dir in
// chunkBytes writes, fsyncing after each, and reports the rate: the most a
// durable writer that syncs every chunkBytes can ingest on this disk. The
// file is removed afterwards. Random data so that a compressing or
// deduplicating filesystem cannot flatter the number.
func DiskBandwidth(ctx context.Context, dir string, totalBytes int64, chunkBytes int) (DiskResult, error) {
	if totalBytes <= 0 || chunkBytes <= 0 || totalBytes < int64(chunkBytes) {
		return DiskResult{}, ErrBadDiskSize
	}
	chunk := make([]byte, chunkBytes)
	if _, err := rand.Read(chunk); err != nil {
		return DiskResult{}, err
	}
	f, err := os.CreateTemp(dir, "strand-bench-disk-*")
	if err != nil {
		return DiskResult{}, fmt.Errorf("bench: disk bandwidth: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	var (
		written   int64
		syncs     int
		syncTotal time.Duration
		start     = time.Now()
	)
	for written < totalBytes {
		if err := ctx.Err(); err != nil {
			return DiskResult{}, err
		}
		n := min(int64(chunkBytes), totalBytes-written)
		if _, err := f.Write(chunk[:n]); err != nil {
			return DiskResult{}, fmt.Errorf("bench: disk bandwidth: %w", err)
		}
		s := time.Now()
		if err := f.Sync(); err != nil {
			return DiskResult{}, fmt.Errorf("bench: disk bandwidth: %w", err)
		}
		syncTotal += time.Since(s)
		syncs++
		written += n
	}
	secs := time.Since(start).Seconds()
	return DiskResult{
		Bytes:        written,
		ChunkBytes:   chunkBytes,
		Seconds:      secs,
		BytesPerSec:  float64(written) / secs,
		FsyncsPerSec: float64(syncs) / secs,
		MeanFsyncMs:  syncTotal.Seconds() * 1e3 / float64(syncs),
	}, nil
}
