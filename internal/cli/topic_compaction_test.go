package cli

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// compactionRow returns the COMPACTION table's row of partition p.
func compactionRow(t *testing.T, out string, p int) []string {
	t.Helper()
	rs := rows(out)
	for i, r := range rs {
		if slices.Equal(r, []string{"PARTITION", "CLEAN", "DIRTY", "DIRTY-RATIO", "FIRST-DIRTY", "DUE"}) {
			for _, row := range rs[i+1:] {
				if len(row) == 6 && row[0] == strconv.Itoa(p) {
					return row
				}
			}
		}
	}
	t.Fatalf("no compaction row for partition %d:\n%s", p, out)
	return nil
}

// TestTopicDescribeCompaction: `topic describe` shows a compacted
// topic's clean and dirty bytes and dirty ratio per partition, from an
// agent's admin API, before and after a cleaning pass; a topic that is
// not compacted shows none.
func TestTopicDescribeCompaction(t *testing.T) {
	a := startAgent(t)
	brokers := a.KafkaAddr()
	mustRun(t, brokers, "", "topic", "create", "table", "-p", "1", "-c", "cleanup.policy=compact")
	mustRun(t, brokers, "", "topic", "create", "plain", "-p", "1")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 4 { // four flushes: three cleanable, the newest not
		r := &kgo.Record{Topic: "table", Key: []byte("k"), Value: []byte(strconv.Itoa(i))}
		if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	describe := func() string {
		return mustRun(t, brokers, "", "topic", "describe", "table", "--http", a.HTTPAddr()).stdout
	}
	row := compactionRow(t, describe(), 0)
	if row[1] != "0" || row[2] == "0" || row[3] != "1.000" || row[4] != "0" || row[5] != "true" {
		t.Fatalf("before cleaning: %v", row)
	}
	if _, err := a.CleanCompacted(t.Context()); err != nil {
		t.Fatal(err)
	}
	row = compactionRow(t, describe(), 0)
	if row[1] == "0" || row[2] != "0" || row[3] != "0.000" || row[5] != "false" {
		t.Fatalf("after cleaning: %v", row)
	}
	var descs []struct {
		Compaction *agent.TopicCompaction `json:"compaction"`
	}
	out := mustRun(t, brokers, "", "topic", "describe", "table", "plain", "--http", a.HTTPAddr(), "--format", "json").stdout
	if err := json.Unmarshal([]byte(out), &descs); err != nil || len(descs) != 2 || descs[0].Compaction == nil ||
		len(descs[0].Compaction.Partitions) != 1 || descs[0].Compaction.Partitions[0].DirtyBytes != 0 || descs[1].Compaction != nil {
		t.Fatalf("describe --format json: %v\n%s", err, out)
	}
	if out := mustRun(t, brokers, "", "topic", "describe", "plain", "--http", a.HTTPAddr()).stdout; slices.ContainsFunc(rows(out), func(r []string) bool { return slices.Contains(r, "DIRTY") }) {
		t.Fatalf("a plain topic shows compaction:\n%s", out)
	}
}
