package replica

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
)

// crashDirEnv switches the test binary into the crash child: it runs a
// replica over the file loglet in that directory and proposes until it is
// killed.
const (
	crashDirEnv  = "META_CRASH_CHILD_DIR"
	crashIterEnv = "META_CRASH_CHILD_ITER"

	crashTopic      = "crash"
	crashPartitions = 8
	crashWorkers    = 6
	crashWriter     = "child"
	// crashChildLimit bounds a child the parent never kills.
	crashChildLimit = 20 * time.Second
)

// crashBatch is one acknowledged CommitBatch: partition, base offset and
// record count.
type crashBatch struct {
	partition int32
	base      int64
	records   int32
}

// crashAcks is everything the children acknowledged so far.
type crashAcks struct {
	commits map[string][]crashBatch // object key -> batches in order
	topics  map[string]meta.TopicID
}

// TestReplicaCrash is the crash acceptance test: a child process that
// proposes and applies over the file loglet is killed with SIGKILL at
// random moments, over and over on the same directories. After each kill
// every acknowledged proposal must be present exactly once at the offsets
// acknowledged, offsets dense, the log must read back without gaps, the
// store the child left must be exactly the state of a log prefix at its
// recorded applied position (the position is written in the same batch as
// the data, and Pebble commits without fsync), and once caught up it must
// have the digest of a replica replayed from position zero.
func TestReplicaCrash(t *testing.T) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(dir, os.Getenv(crashIterEnv))
		return
	}
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -seed %[1]d)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	acks := &crashAcks{commits: map[string][]crashBatch{}, topics: map[string]meta.TopicID{}}
	const iterations = 25
	var kills struct{ early, late, behind int }
	for it := range iterations {
		// Mostly kill while proposals flow; sometimes early, while the
		// child may still be replaying the log or choosing its
		// incarnation.
		early := rng.IntN(5) == 0
		delay := time.Duration(rng.IntN(300)) * time.Millisecond
		if early {
			delay = time.Duration(rng.IntN(60)) * time.Millisecond
			kills.early++
		} else {
			kills.late++
		}
		n, stderr := runReplicaCrashChild(t, dir, it, early, delay, acks)
		if n == 0 && !early {
			t.Fatalf("iteration %d: the child acknowledged nothing; stderr:\n%s", it, stderr)
		}
		if verifyReplicaCrash(t, dir, acks) {
			kills.behind++
		}
	}
	if len(acks.commits) == 0 || len(acks.topics) == 0 {
		t.Fatalf("only %d commits and %d topics acknowledged", len(acks.commits), len(acks.topics))
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, "pebble", "*.sst"))
	t.Logf("%d commits and %d topics acknowledged over %d kills (%d early); the child's store was behind the log %d times; %d SSTs",
		len(acks.commits), len(acks.topics), iterations, kills.early, kills.behind, len(ssts))
}

// runReplicaCrashChild runs one child, kills it delay after its first
// acknowledgement (or after it started, if early), records what it
// acknowledged into acks and returns how many.
func runReplicaCrashChild(t *testing.T, dir string, it int, early bool, delay time.Duration, acks *crashAcks) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestReplicaCrash$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashIterEnv+"="+strconv.Itoa(it))
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
	guard := time.After(crashChildLimit + 10*time.Second) // deadlock guard only
	var kill <-chan time.Time
	if early {
		kill = time.After(delay)
	}
	n, killed := 0, false
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				err := cmd.Wait()
				if !killed || err == nil || !strings.Contains(err.Error(), "killed") {
					t.Fatalf("iteration %d: child exited with %v, want killed; stderr:\n%s", it, err, stderr.String())
				}
				return n, stderr.String()
			}
			if err := acks.record(line); err != nil {
				t.Fatalf("iteration %d: %v", it, err)
			}
			n++
			if n == 1 && !early {
				kill = time.After(delay)
			}
		case <-kill:
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed, kill = true, nil
		case <-guard:
			_ = cmd.Process.Kill()
			t.Fatalf("iteration %d: child not done; stderr:\n%s", it, stderr.String())
		}
	}
}

// record parses one acknowledgement line:
//
//	commit <object key> <partition>:<base>:<records>,...
//	topic <name> <topic id hex>
func (a *crashAcks) record(line string) error {
	f := strings.Fields(line)
	if len(f) != 3 {
		return fmt.Errorf("bad ack line %q", line)
	}
	switch f[0] {
	case "commit":
		if _, dup := a.commits[f[1]]; dup {
			return fmt.Errorf("object %s acknowledged twice", f[1])
		}
		var bs []crashBatch
		for _, s := range strings.Split(f[2], ",") {
			var b crashBatch
			if _, err := fmt.Sscanf(s, "%d:%d:%d", &b.partition, &b.base, &b.records); err != nil {
				return fmt.Errorf("bad ack line %q: %v", line, err)
			}
			bs = append(bs, b)
		}
		a.commits[f[1]] = bs
	case "topic":
		var id meta.TopicID
		if n, err := hex.Decode(id[:], []byte(f[2])); err != nil || n != len(id) {
			return fmt.Errorf("bad ack line %q", line)
		}
		if _, dup := a.topics[f[1]]; dup {
			return fmt.Errorf("topic %s acknowledged twice", f[1])
		}
		a.topics[f[1]] = id
	default:
		return fmt.Errorf("bad ack line %q", line)
	}
	return nil
}

// verifyReplicaCrash checks the directories a killed child left, and
// reports whether the child's store was behind the log's tail.
func verifyReplicaCrash(t *testing.T, dir string, acks *crashAcks) (behind bool) {
	t.Helper()
	log, err := filelog.Open(filepath.Join(dir, "log"), filelog.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := log.Close(); err != nil {
			t.Fatal(err)
		}
	}()

	// The log reads back densely from zero, every entry intact.
	entries := rawEntries(t, log)
	for i, e := range entries {
		if e.Pos != sharedlog.Pos(i) {
			t.Fatalf("log entry %d read at position %d", i, e.Pos)
		}
		if _, err := meta.DecodeEntry(e.Data); err != nil {
			t.Fatalf("log entry %d: %v", i, err)
		}
	}
	tail := sharedlog.Pos(len(entries))

	// The child's store, as a restart finds it, is the state of a log
	// prefix at the position it records. Work on a copy: the next child
	// must find the store exactly as the kill left it.
	cp := t.TempDir()
	copyFiles(t, filepath.Join(dir, "pebble"), cp)
	db, err := pebble.Open(cp, pebbleOptions(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	applied, digest, err := stateOf(db)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if applied > tail {
		t.Fatalf("the child's store is at %d, past the log's tail %d", applied, tail)
	}
	if want := replayDigest(t, log, applied); digest != want {
		t.Fatalf("the child's store at %d has digest %x, the log's prefix %x", applied, digest, want)
	}

	// Caught up, it agrees with a copy replayed from zero.
	child := openReplica(t, log, cp, "parent")
	fresh := openReplica(t, log, "", "fresh")
	defer child.Close()
	defer fresh.Close()
	if child.NextToApply() != tail || fresh.NextToApply() != tail {
		t.Fatalf("caught up to %d and %d, tail %d", child.NextToApply(), fresh.NextToApply(), tail)
	}
	if got, want := mustDigest(t, child), mustDigest(t, fresh); got != want {
		t.Fatalf("the child's store caught up to %d: digest %x, replayed from zero %x", tail, got, want)
	}
	checkCrashAcks(t, fresh, acks)
	return applied < tail
}

// checkCrashAcks checks every acknowledgement against r: each commit's
// batches at the acknowledged offsets, once; offsets dense from zero; each
// acknowledged topic with its id.
func checkCrashAcks(t *testing.T, r *Replica, acks *crashAcks) {
	t.Helper()
	v := r.View()
	defer v.Close()
	top, ok, err := v.Topic(crashTopic)
	if err == nil && !ok && len(acks.commits) == 0 && len(acks.topics) == 0 {
		return // every child so far was killed before it got going
	}
	if err != nil || !ok {
		t.Fatalf("topic %s: %v, %v", crashTopic, ok, err)
	}
	found := map[string][]crashBatch{}
	for p := range int32(crashPartitions) {
		it, err := v.Seek(top.ID, p, 0)
		if err != nil {
			t.Fatal(err)
		}
		var next int64
		for it.Next() {
			e := it.Entry()
			if e.BaseOffset != next {
				t.Fatalf("partition %d: entry at %d, want %d (gap or overlap)", p, e.BaseOffset, next)
			}
			next += int64(e.Records)
			for _, b := range found[e.ObjectKey] {
				if b.partition == p {
					// A child commit never has two batches in one
					// partition: this one applied twice.
					t.Fatalf("object %s in partition %d at %d and %d", e.ObjectKey, p, b.base, e.BaseOffset)
				}
			}
			found[e.ObjectKey] = append(found[e.ObjectKey], crashBatch{p, e.BaseOffset, e.Records})
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		it.Close()
		st, _, err := v.Partition(top.ID, p)
		if err != nil || st.NextOffset != next {
			t.Fatalf("partition %d: next offset %d, index ends at %d (%v)", p, st.NextOffset, next, err)
		}
	}
	for key, want := range acks.commits {
		got := found[key]
		if len(got) != len(want) {
			t.Fatalf("object %s: %d index entries, acknowledged %d batches", key, len(got), len(want))
		}
		for _, w := range want {
			var match bool
			for _, g := range got {
				match = match || g == w
			}
			if !match {
				t.Fatalf("object %s: acknowledged %+v, index holds %+v", key, w, got)
			}
		}
	}
	for name, id := range acks.topics {
		tp, ok, err := v.Topic(name)
		if err != nil || !ok || tp.ID != id {
			t.Fatalf("topic %s: %+v, %v, %v; acknowledged id %v", name, tp, ok, err, id)
		}
	}
}

func copyFiles(t *testing.T, from, to string) {
	t.Helper()
	des, err := os.ReadDir(from)
	if errors.Is(err, fs.ErrNotExist) {
		return // killed before it was created
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if !de.Type().IsRegular() {
			t.Fatalf("unexpected %s in %s", de.Name(), from)
		}
		src, err := os.Open(filepath.Join(from, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Create(filepath.Join(to, de.Name()))
		if err == nil {
			_, err = io.Copy(dst, src)
			err = errors.Join(err, dst.Close())
		}
		src.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// crashChild runs a replica over the file loglet in dir and proposes from
// several goroutines, printing one line per acknowledged proposal (one
// write per line), until it is killed.
func crashChild(dir, iter string) {
	fail := func(code int, what string, err error) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(code)
	}
	time.AfterFunc(crashChildLimit, func() { fail(4, "limit", fmt.Errorf("not killed within %v", crashChildLimit)) })
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	log, err := filelog.Open(filepath.Join(dir, "log"), filelog.Options{Logger: logger})
	if err != nil {
		fail(3, "open log", err)
	}
	ctx := context.Background()
	r, err := Open(ctx, Config{Dir: filepath.Join(dir, "pebble"), Log: log, WriterID: crashWriter, Logger: logger})
	if err != nil {
		fail(3, "open replica", err)
	}
	// An earlier child may have created the topic, acknowledged or not.
	res, err := r.Propose(ctx, meta.CreateTopic{Name: crashTopic, Partitions: crashPartitions})
	if err == nil && res.Code != 0 && res.Code != kerr.TopicAlreadyExists.Code {
		err = res.Err()
	}
	if err != nil {
		fail(5, "create topic", err)
	}
	v := r.View()
	top, ok, err := v.Topic(crashTopic)
	v.Close()
	if err != nil || !ok {
		fail(5, "topic", fmt.Errorf("found %v: %v", ok, err))
	}

	var mu sync.Mutex
	ack := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, format, args...)
	}
	var wg sync.WaitGroup
	for g := range crashWorkers {
		wg.Go(func() {
			for i := 0; ; i++ {
				name := fmt.Sprintf("%s.%d.%d", iter, g, i)
				if i%8 == 7 {
					res, err := r.Propose(ctx, meta.CreateTopic{Name: "t." + name, Partitions: 1})
					if err == nil {
						err = res.Err()
					}
					if err != nil {
						fail(5, "create "+name, err)
					}
					ack("topic t.%s %s\n", name, hex.EncodeToString(res.TopicID[:]))
					continue
				}
				co := meta.CommitObject{ObjectKey: "o." + name}
				for k := range 1 + (g+i)%3 {
					// Distinct partitions within a commit, so a commit
					// applied twice shows as a repeated partition.
					co.Batches = append(co.Batches, meta.CommitBatch{
						TopicID: top.ID, Partition: int32((g + i + k) % crashPartitions),
						Position: int64(k) * 100, Length: 100, Records: int32(1 + (i+k)%7), BatchCount: 1,
						ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
					})
				}
				co.ObjectSize = int64(len(co.Batches)) * 100
				res, err := r.Propose(ctx, co)
				if err == nil {
					err = res.Err()
				}
				if err != nil {
					fail(5, "commit "+name, err)
				}
				var line strings.Builder
				for k, br := range res.Batches {
					if br.Code != 0 {
						fail(5, "commit "+name, kerr.ErrorForCode(br.Code))
					}
					if k > 0 {
						line.WriteByte(',')
					}
					fmt.Fprintf(&line, "%d:%d:%d", co.Batches[k].Partition, br.BaseOffset, co.Batches[k].Records)
				}
				ack("commit %s %s\n", co.ObjectKey, line.String())
			}
		})
	}
	wg.Wait()
}
