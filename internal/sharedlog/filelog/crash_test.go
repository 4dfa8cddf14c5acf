package filelog_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
)

// crashDirEnv switches the test binary into the crash child: it appends to
// the loglet in that directory until it is killed.
const (
	crashDirEnv  = "FILELOG_CRASH_CHILD_DIR"
	crashIterEnv = "FILELOG_CRASH_CHILD_ITER"
)

// Small segments, so kills also land in the middle of rolls.
var crashOpts = filelog.Options{SegmentBytes: 16 << 10}

// crashPayload is the entry for an append id; the id is readable from the
// entry, so the parent can regenerate and compare every entry it reads.
func crashPayload(id string) []byte {
	sum := crc32.ChecksumIEEE([]byte(id))
	b := make([]byte, len(id)+1+int(sum%2048))
	copy(b, id)
	b[len(id)] = '|'
	for i := len(id) + 1; i < len(b); i++ {
		b[i] = byte(sum) + byte(i)
	}
	return b
}

// TestCrash kills a child process appending from several goroutines with
// SIGKILL at a random moment, over and over on the same directory. After
// each kill the log must hold every acknowledged entry at its position
// with its bytes, densely, and no entry that is not one the child sent.
func TestCrash(t *testing.T) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(dir, os.Getenv(crashIterEnv))
		return
	}
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	acked := map[sharedlog.Pos]string{} // position -> append id
	var trimmed sharedlog.Pos
	const iterations = 15
	for it := range iterations {
		acks, stderr := runCrashChild(t, dir, it, time.Duration(rng.IntN(50))*time.Millisecond)
		if len(acks) == 0 {
			t.Fatalf("iteration %d: the child acknowledged nothing; stderr:\n%s", it, stderr)
		}
		for _, a := range acks {
			if prev, dup := acked[a.pos]; dup {
				t.Fatalf("iteration %d: position %d acknowledged for %s and earlier for %s", it, a.pos, a.id, prev)
			}
			acked[a.pos] = a.id
		}
		tail := verifyCrashDir(t, dir, acked, trimmed)
		if it%4 == 3 {
			// Trimming between crashes checks that the trim point and
			// segment deletions survive later crashes.
			trimmed = tail / 2
			l := open(t, dir, crashOpts)
			if err := l.PrefixTrim(t.Context(), trimmed); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d acknowledged entries over %d crashes", len(acked), iterations)
}

type crashAck struct {
	pos sharedlog.Pos
	id  string
}

// runCrashChild runs one child until its first acknowledgement plus
// delay, kills it, and returns every acknowledgement it printed.
func runCrashChild(t *testing.T, dir string, it int, delay time.Duration) ([]crashAck, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrash$", "-test.count=1")
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
	lines := make(chan crashAck)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 || f[0] != "ack" {
				continue
			}
			pos, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Errorf("bad ack line %q", sc.Text())
				continue
			}
			lines <- crashAck{sharedlog.Pos(pos), f[2]}
		}
	}()
	var acks []crashAck
	guard := time.After(30 * time.Second) // deadlock guard only
	var kill <-chan time.Time
	for kill == nil {
		select {
		case a, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				return acks, stderr.String()
			}
			acks = append(acks, a)
			kill = time.After(delay)
		case <-guard:
			_ = cmd.Process.Kill()
			t.Fatalf("iteration %d: no acknowledgement from the child", it)
		}
	}
collect:
	for {
		select {
		case a, ok := <-lines:
			if !ok {
				break collect
			}
			acks = append(acks, a)
		case <-kill:
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			kill = nil
		}
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("iteration %d: child exited with %v, want killed; stderr:\n%s", it, err, stderr.String())
	}
	return acks, stderr.String()
}

// verifyCrashDir reopens dir and checks it against the acknowledgements.
func verifyCrashDir(t *testing.T, dir string, acked map[sharedlog.Pos]string, trimmed sharedlog.Pos) sharedlog.Pos {
	t.Helper()
	ctx := t.Context()
	var logs logBuffer
	opts := crashOpts
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	l := open(t, dir, opts)
	defer func() {
		if strings.Contains(logs.String(), "torn tail") {
			t.Logf("recovery cut a torn tail")
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	tail, sealed, err := l.CheckTail(ctx)
	if err != nil || sealed {
		t.Fatalf("CheckTail = (%d, %v, %v)", tail, sealed, err)
	}
	for pos := range acked {
		if pos >= tail {
			t.Fatalf("acknowledged position %d lost: tail is %d", pos, tail)
		}
	}
	seen := map[string]sharedlog.Pos{}
	for p := trimmed; p < tail; {
		es, err := l.ReadNext(ctx, p, tail)
		if err != nil || len(es) == 0 {
			t.Fatalf("ReadNext(%d) with tail %d: %d entries, %v", p, tail, len(es), err)
		}
		for _, en := range es {
			id, _, ok := bytes.Cut(en.Data, []byte("|"))
			if !ok || !bytes.Equal(en.Data, crashPayload(string(id))) {
				t.Fatalf("entry %d is not an entry the child sent: %q", en.Pos, en.Data[:min(len(en.Data), 40)])
			}
			if want, ok := acked[en.Pos]; ok && want != string(id) {
				t.Fatalf("position %d holds %s, acknowledged for %s", en.Pos, id, want)
			}
			if prev, dup := seen[string(id)]; dup {
				t.Fatalf("%s at both %d and %d", id, prev, en.Pos)
			}
			seen[string(id)] = en.Pos
		}
		p += sharedlog.Pos(len(es))
	}
	return tail
}

// crashChild appends from several goroutines and prints "ack pos id" for
// each acknowledged append, one write per line, until it is killed.
func crashChild(dir, iter string) {
	l, err := filelog.Open(dir, filelog.Options{
		SegmentBytes: crashOpts.SegmentBytes,
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	// Bound the child if the parent never kills it.
	time.AfterFunc(20*time.Second, func() { os.Exit(4) })
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("%s.%d.%d", iter, g, i)
				pos, err := l.Append(context.Background(), crashPayload(id))
				if err != nil {
					fmt.Fprintln(os.Stderr, "append:", err)
					os.Exit(5)
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "ack %d %s\n", pos, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
