package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
)

// olderBuildCommit is the last commit of main before feature levels: a
// build that writes what strand.metadata.version 1 allows and halts on
// anything newer, the build a rolling upgrade starts from.
const olderBuildCommit = "c53cb0e88394c0e9cdb62b63ae4541568c9d440c"

// olderBinary builds cmd/strand at olderBuildCommit from this checkout's
// git history, once per machine: the binary is kept in the user cache
// dir, keyed by commit and Go version. A checkout without that commit (a
// shallow clone) fetches it from origin; if that fails too the test
// skips, saying how to get it, or fails under CI=true.
func olderBinary(t *testing.T) string {
	t.Helper()
	requireCommand(t, "git")
	if err := haveCommit(olderBuildCommit); err != nil {
		if ferr := fetchCommit(olderBuildCommit); ferr != nil {
			skipOrFailInCI(t, "commit %s is not in this checkout's history (%v), and fetching it failed: %v; "+
				"in a shallow clone, git fetch --unshallow", olderBuildCommit[:12], err, ferr)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "strand", "older-builds", olderBuildCommit[:12]+"-"+runtime.Version())
	bin := filepath.Join(dir, "strand")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	src := t.TempDir()
	if err := extractCommit(olderBuildCommit, src); err != nil {
		t.Fatalf("extracting %s: %v", olderBuildCommit[:12], err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := bin + ".tmp" + strconv.Itoa(os.Getpid())
	build := exec.Command("go", "build", "-o", tmp, "./cmd/strand")
	build.Dir = src
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of %s: %v\n%s", olderBuildCommit[:12], err, out)
	}
	// Renamed into place whole, so a concurrent run sees all or nothing.
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// haveCommit reports whether the checkout holds commit.
func haveCommit(commit string) error {
	if out, err := exec.Command("git", "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		return fmt.Errorf("%v %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// gitFetchTimeout bounds fetching the older build's commit, as a hang
// guard: it is one commit's tree.
const gitFetchTimeout = 5 * time.Minute

// fetchCommit fetches commit from origin: CI may test a shallow clone,
// which lacks the history the older build comes from. A shallow clone
// gets just that commit (depth 1, all git archive needs), so that it
// stays small; a full one, whatever it lacks.
func fetchCommit(commit string) error {
	ctx, cancel := context.WithTimeout(context.Background(), gitFetchTimeout)
	defer cancel()
	args := []string{"fetch", "--quiet", "--no-tags"}
	if out, err := exec.Command("git", "rev-parse", "--is-shallow-repository").Output(); err == nil && strings.TrimSpace(string(out)) == "true" {
		args = append(args, "--depth=1")
	}
	cmd := exec.CommandContext(ctx, "git", append(args, "origin", commit)...)
	// Never wait for a password nobody will type.
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s origin %s: %v %s", strings.Join(args, " "), commit[:12], err, bytes.TrimSpace(out))
	}
	return haveCommit(commit)
}

// extractCommit writes the tree of commit into dir (git archive), without
// touching this checkout's work tree or its list of worktrees.
func extractCommit(commit, dir string) error {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return fmt.Errorf("git rev-parse --show-toplevel: %w", err)
	}
	cmd := exec.Command("git", "archive", "--format=tar", commit)
	// From a subdirectory git archives only that subdirectory.
	cmd.Dir = strings.TrimSpace(string(top))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	tr := tar.NewReader(out)
	var extractErr error
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			extractErr = err
			break
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, filepath.Clean(dir)+string(filepath.Separator)) {
			extractErr = fmt.Errorf("archive entry %q leaves the directory", h.Name)
			break
		}
		switch h.Typeflag {
		case tar.TypeDir:
			extractErr = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			extractErr = writeFile(path, tr, os.FileMode(h.Mode).Perm())
		}
		if extractErr != nil {
			break
		}
	}
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git archive: %v: %s", err, stderr.String())
	}
	return extractErr
}

func writeFile(path string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// upgradeAgent is one `strand serve` of the upgrade test.
type upgradeAgent struct {
	node            int32
	dataDir         string
	kafka, httpAddr string
	proc            *agentProcess
}

// TestRollingUpgrade runs the build before feature levels beside this one
// on one PostgreSQL log and one object store, as a rolling upgrade does
// halfway through. Produce, consume and a consumer group work across
// both; the older agent never halts, since at strand.metadata.version 1
// the newer one writes only what it reads; raising the level is refused
// while the older agent is live. Once it is replaced by this build, an
// operator raises the level and the new command versions (FinalizeFeatures,
// AgentHeartbeat v3) appear in the log.
func TestRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two strand binaries and starts PostgreSQL")
	}
	older := olderBinary(t)
	newer := strandBinary(t)
	logURL := pgLogletURL(t, "e2e-upgrade")
	objURL := "file://" + t.TempDir()
	serve := func(bin string, a *upgradeAgent) {
		t.Helper()
		a.proc = startBinary(t, bin, a.httpAddr,
			"--data-dir", a.dataDir, "--node-id", strconv.Itoa(int(a.node)),
			"--kafka-listen", a.kafka, "--http-listen", a.httpAddr,
			"--objstore", objURL, "--log", logURL, "--lease", clusterLease.String(), "--snapshot-interval", "0",
			"--group-initial-rebalance-delay", "100ms")
	}
	// The older build starts the cluster, as it did before the upgrade.
	a1 := &upgradeAgent{node: 1, dataDir: t.TempDir(), kafka: freeAddr(t), httpAddr: freeAddr(t)}
	a2 := &upgradeAgent{node: 2, dataDir: t.TempDir(), kafka: freeAddr(t), httpAddr: freeAddr(t)}
	serve(older, a1)
	serve(newer, a2)
	both := []int32{1, 2}
	if c1, c2 := waitBrokers(t, a1.kafka, both), waitBrokers(t, a2.kafka, both); c1 != c2 {
		t.Fatalf("cluster ids %q and %q", c1, c2)
	}

	const topic = "upgrade"
	createTopic(t, a2.kafka, topic, 4)
	var sent []string
	sent = append(sent, produceN(t, a1.kafka, topic, "older", 50)...)
	sent = append(sent, produceN(t, a2.kafka, topic, "newer", 50)...)
	checkValues(t, a1.kafka, topic, sent)
	checkValues(t, a2.kafka, topic, sent)
	// A group with a member on each agent: whichever coordinates it, the
	// other serves its members' fetches and reads its commits.
	groupConsume(t, []string{a1.kafka, a2.kafka}, "upgrade-group", topic, int64(len(sent)))
	if n := committed(t, a2.kafka, "upgrade-group", topic); n != int64(len(sent)) {
		t.Fatalf("the group's commits read through agent 2 cover %d records, through agent 1 %d", n, len(sent))
	}

	describe := runStrand(t, "features", "describe", "--brokers", a2.kafka)
	// Every agent supports level 1 only: the older one names none.
	if !regexpLine(describe, "strand.metadata.version", "1", "1", "1") {
		t.Fatalf("features describe beside the older agent:\n%s", describe)
	}
	out, err := runStrandErr(t, "features", "upgrade", "--feature", "strand.metadata.version=2", "--brokers", a2.kafka)
	if err == nil || !strings.Contains(out, "Agent 1 only supports versions 1") {
		t.Fatalf("raising the level beside the older agent: %v\n%s", err, out)
	}
	createTopic(t, a2.kafka, "upgrade-probe", 1)
	checkRoundTrip(t, a1.kafka, "upgrade-probe")
	if strings.Contains(a1.proc.stderr.String(), "halted") {
		t.Fatalf("the older agent halted:\n%s", a1.proc.stderr.String())
	}
	scanLog(t, logURL, 0, func(rc meta.RawCommand) error {
		if rc.Type == meta.TypeFinalizeFeatures || rc.Type == meta.TypeAgentHeartbeat && rc.Version > 2 {
			return fmt.Errorf("%v v%d at level 1", rc.Type, rc.Version)
		}
		return nil
	})

	// Replace the older agent by this build on its data dir, then raise.
	a1.proc.stopGracefully(t)
	serve(newer, a1)
	waitBrokers(t, a2.kafka, both)
	raisedFrom := scanLog(t, logURL, 0, func(meta.RawCommand) error { return nil })
	runStrand(t, "features", "upgrade", "--feature", "strand.metadata.version=2", "--brokers", a1.kafka)
	describe = runStrand(t, "features", "describe", "--brokers", a2.kafka)
	if !regexpLine(describe, "strand.metadata.version", "1", strconv.Itoa(int(meta.MaxMetadataLevel)), "2") {
		t.Fatalf("features describe after the raise:\n%s", describe)
	}
	// Each agent's next renewal (every lease/3) carries its ranges.
	deadline := time.Now().Add(opTimeout)
	for !allAdvertise(t, a2.httpAddr, both) {
		if time.Now().After(deadline) {
			t.Fatalf("agents did not renew with their ranges after the raise: %+v", logStatus(t, a2.httpAddr).Agents)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var finalize, heartbeatV3 int
	scanLog(t, logURL, raisedFrom, func(rc meta.RawCommand) error {
		switch {
		case rc.Type == meta.TypeFinalizeFeatures:
			finalize++
		case rc.Type == meta.TypeAgentHeartbeat && rc.Version == 3:
			heartbeatV3++
		}
		return nil
	})
	if finalize != 1 || heartbeatV3 < 2 {
		t.Fatalf("after the raise the log holds %d FinalizeFeatures and %d AgentHeartbeat v3, want 1 and at least 2", finalize, heartbeatV3)
	}
	sent = append(sent, produceN(t, a1.kafka, topic, "after", 50)...)
	checkValues(t, a2.kafka, topic, sent)
}

// runStrandErr runs the strand binary and returns its stdout and error,
// for commands expected to fail.
func runStrandErr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, strandBinary(t), args...).Output()
	return string(out), err
}

// regexpLine reports whether out has a line with exactly these leading
// cells.
func regexpLine(out string, cells ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(cells) && slices.Equal(f[:len(cells)], cells) {
			return true
		}
	}
	return false
}

// allAdvertise reports whether every node's lease carries its ranges.
func allAdvertise(t *testing.T, httpAddr string, nodes []int32) bool {
	t.Helper()
	n := 0
	for _, l := range logStatus(t, httpAddr).Agents {
		if slices.Contains(nodes, l.NodeID) && l.Live && l.Features[meta.FeatureMetadata] != "" {
			n++
		}
	}
	return n == len(nodes)
}

// scanLog reads the shared log from position from to its tail, calls
// check with every command, and returns the tail.
func scanLog(t *testing.T, logURL string, from sharedlog.Pos, check func(meta.RawCommand) error) sharedlog.Pos {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	vl, err := logurl.OpenVirtual(ctx, logURL, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer vl.Close()
	tail, _, err := vl.CheckTail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for from < tail {
		es, err := vl.ReadNext(ctx, from, tail)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			entry, err := meta.DecodeEntry(e.Data)
			if err != nil {
				t.Fatalf("entry at %d: %v", e.Pos, err)
			}
			for _, rc := range entry.Commands {
				if err := check(rc); err != nil {
					t.Fatalf("entry at %d by %s: %v", e.Pos, entry.WriterID, err)
				}
			}
			from = e.Pos + 1
		}
	}
	return tail
}

// produceN produces n records valued prefix-i, acks=all, and returns
// the values.
func produceN(t *testing.T, addr, topic, prefix string, n int) []string {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var rs []*kgo.Record
	var values []string
	for i := range n {
		v := fmt.Sprintf("%s-%d", prefix, i)
		values = append(values, v)
		rs = append(rs, &kgo.Record{Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce through %s: %v", addr, err)
	}
	return values
}

// checkValues reads the whole topic through addr and wants exactly want,
// in any order across partitions.
func checkValues(t *testing.T, addr, topic string, want []string) {
	t.Helper()
	var got []string
	for _, rs := range consumeAll(t, addr, topic, endOffsets(t, addr, topic)) {
		for _, r := range rs {
			got = append(got, string(r.Value))
		}
	}
	slices.Sort(got)
	w := slices.Sorted(slices.Values(want))
	if !slices.Equal(got, w) {
		t.Fatalf("%s serves %d records, want %d", addr, len(got), len(w))
	}
}

// groupConsume runs one group member per seed, each committing what it
// read after every poll, until the group's commits, read through the
// first seed, cover total records. A commit lost to a rebalance is made
// good by the partition's next owner, which reads from the last commit.
func groupConsume(t *testing.T, seeds []string, group, topic string, total int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	members, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, seed := range seeds {
		cl := newClient(t, seed, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
			kgo.ClientID(fmt.Sprintf("member-%d", i)), kgo.FetchMaxWait(100*time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for members.Err() == nil {
				fs := cl.PollFetches(members)
				fs.EachError(func(topic string, p int32, err error) {
					if !errors.Is(err, context.Canceled) {
						t.Logf("member %d fetch %s/%d: %v", i, topic, p, err)
					}
				})
				if err := cl.CommitUncommittedOffsets(ctx); err != nil {
					t.Logf("member %d commit: %v", i, err)
				}
			}
		}()
	}
	defer wg.Wait()
	defer stop()
	for committed(t, seeds[0], group, topic) != total {
		if ctx.Err() != nil {
			t.Fatalf("group %s committed %d of %d records after %v", group, committed(t, seeds[0], group, topic), total, opTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// committed is the sum of the group's committed offsets of topic, read
// through addr.
func committed(t *testing.T, addr, group, topic string) int64 {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	os, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets of %s through %s: %v", group, addr, err)
	}
	var sum int64
	os.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			sum += o.At
		}
	})
	return sum
}
