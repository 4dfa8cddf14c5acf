package s3log_test

import (
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/backendtest"
	"github.com/strandkafka/strand/internal/sharedlog/s3log"
)

// BenchmarkAppend measures appends per second against in-process
// gofakes3 with 1, 8 and 64 goroutines appending 512-byte entries
// through one handle.
// The server shares this process, so this measures the client's
// pipelining and the fake's CPU, not S3.
func BenchmarkAppend(b *testing.B) {
	endpoint := fakeS3(b)
	backendtest.BenchmarkAppend(b, backendtest.AppendBench{
		EntryBytes: 512,
		Open: func(b *testing.B) (sharedlog.Loglet, func() (int64, int64)) {
			return open(b, config(endpoint, newPrefix(b)), s3log.Options{}), nil
		},
	})
}
