package gc_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/gc"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/fileobj"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
)

// crashChildEnv carries the data directory to the re-executed child.
const crashChildEnv = "GC_CRASH_CHILD_DIR"

// openCrashAgent opens the log, store and a replica under dir.
func openCrashAgent(t *testing.T, dir, metaDir string, clk *aheadClock) (*filelog.Loglet, *fileobj.Store, *replica.Replica) {
	t.Helper()
	log, err := filelog.Open(filepath.Join(dir, "log"), filelog.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	store, err := fileobj.Open(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := replica.Open(testCtx(t), replica.Config{Dir: metaDir, Log: log, WriterID: "agent-1", Clock: clk, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return log, store, r
}

// stallCommits is a proposer that commits through r until stall is set,
// then reports the object it was asked to commit and never returns: the
// process is killed between the upload and the commit.
type stallCommits struct {
	r     *replica.Replica
	stall bool
}

func (s *stallCommits) ProposeBatch(ctx context.Context, cmds []meta.Command) ([]meta.Result, error) {
	if !s.stall {
		return s.r.ProposeBatch(ctx, cmds)
	}
	for _, c := range cmds {
		fmt.Printf("uploaded %s\n", c.(meta.CommitObject).ObjectKey) // os.Stdout is unbuffered
	}
	select {}
}

// TestCrashChild is the process TestKillBetweenUploadAndCommit kills: it
// commits one object, then uploads another and waits to be killed before
// committing it.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("only runs as a child of TestKillBetweenUploadAndCommit")
	}
	_, store, r := openCrashAgent(t, dir, filepath.Join(dir, "meta-child"), new(aheadClock))
	if _, err := r.Propose(testCtx(t), meta.FinalizeFeatures{Bootstrap: true,
		Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel3}}}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Propose(testCtx(t), meta.CreateTopic{Name: "t", Partitions: 1})
	if err != nil || res.Code != 0 {
		t.Fatalf("CreateTopic = %v, %v", res.Err(), err)
	}
	prop := &stallCommits{r: r}
	p, err := produce.New(produce.Config{Store: store, Replica: prop, AgentID: "agent-1-1", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		b, err := produce.BatchFrom(res.TopicID, 0, batchtest.Build(t, batchtest.Options{Records: 1, ValueBytes: 10, Seed: uint64(i)}))
		if err != nil {
			t.Fatal(err)
		}
		prop.stall = i == 1
		if _, err := p.Produce(context.Background(), []produce.Batch{b}); err != nil {
			t.Fatal(err)
		}
		fmt.Println("committed")
	}
}

// TestKillBetweenUploadAndCommit kills (SIGKILL) a process whose object
// is in the store and whose commit never reached the log. The
// reconciler, once the key time is below the orphan horizon, deletes it,
// and the object committed before stays readable.
func TestKillBetweenUploadAndCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and kills a child process")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(testCtx(t), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var orphan string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if k, ok := strings.CutPrefix(sc.Text(), "uploaded "); ok {
			orphan = k
			break
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if orphan == "" {
		t.Fatal("the child never reached its second commit")
	}

	clk := new(aheadClock)
	_, store, r := openCrashAgent(t, dir, t.TempDir(), clk)
	if _, err := store.Get(ctx, orphan, 0, -1); err != nil {
		t.Fatalf("the uploaded object is not in the store: %v", err)
	}
	v := r.View()
	known, err := v.ObjectKnown(orphan)
	v.Close()
	if err != nil || known {
		t.Fatalf("the object the child never committed is known: %v, %v", known, err)
	}
	c, err := gc.New(gc.Config{Store: store, Meta: r, Grace: time.Second, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	step := func() gc.Step {
		st, err := c.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := step(); st.Orphans != 0 { // sets the grace; the orphan is young
		t.Fatalf("step %+v", st)
	}
	// Time passes: the log clock goes past the grace and the key bucket.
	clk.offset.Store(int64(3 * time.Minute))
	if _, err := r.Propose(ctx, meta.AlterConfigs{Name: "tick"}); err != nil {
		t.Fatal(err)
	}
	var orphans int
	for range 5 {
		orphans += step().Orphans
	}
	if orphans != 1 {
		t.Fatalf("deleted %d orphans, want 1", orphans)
	}
	if _, err := store.Get(ctx, orphan, 0, -1); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the orphan's Get = %v, want ErrNotFound", err)
	}
	v = r.View()
	defer v.Close()
	tp, _, err := v.Topic("t")
	if err != nil {
		t.Fatal(err)
	}
	res, err := fetch.NewReader(store, fetch.NewCache(0)).Read(ctx, v, tp.ID, 0, 0, 1<<20)
	if err != nil || len(res.Records) == 0 {
		t.Fatalf("the committed object does not read back: %v", err)
	}
}
