package cli

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// TestTopicDeadBytes: on a Strand agent, records that retention dropped
// leave SIZE at 0 while their object waits out the delete delay (a
// minute by default) in the store; `topic list` and `topic describe`
// show those bytes under DEAD, in text and JSON.
func TestTopicDeadBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), commandDeadline)
	defer cancel()
	a, err := agent.Start(ctx, agent.Config{
		DataDir: t.TempDir(), KafkaListen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0",
		SnapshotInterval:          agent.SnapshotsOff,
		LogRetentionCheckInterval: 20 * time.Millisecond,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("agent.Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), commandDeadline)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("agent.Stop: %v", err)
		}
	})
	brokers := a.KafkaAddr()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kadm.StringPtr("1000")}, "expiring"); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	var rs []*kgo.Record
	for i := range 10 {
		rs = append(rs, &kgo.Record{Topic: "expiring", Partition: 1, Value: strconv.AppendInt([]byte("record-"), int64(i), 10), Timestamp: old})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// Retention runs every 20 ms: wait for SIZE 0, then DEAD holds what
	// SIZE had.
	var listed []TopicListing
	for {
		r := mustRun(t, brokers, "", "topic", "list", "--format", "json")
		listed = nil
		if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed) != 1 || listed[0].SizeBytes == nil {
			t.Fatalf("topic list --format json: %v\n%s", err, r.stdout)
		}
		if *listed[0].SizeBytes == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("retention never dropped the records: %s", r.stdout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if listed[0].DeadBytes == nil || *listed[0].DeadBytes <= 0 {
		t.Fatalf("topic list: dead bytes %v after retention, want the records' bytes", listed[0].DeadBytes)
	}
	dead := strconv.FormatInt(*listed[0].DeadBytes, 10)

	r := mustRun(t, brokers, "", "topic", "list")
	want := [][]string{{"NAME", "PARTITIONS", "SIZE", "DEAD"}, {"expiring", "2", "0", dead}}
	if !slices.EqualFunc(rows(r.stdout), want, slices.Equal) {
		t.Fatalf("topic list:\n%s\nwant %v", r.stdout, want)
	}
	r = mustRun(t, brokers, "", "topic", "describe", "expiring")
	got := rows(r.stdout)
	if row := findRow(got, "DEAD"); !slices.Equal(row, []string{"DEAD", dead}) {
		t.Errorf("summary DEAD row %v, want %s:\n%s", row, dead, r.stdout)
	}
	header := findRow(got, "PARTITION")
	col := slices.Index(header, "DEAD")
	if col < 0 {
		t.Fatalf("no DEAD column:\n%s", r.stdout)
	}
	for p, want := range []string{"0", dead} {
		if row := findRow(got, strconv.Itoa(p)); len(row) != len(header) || row[col] != want {
			t.Errorf("partition %d row %v, want DEAD %s:\n%s", p, row, want, r.stdout)
		}
	}
}
