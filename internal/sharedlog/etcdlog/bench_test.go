package etcdlog_test

import (
	"testing"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/etcdlog"
	"github.com/strandkafka/strand/internal/sharedlog/internal/backendtest"
)

// BenchmarkAppend measures durable appends of 256-byte entries from 1, 8
// and 64 concurrent appenders against the local server; entries/txn
// shows how well group commit gathers them.
func BenchmarkAppend(b *testing.B) {
	backendtest.BenchmarkAppend(b, backendtest.AppendBench{
		EntryBytes: 256,
		Open: func(b *testing.B) (sharedlog.Loglet, func() (int64, int64)) {
			l, err := etcdlog.OpenURL(b.Context(), etcdURL(b, newPath()), etcdlog.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return l, func() (int64, int64) { st := l.Stats(); return st.Entries, st.Batches }
		},
		CommitUnit: "entries/txn",
	})
}
