package retention

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/placement"
)

// recorder is a metatest.DB that keeps what ApplyRetention proposals
// named.
type recorder struct {
	*metatest.DB
	mu        sync.Mutex
	proposals [][]meta.RetentionPartition
}

func (r *recorder) ProposeBatch(ctx context.Context, cmds []meta.Command) ([]meta.Result, error) {
	for _, c := range cmds {
		if ar, ok := c.(meta.ApplyRetention); ok {
			r.mu.Lock()
			r.proposals = append(r.proposals, ar.Partitions)
			r.mu.Unlock()
		}
	}
	return r.DB.ProposeBatch(ctx, cmds)
}

func must(t *testing.T, db *metatest.DB, c meta.Command) meta.Result {
	t.Helper()
	return db.MustPropose(t, c)
}

// fixture: a copy at now, a topic of n partitions with retention.ms 1000
// and one expired record in each.
func fixture(t *testing.T, level int16, n int32) (*metatest.DB, *clock.Fake, meta.TopicID) {
	t.Helper()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	db := metatest.New(clk.Now)
	must(t, db, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: level}}})
	id := must(t, db, meta.CreateTopic{Name: "t", Partitions: n, Configs: map[string]string{"retention.ms": "1000"}}).TopicID
	co := meta.CommitObject{ObjectKey: "o", ObjectSize: int64(n) * 10}
	for p := range n {
		co.Batches = append(co.Batches, meta.CommitBatch{TopicID: id, Partition: p, Position: int64(p) * 10, Length: 10,
			Records: 1, BatchCount: 1, MaxTimestamp: clk.Now().UnixMilli() - 5000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	}
	must(t, db, co)
	return db, clk, id
}

func startChecker(t *testing.T, m Meta, clk clock.Clock, self int32, live []int32) *Checker {
	t.Helper()
	c, err := Start(Config{
		Meta: m, Placement: placement.Ring{Self: self, Live: func() []int32 { return live }},
		Interval: time.Hour, DefaultMs: -1, DefaultBytes: -1, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func logStarts(t *testing.T, db *metatest.DB, id meta.TopicID, n int32) []int64 {
	t.Helper()
	v := db.View()
	defer v.Close()
	var out []int64
	for p := range n {
		st, _, err := v.Partition(id, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, st.LogStartOffset)
	}
	return out
}

// TestCheckOwnersAndBatches: two agents each propose only the partitions
// placement gives them, together every due partition once, in
// proposals of at most BatchPartitions.
func TestCheckOwnersAndBatches(t *testing.T) {
	const n = 600
	db, clk, id := fixture(t, meta.MetadataLevel3, n)
	rec := &recorder{DB: db}
	seen := map[string]int32{}
	for _, self := range []int32{1, 2} {
		c := startChecker(t, rec, clk, self, []int32{1, 2})
		rec.proposals = nil
		moved, err := c.Check(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, ps := range rec.proposals {
			if len(ps) > BatchPartitions {
				t.Errorf("agent %d proposed %d partitions at once, at most %d", self, len(ps), BatchPartitions)
			}
			for _, p := range ps {
				key := OwnerKey(p.TopicID, p.Partition)
				if owner := placement.OwnerOf(key, []int32{1, 2}); owner != self {
					t.Errorf("agent %d proposed %s, owned by %d", self, key, owner)
				}
				if prev, dup := seen[key]; dup {
					t.Errorf("%s proposed by %d and %d", key, prev, self)
				}
				seen[key] = self
				total++
			}
		}
		if moved != total || total == 0 {
			t.Errorf("agent %d: %d log starts moved, %d partitions proposed", self, moved, total)
		}
	}
	if len(seen) != n {
		t.Errorf("%d partitions proposed, want %d", len(seen), n)
	}
	for p, s := range logStarts(t, db, id, n) {
		if s != 1 {
			t.Fatalf("partition %d log start %d, want 1", p, s)
		}
	}
	// Nothing is due any more: a second check proposes nothing.
	rec.proposals = nil
	if moved, err := startChecker(t, rec, clk, 1, []int32{1, 2}).Check(context.Background()); err != nil || moved != 0 || len(rec.proposals) != 0 {
		t.Errorf("second check: %d moved, %v, %d proposals", moved, err, len(rec.proposals))
	}
}

// TestCheckWaitsForLevel3: below strand.metadata.version 3 the checker
// proposes nothing (the log could not hold ApplyRetention); once an
// operator raises the level, it does.
func TestCheckWaitsForLevel3(t *testing.T) {
	db, clk, id := fixture(t, meta.MetadataLevel2, 1)
	rec := &recorder{DB: db}
	c := startChecker(t, rec, clk, 1, nil)
	if moved, err := c.Check(context.Background()); err != nil || moved != 0 || len(rec.proposals) != 0 {
		t.Fatalf("at level 2: %d moved, %v, %d proposals", moved, err, len(rec.proposals))
	}
	must(t, db, meta.FinalizeFeatures{Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel3}}})
	if moved, err := c.Check(context.Background()); err != nil || moved != 1 {
		t.Fatalf("at level 3: %d moved, %v", moved, err)
	}
	if s := logStarts(t, db, id, 1); s[0] != 1 {
		t.Errorf("log start %d, want 1", s[0])
	}
}

// plainTopic: a copy at level 3 with a topic that sets no retention,
// holding two records a minute old.
func plainTopic(t *testing.T) (*metatest.DB, *clock.Fake, meta.TopicID) {
	t.Helper()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	db := metatest.New(clk.Now)
	must(t, db, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel3}}})
	id := must(t, db, meta.CreateTopic{Name: "plain", Partitions: 1}).TopicID
	must(t, db, meta.CommitObject{ObjectKey: "o", ObjectSize: 10, Batches: []meta.CommitBatch{{TopicID: id, Length: 10, Records: 2, BatchCount: 1,
		MaxTimestamp: clk.Now().UnixMilli() - 60_000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}}})
	return db, clk, id
}

// TestCheckBrokerDefault: a topic that sets no retention.ms is ruled by
// the agent's log.retention.ms.
func TestCheckBrokerDefault(t *testing.T) {
	db, clk, id := plainTopic(t)
	for _, tc := range []struct {
		defaultMs int64
		want      int64
	}{{-1, 0}, {120_000, 0}, {30_000, 2}} {
		t.Run(fmt.Sprint(tc.defaultMs), func(t *testing.T) {
			c, err := Start(Config{Meta: db, Interval: time.Hour, DefaultMs: tc.defaultMs, DefaultBytes: -1, Clock: clk,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Check(context.Background()); err != nil {
				t.Fatal(err)
			}
			if s := logStarts(t, db, id, 1); s[0] != tc.want {
				t.Errorf("log.retention.ms %d: log start %d, want %d", tc.defaultMs, s[0], tc.want)
			}
		})
	}
}

// TestCheckDynamicDefault: dynamic broker configs (KIP-226) in the log
// rule a topic that sets nothing, without a restart: the agent's own
// log.retention.ms over the cluster-wide one over the flag.
func TestCheckDynamicDefault(t *testing.T) {
	db, clk, id := plainTopic(t)
	c, err := Start(Config{Meta: db, Placement: placement.Ring{Self: 1}, Interval: time.Hour, DefaultMs: 120_000, DefaultBytes: -1, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, step := range []struct {
		name string
		cmd  meta.AlterBrokerConfigs
		want int64
	}{
		{"agent keeps more than the cluster", meta.AlterBrokerConfigs{Resource: "1", Set: map[string]string{"log.retention.ms": "120000"}}, 0},
		{"cluster lowers it", meta.AlterBrokerConfigs{Set: map[string]string{"log.retention.ms": "30000"}}, 0},
		{"another agent's value is not ours", meta.AlterBrokerConfigs{Resource: "2", Set: map[string]string{"log.retention.ms": "120000"}}, 0},
		{"agent's own value deleted", meta.AlterBrokerConfigs{Resource: "1", Delete: []string{"log.retention.ms"}}, 2},
	} {
		must(t, db, step.cmd)
		if _, err := c.Check(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s := logStarts(t, db, id, 1); s[0] != step.want {
			t.Fatalf("%s: log start %d, want %d", step.name, s[0], step.want)
		}
	}
}
