package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/gc"
	"github.com/strandkafka/strand/internal/placement"
)

// TestStalledAgentKeepsItsObjects: an agent whose apply stalls keeps
// renewing its lease, and keeps answering fetches from the view it
// reached. A topic it still serves is deleted elsewhere and the grace
// period passes by every clock: the janitor waits for the stalled agent
// to apply the deletion, so its fetches never meet a missing object;
// once it caught up the objects go.
func TestStalledAgentKeepsItsObjects(t *testing.T) {
	stall := make(chan struct{})
	stalled := make(chan struct{})
	var armed atomic.Bool
	// The default lease: a stalled agent's renewal waits out its
	// timeout (5 s) for an apply that does not come before the next, so
	// a lease shorter than that would end while it still serves.
	// A is the janitor: placement names it among nodes 1 and 2.
	janitor := placement.OwnerOf(gc.JanitorKey, []int32{1, 2})
	c := startClockCluster(t, []time.Duration{0, 0}, func(i int, cfg *agent.Config) {
		cfg.NodeID = janitor
		if i == 1 {
			cfg.NodeID = 3 - janitor
			agent.SetAppliedHook(cfg, func() {
				if armed.CompareAndSwap(true, false) {
					close(stalled)
					<-stall
				}
			})
		}
	})
	a, b := c.agents[0], c.agents[1]
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()

	const topic = "stalled-reads"
	id := createTopicWith(t, a.KafkaAddr(), topic, 1, nil)
	rs := []*kgo.Record{{Topic: topic, Value: []byte("one")}, {Topic: topic, Value: []byte("two")}}
	produce(t, a.KafkaAddr(), rs)
	if err := b.Replica().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	objects := storedObjects(t, c)
	if len(objects) == 0 {
		t.Fatal("no data object written")
	}

	// B's apply stalls on its next own entry (a renewal); its later
	// renewals still land, carrying the position it reached.
	armed.Store(true)
	<-stalled
	unstall := func() {
		select {
		case <-stall:
		default:
			close(stall)
		}
	}
	defer unstall()

	if res, err := kadm.NewClient(client(t, a.KafkaAddr())).DeleteTopic(ctx, topic); err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	for _, clk := range c.clocks {
		clk.shift(gc.DefaultGrace + time.Minute)
	}
	// The log clock passes the grace once both agents' renewals at the
	// new time have applied on A.
	waitLogClock(t, a, time.Now().Add(gc.DefaultGrace+time.Minute).UnixMilli())
	// Until its own renewal at the new time, A's clock looks ahead of
	// the log's, and it holds its garbage collection.
	for a.ClockHeld() {
		if ctx.Err() != nil {
			t.Fatal("the janitor's clock never agreed with the log's")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 3 {
		for _, ag := range c.agents {
			if err := ag.CollectGarbage(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := storedObjects(t, c); len(got) < len(objects) {
		t.Fatalf("the janitor deleted objects a stalled agent still reads: %d of %d left", len(got), len(objects))
	}
	// Straight to B, which still has the topic: Metadata would send a
	// client to A, where it is gone.
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, client(t, b.KafkaAddr()).Broker(int(3-janitor)))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch from the stalled agent: %+v", resp)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch from the stalled agent: %v, %d bytes", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
	}

	unstall()
	if err := b.Replica().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for len(storedObjects(t, c)) > 0 {
		if err := a.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatalf("the objects stayed after the stalled agent caught up: %v", storedObjects(t, c))
		}
		time.Sleep(50 * time.Millisecond) // the next renewal carries B's position
	}
}

// storedObjects lists the data objects in the cluster's file store.
func storedObjects(t *testing.T, c *clockCluster) []string {
	t.Helper()
	var keys []string
	err := filepath.WalkDir(filepath.Join(c.storeDir, "objects"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".strd") {
			keys = append(keys, p)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return keys
}

// waitLogClock waits, on apply notifications, until a's log clock
// reaches ms.
func waitLogClock(t *testing.T, a *agent.Agent, ms int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for {
		changed := a.Replica().Changed()
		v := a.Replica().View()
		lc, err := v.LogClock()
		v.Close()
		if err != nil {
			t.Fatal(err)
		}
		if lc >= ms {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("log clock %d, want %d", lc, ms)
		case <-changed:
		}
	}
}
