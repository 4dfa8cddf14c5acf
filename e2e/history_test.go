package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strandkafka/strand/internal/history"
	"github.com/strandkafka/strand/internal/planted"
)

// The history tests run a Jepsen-style workload (history_workload_test.go)
// against a cluster of the real binary (history_cluster_test.go) while a
// seeded schedule injects faults (history_faults_test.go), then heal
// everything, drain, and hand the recorded history to internal/history.
//
//	go test -run '^TestHistory$' -v ./e2e/                            # CI: PostgreSQL, a minute of faults
//	STRAND_E2E_LONG=1 go test -run '^TestHistory$' -v -timeout 90m ./e2e/   # PostgreSQL, etcd, dynalite and file, 10 min each
//	go test -run '^TestHistory$' -v ./e2e/ -args -history-duration 2m -history-seed 42
//
// STRAND_HISTORY_SEED (or -history-seed) replays a run's fault schedule
// and workload choices; STRAND_HISTORY_BACKENDS (comma-separated) picks
// the backends; STRAND_HISTORY_LOGS keeps the agents' logs in that
// directory.

var (
	historyDuration = flag.Duration("history-duration", 0, "how long each history test run injects faults (default 1m, 10m with STRAND_E2E_LONG)")
	historySeed     = flag.Uint64("history-seed", 0, "seed of the history tests' fault schedule and workload (default: STRAND_HISTORY_SEED, else the time)")
)

const (
	// histWaitTimeout bounds each wait of the end of a run: transactions
	// settling, the drains, the groups catching up. Deadlock guards.
	histWaitTimeout = 2 * time.Minute
	// histRate is the records per second each idempotent producer sends.
	histRate = 50
)

// histRun is one history test run.
type histRun struct {
	backend  string
	agents   int
	duration time.Duration
	faults   bool
	seed     uint64
	bin      string
	env      []string
	// agentEnv is added to one agent's environment, by node id.
	agentEnv map[int32][]string
	// topicConfigs are the history topics' configs, args the agents'
	// extra flags.
	topicConfigs map[string]*string
	args         []string
	// atEnd, if set, runs once the workload is drained, with the
	// cluster still up.
	atEnd func(c *histCluster)
}

// TestHistory runs the workload on three agents under the fault schedule
// and checks the history. CI runs it on PostgreSQL for a minute of faults;
// STRAND_E2E_LONG=1 runs it on PostgreSQL, etcd, dynalite and the file
// log for 10 minutes each (-history-duration sets the length). The file
// log belongs to one process, so its cluster is the embedded default:
// one agent, log and objects in its data dir, faults that spare the
// (absent) servers.
func TestHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strand binary and starts a log backend")
	}
	backends, d := []string{"postgres"}, time.Minute
	if os.Getenv("STRAND_E2E_LONG") != "" {
		backends, d = []string{"postgres", "etcd", "dynalite", "file"}, 10*time.Minute
	}
	if b := os.Getenv("STRAND_HISTORY_BACKENDS"); b != "" {
		backends = strings.Split(b, ",")
	}
	if *historyDuration > 0 {
		d = *historyDuration
	}
	seed := histSeed(t)
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			agents := 3
			if b == "file" {
				agents = 1
			}
			rep := runHistory(t, histRun{backend: b, agents: agents, duration: d, faults: true, seed: seed, bin: strandBinary(t)})
			if !rep.Valid() {
				t.Errorf("the checker found anomalies; replay with STRAND_HISTORY_SEED=%d STRAND_HISTORY_BACKENDS=%s", seed, b)
			}
		})
	}
}

// TestHistoryClockSkew runs the workload under the fault schedule on
// three agents of which the third runs on a skewed clock (a test build:
// package planted), seconds to a day either way, with the history topics
// kept for an hour: a log clock that followed the skewed agent would
// trim acknowledged records (lost writes) or time transactions out. The
// agent skewed beyond --max-clock-skew must end unready. CI runs each
// offset for 20 s of faults; STRAND_E2E_LONG=1 for 3 minutes.
func TestHistoryClockSkew(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strand binary and starts PostgreSQL")
	}
	d := 20 * time.Second
	if os.Getenv("STRAND_E2E_LONG") != "" {
		d = 3 * time.Minute
	}
	if *historyDuration > 0 {
		d = *historyDuration
	}
	seed := histSeed(t)
	bin := plantedBinary(t)
	for _, tc := range []struct {
		offset  time.Duration
		unready bool
	}{
		{24 * time.Hour, true},
		{-24 * time.Hour, true},
		{90 * time.Second, true},
		{-10 * time.Second, false},
	} {
		t.Run(tc.offset.String(), func(t *testing.T) {
			run := histRun{backend: "postgres", agents: 3, duration: d, faults: true, seed: seed, bin: bin,
				agentEnv:     map[int32][]string{3: {planted.EnvClockOffset + "=" + tc.offset.String()}},
				topicConfigs: map[string]*string{"retention.ms": kadm.StringPtr("3600000")},
				// Retention looks often, so a clock gone wrong would
				// trim within the run.
				args: []string{"--log-retention-check-interval-ms", "200"}}
			run.atEnd = func(c *histCluster) {
				if code, body := httpGet(t, "http://"+c.agents[2].http+"/readyz"); (code == 503) != tc.unready {
					t.Errorf("the agent %v off: /readyz %d %q, want unready %v", tc.offset, code, body, tc.unready)
				}
			}
			if rep := runHistory(t, run); !rep.Valid() {
				t.Errorf("the checker found anomalies; replay with STRAND_HISTORY_SEED=%d", seed)
			}
		})
	}
}

// TestHistoryPlanted runs the workload, without faults, on a test build
// carrying each planted bug (internal/planted) and checks that the
// checker reports exactly the anomaly the bug makes, where it makes it.
func TestHistoryPlanted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strand binary")
	}
	bin := plantedBinary(t)
	tests := []struct {
		bug  string
		want history.Kind
	}{
		{planted.BugDropAcked + ":" + histPlainTopic + "/0/10", history.LostWrite},
		{planted.BugExposeAborted + ":" + histTxnTopic + "/0/0", history.AbortedRead},
	}
	for _, tc := range tests {
		t.Run(tc.bug, func(t *testing.T) {
			_, target, err := planted.Parse(tc.bug)
			if err != nil {
				t.Fatal(err)
			}
			rep := runHistory(t, histRun{backend: "file", agents: 1, duration: 10 * time.Second, seed: histSeed(t), bin: bin,
				env: []string{planted.EnvBug + "=" + tc.bug}})
			if got := rep.Found(); !slices.Equal(got, []history.Kind{tc.want}) {
				t.Fatalf("found %v, want exactly [%s]:\n%s", got, tc.want, rep.Summary())
			}
			for _, a := range rep.Anomalies {
				tp := history.TP{Topic: target.Topic, Partition: target.Partition}
				if a.TP != tp || (tc.want == history.LostWrite && a.Offset != target.Offset) {
					t.Errorf("%v: not where the bug was planted (%s)", a, tc.bug)
				}
			}
			if tc.want == history.LostWrite && rep.Counts[tc.want] != 1 {
				t.Errorf("%d lost writes, want the one planted", rep.Counts[tc.want])
			}
		})
	}
}

// histSeed is the run's seed: -history-seed, else STRAND_HISTORY_SEED,
// else the time. It is logged so a failure can be replayed.
func histSeed(t *testing.T) uint64 {
	t.Helper()
	seed := *historySeed
	if s := os.Getenv("STRAND_HISTORY_SEED"); seed == 0 && s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("STRAND_HISTORY_SEED: %v", err)
		}
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("STRAND_HISTORY_SEED=%d", seed)
	return seed
}

// plantedBinary builds cmd/strand with the strand_planted tag once.
func plantedBinary(t *testing.T) string {
	t.Helper()
	return buildStrand(t, "strand-planted", "-tags", "strand_planted")
}

// runHistory runs one history test: cluster, workload, faults for
// run.duration, then heal, quiesce, drain and check. It logs the
// summary and returns the checker's report.
func runHistory(t *testing.T, run histRun) *history.Report {
	log := startHistLog(t, run.backend)
	c := startHistCluster(t, log, histClusterOpts{bin: run.bin, agents: run.agents, seed: run.seed, env: run.env,
		agentEnv: run.agentEnv, args: run.args, snapshotInterval: 20 * time.Second})
	seed := c.seeds()[0]
	createTopicConfigs(t, seed, histPlainTopic, histPartitions, run.topicConfigs)
	createTopicConfigs(t, seed, histTxnTopic, histPartitions, run.topicConfigs)

	w := newWorkload(t, c.seeds(), run.seed, histRate)
	c.setClock(w.rec.now)
	clientLog, err := os.Create(filepath.Join(c.logDir, "clients.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clientLog.Close() })
	w.clientLog = &lockedWriter{w: clientLog}
	w.start(2, 2)
	n := &nemesis{c: c, w: w}
	if run.faults {
		if err := n.run(newSchedule(run.seed, c), run.duration); err != nil {
			t.Errorf("fault schedule: %v", err)
		}
	} else {
		time.Sleep(run.duration)
	}
	healedAt := w.rec.now()
	c.heal()
	if err := log.check(); err != nil {
		t.Fatal(err)
	}
	w.stopProducers()

	// Each wait has its own bound: a deadlock guard, not an expectation.
	phase := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), histWaitTimeout)
		t.Cleanup(cancel)
		return ctx
	}
	if err := c.waitUp(phase()); err != nil {
		t.Errorf("after healing: %v", err)
	}
	tps := histTPs()
	ends, err := settledEnds(phase(), t, c.seeds(), tps)
	if err != nil {
		t.Errorf("transactions did not settle: %v", err)
	}
	lasts := make(map[history.Isolation]map[history.TP]int64)
	for _, iso := range []history.Isolation{history.ReadUncommitted, history.ReadCommitted} {
		if lasts[iso], err = lastVisible(phase(), t, c.seeds(), tps, iso); err != nil {
			t.Fatalf("reading the partitions' ends: %v", err)
		}
		if err := w.drain(phase(), iso, ends, lasts[iso]); err != nil {
			t.Errorf("drain at %s: %v", iso, err)
		}
	}
	for _, iso := range []history.Isolation{history.ReadUncommitted, history.ReadCommitted} {
		if err := w.groupCaughtUp(phase(), iso, lasts[iso]); err != nil {
			t.Errorf("group %s: %v", groupOf(iso), err)
		}
	}
	w.stopMembers()
	if run.atEnd != nil {
		run.atEnd(c)
	}

	rep := history.Check(w.rec.ops())
	var s3 string
	if c.s3 != nil {
		s3 = fmt.Sprintf("; object store: %d requests, %d failed by the fault handler", c.s3.requests.Load(), c.s3.failed.Load())
	}
	exitLines := c.exits()
	exits := "none"
	if len(exitLines) > 0 {
		exits = "\n" + strings.Join(exitLines, "\n")
	}
	t.Logf("history on %s (STRAND_HISTORY_SEED=%d): %v of workload, then %v to heal, quiesce and drain\nfaults injected: %s%s\nagents that exited on their own: %s\nclient errors: %s\nchecked: %s",
		run.backend, run.seed, healedAt.Round(time.Second), (w.rec.now() - healedAt).Round(time.Second),
		n.summary(), s3, exits, w.errSummary(), rep.Summary())
	for _, e := range exitLines {
		// Waking below the log's trim point after a pause past the
		// lease is the one way out an agent is expected to take here
		// (TestTrimmedOutAgentExits).
		if !strings.Contains(e, "trim point") {
			t.Errorf("an agent exited on its own: %s", e)
		}
	}
	if !rep.Valid() || testing.Verbose() {
		t.Logf("fault schedule:\n%s", strings.Join(slices.Concat(n.lines, exitLines), "\n"))
	}
	return rep
}

// histTPs is every partition the workload writes.
func histTPs() []history.TP {
	var out []history.TP
	for _, topic := range []string{histPlainTopic, histTxnTopic} {
		for p := range int32(histPartitions) {
			out = append(out, history.TP{Topic: topic, Partition: p})
		}
	}
	return out
}

// settledEnds waits until every partition's last stable offset is its
// high watermark (every transaction ended, by its producer or by the
// transaction timeout) and returns the high watermarks.
func settledEnds(ctx context.Context, t *testing.T, seeds []string, tps []history.TP) (map[history.TP]int64, error) {
	adm := kadm.NewClient(newClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	for {
		hwm, err1 := adm.ListEndOffsets(ctx, histPlainTopic, histTxnTopic)
		lso, err2 := adm.ListCommittedOffsets(ctx, histPlainTopic, histTxnTopic)
		ends := make(map[history.TP]int64)
		var open []string
		if err := errors.Join(err1, err2); err == nil {
			for _, tp := range tps {
				h, hok := hwm.Lookup(tp.Topic, tp.Partition)
				l, lok := lso.Lookup(tp.Topic, tp.Partition)
				if !hok || !lok || h.Err != nil || l.Err != nil || h.Offset != l.Offset {
					open = append(open, fmt.Sprintf("%s (end %d, stable %d)", tp, h.Offset, l.Offset))
				}
				ends[tp] = h.Offset
			}
			if len(open) == 0 {
				return ends, nil
			}
		}
		select {
		case <-ctx.Done():
			return ends, fmt.Errorf("%v: still open: %v (errors %v, %v)", ctx.Err(), open, err1, err2)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// lastVisible returns, per partition, the offset of the last record a
// consumer at iso must deliver (-1: none), read with raw Fetch requests
// and the read_committed filtering a client does, so the drains know
// when they are done without trusting what they are checking.
func lastVisible(ctx context.Context, t *testing.T, seeds []string, tps []history.TP, iso history.Isolation) (map[history.TP]int64, error) {
	// Capped at 2.8 so Fetch stays below v13, which names topics by id.
	cl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.MaxVersions(kversion.V2_8_0()))
	out := make(map[history.TP]int64)
	for _, tp := range tps {
		last, off := int64(-1), int64(0)
		aborted := make(map[int64]bool)
		for {
			req := kmsg.NewPtrFetchRequest()
			req.MaxBytes, req.SessionEpoch, req.IsolationLevel = 8<<20, -1, int8(iso)
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = tp.Topic
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = tp.Partition, off, 8<<20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err == nil && resp.Topics[0].Partitions[0].ErrorCode != 0 {
				err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
			}
			if err != nil {
				// An agent restarted by the last fault may still be
				// catching up: ask again until the wait's bound.
				select {
				case <-ctx.Done():
					return nil, fmt.Errorf("fetch %s at %d: %w", tp, off, err)
				case <-time.After(200 * time.Millisecond):
					continue
				}
			}
			p := resp.Topics[0].Partitions[0]
			list := p.AbortedTransactions
			sort.Slice(list, func(i, j int) bool { return list[i].FirstOffset < list[j].FirstOffset })
			var n int
			for rest := p.RecordBatches; len(rest) > 0; n++ {
				var b kmsg.RecordBatch
				if err := b.ReadFrom(rest); err != nil {
					return nil, fmt.Errorf("fetch %s at %d: %w", tp, off, err)
				}
				rest = rest[12+int(b.Length):]
				for len(list) > 0 && list[0].FirstOffset <= b.FirstOffset {
					aborted[list[0].ProducerID] = true
					list = list[1:]
				}
				switch {
				case b.Attributes&batchControl != 0:
					delete(aborted, b.ProducerID)
				case iso == history.ReadCommitted && b.Attributes&batchTransactional != 0 && aborted[b.ProducerID]:
				case b.NumRecords > 0:
					last = b.FirstOffset + int64(b.LastOffsetDelta)
				}
				off = b.FirstOffset + int64(b.LastOffsetDelta) + 1
			}
			end := p.HighWatermark
			if iso == history.ReadCommitted {
				end = p.LastStableOffset
			}
			if n == 0 || off >= end {
				break
			}
		}
		out[tp] = last
	}
	return out, nil
}

// drain reads every partition from offset 0 at iso with a new consumer
// until it has read the last record it must deliver (lasts), and records
// that it read each partition to its end: the checker then expects
// every visible record below the end among what it read.
func (w *workload) drain(ctx context.Context, iso history.Isolation, ends, lasts map[history.TP]int64) error {
	name := "drain-" + strings.TrimPrefix(groupOf(iso), "h-")
	level := kgo.ReadUncommitted()
	if iso == history.ReadCommitted {
		level = kgo.ReadCommitted()
	}
	starts := make(map[string]map[int32]kgo.Offset)
	tps := slices.SortedFunc(maps.Keys(ends), func(a, b history.TP) int { return strings.Compare(a.String(), b.String()) })
	for _, tp := range tps {
		if starts[tp.Topic] == nil {
			starts[tp.Topic] = make(map[int32]kgo.Offset)
		}
		starts[tp.Topic][tp.Partition] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(append(w.clientOpts(name),
		kgo.ConsumePartitions(starts), kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(250*time.Millisecond))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	w.rec.add(&history.Assign{Process: name, At: w.rec.now(), Isolation: iso, Added: tps, From: 0})
	read := make(map[history.TP]int64)
	var err2 error
	for !reached(read, lasts) {
		if ctx.Err() != nil {
			err2 = fmt.Errorf("%v: read %v, want %v", ctx.Err(), read, lasts)
			break
		}
		for _, r := range w.poll(ctx, cl, name, "", iso) {
			read[r.TP] = max(read[r.TP], r.Offset)
		}
	}
	for _, tp := range tps {
		w.rec.add(&history.Drained{Process: name, At: w.rec.now(), TP: tp, End: ends[tp]})
	}
	return err2
}

// reached reports whether read holds, for every partition with a last
// record, an offset at or past it.
func reached(read, lasts map[history.TP]int64) bool {
	for tp, last := range lasts {
		if r, ok := read[tp]; last >= 0 && (!ok || r < last) {
			return false
		}
	}
	return true
}

// groupCaughtUp waits until iso's group has read up to the last record
// it must deliver in every partition. The group's state lives in the
// agents, with nothing to wait on from here, so this polls.
func (w *workload) groupCaughtUp(ctx context.Context, iso history.Isolation, lasts map[history.TP]int64) error {
	for !reached(w.groupRead(iso), lasts) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%v: read %v, want %v", ctx.Err(), w.groupRead(iso), lasts)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// errSummary lists the errors clients reported, most frequent first.
func (w *workload) errSummary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.mu.errs) == 0 {
		return "none"
	}
	kinds := slices.Collect(maps.Keys(w.mu.errs))
	sort.Slice(kinds, func(i, j int) bool { return w.mu.errs[kinds[i]] > w.mu.errs[kinds[j]] })
	var b strings.Builder
	for i, k := range kinds {
		if i == 20 {
			fmt.Fprintf(&b, "\n  ... %d more kinds", len(kinds)-i)
			break
		}
		fmt.Fprintf(&b, "\n  %d x %s (first at %.1fs)", w.mu.errs[k], k, w.mu.errFirst[k].Seconds())
	}
	return b.String()
}

// lockedWriter serializes the writes of the clients' loggers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
