package fileobj

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func benchStore(b *testing.B) *Store {
	b.Helper()
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func benchData(n int) []byte {
	d := make([]byte, n)
	for i := range d {
		d[i] = byte(i * 7)
	}
	return d
}

// BenchmarkPut measures a durable Put (write, fsync, rename, directory
// fsync) to a fresh key each time, as the produce path does.
func BenchmarkPut(b *testing.B) {
	for _, size := range []int{1 << 20, 8 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			s := benchStore(b)
			data := benchData(size)
			ctx := context.Background()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := s.Put(ctx, fmt.Sprintf("data/%08d.obj", i), data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkPutIfAbsent(b *testing.B) {
	const size = 1 << 20
	s := benchStore(b)
	data := benchData(size)
	ctx := context.Background()
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := s.PutIfAbsent(ctx, fmt.Sprintf("data/%08d.obj", i), data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetRange reads ranges of an 8 MiB object, as the fetch path
// reads one partition's batches out of a multi-partition object.
func BenchmarkGetRange(b *testing.B) {
	const objSize = 8 << 20
	s := benchStore(b)
	ctx := context.Background()
	if err := s.Put(ctx, "data/obj", benchData(objSize)); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int64{4 << 10, 64 << 10, 1 << 20, objSize} {
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) {
			b.SetBytes(n)
			b.ReportAllocs()
			for i := range b.N {
				off := (int64(i) * 1_000_003) % (objSize - n + 1)
				got, err := s.Get(ctx, "data/obj", off, n)
				if err != nil || int64(len(got)) != n {
					b.Fatalf("Get: %d bytes, %v", len(got), err)
				}
			}
		})
	}
}

// BenchmarkPutConcurrent: 4 Puts of 128 KiB at a time into one directory,
// as overlapping uploads write: dirsyncs/put counts the directory fsyncs
// each costs (1 unshared; below 1 when they share).
//
//	go test -run '^$' -bench PutConcurrent -benchtime 2000x ./internal/objstore/fileobj/
func BenchmarkPutConcurrent(b *testing.B) {
	const size, writers = 128 << 10, 4
	s := benchStore(b)
	var syncs atomic.Int64
	s.syncDir = func(dir string) error {
		syncs.Add(1)
		return syncDir(dir)
	}
	data := benchData(size)
	ctx := context.Background()
	b.SetBytes(size)
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range writers {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				if err := s.Put(ctx, fmt.Sprintf("data/%08d.obj", i), data); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(syncs.Load())/float64(b.N), "dirsyncs/put")
}
