package group

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
)

// crashDirEnv switches the test binary into the crash child: an agent's
// replica (file loglet, Pebble) and coordinator in that directory,
// committing offsets until it is killed.
const (
	crashDirEnv      = "GROUP_CRASH_CHILD_DIR"
	crashWorkers     = 4
	crashMemberGroup = "member"
	// crashChildLimit bounds a child the parent never kills.
	crashChildLimit = 20 * time.Second
)

// crashState is what the children acknowledged: the last committed
// offset per "group/partition" and the member group's generation.
type crashState struct {
	acked map[string]int64
	// found is what the store held for each key after the last kill:
	// the next child continues from it, and may be killed with one more
	// commit stored and none acknowledged.
	found      map[string]int64
	generation int32
}

// TestCommittedOffsetsSurviveKill: a child commits offsets (standalone
// groups and a static member's group) and prints each acknowledgement; it
// is killed with SIGKILL at a random moment, over and over on the same
// directories. After each kill, a replica and coordinator opened on what
// it left hold every acknowledged offset (or the one commit in flight
// after it), and the member group comes back Stable at the acknowledged
// generation.
func TestCommittedOffsetsSurviveKill(t *testing.T) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	st := &crashState{acked: make(map[string]int64), found: make(map[string]int64)}
	const iterations = 5
	total := 0
	for it := range iterations {
		delay := time.Duration(rng.IntN(200)) * time.Millisecond
		n := runCrashChild(t, dir, it, delay, st)
		if n == 0 {
			t.Fatalf("iteration %d: nothing acknowledged", it)
		}
		total += n
		verifyCrash(t, dir, st)
	}
	t.Logf("%d acknowledgements over %d kills; offsets %v; member generation %d", total, iterations, st.acked, st.generation)
}

func runCrashChild(t *testing.T, dir string, it int, delay time.Duration, st *crashState) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCommittedOffsetsSurviveKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	limit := time.After(crashChildLimit + 10*time.Second) // deadlock guard only
	var kill <-chan time.Time
	n, killed := 0, false
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				err := cmd.Wait()
				if !killed || err == nil || !strings.Contains(err.Error(), "killed") {
					t.Fatalf("iteration %d: child exited with %v, want killed; stderr:\n%s", it, err, stderr.String())
				}
				return n
			}
			if err := st.record(line); err != nil {
				t.Fatalf("iteration %d: %v", it, err)
			}
			n++
			if n == 1 {
				kill = time.After(delay)
			}
		case <-kill:
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed, kill = true, nil
		case <-limit:
			_ = cmd.Process.Kill()
			t.Fatalf("iteration %d: child not done; stderr:\n%s", it, stderr.String())
		}
	}
}

// record parses "ack <group> <partition> <offset>" and "gen <generation>".
func (st *crashState) record(line string) error {
	f := strings.Fields(line)
	switch {
	case len(f) == 4 && f[0] == "ack":
		var p int32
		var off int64
		if _, err := fmt.Sscanf(f[2]+" "+f[3], "%d %d", &p, &off); err != nil {
			return fmt.Errorf("bad line %q", line)
		}
		key := f[1] + "/" + f[2]
		if prev, ok := st.acked[key]; ok && off <= prev {
			return fmt.Errorf("%s acknowledged %d after %d", key, off, prev)
		}
		st.acked[key] = off
	case len(f) == 2 && f[0] == "gen":
		var g int32
		if _, err := fmt.Sscanf(f[1], "%d", &g); err != nil {
			return fmt.Errorf("bad line %q", line)
		}
		if g < st.generation {
			return fmt.Errorf("generation went from %d to %d", st.generation, g)
		}
		st.generation = g
	default:
		return fmt.Errorf("bad line %q", line)
	}
	return nil
}

// openCrashDirs opens the replica and coordinator the child uses.
func openCrashDirs(ctx context.Context, dir string) (*Coordinator, *replica.Replica, func(), error) {
	log, err := filelog.Open(filepath.Join(dir, "log"), filelog.Options{Logger: quiet})
	if err != nil {
		return nil, nil, nil, err
	}
	rep, err := replica.Open(ctx, replica.Config{Dir: filepath.Join(dir, "pebble"), Log: log, WriterID: "child", Logger: quiet})
	if err != nil {
		log.Close()
		return nil, nil, nil, err
	}
	cfg := testConfig()
	cfg.Meta = rep
	c, err := New(ctx, cfg)
	if err != nil {
		rep.Close()
		log.Close()
		return nil, nil, nil, err
	}
	return c, rep, func() { c.Close(); rep.Close(); log.Close() }, nil
}

func verifyCrash(t *testing.T, dir string, st *crashState) {
	t.Helper()
	c, _, closeAll, err := openCrashDirs(testCtx(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	for key, acked := range st.acked {
		var grp string
		var p int32
		i := strings.LastIndexByte(key, '/')
		grp = key[:i]
		fmt.Sscanf(key[i+1:], "%d", &p)
		got, code := fetchOne(testCtx(t), c, grp, "t", p)
		if code != 0 {
			t.Fatalf("fetch %s: %v", grp, kerr.ErrorForCode(code))
		}
		// Each committer has at most one commit in flight past its last
		// acknowledgement, or, killed before acknowledging any, past
		// what it found.
		base := max(acked, st.found[key])
		if got != base && got != base+1 {
			t.Fatalf("%s: committed %d after the kill, acknowledged %d, found %d after the kill before", key, got, acked, st.found[key])
		}
		st.found[key] = got
	}
	if st.generation > 0 {
		s := c.snapshot(crashMemberGroup)
		if !s.exists || s.state != stateStable || s.generation < st.generation {
			t.Fatalf("member group after the kill: %+v, acknowledged generation %d", s, st.generation)
		}
	}
}

// crashChild commits until killed, printing every acknowledgement. Each
// committer continues from what the store holds.
func crashChild(dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), crashChildLimit)
	defer cancel()
	die := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
		os.Exit(2)
	}
	c, rep, _, err := openCrashDirs(ctx, dir)
	if err != nil {
		die("open: %v", err)
	}
	if res, err := rep.Propose(ctx, meta.CreateTopic{Name: "t", Partitions: crashWorkers}); err != nil ||
		(res.Code != 0 && res.Code != kerr.TopicAlreadyExists.Code) {
		die("create topic: %v %v", err, res.Err())
	}
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		fmt.Printf(format+"\n", args...)
		out.Unlock()
	}

	// The static member rejoins (a restart: a new member id, the group's
	// generation) and syncs.
	join := withInstance(joinReq(crashMemberGroup, "", "t"), "inst")
	join.SessionTimeout = time.Minute
	jr := c.JoinGroup(ctx, Client{ID: "child"}, join)(ctx)
	if jr.Code != 0 {
		die("join: %v", kerr.ErrorForCode(jr.Code))
	}
	sreq := SyncRequest{Group: crashMemberGroup, MemberID: jr.MemberID, Generation: jr.Generation, InstanceID: join.InstanceID}
	if jr.LeaderID == jr.MemberID && !jr.SkipAssignment {
		sreq.Assignments = []SyncAssignment{{MemberID: jr.MemberID, Assignment: []byte{1}}}
	}
	if sr := c.SyncGroup(ctx, sreq)(ctx); sr.Code != 0 {
		die("sync: %v", kerr.ErrorForCode(sr.Code))
	}
	say("gen %d", jr.Generation)

	commit := func(grp, member string, gen int32, p int32) {
		last, _ := fetchOne(ctx, c, grp, "t", p)
		off := max(last, 0) + 1
		for ; ctx.Err() == nil; off++ {
			if code := c.OffsetCommit(ctx, commitReq(grp, member, gen, "t", p, off))(ctx)[0]; code != 0 {
				die("commit %s: %v", grp, kerr.ErrorForCode(code))
			}
			say("ack %s %d %d", grp, p, off)
		}
	}
	var wg sync.WaitGroup
	for w := range int32(crashWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			commit(fmt.Sprintf("solo-%d", w), "", -1, w)
		}()
	}
	commit(crashMemberGroup, jr.MemberID, jr.Generation, 0)
	wg.Wait()
}
