package produce_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore/fileobj"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
)

const (
	// crashChildEnv carries the data directory to the re-executed child.
	crashChildEnv = "PRODUCE_CRASH_CHILD_DIR"
	// crashMaxCalls bounds each child producer if the parent never kills
	// it.
	crashMaxCalls = 2000
	// crashDeadlockGuard turns a hung child into a failure.
	crashDeadlockGuard = 2 * time.Minute
	crashProducers     = 4
	crashPartitions    = 2
)

// crashOpts is the batch of producer g's call i: its records and values
// follow from (g, i), so the parent can rebuild what an ack stands for.
func crashOpts(g, i int) batchtest.Options {
	return batchtest.Options{Records: 1 + (g+i)%4, ValueBytes: 100 + (i*37)%900, Seed: uint64(g*1_000_000 + i)}
}

// openAgent opens an agent's log, store and replica under dir; meta is
// the replica's own directory.
func openAgent(t testing.TB, dir, metaDir string) (*filelog.Loglet, *fileobj.Store, *replica.Replica) {
	t.Helper()
	log, err := filelog.Open(filepath.Join(dir, "log"), filelog.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	store, err := fileobj.Open(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := replica.Open(testCtx(t), replica.Config{Dir: metaDir, Log: log, WriterID: "agent-1", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return log, store, r
}

// TestCrashChild is the agent TestCrashAckedIsDurable kills: producers
// that print every acknowledged batch.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("only runs as a child of TestCrashAckedIsDurable")
	}
	_, store, r := openAgent(t, dir, filepath.Join(dir, "meta-child"))
	res, err := r.Propose(testCtx(t), meta.CreateTopic{Name: "t", Partitions: crashPartitions})
	if err != nil || res.Code != 0 {
		t.Fatalf("CreateTopic = %v, %v", res.Err(), err)
	}
	p, err := produce.New(produce.Config{
		Store: store, Replica: r, AgentID: fmt.Sprintf("agent-1-%d", r.Incarnation()), Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	for g := range crashProducers {
		wg.Go(func() {
			part := int32(g % crashPartitions)
			for i := range crashMaxCalls {
				b, err := produce.BatchFrom(res.TopicID, part, batchtest.Build(t, crashOpts(g, i)))
				if err != nil {
					t.Error(err)
					return
				}
				rs, err := p.Produce(context.Background(), []produce.Batch{b})
				if err != nil || rs[0].Code != 0 {
					t.Errorf("producer %d call %d: %v", g, i, err)
					return
				}
				out.Lock()
				// os.Stdout is unbuffered: once this line is read, the
				// call was acknowledged.
				fmt.Printf("ack %d %d %d %d\n", g, i, part, rs[0].BaseOffset)
				out.Unlock()
			}
		})
	}
	wg.Wait()
}

type crashAck struct {
	g, i int
	part int32
	base int64
}

// TestCrashAckedIsDurable kills an agent part way through producing and
// checks, from the log and the objects alone (a fresh replica that replays
// the log), that every acknowledged batch is readable at the offset it was
// acknowledged with; then a restarted agent produces on. A process kill
// keeps the page cache, so this tests that an ack waits for both the
// object and the commit, not fsync against power loss.
func TestCrashAckedIsDurable(t *testing.T) {
	for _, killAfter := range []int{3, 40} {
		t.Run(fmt.Sprintf("kill-after-%d-acks", killAfter), func(t *testing.T) {
			dir := t.TempDir()
			acks := runAndKill(t, dir, killAfter)

			log, store, r := openAgent(t, dir, t.TempDir())
			defer log.Close()
			defer r.Close()
			v := r.View()
			topic, ok, err := v.Topic("t")
			if err != nil || !ok {
				t.Fatalf("topic after crash: %v, %v", ok, err)
			}
			reader := fetch.NewReader(store, nil)
			for _, a := range acks {
				res, err := reader.Read(testCtx(t), v, topic.ID, a.part, a.base, 1)
				if err != nil || res.Err != 0 {
					t.Fatalf("ack %+v: Read = %d, %v", a, res.Err, err)
				}
				b, _, err := recordbatch.Next(res.Records)
				if err != nil {
					t.Fatal(err)
				}
				o := crashOpts(a.g, a.i)
				rb, recs := batchtest.Decode(t, b)
				if rb.FirstOffset != a.base || len(recs) != o.Records {
					t.Fatalf("ack %+v: batch at %d with %d records", a, rb.FirstOffset, len(recs))
				}
				for j, rec := range recs {
					if !bytes.Equal(rec.Value, batchtest.Value(o, j)) {
						t.Fatalf("ack %+v: record %d differs", a, j)
					}
				}
			}
			v.Close()

			// A restarted agent (new incarnation, new object keys) goes on.
			p, err := produce.New(produce.Config{
				Store: store, Replica: r, AgentID: fmt.Sprintf("agent-1-%d", r.Incarnation()), Logger: quietLogger(),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(testCtx(t))
			b, err := produce.BatchFrom(topic.ID, 0, batchtest.Build(t, crashOpts(99, 0)))
			if err != nil {
				t.Fatal(err)
			}
			rs, err := p.Produce(testCtx(t), []produce.Batch{b})
			if err != nil || rs[0].Code != 0 {
				t.Fatalf("produce after restart: %v, %+v", err, rs)
			}
			if hwm := highWatermark(t, r, topic.ID, 0); rs[0].BaseOffset != hwm-int64(b.Records) {
				t.Fatalf("produced at %d, high watermark %d", rs[0].BaseOffset, hwm)
			}
		})
	}
}

// runAndKill runs the child agent on dir, kills it after killAfter acks,
// and returns every ack it read.
func runAndKill(t *testing.T, dir string, killAfter int) []crashAck {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	guard := time.AfterFunc(crashDeadlockGuard, func() { _ = cmd.Process.Kill() })
	defer guard.Stop()

	var acks []crashAck
	killed := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "ack ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 4 {
			t.Fatalf("bad ack line %q", sc.Text())
		}
		var n [4]int64
		for k := range f {
			if n[k], err = strconv.ParseInt(f[k], 10, 64); err != nil {
				t.Fatalf("bad ack line %q", sc.Text())
			}
		}
		acks = append(acks, crashAck{g: int(n[0]), i: int(n[1]), part: int32(n[2]), base: n[3]})
		if len(acks) == killAfter && !killed {
			killed = true
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			// Acks already in the pipe were printed before the kill and
			// count.
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child ended after %d acks without being killed: %v\n%s", len(acks), err, stderr.String())
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != -1 {
		t.Fatalf("child did not die by signal: %v\n%s", err, stderr.String())
	}
	return acks
}
