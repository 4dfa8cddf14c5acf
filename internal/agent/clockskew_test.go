package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/meta"
)

// skewedCluster starts one agent per clock offset on one log and one
// store, in order, each with its own clock, checking retention often.
func skewedCluster(t *testing.T, offsets ...time.Duration) []*agent.Agent {
	t.Helper()
	shared := t.TempDir()
	logURL := "mem://" + strings.ReplaceAll(t.Name(), "/", "-")
	var agents []*agent.Agent
	for i, d := range offsets {
		cfg := agent.Config{
			DataDir: t.TempDir(), NodeID: int32(i + 1), Log: logURL,
			ObjStore:                  "file://" + filepath.ToSlash(filepath.Join(shared, "objects")),
			LogRetentionCheckInterval: 20 * time.Millisecond,
		}
		agent.SetClock(&cfg, aheadClock{d})
		agents = append(agents, startWith(t, cfg, nil))
	}
	return agents
}

// TestSkewedAgents: of three agents, one runs a day ahead and one a day
// behind, while retention, the garbage collector, the transaction sweep
// and the cleaner run on all three. The log clock stays with the agent
// whose clock is right; nothing acknowledged within retention goes, no
// open transaction is aborted before its timeout, no tombstone goes
// before delete.retention.ms; the two skewed agents say so and are not
// ready, the third is.
func TestSkewedAgents(t *testing.T) {
	agents := skewedCluster(t, 0, 24*time.Hour, -24*time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()

	for i, want := range []int{http.StatusOK, http.StatusServiceUnavailable, http.StatusServiceUnavailable} {
		code, body := get(t, "http://"+agents[i].HTTPAddr()+"/readyz")
		if code != want {
			t.Errorf("agent %d (offset %v): /readyz %d %q, want %d", i+1, []string{"0", "+24h", "-24h"}[i], code, body, want)
		}
	}
	checkMetrics(t, agents[1].HTTPAddr(), []metricCheck{{name: "strand_clock_skewed"}, {name: "strand_clock_skew_seconds"}})
	checkMetrics(t, agents[2].HTTPAddr(), []metricCheck{{name: "strand_clock_skewed"}})

	const topic, compacted = "skew-kept", "skew-compacted"
	hour := kadm.StringPtr("3600000")
	createTopicWith(t, agents[0].KafkaAddr(), topic, 6, map[string]*string{"retention.ms": hour})
	createTopicWith(t, agents[0].KafkaAddr(), compacted, 1, map[string]*string{
		"cleanup.policy": kadm.StringPtr("compact"), "delete.retention.ms": hour,
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"), "segment.ms": kadm.StringPtr("1"),
	})
	var kept []*kgo.Record
	for i, a := range agents {
		var rs []*kgo.Record
		for p := range int32(6) {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "from agent %d", i+1)})
		}
		produce(t, a.KafkaAddr(), rs)
		kept = append(kept, rs...)
	}
	// A key written and deleted: the tombstone must outlive the cleaner
	// rounds for delete.retention.ms, whatever clock runs them.
	tomb := []*kgo.Record{{Topic: compacted, Key: []byte("k"), Value: []byte("v")}, {Topic: compacted, Key: []byte("k")}}
	produce(t, agents[1].KafkaAddr(), tomb[:1])
	produce(t, agents[2].KafkaAddr(), tomb[1:])

	// An open transaction, its timeout a minute.
	txnCl := client(t, agents[0].KafkaAddr(), kgo.TransactionalID("skew-txn"), kgo.TransactionTimeout(time.Minute),
		kgo.SeedBrokers(agents[0].KafkaAddr(), agents[1].KafkaAddr(), agents[2].KafkaAddr()))
	if err := txnCl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txnCl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("in a transaction")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	for round := range 3 {
		for i, a := range agents {
			if _, err := a.CheckRetention(ctx); err != nil {
				t.Fatalf("round %d, agent %d: retention: %v", round, i+1, err)
			}
			if err := a.SweepTransactions(ctx); err != nil {
				t.Fatalf("round %d, agent %d: transaction sweep: %v", round, i+1, err)
			}
			if err := a.CollectGarbage(ctx); err != nil {
				t.Fatalf("round %d, agent %d: gc: %v", round, i+1, err)
			}
			if _, err := a.CleanCompacted(ctx); err != nil {
				t.Fatalf("round %d, agent %d: cleaner: %v", round, i+1, err)
			}
		}
	}
	if err := txnCl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Errorf("committing the open transaction: %v (aborted before its timeout?)", err)
	}

	for _, a := range agents {
		if err := a.Replica().Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	v := agents[0].Replica().View()
	lc, err := v.LogClock()
	v.Close()
	if now := time.Now().UnixMilli(); err != nil || lc > now+meta.ClockLeadMs || lc < now-agent.DefaultLease.Milliseconds() {
		t.Errorf("log clock %v from the wall clock (%v), want within [-lease, +%d ms]", time.Duration(lc-now)*time.Millisecond, err, meta.ClockLeadMs)
	}
	for _, a := range agents {
		checkRecords(t, a.KafkaAddr(), topic, kept)
		// The value the tombstone deletes may go; the tombstone stays.
		checkRecords(t, a.KafkaAddr(), compacted, tomb[1:])
	}
}
