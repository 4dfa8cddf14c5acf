package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
)

// Shape of the metadata BenchmarkStartWithIndexEntries builds.
const (
	benchPartitions = 64
	// benchBatchesPerCommand index entries per CommitObject, and
	// benchCommandsPerEntry commands per log entry (about 800 KiB, under
	// replica.DefaultMaxEntryBytes).
	benchBatchesPerCommand = 1000
	benchCommandsPerEntry  = 20
	benchRecordsPerBatch   = 10
)

// BenchmarkStartWithIndexEntries measures the time to ready of an agent
// started on an empty data dir when the metadata holds 1M offset index
// entries (the objects they point to are not written: start-up never
// reads them):
//
//   - replay: no snapshot exists, so the agent replays the whole log;
//   - restore: the agent restores the newest snapshot (taken, and the log
//     trimmed, through POST /v1/snapshot) and replays nothing.
//
// An op is one agent.Start, from the call to its return, which is when
// /readyz turns ready. Building the metadata takes a while and is not
// timed. STRAND_BENCH_INDEX_ENTRIES overrides the 1M.
//
//	go test ./internal/agent -run '^$' -bench StartWithIndexEntries -benchtime 3x
func BenchmarkStartWithIndexEntries(b *testing.B) {
	entries := 1_000_000
	if s := os.Getenv("STRAND_BENCH_INDEX_ENTRIES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < benchBatchesPerCommand {
			b.Fatalf("STRAND_BENCH_INDEX_ENTRIES=%q: want a number of at least %d", s, benchBatchesPerCommand)
		}
		entries = n
	}
	shared := b.TempDir()
	cfg := func(dataDir string) agent.Config {
		return agent.Config{
			DataDir:          dataDir,
			KafkaListen:      "127.0.0.1:0",
			HTTPListen:       "127.0.0.1:0",
			ObjStore:         "file://" + filepath.ToSlash(filepath.Join(shared, "objects")),
			Log:              "file://" + filepath.ToSlash(filepath.Join(shared, "log")),
			SnapshotInterval: agent.SnapshotsOff,
		}
	}
	builder := filepath.Join(shared, "builder")
	logEntries := buildIndex(b, cfg(builder), entries)

	// timeStarts times Start on a new empty data dir b.N times; the
	// start replays logEntries.
	timeStarts := func(b *testing.B, logEntries int) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			dir := filepath.Join(shared, fmt.Sprintf("%s-%d", filepath.Base(b.Name()), i))
			ctx, cancel := context.WithTimeout(context.Background(), benchStartTimeout)
			a, err := agent.Start(ctx, cfg(dir), quietLogger())
			cancel()
			if err != nil {
				b.Fatalf("Start: %v", err)
			}
			b.StopTimer()
			checkIndexed(b, a, entries)
			stopAgent(b, a)
			os.RemoveAll(dir)
			b.StartTimer()
		}
		b.ReportMetric(float64(entries), "index-entries")
		b.ReportMetric(float64(logEntries), "log-entries-replayed")
	}
	b.Run("replay", func(b *testing.B) { timeStarts(b, logEntries) })

	a := startBench(b, cfg(builder))
	code, body := adminCall(b, http.MethodPost, a.HTTPAddr(), agent.PathSnapshot, "")
	stopAgent(b, a)
	if code != http.StatusOK {
		b.Fatalf("POST %s: %d %s", agent.PathSnapshot, code, body)
	}
	b.Logf("snapshot: %s", body)
	b.Run("restore", func(b *testing.B) { timeStarts(b, 0) })
}

// benchStartTimeout guards one Start in the benchmark against a hang.
const benchStartTimeout = 10 * time.Minute

// buildIndex starts an agent with cfg, creates a topic and proposes
// CommitObject commands through its replica until the metadata holds
// entries index entries, then stops it. It returns the log's length.
func buildIndex(b *testing.B, cfg agent.Config, entries int) int {
	b.Helper()
	a := startBench(b, cfg)
	defer stopAgent(b, a)
	ctx := context.Background()
	r := a.Replica()
	res, err := r.Propose(ctx, meta.CreateTopic{Name: "bench", Partitions: benchPartitions})
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		b.Fatalf("create topic: %v", err)
	}
	id := res.TopicID
	var pending []*replica.Proposal
	n := 0
	for obj := 0; n < entries; {
		cmds := make([]meta.Command, 0, benchCommandsPerEntry)
		for len(cmds) < benchCommandsPerEntry && n < entries {
			co := meta.CommitObject{ObjectKey: fmt.Sprintf("data/bench/%020d.obj", obj), ObjectSize: benchBatchesPerCommand * 4096}
			for i := 0; i < benchBatchesPerCommand && n < entries; i++ {
				co.Batches = append(co.Batches, meta.CommitBatch{
					TopicID: id, Partition: int32(n % benchPartitions), Position: int64(i) * 4096, Length: 4096,
					Records: benchRecordsPerBatch, BatchCount: 1,
					FirstTimestamp: 1_700_000_000_000 + int64(n), MaxTimestamp: 1_700_000_000_000 + int64(n),
					ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
				})
				n++
			}
			cmds = append(cmds, co)
			obj++
		}
		p, err := r.Submit(ctx, cmds)
		if err != nil {
			b.Fatalf("submit: %v", err)
		}
		pending = append(pending, p)
	}
	for _, p := range pending {
		results, err := p.Wait(ctx)
		if err != nil {
			b.Fatalf("commit: %v", err)
		}
		for _, res := range results {
			for _, br := range res.Batches {
				if br.Code != 0 {
					b.Fatalf("commit: error code %d", br.Code)
				}
			}
		}
	}
	checkIndexed(b, a, entries)
	return int(r.NextToApply())
}

// checkIndexed checks that a's metadata holds entries batches of
// benchRecordsPerBatch records.
func checkIndexed(b *testing.B, a *agent.Agent, entries int) {
	b.Helper()
	v := a.Replica().View()
	defer v.Close()
	tp, ok, err := v.Topic("bench")
	if err != nil || !ok {
		b.Fatalf("topic bench: %v (found %v)", err, ok)
	}
	var records int64
	for p := range int32(benchPartitions) {
		ps, _, err := v.Partition(tp.ID, p)
		if err != nil {
			b.Fatal(err)
		}
		records += ps.NextOffset
	}
	if want := int64(entries) * benchRecordsPerBatch; records != want {
		b.Fatalf("the metadata holds %d records, want %d", records, want)
	}
}

func startBench(b *testing.B, cfg agent.Config) *agent.Agent {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), benchStartTimeout)
	defer cancel()
	a, err := agent.Start(ctx, cfg, quietLogger())
	if err != nil {
		b.Fatalf("Start: %v", err)
	}
	return a
}

func stopAgent(b *testing.B, a *agent.Agent) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		b.Fatalf("Stop: %v", err)
	}
}
