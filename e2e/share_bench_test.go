package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// TestShareBench measures what issue 32 asks to quote, a share group
// against a classic group on the same kind of topic (2 partitions):
//
//   - throughput: records/s acknowledged (share: the share-partition
//     start offsets reach the log end; classic: the committed offsets
//     do) by 8 consumer processes with no processing delay, over
//     STRAND_SHARE_BENCH_RECORDS records (default 200,000) produced
//     beforehand; a classic group of 8 on 2 partitions has 6 idle
//     members, which is the point of share groups;
//   - redelivery delay: two consumers on a 1-partition topic, one
//     record; the one holding it is killed with SIGKILL, and the delay
//     is from the kill to the other consumer's acquisition of the record
//     (share: the broker frees the dead member's records; classic: the
//     group notices the dead member after its session timeout, kgo's
//     default 45 s, and the partition moves), STRAND_SHARE_BENCH_TRIALS
//     trials (default 3).
//
// Against one in-process agent, or against franz-go's kfake with
// STRAND_SHARE_BENCH_TARGET=kfake. Not part of CI:
//
//	STRAND_SHARE_BENCH=1 go test -count=1 -timeout 30m -v -run TestShareBench ./e2e/
func TestShareBench(t *testing.T) {
	if os.Getenv("STRAND_SHARE_BENCH") == "" {
		t.Skip("a measurement: STRAND_SHARE_BENCH=1 runs it")
	}
	records := envInt(t, "STRAND_SHARE_BENCH_RECORDS", 200_000)
	trials := envInt(t, "STRAND_SHARE_BENCH_TRIALS", 3)
	var brokers []string
	target := os.Getenv("STRAND_SHARE_BENCH_TARGET")
	switch target {
	case "kfake":
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		brokers = c.ListenAddrs()
	case "", "strand":
		target = "strand"
		a := startAgent(t, agent.Config{})
		brokers = []string{a.KafkaAddr()}
		requireShareGroups(t, brokers[0])
	default:
		t.Fatalf("STRAND_SHARE_BENCH_TARGET=%q: want strand or kfake", target)
	}
	b := &shareBench{t: t, brokers: brokers, dir: t.TempDir()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	b.cl, b.adm = cl, kadm.NewClient(cl)

	const topic = "share-bench"
	b.createTopic(topic, 2)
	b.produce(topic, -1, records)
	shareRate := b.throughput(topic, false, records)
	classicRate := b.throughput(topic, true, records)
	var shareDelays, classicDelays []time.Duration
	for i := range trials {
		shareDelays = append(shareDelays, b.redelivery(i, false))
		classicDelays = append(classicDelays, b.redelivery(i, true))
	}
	summary := fmt.Sprintf("share-group bench against %s, %d records, 8 consumers, 2 partitions:\n"+
		"  throughput (records/s acknowledged): share %.0f, classic %.0f\n"+
		"  redelivery after kill -9 (%d trials): share %v, classic %v",
		target, records, shareRate, classicRate, trials, delays(shareDelays), delays(classicDelays))
	t.Log(summary)
	fmt.Println(summary)
}

type shareBench struct {
	t       *testing.T
	brokers []string
	dir     string
	cl      *kgo.Client
	adm     *kadm.Client
	n       int // consumers started, for unique names
}

func (b *shareBench) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.t.Context(), opTimeout)
}

func (b *shareBench) createTopic(topic string, partitions int32) {
	ctx, cancel := b.ctx()
	defer cancel()
	if _, err := b.adm.CreateTopic(ctx, partitions, -1, nil, topic); err != nil {
		b.t.Fatal(err)
	}
}

// produce writes n records "r-<first+i>"; partition -1 spreads them
// round robin, else all go to that partition.
func (b *shareBench) produce(topic string, partition int32, n int) {
	opts := []kgo.Opt{kgo.SeedBrokers(b.brokers...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5 * time.Millisecond)}
	if partition < 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	} else {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(b.t.Context(), 10*opTimeout)
	defer cancel()
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Partition: max(partition, 0), Value: []byte(shareRecordID(i + 1))}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.t.Fatal(err)
	}
}

func (b *shareBench) start(cfg shareConsumerConfig) *shareProc {
	b.n++
	cfg.Brokers, cfg.Name = b.brokers, fmt.Sprintf("b%d", b.n)
	cfg.LogPath = filepath.Join(b.dir, cfg.Name+".jsonl")
	return startShareProc(b.t, cfg)
}

// throughput runs 8 consumers over the topic until the group's offsets
// reach its end and returns records/s from their start.
func (b *shareBench) throughput(topic string, classic bool, records int) float64 {
	group := "bench-share"
	if classic {
		group = "bench-classic"
	} else {
		ctx, cancel := b.ctx()
		defer cancel()
		if err := setShareAutoOffsetReset(ctx, b.cl, group, "earliest"); err != nil {
			b.t.Fatal(err)
		}
	}
	ctx, cancel := b.ctx()
	ends, err := b.adm.ListEndOffsets(ctx, topic)
	cancel()
	if err != nil {
		b.t.Fatal(err)
	}
	began := time.Now()
	var procs []*shareProc
	for range shareConsumers {
		procs = append(procs, b.start(shareConsumerConfig{Topic: topic, Group: group, Classic: classic, Quiet: true}))
	}
	defer func() {
		for _, p := range procs {
			p.kill()
		}
	}()
	for deadline := began.Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		at := map[int32]int64{}
		ctx, cancel := b.ctx()
		if classic {
			os, err := b.adm.FetchOffsets(ctx, group)
			if err == nil {
				os.Each(func(o kadm.OffsetResponse) { at[o.Partition] = o.At })
			}
		} else {
			d, err := b.adm.DescribeShareGroupOffsets(ctx, group)
			if err == nil {
				d[group].Offsets.Each(func(o kadm.ShareOffset) { at[o.Partition] = o.StartOffset })
			}
		}
		cancel()
		done := true
		ends.Each(func(e kadm.ListedOffset) {
			if at[e.Partition] < e.Offset {
				done = false
			}
		})
		if done {
			return float64(records) / time.Since(began).Seconds()
		}
	}
	b.t.Fatalf("group %s did not reach the end in 10 minutes", group)
	return 0
}

// redelivery runs one trial: two consumers on a fresh 1-partition topic,
// one record,
// the holder killed; the delay until the other acquires it.
func (b *shareBench) redelivery(trial int, classic bool) time.Duration {
	kind := "share"
	if classic {
		kind = "classic"
	}
	topic := fmt.Sprintf("share-bench-rd-%s-%d", kind, trial)
	group := "g-" + topic
	// One partition, which both members of a share group are assigned
	// (with a partition each, Kafka's simple assignor would move the dead
	// member's partition only after its session timeout, as a classic
	// group does).
	b.createTopic(topic, 1)
	if !classic {
		ctx, cancel := b.ctx()
		if err := setShareAutoOffsetReset(ctx, b.cl, group, "earliest"); err != nil {
			b.t.Fatal(err)
		}
		cancel()
	}
	cfg := shareConsumerConfig{Topic: topic, Group: group, Classic: classic, Hold: time.Hour, MaxRecords: 1}
	procs := []*shareProc{b.start(cfg), b.start(cfg)}
	defer func() {
		for _, p := range procs {
			p.kill()
		}
	}()
	b.waitMembers(group, classic, 2)
	b.produce(topic, 0, 1)
	id := shareRecordID(1)
	holder, _ := b.waitAcq(procs, id, 0)
	killedAt := monoNow()
	procs[holder].kill()
	other := procs[1-holder]
	_, at := b.waitAcq([]*shareProc{other}, id, killedAt)
	return time.Duration(at - killedAt)
}

// waitMembers waits until the group has n members (and, classic, is
// Stable, so each holds its partitions).
func (b *shareBench) waitMembers(group string, classic bool, n int) {
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := b.ctx()
		if classic {
			d, err := b.adm.DescribeGroups(ctx, group)
			if g, ok := d[group]; err == nil && ok && g.State == "Stable" && len(g.Members) == n {
				cancel()
				return
			}
		} else {
			d, err := b.adm.DescribeShareGroups(ctx, group)
			if g, ok := d[group]; err == nil && ok && len(g.Members) == n {
				cancel()
				return
			}
		}
		cancel()
	}
	b.t.Fatalf("group %s never had %d members", group, n)
}

// waitAcq polls the consumers' histories until one acquired id after
// the monotonic time after; it returns which and when.
func (b *shareBench) waitAcq(procs []*shareProc, id string, after int64) (int, int64) {
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for i, p := range procs {
			f, err := os.Open(filepath.Join(b.dir, p.name+".jsonl"))
			if err != nil {
				continue
			}
			evs, _ := readShareEvents(f)
			f.Close()
			for _, e := range evs {
				if e.Ev == evAcquired && e.ID == id && e.T > after {
					return i, e.T
				}
			}
		}
	}
	b.t.Fatalf("%s not acquired within 5 minutes", id)
	return 0, 0
}

// delays renders trials as "median (min-max)".
func delays(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return fmt.Sprintf("median %s (%s)", r(s[len(s)/2]), strings.Join(func() []string {
		out := make([]string, len(s))
		for i, d := range s {
			out[i] = r(d)
		}
		return out
	}(), ", "))
}
