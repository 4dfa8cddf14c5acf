package jdbcsink

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/testservers/mariadbtest"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

var benchFields = []map[string]any{
	{"field": "id", "type": "int32", "optional": false},
	{"field": "name", "type": "string", "optional": true},
	{"field": "n", "type": "int64", "optional": true},
	{"field": "seen", "type": "int64", "optional": true, "name": "io.debezium.time.MicroTimestamp"},
}

// BenchmarkSink: rows/s from a topic of Debezium change events (with
// schemas, one create per key, 4 columns) upserted on the record key
// into each database, batch.size 500, the consumer reading an
// in-process Kafka (kfake) on the same machine. b.N rows per run; the
// time is from the task's start to its offsets covering every record.
//
//	go test ./internal/connect/jdbcsink -run '^$' -bench Sink -benchtime 20000x
func BenchmarkSink(b *testing.B) {
	b.Run("postgresql", func(b *testing.B) { benchSink(b, postgresDB(b, pgtest.URL(b))) })
	b.Run("mariadb", func(b *testing.B) { benchSink(b, mariaDB(b, mariadbtest.DSN(b), mariadbtest.URL(b))) })
}

func benchSink(b *testing.B, d *db) {
	b.ReportAllocs()
	topic := uniq("bench.public.rows")
	kafka := cluster(b, 4, topic)
	p := newProducer(b, kafka)
	for i := range b.N {
		row := map[string]any{"id": i, "name": fmt.Sprintf("row %d", i), "n": int64(i) * 7, "seen": int64(1714557600000000 + i)}
		p.send(topic, intKey(i), envelope(benchFields, "c", nil, row))
	}
	name := uniq("bench")
	cfg := d.config(topic, "insert.mode", "upsert", "primary.key.mode", "record_key", "schema.evolution", "basic")
	b.ResetTimer()
	start0 := time.Now()
	m := NewMetrics()
	r := start(b, name, cfg, kafka, m)
	waitCaughtUp(b, d, name, p, r)
	elapsed := time.Since(start0)
	b.StopTimer()
	if err := r.stop(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rows/s")
	var h dto.Metric
	if err := m.batchSeconds.WithLabelValues(name).(prometheus.Histogram).Write(&h); err == nil && h.GetHistogram().GetSampleCount() > 0 {
		hs := h.GetHistogram()
		b.ReportMetric(hs.GetSampleSum()/float64(hs.GetSampleCount())*1000, "ms/batch")
		b.ReportMetric(float64(b.N)/float64(hs.GetSampleCount()), "rows/batch")
	}
}

// BenchmarkDecode: one Debezium change event with its schema (the
// benchmark's 4 columns) decoded into a change.
func BenchmarkDecode(b *testing.B) {
	cfg, err := Parse(map[string]string{"connection.url": "jdbc:postgresql://h/db", "topics": "t",
		"insert.mode": "upsert", "primary.key.mode": "record_key"})
	if err != nil {
		b.Fatal(err)
	}
	row := map[string]any{"id": 1, "name": "row 1", "n": int64(7), "seen": int64(1714557600000000)}
	r := &kgo.Record{Topic: "bench.public.rows", Key: []byte(intKey(1)), Value: []byte(envelope(benchFields, "c", nil, row))}
	b.SetBytes(int64(len(r.Key) + len(r.Value)))
	b.ReportAllocs()
	d := decoder{cfg: cfg}
	for b.Loop() {
		if _, err := d.decode(r); err != nil {
			b.Fatal(err)
		}
	}
}
