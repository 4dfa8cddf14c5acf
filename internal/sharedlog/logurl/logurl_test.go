package logurl_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
	"github.com/strandkafka/strand/internal/sharedlog/loglettest"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
)

const maxPos = sharedlog.Pos(math.MaxUint64)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func fileURL(dir string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

var memNames atomic.Int64

// memName returns a process-unique mem:// name, forgotten at cleanup.
func memName(t *testing.T) string {
	name := fmt.Sprintf("logurl-test-%d", memNames.Add(1))
	t.Cleanup(func() { logurl.DeleteMem(name) })
	return name
}

func TestMemConformance(t *testing.T) {
	loglettest.Options{Entries: 100}.Run(t, func(t *testing.T) sharedlog.Loglet {
		l, err := logurl.Open(t.Context(), "mem://"+memName(t))
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

func TestMemHandlesShareALoglet(t *testing.T) {
	ctx := testCtx(t)
	u := "mem://" + memName(t) + "/seg-1"
	a, err := logurl.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	b, err := logurl.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := a.(sharedlog.TailWaiter).WaitTail(ctx, 5)
		waited <- err
	}()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; !errors.Is(err, sharedlog.ErrClosed) {
		t.Fatalf("WaitTail across Close = %v, want ErrClosed", err)
	}
	if _, _, err := a.CheckTail(ctx); !errors.Is(err, sharedlog.ErrClosed) {
		t.Fatalf("CheckTail on a closed handle = %v, want ErrClosed", err)
	}
	if err := b.Seal(ctx); err != nil {
		t.Fatalf("the other handle after Close: %v", err)
	}
	c, err := logurl.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if tail, sealed, err := c.CheckTail(ctx); err != nil || tail != 1 || !sealed {
		t.Fatalf("a new handle sees (%d, %v, %v), want (1, sealed)", tail, sealed, err)
	}
}

func TestFileLoglet(t *testing.T) {
	ctx := testCtx(t)
	base := t.TempDir()
	for _, tc := range []struct {
		name, url, dir string
		open           sharedlog.Opener
	}{
		{"absolute", fileURL(filepath.Join(base, "abs")), filepath.Join(base, "abs"), logurl.Open},
		{"relative", "file:rel/seg-1", filepath.Join(base, "rel", "seg-1"), logurl.Opener(base)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := tc.open(ctx, tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append(ctx, []byte("durable")); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			// The entry is in a filelog in the expected directory.
			fl, err := filelog.Open(tc.dir, filelog.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer fl.Close()
			es, err := fl.ReadNext(ctx, 0, maxPos)
			if err != nil || len(es) != 1 || string(es[0].Data) != "durable" {
				t.Fatalf("filelog in %s holds %v, %v", tc.dir, es, err)
			}
		})
	}
}

func TestBadURLs(t *testing.T) {
	ctx := testCtx(t)
	for _, u := range []string{
		"", "seg-1", "http://host/x", "mem://", "mem:name", "mem://name?x=1", "mem://name#f",
		"file://otherhost/dir", "file:rel", "file:relative/dir", "file:", "file://",
	} {
		t.Run(u, func(t *testing.T) {
			if l, err := logurl.Open(ctx, u); !errors.Is(err, logurl.ErrBadURL) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("Open(%q) = %v, want ErrBadURL", u, err)
			}
		})
	}
	for _, u := range []string{"file:../escape", "file:a/../../escape"} {
		t.Run("base "+u, func(t *testing.T) {
			if _, err := logurl.Opener(t.TempDir())(ctx, u); !errors.Is(err, logurl.ErrBadURL) {
				t.Fatalf("Open(%q) = %v, want ErrBadURL", u, err)
			}
		})
	}
	if _, err := logurl.OpenVirtual(ctx, "http://x/y", sharedlog.VirtualOptions{}); !errors.Is(err, logurl.ErrBadURL) {
		t.Fatalf("OpenVirtual of an unknown scheme = %v, want ErrBadURL", err)
	}
}

func appendAll(t *testing.T, ctx context.Context, l sharedlog.Log, data ...string) {
	t.Helper()
	for _, d := range data {
		if _, err := l.Append(ctx, []byte(d)); err != nil {
			t.Fatalf("Append(%q): %v", d, err)
		}
	}
}

func readAll(t *testing.T, ctx context.Context, l sharedlog.Log, from sharedlog.Pos) []string {
	t.Helper()
	tail, _, err := l.CheckTail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for p := from; p < tail; {
		es, err := l.ReadNext(ctx, p, maxPos)
		if err != nil || len(es) == 0 {
			t.Fatalf("ReadNext(%d) below tail %d = (%d entries, %v)", p, tail, len(es), err)
		}
		for _, e := range es {
			out = append(out, string(e.Data))
		}
		p += sharedlog.Pos(len(es))
	}
	return out
}

func TestOpenVirtualFile(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "log")
	v, err := logurl.OpenVirtual(ctx, fileURL(dir), sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, ctx, v, "a", "b")
	if err := v.Reconfigure(ctx, "file:seg-manual"); err != nil {
		t.Fatal(err)
	}
	appendAll(t, ctx, v, "c")
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"chain.json", "seg-00000000", "seg-manual"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	// The chain holds relative URLs, so the directory can move.
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	v, err = logurl.OpenVirtual(ctx, fileURL(moved), sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, ctx, v, 0); fmt.Sprint(got) != "[a b c]" {
		t.Fatalf("after the move the log holds %q", got)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}

	// A reconfiguration abandoned after its seal is finished by the next
	// appender, in a segment named after the sealed one and the chain
	// version.
	fl, err := filelog.Open(filepath.Join(moved, "seg-manual"), filelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := fl.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	fl.Close()
	v, err = logurl.OpenVirtual(ctx, fileURL(moved), sharedlog.VirtualOptions{StallTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	appendAll(t, ctx, v, "d")
	if got := readAll(t, ctx, v, 0); fmt.Sprint(got) != "[a b c d]" {
		t.Fatalf("after the stall the log holds %q", got)
	}
	if act := v.Chain().Active(); act.URL != "file:seg-manual-00000003" || act.Start != 3 {
		t.Fatalf("active segment %+v, want file:seg-manual-00000003 from 3", act)
	}
	if _, err := os.Stat(filepath.Join(moved, "seg-manual-00000003")); err != nil {
		t.Fatal(err)
	}
}

func TestOpenVirtualMem(t *testing.T) {
	ctx := testCtx(t)
	u := "mem://" + memName(t)
	a, err := logurl.OpenVirtual(ctx, u, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := logurl.OpenVirtual(ctx, u, sharedlog.VirtualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	appendAll(t, ctx, a, "a")
	if err := b.Reconfigure(ctx, u+"/seg-b"); err != nil {
		t.Fatal(err)
	}
	appendAll(t, ctx, a, "b")
	for _, v := range []*sharedlog.VirtualLog{a, b} {
		if got := readAll(t, ctx, v, 0); fmt.Sprint(got) != "[a b]" {
			t.Fatalf("log holds %q", got)
		}
	}
	if c := a.Chain(); c.Segments[0].URL != u+"/seg-00000000" || c.Active().URL != u+"/seg-b" {
		t.Fatalf("chain %+v", c)
	}
}

// The crash test's child process: with crashChildEnv set, the test
// binary appends to the file VirtualLog in crashDirEnv from several
// goroutines, reconfiguring now and then, and prints "ack POS DATA" for
// every acknowledged append, until it is killed.
const (
	crashChildEnv = "STRAND_LOGURL_CRASH_CHILD"
	crashDirEnv   = "STRAND_LOGURL_CRASH_DIR"
	crashTagEnv   = "STRAND_LOGURL_CRASH_TAG"
)

func TestVirtualFileCrashHelperProcess(t *testing.T) {
	if os.Getenv(crashChildEnv) == "" {
		t.Skip("helper process for TestVirtualFileCrash")
	}
	if err := runCrashChild(os.Getenv(crashDirEnv), os.Getenv(crashTagEnv)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runCrashChild(dir, tag string) error {
	const (
		appenders        = 4
		reconfigureEvery = 15 // acknowledged appends
	)
	ctx := context.Background()
	v, err := logurl.OpenVirtual(ctx, fileURL(dir), sharedlog.VirtualOptions{StallTimeout: -1})
	if err != nil {
		return err
	}
	var (
		mu    sync.Mutex
		acks  int
		out   = bufio.NewWriter(os.Stdout)
		errc  = make(chan error, appenders)
		segNo int
	)
	for a := range appenders {
		go func() {
			for i := 0; ; i++ {
				data := fmt.Sprintf("%s-%d-%d", tag, a, i)
				p, err := v.Append(ctx, []byte(data))
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				fmt.Fprintf(out, "ack %d %s\n", p, data)
				out.Flush()
				acks++
				reconfigure := acks%reconfigureEvery == 0
				segNo++
				next := fmt.Sprintf("file:seg-%s-%d", tag, segNo)
				mu.Unlock()
				if reconfigure {
					if err := v.Reconfigure(ctx, next); err != nil && !errors.Is(err, sharedlog.ErrConflict) {
						errc <- err
						return
					}
				}
			}
		}()
	}
	return <-errc
}

// TestVirtualFileCrash kills a process appending to a file VirtualLog
// (while it reconfigures) at random points, then checks that every
// acknowledged entry is at its position, that the log is dense, and that
// it takes appends again, finishing any reconfiguration the kill cut
// short.
func TestVirtualFileCrash(t *testing.T) {
	const rounds = 4
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "log")
	acked := map[sharedlog.Pos]string{}
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestVirtualFileCrashHelperProcess$")
		cmd.Env = append(os.Environ(), crashChildEnv+"=1", crashDirEnv+"="+dir, crashTagEnv+"="+fmt.Sprintf("r%d", round))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 10 + rng.IntN(60)
		sc := bufio.NewScanner(out)
		for seen := 0; seen < killAfter && sc.Scan(); seen++ {
			f := strings.Fields(sc.Text())
			if len(f) != 3 || f[0] != "ack" {
				t.Fatalf("child printed %q", sc.Text())
			}
			p, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if old, ok := acked[sharedlog.Pos(p)]; ok {
				t.Fatalf("position %d acknowledged for %s and %s", p, old, f[2])
			}
			acked[sharedlog.Pos(p)] = f[2]
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()

		v, err := logurl.OpenVirtual(ctx, fileURL(dir), sharedlog.VirtualOptions{StallTimeout: -1})
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		got := readAll(t, ctx, v, 0)
		seen := map[string]bool{}
		for p, data := range got {
			if seen[data] {
				t.Fatalf("round %d: %q is in the log twice", round, data)
			}
			seen[data] = true
			if want, ok := acked[sharedlog.Pos(p)]; ok && want != data {
				t.Fatalf("round %d: position %d holds %q, acknowledged %q", round, p, data, want)
			}
		}
		for p, data := range acked {
			if int(p) >= len(got) {
				t.Fatalf("round %d: acknowledged %q at %d, but the log ends at %d", round, data, p, len(got))
			}
		}
		p, err := v.Append(ctx, []byte(fmt.Sprintf("check-%d", round)))
		if err != nil || int(p) != len(got) {
			t.Fatalf("round %d: append after the crash = (%d, %v), want position %d", round, p, err, len(got))
		}
		acked[p] = fmt.Sprintf("check-%d", round)
		t.Logf("round %d: %d entries, %d segments", round, len(got)+1, len(v.Chain().Segments))
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBilledPerRequest: the logs whose every request is billed, by
// scheme in any case; the others and what is no log URL are not.
func TestBilledPerRequest(t *testing.T) {
	for raw, want := range map[string]bool{
		"s3://bucket/log?region=us-east-1": true,
		"S3://bucket/log":                  true,
		"dynamodb://table/log":             true,
		"postgres://u@h/db?log=main":       false,
		"etcd://127.0.0.1:2379/strand":     false,
		"file:///var/lib/strand/log":       false,
		"mem://x":                          false,
		"not a url":                        false,
	} {
		if got := logurl.BilledPerRequest(raw); got != want {
			t.Errorf("BilledPerRequest(%q) = %v, want %v", raw, got, want)
		}
	}
}
