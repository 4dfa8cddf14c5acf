package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCatchUpReadAhead produces into a topic of four partitions through
// one agent, so each data object holds all four, then restarts the agent
// (its read cache empty, as on an agent that did not write the data) and
// consumes partition 0 from the start with small fetches: every record
// comes back as produced, in order, and the agent read ahead to serve
// them.
func TestCatchUpReadAhead(t *testing.T) {
	dir := t.TempDir()
	a := start(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	const topic, records = "catch-up", 2000
	p := client(t, a.KafkaAddr(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	createTopic(t, a.KafkaAddr(), topic, 4)
	var want [][]byte
	for i := range records {
		v := bytes.Repeat(fmt.Appendf(nil, "record %06d ", i), 40)
		if i%4 == 0 {
			want = append(want, v)
		}
		p.Produce(ctx, &kgo.Record{Value: v}, nil)
		if i%200 == 199 {
			// Several produce requests, so several objects.
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()
	stop(t, a)

	a = start(t, dir)
	c := client(t, a.KafkaAddr(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxPartitionBytes(8<<10))
	var got [][]byte
	for len(got) < len(want) {
		fs := c.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d records: %v", len(got), err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Value) })
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d of partition 0 differs", i)
		}
	}
	checkMetrics(t, a.HTTPAddr(), []metricCheck{{name: "strand_fetch_read_ahead_gets_total"}})
}
