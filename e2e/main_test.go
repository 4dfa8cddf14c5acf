// Package e2e runs whole Strand agents against real clients: franz-go, the
// strand CLI, kcat (librdkafka) and kafka-python, plus a kill -9 crash
// loop of the real binary, raw bad input on the wire, and the
// Jepsen-style history tests (history_test.go). It holds tests only.
// Tests that need a client tool skip when it is missing, except under
// CI=true, where they fail: scripts/test installs the tools.
package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/testservers/etcdtest"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

// Bounds that guard against deadlocks; none of them is expected to be
// reached by a passing test.
const (
	// opTimeout bounds one client operation (a topic creation, a flush,
	// a consume to the end of a small topic).
	opTimeout = 30 * time.Second
	// startTimeout bounds an agent process coming up.
	startTimeout = 30 * time.Second
)

// binDir is where TestMain lets strandBinary build the binary, removed
// when the tests end.
var binDir string

func TestMain(m *testing.M) {
	// A consumer process of the share-group chaos test, not a test run
	// (share_consumer_test.go).
	if cfg := os.Getenv(shareConsumerEnv); cfg != "" {
		os.Exit(runShareConsumer(cfg))
	}
	dir, err := os.MkdirTemp("", "strand-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(2)
	}
	binDir = dir
	// Stops the PostgreSQL and etcd servers that tests start on first use.
	code := pgtest.Run(runFunc(func() int { return etcdtest.Run(m) }))
	os.RemoveAll(dir)
	os.Exit(code)
}

// runFunc chains the test servers' Run wrappers.
type runFunc func() int

func (f runFunc) Run() int { return f() }

// builds are the binaries built by this test binary, by file name.
var builds struct {
	mu   sync.Mutex
	done map[string]*build
}

type build struct {
	once sync.Once
	path string
	err  error
}

// strandBinary builds cmd/strand once per test binary, on first use, so
// a run of only the in-process tests or benchmarks does not pay for it.
func strandBinary(t testing.TB) string {
	t.Helper()
	return buildStrand(t, "strand")
}

// buildStrand builds cmd/strand as binDir/name with the go build flags
// given, once per test binary.
func buildStrand(t testing.TB, name string, flags ...string) string {
	t.Helper()
	builds.mu.Lock()
	if builds.done == nil {
		builds.done = make(map[string]*build)
	}
	b := builds.done[name]
	if b == nil {
		b = new(build)
		builds.done[name] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() {
		path := filepath.Join(binDir, name)
		args := append(append([]string{"build"}, flags...), "-o", path, "github.com/strandkafka/strand/cmd/strand")
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
			return
		}
		b.path = path
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// runStrand runs the strand binary with args and returns its stdout.
func runStrand(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, strandBinary(t), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("strand %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// requireTool fails the test under CI=true when check reports the tool
// missing, and skips it otherwise.
func requireTool(t testing.TB, name string, check func() error) {
	t.Helper()
	if err := check(); err != nil {
		skipOrFailInCI(t, "%s missing (%v); scripts/test installs it", name, err)
	}
}

// skipOrFailInCI skips t, or fails it under CI=true, where what the
// test lacks is part of the setup and a skip would hide a hole.
func skipOrFailInCI(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("under CI=true: "+format, args...)
	}
	t.Skipf(format, args...)
}

// requireCommand is requireTool for a command on PATH.
func requireCommand(t testing.TB, name string) string {
	t.Helper()
	var path string
	requireTool(t, name, func() (err error) {
		path, err = exec.LookPath(name)
		return err
	})
	return path
}

// systemPython is the Debian interpreter: the python3 first on PATH may
// be a version manager's shim that does not see the Debian packages.
const systemPython = "/usr/bin/python3"

// requirePythonModule requires systemPython with module importable.
func requirePythonModule(t testing.TB, module, debianPackage string) {
	t.Helper()
	requireTool(t, debianPackage, func() error {
		out, err := exec.Command(systemPython, "-c", "import "+module).CombinedOutput()
		if err != nil {
			// The traceback's last line names the problem.
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			return fmt.Errorf("%s -c 'import %s': %v: %s", systemPython, module, err, lines[len(lines)-1])
		}
		return nil
	})
}

// testLogger sends warnings and errors to the test log, so a failing
// test shows what the agent complained about and a passing one stays
// quiet.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startAgent starts an in-process agent on loopback ports chosen by the
// kernel, with its data in a temp dir unless cfg names one, and stops it
// at cleanup.
func startAgent(t testing.TB, cfg agent.Config) *agent.Agent {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.KafkaListen == "" && cfg.Listeners == "" {
		cfg.KafkaListen = "127.0.0.1:0"
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	a, err := agent.Start(ctx, cfg, testLogger(t))
	if err != nil {
		t.Fatalf("agent.Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("agent.Stop: %v", err)
		}
	})
	return a
}

// newClient returns a kgo client for addr, closed at cleanup.
func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a topic with kadm.
func createTopic(t testing.TB, addr, topic string, partitions int32) {
	t.Helper()
	createTopicConfigs(t, addr, topic, partitions, nil)
}

// createTopicConfigs is createTopic with the topic's configs.
func createTopicConfigs(t testing.TB, addr, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// endOffsets lists the high watermark of every partition of topic.
func endOffsets(t testing.TB, addr, topic string) map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	out := make(map[int32]int64)
	var errs []error
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", o.Partition, o.Err))
		}
		out[o.Partition] = o.Offset
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	return out
}

// consumeAll reads every record of topic from offset 0 up to the high
// watermarks in ends, in offset order per partition.
func consumeAll(t testing.TB, addr, topic string, ends map[int32]int64) map[int32][]*kgo.Record {
	t.Helper()
	starts := make(map[int32]kgo.Offset)
	left := 0
	for p, end := range ends {
		starts[p] = kgo.NewOffset().At(0)
		left += int(end)
	}
	out := make(map[int32][]*kgo.Record)
	if left == 0 {
		return out
	}
	cl := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}),
		kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume %s: %d records still missing after %v", topic, left, opTimeout)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Errorf("fetch %s/%d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				out[r.Partition] = append(out[r.Partition], r)
				left--
			}
		})
	}
	return out
}

// checkRoundTrip produces one record with a fresh client and consumes it
// back: the agent still serves after whatever the test did before.
func checkRoundTrip(t testing.TB, addr, topic string) {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.DisableIdempotentWrite())
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	value := fmt.Sprintf("probe-%d", time.Now().UnixNano())
	r, err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(value)}).First()
	if err != nil {
		t.Fatalf("probe produce: %v", err)
	}
	cons := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {r.Partition: kgo.NewOffset().At(r.Offset)},
	}))
	for {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("probe consume at %d/%d: %v", r.Partition, r.Offset, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Errorf("probe fetch %s/%d: %v", topic, p, err) })
		for _, got := range fs.Records() {
			if got.Offset == r.Offset {
				if string(got.Value) != value {
					t.Fatalf("probe at %d/%d: got %q, want %q", r.Partition, r.Offset, got.Value, value)
				}
				return
			}
		}
	}
}

// agentProcess is the strand binary running `serve` as a child process,
// so a test can kill -9 it.
type agentProcess struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	exited chan struct{}
}

type lockedBuffer struct {
	mu struct {
		sync.Mutex
		b strings.Builder
	}
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.b.String()
}

// servingLine is the agent's log message once it serves Kafka.
const servingLine = `msg="strand agent serving"`

// startProcess runs `strand serve` with args and returns once it logged
// that it serves and /readyz answered 200. Its stderr is logged if the
// test fails.
func startProcess(t testing.TB, httpAddr string, args ...string) *agentProcess {
	t.Helper()
	return startBinary(t, strandBinary(t), httpAddr, args...)
}

// startBinary is startProcess for the strand binary at bin (an older
// build, say).
func startBinary(t testing.TB, bin, httpAddr string, args ...string) *agentProcess {
	t.Helper()
	return startBinaryEnv(t, bin, nil, httpAddr, args...)
}

// startBinaryEnv is startBinary with env added to the environment.
func startBinaryEnv(t testing.TB, bin string, env []string, httpAddr string, args ...string) *agentProcess {
	t.Helper()
	// The serving line is logged at info, whatever STRAND_LOG_LEVEL says.
	cmd := exec.Command(bin, append([]string{"serve", "--log-level", "info"}, args...)...)
	// The schema registry's and Connect's default ports would be one for every agent
	// of a cluster on this machine: off unless a test asks (an
	// older build ignores the variable).
	cmd.Env = append(append(os.Environ(), "STRAND_SCHEMA_REGISTRY_LISTEN=", "STRAND_CONNECT_LISTEN="), env...)
	pr, pw := io.Pipe()
	p := &agentProcess{cmd: cmd, stderr: new(lockedBuffer), exited: make(chan struct{})}
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("start strand serve: %v", err)
	}
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			p.stderr.Write([]byte(line + "\n"))
			if strings.Contains(line, servingLine) {
				once.Do(func() { close(serving) })
			}
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		cmd.Wait()
		pw.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("strand serve %s stderr:\n%s", strings.Join(args, " "), p.stderr.String())
		}
	})
	select {
	case <-serving:
	case <-p.exited:
		t.Fatalf("strand serve exited before serving: %v\n%s", cmd.ProcessState, p.stderr.String())
	case <-time.After(startTimeout):
		t.Fatalf("strand serve not serving after %v\n%s", startTimeout, p.stderr.String())
	}
	if code := httpStatus(t, "http://"+httpAddr+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz after serving: %d", code)
	}
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *agentProcess) kill() {
	p.cmd.Process.Kill()
	<-p.exited
}

// httpStatus GETs url and returns the status code.
func httpStatus(t testing.TB, url string) int {
	t.Helper()
	code, _ := httpGet(t, url)
	return code
}

func httpGet(t testing.TB, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: opTimeout}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// freeAddr returns a loopback address with a port free right now. The
// crash test needs fixed ports so a restarted agent is found where the
// producer's client left it.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
