package sharedlog_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/metastoretest"
)

func TestMemMetaStore(t *testing.T) {
	metastoretest.Run(t, func(t *testing.T) func(t *testing.T) sharedlog.MetaStore {
		ms := sharedlog.NewMemMetaStore()
		return func(*testing.T) sharedlog.MetaStore { return ms }
	})
}

func TestFileMetaStore(t *testing.T) {
	metastoretest.Run(t, func(t *testing.T) func(t *testing.T) sharedlog.MetaStore {
		path := filepath.Join(t.TempDir(), "sub", "chain.json")
		return func(t *testing.T) sharedlog.MetaStore {
			ms, err := sharedlog.OpenFileMetaStore(path)
			if err != nil {
				t.Fatal(err)
			}
			return ms
		}
	})
}

func TestFileMetaStoreOpen(t *testing.T) {
	ctx := context.Background()
	t.Run("removes temp files", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "chain.json")
		stale := path + ".tmp-12345"
		other := filepath.Join(dir, "other.tmp-1")
		for _, p := range []string{stale, other} {
			if err := os.WriteFile(p, []byte("half a cha"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := sharedlog.OpenFileMetaStore(path); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale temp file survived Open: %v", err)
		}
		if _, err := os.Stat(other); err != nil {
			t.Errorf("Open removed a file it does not own: %v", err)
		}
	})
	t.Run("rejects a damaged chain", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "chain.json")
		if err := os.WriteFile(path, []byte(`{"format":1,"version":1,"segm`), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := sharedlog.OpenFileMetaStore(path); !errors.Is(err, sharedlog.ErrInvalidChain) {
			t.Fatalf("Open of a damaged chain = %v, want ErrInvalidChain", err)
		}
	})
	t.Run("leaves no temp file behind", func(t *testing.T) {
		dir := t.TempDir()
		ms, err := sharedlog.OpenFileMetaStore(filepath.Join(dir, "chain.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := ms.CAS(ctx, 0, testChain(1, "x")); err != nil {
			t.Fatal(err)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if strings.Join(names, " ") != "chain.json chain.json.lock" {
			t.Fatalf("directory holds %v", names)
		}
	})
}

func testChain(v uint64, tag string) sharedlog.Chain {
	return sharedlog.Chain{Version: v, Segments: []sharedlog.Segment{{URL: fmt.Sprintf("mem://%s/%d", tag, v)}}}
}

// The helper process: with metaChildEnv set, the test binary runs one
// child role instead of tests. The roles print "won N" for every version
// N they stored, after CAS returned.
const (
	metaChildEnv   = "STRAND_SHAREDLOG_METASTORE_CHILD"
	metaPathEnv    = "STRAND_SHAREDLOG_METASTORE_PATH"
	metaTargetEnv  = "STRAND_SHAREDLOG_METASTORE_TARGET"
	metaChildIDEnv = "STRAND_SHAREDLOG_METASTORE_ID"
)

func TestFileMetaStoreHelperProcess(t *testing.T) {
	if os.Getenv(metaChildEnv) == "" {
		t.Skip("helper process for the multi-process tests")
	}
	if err := runCASChild(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runCASChild races for versions until the store reaches the target.
func runCASChild() error {
	ctx := context.Background()
	target, err := strconv.ParseUint(os.Getenv(metaTargetEnv), 10, 64)
	if err != nil {
		return err
	}
	id := os.Getenv(metaChildIDEnv)
	ms, err := sharedlog.OpenFileMetaStore(os.Getenv(metaPathEnv))
	if err != nil {
		return err
	}
	for {
		cur, err := ms.Get(ctx)
		if err != nil {
			return err
		}
		if cur.Version >= target {
			return nil
		}
		err = ms.CAS(ctx, cur.Version, testChain(cur.Version+1, id))
		if errors.Is(err, sharedlog.ErrConflict) {
			continue
		}
		if err != nil {
			return err
		}
		if _, err := fmt.Printf("won %d\n", cur.Version+1); err != nil {
			return err
		}
	}
}

func casChild(t *testing.T, path, id string, target uint64) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFileMetaStoreHelperProcess$")
	cmd.Env = append(os.Environ(),
		metaChildEnv+"=1", metaPathEnv+"="+path, metaChildIDEnv+"="+id,
		metaTargetEnv+"="+strconv.FormatUint(target, 10))
	cmd.Stderr = os.Stderr
	return cmd
}

// TestFileMetaStoreProcessesRace races processes for every version: the
// flock must give each version exactly one winner.
func TestFileMetaStoreProcessesRace(t *testing.T) {
	const (
		procs  = 3
		target = 60
	)
	path := filepath.Join(t.TempDir(), "chain.json")
	type result struct {
		id   string
		wins []uint64
		err  error
	}
	results := make(chan result, procs)
	for i := range procs {
		id := fmt.Sprintf("p%d", i)
		cmd := casChild(t, path, id, target)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			r := result{id: id}
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				v, err := strconv.ParseUint(strings.TrimPrefix(sc.Text(), "won "), 10, 64)
				if err != nil {
					r.err = err
				}
				r.wins = append(r.wins, v)
			}
			if err := cmd.Wait(); err != nil && r.err == nil {
				r.err = err
			}
			results <- r
		}()
	}
	winner := map[uint64]string{}
	for range procs {
		r := <-results
		if r.err != nil {
			t.Fatalf("child %s: %v", r.id, r.err)
		}
		for _, v := range r.wins {
			if w, ok := winner[v]; ok {
				t.Fatalf("version %d won by %s and %s", v, w, r.id)
			}
			winner[v] = r.id
		}
	}
	if len(winner) != target {
		t.Fatalf("%d versions won, want %d", len(winner), target)
	}
	ms, err := sharedlog.OpenFileMetaStore(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ms.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := testChain(target, winner[target]); c.Active().URL != want.Active().URL {
		t.Fatalf("stored chain %+v, want the last winner's %+v", c, want)
	}
}

// TestFileMetaStoreCrash kills a CASing process at random points: every
// acknowledged version must survive, the chain must decode, and at most
// the one CAS in flight may have landed past the last acknowledgement.
func TestFileMetaStoreCrash(t *testing.T) {
	const rounds = 5
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	path := filepath.Join(t.TempDir(), "chain.json")
	var acked uint64
	for round := range rounds {
		cmd := casChild(t, path, fmt.Sprintf("r%d", round), 1<<62)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 1 + rng.IntN(40)
		sc := bufio.NewScanner(out)
		for seen := 0; seen < killAfter && sc.Scan(); seen++ {
			v, err := strconv.ParseUint(strings.TrimPrefix(sc.Text(), "won "), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			acked = v
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		ms, err := sharedlog.OpenFileMetaStore(path)
		if err != nil {
			t.Fatalf("round %d: reopen after kill: %v", round, err)
		}
		c, err := ms.Get(context.Background())
		if err != nil {
			t.Fatalf("round %d: Get after kill: %v", round, err)
		}
		// Lines read after the kill decision are acknowledgements too.
		if c.Version < acked {
			t.Fatalf("round %d: stored version %d, below acknowledged %d", round, c.Version, acked)
		}
		acked = c.Version
	}
}
