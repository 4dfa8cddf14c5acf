package dynamolog_test

import (
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/dynamolog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/backendtest"
	"github.com/strandkafka/strand/internal/testservers/dynalitetest"
)

// BenchmarkAppend measures appends per second against dynalite with 1,
// 8 and 64 goroutines appending 512-byte entries through one handle.
// dynalite runs on the same machine, so this measures the client's
// pipelining and the server's CPU, not DynamoDB.
func BenchmarkAppend(b *testing.B) {
	db := connect(b, config(dynalitetest.Start(b)))
	backendtest.BenchmarkAppend(b, backendtest.AppendBench{
		EntryBytes: 512,
		Open: func(b *testing.B) (sharedlog.Loglet, func() (int64, int64)) {
			return openLoglet(b, db, newLogID(b), dynamolog.Options{}), nil
		},
	})
}
