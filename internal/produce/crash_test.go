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
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/express"
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

// crashExpressMarker, a file in the data directory, makes both the child
// and the parent write and read through the low-latency tier: three zone
// directories beside the main one.
const crashExpressMarker = "express"

// openAgent opens an agent's log, store and replica under dir; meta is
// the replica's own directory. x is the tier when dir holds the marker.
func openAgent(t testing.TB, dir, metaDir string) (*filelog.Loglet, objstore.Store, *replica.Replica, *express.Store) {
	t.Helper()
	log, err := filelog.Open(filepath.Join(dir, "log"), filelog.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var store objstore.Store
	store, err = fileobj.Open(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	var x *express.Store
	if _, err := os.Stat(filepath.Join(dir, crashExpressMarker)); err == nil {
		var zones []express.Zone
		for i := range 3 {
			z, err := fileobj.Open(filepath.Join(dir, fmt.Sprintf("zone-%d", i)))
			if err != nil {
				t.Fatal(err)
			}
			zones = append(zones, express.Zone{Name: strconv.Itoa(i), Store: z})
		}
		if x, err = express.New(express.Config{Main: store, Zones: zones, Local: 0}); err != nil {
			t.Fatal(err)
		}
		store = x
	}
	r, err := replica.Open(testCtx(t), replica.Config{Dir: metaDir, Log: log, WriterID: "agent-1", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return log, store, r, x
}

// TestCrashChild is the agent TestCrashAckedIsDurable kills: producers
// that print every acknowledged batch.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("only runs as a child of TestCrashAckedIsDurable")
	}
	_, store, r, x := openAgent(t, dir, filepath.Join(dir, "meta-child"))
	res, err := r.Propose(testCtx(t), meta.CreateTopic{Name: "t", Partitions: crashPartitions})
	if err != nil || res.Code != 0 {
		t.Fatalf("CreateTopic = %v, %v", res.Err(), err)
	}
	p, err := produce.New(produce.Config{
		Store: store, Express: x, Replica: r, AgentID: fmt.Sprintf("agent-1-%d", r.Incarnation()), Logger: quietLogger(),
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
//
// With the low-latency tier (the express subtests) the same holds of
// objects acknowledged by two of three zone directories, read back
// through the keys the commits name.
func TestCrashAckedIsDurable(t *testing.T) {
	for _, tc := range []struct {
		killAfter int
		express   bool
	}{{3, false}, {40, false}, {3, true}, {40, true}} {
		name := fmt.Sprintf("kill-after-%d-acks", tc.killAfter)
		if tc.express {
			name = "express/" + name
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.express {
				if err := os.WriteFile(filepath.Join(dir, crashExpressMarker), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			acks := runAndKill(t, dir, tc.killAfter)

			log, store, r, x := openAgent(t, dir, t.TempDir())
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
				if tc.express {
					if key := objectAt(t, v, topic.ID, a.part, a.base); !express.IsKey(key) {
						t.Fatalf("ack %+v: committed in %s, not a tier object", a, key)
					}
				}
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
				Store: store, Express: x, Replica: r, AgentID: fmt.Sprintf("agent-1-%d", r.Incarnation()), Logger: quietLogger(),
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

// objectAt returns the key of the object holding offset.
func objectAt(t testing.TB, v *meta.View, id meta.TopicID, part int32, offset int64) string {
	t.Helper()
	it, err := v.Seek(id, part, offset)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if !it.Next() {
		t.Fatalf("no index entry at %d: %v", offset, it.Err())
	}
	return it.Entry().ObjectKey
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
