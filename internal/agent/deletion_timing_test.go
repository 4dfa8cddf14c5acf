package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/fileobj"
)

// deletionBound is the acceptance of issue 33: with default flags, the
// bytes of a topic with retention.ms=5000 leave the object store within
// 7 minutes of being written (Kafka: its 5-minute retention check plus
// log.segment.delete.delay.ms's minute, with room for the steps between).
const deletionBound = 7 * time.Minute

// envDeletionRealTime runs TestDeletionTimingAtDefaults on the wall
// clock, at the real defaults: it then takes up to 7 minutes.
const envDeletionRealTime = "STRAND_DELETION_REAL_TIME"

// fastClock runs speed times faster than the wall clock from start, its
// timers as much shorter: an agent on it goes through every step of its
// default timing (retention check, heartbeats and leases, the delete
// delay, the janitor's steps) speed times as fast, all in the same
// proportion.
type fastClock struct {
	start time.Time
	speed int64
}

func (c fastClock) Now() time.Time {
	return c.start.Add(time.Since(c.start) * time.Duration(c.speed))
}

func (c fastClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return clock.Real.AfterFunc(d/time.Duration(c.speed), f)
}

// TestDeletionTimingAtDefaults: an agent with default flags (retention
// check interval, lease, garbage collection grace and delete delay) is
// given a topic with retention.ms=5000 and some records; the objects
// holding them must be gone from the store within deletionBound of the
// produce, by the agent's clock. The agent runs on a clock 10 times as
// fast as the wall clock, so this takes about 40 s;
// STRAND_DELETION_REAL_TIME=1 runs it on the wall clock (6 to 7 minutes).
// The records' timestamps are the agent clock's, so the whole chain is
// the one a real client sees: retention finds them expired at its next
// check, their objects die, the janitor waits the delete delay and for
// the heartbeat that says the agent applied the death, and deletes them.
func TestDeletionTimingAtDefaults(t *testing.T) {
	speed := int64(10)
	if os.Getenv(envDeletionRealTime) != "" {
		speed = 1
	} else if testing.Short() {
		t.Skip("takes about 40 s; " + envDeletionRealTime + "=1 takes about 6 minutes")
	}
	clk := fastClock{start: time.Now(), speed: speed}
	storeDir := filepath.Join(t.TempDir(), "objects")
	cfg := agent.Config{DataDir: t.TempDir(), ObjStore: "file://" + filepath.ToSlash(storeDir)}
	agent.SetClock(&cfg, clk)
	a := startWith(t, cfg, nil)

	// Real time: the waits below are on the agent's clock.
	guard := time.Duration(int64(deletionBound)/speed) + opTimeout
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()

	const topic = "retention-5s"
	id := createTopicWith(t, a.KafkaAddr(), topic, 1, map[string]*string{"retention.ms": kadm.StringPtr("5000")})
	written := clk.Now()
	var rs []*kgo.Record
	for i := range 20 {
		rs = append(rs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "record-%d", i), Timestamp: clk.Now()})
	}
	produce(t, a.KafkaAddr(), rs)
	keys := indexObjects(t, a, id)
	if len(keys) == 0 {
		t.Fatal("the produce left no index entry pointing at an object")
	}
	store, err := fileobj.OpenShared(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	stored := func() (n int) {
		t.Helper()
		for _, k := range keys {
			_, err := store.Get(ctx, k, 0, 1)
			switch {
			case err == nil:
				n++
			case !errors.Is(err, objstore.ErrNotFound):
				t.Fatal(err)
			}
		}
		return n
	}
	if n := stored(); n != len(keys) {
		t.Fatalf("%d of the topic's %d objects found in the store before retention", n, len(keys))
	}

	var unreadable sync.Once
	var unreadableAfter time.Duration
	for {
		if len(indexObjects(t, a, id)) == 0 {
			unreadable.Do(func() { unreadableAfter = clk.Now().Sub(written) })
		}
		left := stored()
		took := clk.Now().Sub(written)
		if left == 0 {
			t.Logf("speed %dx: records unreadable %v and their %d objects deleted %v after the produce (bound %v)",
				speed, unreadableAfter.Round(time.Second), len(keys), took.Round(time.Second), deletionBound)
			if took > deletionBound {
				t.Fatalf("the objects left the store %v after the produce, want within %v", took.Round(time.Second), deletionBound)
			}
			return
		}
		if took > deletionBound {
			t.Fatalf("%d of %d objects still in the store %v after the produce (records unreadable after %v), want none after %v",
				left, len(keys), took.Round(time.Second), unreadableAfter.Round(time.Second), deletionBound)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d objects still in the store at the guard", left, len(keys))
		case <-time.After(time.Duration(int64(time.Second) / speed)):
		}
	}
}

// indexObjects returns the object keys partition 0 of topic id's index
// points at, each once.
func indexObjects(t *testing.T, a *agent.Agent, id meta.TopicID) []string {
	t.Helper()
	v := a.Replica().View()
	defer v.Close()
	it, err := v.Seek(id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	seen := map[string]bool{}
	var keys []string
	for it.Next() {
		if k := it.Entry().ObjectKey; k != "" && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}
