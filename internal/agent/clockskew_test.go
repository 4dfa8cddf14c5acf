package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
)

// shiftClock is the wall clock moved by an offset the test may change:
// each agent of a test cluster has its own.
type shiftClock struct{ off atomic.Int64 }

func (c *shiftClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

func (c *shiftClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return clock.Real.AfterFunc(d, f)
}

func (c *shiftClock) shift(d time.Duration) { c.off.Add(int64(d)) }

// clockCluster is agents on one log and one store, each on its own
// clock.
type clockCluster struct {
	agents []*agent.Agent
	clocks []*shiftClock
	// storeDir holds the file object store, under objects/.
	storeDir string
}

// startClockCluster starts one agent per clock offset, in order,
// checking retention often; tweak, if set, changes agent i's config.
func startClockCluster(t *testing.T, offsets []time.Duration, tweak func(i int, cfg *agent.Config)) *clockCluster {
	t.Helper()
	shared := t.TempDir()
	logURL := "mem://" + strings.ReplaceAll(t.Name(), "/", "-")
	c := &clockCluster{storeDir: shared}
	for i, d := range offsets {
		cfg := agent.Config{
			DataDir: t.TempDir(), NodeID: int32(i + 1), Log: logURL,
			ObjStore:                  "file://" + filepath.ToSlash(filepath.Join(shared, "objects")),
			LogRetentionCheckInterval: 20 * time.Millisecond,
		}
		clk := new(shiftClock)
		clk.shift(d)
		agent.SetClock(&cfg, clk)
		if tweak != nil {
			tweak(i, &cfg)
		}
		c.clocks = append(c.clocks, clk)
		c.agents = append(c.agents, startWith(t, cfg, nil))
	}
	return c
}

// TestSkewedAgents: of three agents, one runs a day ahead and one a day
// behind, while retention, the garbage collector, the transaction sweep
// and the cleaner run on all three. The log clock stays with the agent
// whose clock is right; nothing acknowledged within retention goes, no
// open transaction is aborted before its timeout, no tombstone goes
// before delete.retention.ms; the two skewed agents say so and are not
// ready, the third is.
func TestSkewedAgents(t *testing.T) {
	agents := startClockCluster(t, []time.Duration{0, 24 * time.Hour, -24 * time.Hour}, nil).agents
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
