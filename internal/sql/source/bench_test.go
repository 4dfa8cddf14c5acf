package source_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/bench/nexmark"
	"github.com/strandkafka/strand/internal/sql/source"
)

// nexmarkRecords are n generated events of table's kind as the bench's
// topics hold them.
func nexmarkRecords(b *testing.B, table string, n int) []*kgo.Record {
	b.Helper()
	gen, err := nexmark.NewGenerator(nexmark.Config{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	var out []*kgo.Record
	for len(out) < n {
		e, ok := gen.Next()
		if !ok {
			b.Fatal("generator ended")
		}
		if e.Kind.Table() != table {
			continue
		}
		v, err := e.JSON()
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, &kgo.Record{Topic: table, Key: e.Key(), Value: v, Offset: int64(len(out))})
	}
	return out
}

// BenchmarkDecodeNexmark decodes the Nexmark tables' JSON records into
// the columns `strand bench --nexmark` declares: the per-record cost of
// a view's source stage, without Kafka.
//
//	go test -run '^$' -bench BenchmarkDecodeNexmark ./internal/sql/source/
func BenchmarkDecodeNexmark(b *testing.B) {
	for _, table := range []string{"bid", "auction", "person"} {
		b.Run(table, func(b *testing.B) {
			cols, err := nexmark.SourceColumns(table)
			if err != nil {
				b.Fatal(err)
			}
			def := defOf(b, "json", cols)
			dec, err := source.NewDecoder(def, nil)
			if err != nil {
				b.Fatal(err)
			}
			recs := nexmarkRecords(b, table, 1000)
			var size int64
			for _, r := range recs {
				size += int64(len(r.Value))
			}
			b.SetBytes(size / int64(len(recs)))
			b.ReportAllocs()
			var cpu0 time.Duration
			if processCPU != nil {
				cpu0 = processCPU(b)
			}
			i := 0
			for b.Loop() {
				if _, err := dec.Decode(context.Background(), recs[i%len(recs)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			if processCPU != nil {
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(i), "cpu-ns/op")
			}
		})
	}
}

// processCPU, where the platform has it (cpu_unix_test.go), is the CPU
// time (user and system) this process used so far: cpu-ns/op holds up
// on a loaded machine where ns/op does not.
var processCPU func(b *testing.B) time.Duration
