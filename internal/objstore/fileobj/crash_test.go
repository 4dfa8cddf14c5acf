package fileobj

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	// crashChildEnv carries the store directory to the re-executed child.
	crashChildEnv = "FILEOBJ_CRASH_CHILD_DIR"
	// crashMaxWrites bounds the child in case the parent never kills it.
	crashMaxWrites = 5000
	// crashDeadlockGuard turns a hung child into a failure; not a speed check.
	crashDeadlockGuard = 2 * time.Minute
	overwriteKey       = "crash/overwrite"
)

// crashData is write i's payload: its size varies up to 512 KiB so the kill
// lands inside writes of many sizes, and its bytes depend on i so a mix of
// two writes or a cut write is detectable.
func crashData(i int) []byte {
	n := 1 + (i*7919)%(512<<10)
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(j*31+i*17) ^ byte(j>>8)
	}
	return b
}

// crashWrite is what the child does at step i: fresh keys by Put and by
// PutIfAbsent, and overwrites of one key, whose version is i.
func crashWrite(ctx context.Context, s *Store, i int, data []byte) error {
	switch i % 3 {
	case 0:
		return s.Put(ctx, fmt.Sprintf("crash/put/%05d", i), data)
	case 1:
		return s.PutIfAbsent(ctx, fmt.Sprintf("crash/pia/%05d", i), data)
	default:
		return s.Put(ctx, overwriteKey, data)
	}
}

// TestCrashChild is the writer that TestCrashLeavesNoPartialObjects kills.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("only runs as a child of TestCrashLeavesNoPartialObjects")
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	next := crashData(0)
	for i := range crashMaxWrites {
		if err := crashWrite(context.Background(), s, i, next); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		// Make the next payload before acknowledging, so a kill sent on
		// reading the ack lands inside the next write, not while its bytes
		// are being generated.
		next = crashData(i + 1)
		// os.Stdout is unbuffered: once this line is read, write i returned.
		fmt.Printf("ack %d\n", i)
	}
}

// TestCrashLeavesNoPartialObjects kills a writer with SIGKILL part way
// through and checks what a fresh Open sees: every acknowledged write,
// no partial object, no temporary file. A process kill keeps the page
// cache, so this tests atomic publication, not fsync against power loss.
func TestCrashLeavesNoPartialObjects(t *testing.T) {
	for _, killAfter := range []int{5, 17, 31} {
		t.Run(fmt.Sprintf("kill-after-%d-acks", killAfter), func(t *testing.T) {
			dir := t.TempDir()
			lastAck := runAndKill(t, dir, killAfter)
			verifyAfterCrash(t, dir, lastAck)
		})
	}
}

// runAndKill runs the child writer on dir, kills it after it acknowledged
// killAfter writes, and returns the last acknowledged write.
func runAndKill(t *testing.T, dir string, killAfter int) int {
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

	lastAck, acks, killed := -1, 0, false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "ack ")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(rest)
		if err != nil {
			t.Fatalf("bad ack line %q", line)
		}
		lastAck = n
		acks++
		if acks == killAfter && !killed {
			killed = true
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			// Keep reading: acks already in the pipe were written before
			// the kill and count.
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child ended after %d acks without being killed: %v\n%s", acks, err, stderr.String())
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != -1 {
		t.Fatalf("child did not die by signal: %v\n%s", err, stderr.String())
	}
	return lastAck
}

func verifyAfterCrash(t *testing.T, dir string, lastAck int) {
	t.Helper()
	for _, p := range onDisk(t, dir) {
		if strings.Contains(p, tmpPrefix) {
			t.Logf("crash left temporary file %s", p)
		}
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open after crash: %v", err)
	}
	for _, p := range onDisk(t, dir) {
		if strings.Contains(p, tmpPrefix) {
			t.Fatalf("Open left temporary file %s", p)
		}
	}
	ctx := context.Background()
	infos, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]int64{}
	for _, info := range infos {
		present[info.Key] = info.Size
	}
	// Every acknowledged write is there, whole; the one in flight at the
	// kill (lastAck+1) may or may not be, but if it is, it is whole.
	lastOverwrite := -1
	for i := 0; i <= lastAck+1; i++ {
		if i%3 == 2 {
			if i <= lastAck {
				lastOverwrite = i
			}
			continue
		}
		key := fmt.Sprintf("crash/put/%05d", i)
		if i%3 == 1 {
			key = fmt.Sprintf("crash/pia/%05d", i)
		}
		size, ok := present[key]
		delete(present, key)
		if !ok {
			if i <= lastAck {
				t.Fatalf("acknowledged write %d (%s) is missing", i, key)
			}
			continue
		}
		want := crashData(i)
		if size != int64(len(want)) {
			t.Fatalf("%s listed with size %d, want %d", key, size, len(want))
		}
		got, err := s.Get(ctx, key, 0, -1)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: got %d bytes (err %v), not write %d's %d bytes", key, len(got), err, i, len(want))
		}
	}
	if lastOverwrite >= 0 {
		got, err := s.Get(ctx, overwriteKey, 0, -1)
		if err != nil {
			t.Fatalf("Get %s: %v", overwriteKey, err)
		}
		// The newest acknowledged version, or the one in flight.
		inFlight := lastAck + 1
		okVersion := bytes.Equal(got, crashData(lastOverwrite)) ||
			(inFlight%3 == 2 && bytes.Equal(got, crashData(inFlight)))
		if !okVersion {
			t.Fatalf("%s holds %d bytes matching neither version %d nor the in-flight version", overwriteKey, len(got), lastOverwrite)
		}
		delete(present, overwriteKey)
	}
	for key := range present {
		t.Fatalf("unexpected object %s after crash", key)
	}
	t.Logf("killed after write %d; %d objects verified", lastAck, len(infos))
}
