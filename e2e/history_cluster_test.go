package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/strandkafka/strand/internal/testservers/dynalitetest"
	"github.com/strandkafka/strand/internal/testservers/etcdtest"
	"github.com/strandkafka/strand/internal/testservers/faultproxy"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// The history tests' cluster: agents of the real binary, each behind a
// faultproxy that every client connection goes through (the agents
// advertise the proxy's address), on one shared log backend the test
// can pause and kill, and one S3 object store served in-process by
// gofakes3 behind a handler that injects errors and latency.

// histLease is the agents' --lease: a paused agent drops out of the
// others' Metadata within a fault's hold.
const histLease = 3 * time.Second

// histLog is the shared log backend and the faults it can take.
type histLog struct {
	name, url     string
	pause, resume func()
	// kill and restart are nil for a backend that cannot be killed
	// without losing what it holds (dynalite keeps it in memory).
	kill    func()
	restart func() error
	// died is closed if the server exits on its own (nil: not watched),
	// and output says what it last wrote.
	died   <-chan struct{}
	output func() string
}

// check reports a log server that died under the run.
func (l *histLog) check() error {
	select {
	case <-l.died:
		return fmt.Errorf("the %s server exited; its last output:\n%s", l.name, l.output())
	default:
		return nil
	}
}

// startHistLog starts a private server of backend (postgres, etcd,
// dynalite or file) for one test; file is a log in the one agent's data
// dir, with no faults.
func startHistLog(t *testing.T, backend string) *histLog {
	t.Helper()
	switch backend {
	case "postgres":
		srv, err := pgtest.Start(pgtest.Options{})
		if err != nil {
			testproc.SkipOrFail(t, err)
		}
		t.Cleanup(func() { srv.Resume(); srv.Stop() })
		u, err := url.Parse(srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("log", "history")
		u.RawQuery = q.Encode()
		return &histLog{name: backend, url: u.String(), pause: srv.Pause, resume: srv.Resume, kill: srv.Kill, restart: srv.Restart}
	case "etcd":
		srv, err := etcdtest.Start()
		if err != nil {
			testproc.SkipOrFail(t, err)
		}
		t.Cleanup(func() { srv.Resume(); srv.Stop() })
		return &histLog{name: backend, url: "etcd://" + srv.Endpoint() + "/history/seg",
			pause: srv.Pause, resume: srv.Resume, kill: srv.Kill, restart: srv.Restart}
	case "dynalite":
		srv := dynalitetest.Start(t)
		endpoint := shield(t, srv.Endpoint)
		// Resumed before the shield closes (cleanups run last first),
		// so its close does not wait on requests to a stopped server.
		t.Cleanup(srv.Resume)
		return &histLog{name: backend, url: fmt.Sprintf("dynamodb://strand-history/h?endpoint=%s&region=%s", endpoint, dynalitetest.Region),
			pause: srv.Pause, resume: srv.Resume, died: srv.Exited(), output: srv.Stderr}
	case "file":
		return &histLog{name: backend}
	}
	t.Fatalf("unknown log backend %q", backend)
	return nil
}

// shield serves endpoint's HTTP API on a new loopback address through a
// proxy that receives each request whole before it forwards it and sees
// each forwarded request through to its answer, whatever its client
// does meanwhile. dynalite dies of a client that goes away mid-request
// (it rethrows the request's "aborted" error, ECONNRESET, uncaught), so
// one agent killed at the wrong moment ended a run with the log server
// gone; DynamoDB itself shrugs that off, and so does the server the
// agents see here.
func shield(t *testing.T, endpoint string) string {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return // the client went away before its request was whole
		}
		u := *target
		u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
		out, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, u.String(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header, out.Host = r.Header.Clone(), r.Host // as signed
		resp, err := client.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		maps.Copy(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestShieldKeepsDynaliteUp: a client that goes away in the middle of a
// request, as a killed agent does, kills dynalite itself; through the
// shield the server stays up and answers the next request.
func TestShieldKeepsDynaliteUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts dynalite")
	}
	srv := dynalitetest.Start(t)
	for _, via := range []string{"shield", "direct"} {
		endpoint := srv.Endpoint
		if via == "shield" {
			endpoint = shield(t, srv.Endpoint)
		}
		u, err := url.Parse(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: "+u.Host+"\r\nContent-Length: 100\r\n"+
			"X-Amz-Target: DynamoDB_20120810.ListTables\r\n\r\n{\"Limit\":"); err != nil {
			t.Fatal(err)
		}
		// Gone with a reset, as a process killed mid-request goes.
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close()
		if via == "direct" {
			// How it fails without the shield, so this test notices a
			// dynalite that no longer needs one.
			select {
			case <-srv.Exited():
				t.Logf("dynalite died of it, as expected without the shield")
			case <-time.After(opTimeout):
				t.Log("dynalite survived a client gone mid-request: the shield may no longer be needed")
			}
			return
		}
		req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=history/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=00")
		req.Header.Set("X-Amz-Date", "20260101T000000Z")
		resp, err := (&http.Client{Timeout: opTimeout}).Do(req)
		select {
		case <-srv.Exited():
			t.Fatalf("dynalite died behind the shield:\n%s", srv.Stderr())
		default:
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "TableNames") {
			t.Fatalf("ListTables through the shield: %s %s", resp.Status, b)
		}
	}
}

// faultyS3 is an S3 endpoint (gofakes3 on memory) whose handler fails
// requests at a rate, before or after performing them, and delays them.
type faultyS3 struct {
	next http.Handler
	srv  *httptest.Server
	// failRate is a float64's bits: the share of requests failed.
	failRate atomic.Uint64
	// failAfter: a failed request is performed first and its reply
	// replaced, as when the store applied it and the answer was lost.
	failAfter atomic.Bool
	// latency is the most a request is delayed, in nanoseconds: each
	// waits a uniform share of it.
	latency atomic.Int64

	requests, failed atomic.Int64
	mu               struct {
		sync.Mutex
		rng *rand.Rand
	}
}

const histBucket = "strand-history"

func startFaultyS3(t *testing.T, seed uint64) *faultyS3 {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(histBucket); err != nil {
		t.Fatal(err)
	}
	f := &faultyS3{next: gofakes3.New(backend).Server()}
	f.mu.rng = rand.New(rand.NewPCG(seed, 3))
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	// The agents find credentials through the AWS default chain, kept
	// away from this machine's own files and instance metadata.
	home := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", "history")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "history")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(home, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(home, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return f
}

// url is the --objstore URL of the store.
func (f *faultyS3) url() string {
	return fmt.Sprintf("s3://%s/objects?endpoint=%s&region=us-east-1&path-style=true", histBucket, f.srv.URL)
}

// set changes the faults: fail rate (0 to 1), whether failures happen
// after the request is performed, and the most a request is delayed.
func (f *faultyS3) set(rate float64, after bool, latency time.Duration) {
	f.failRate.Store(math.Float64bits(rate))
	f.failAfter.Store(after)
	f.latency.Store(int64(latency))
}

func (f *faultyS3) roll() (fail bool, delay time.Duration) {
	rate := math.Float64frombits(f.failRate.Load())
	lat := f.latency.Load()
	f.mu.Lock()
	defer f.mu.Unlock()
	if lat > 0 {
		delay = time.Duration(f.mu.rng.Int64N(lat))
	}
	return rate > 0 && f.mu.rng.Float64() < rate, delay
}

func (f *faultyS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	fail, delay := f.roll()
	if delay > 0 {
		time.Sleep(delay)
	}
	if !fail {
		f.next.ServeHTTP(w, r)
		return
	}
	f.failed.Add(1)
	if f.failAfter.Load() {
		f.next.ServeHTTP(httptest.NewRecorder(), r)
	}
	// An S3 error the SDK treats as retryable, as a real store's
	// overload would be.
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>injected by the history test</Message></Error>`)
}

// histAgent is one `strand serve` of a history cluster and the proxy in
// front of it. The fault schedule and the cluster's supervisor both act
// on it, under mu.
type histAgent struct {
	id     int32
	kafka  string // listen address
	http   string
	proxy  *faultproxy.Proxy
	bin    string
	args   []string
	env    []string
	logDir string

	mu         sync.Mutex
	starts     int
	proc       *testproc.Proc
	paused     bool
	lastLogTag string
	// killed: the schedule killed it and restarts it itself; the
	// supervisor leaves it down.
	killed bool
	// retryAt is when the supervisor may try again after a restart
	// that did not come up, and backoff the wait after the next one.
	retryAt time.Time
	backoff time.Duration
}

// start runs the agent and waits until /readyz answers 200 (or says
// only that its clock is off the log's).
func (a *histAgent) start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.startLocked()
}

func (a *histAgent) startLocked() error {
	a.starts++
	a.lastLogTag = fmt.Sprintf("agent-%d.%d.log", a.id, a.starts)
	var id testproc.Identity
	cmd := id.Command(a.bin, append([]string{"serve"}, a.args...)...)
	// Several agents on this machine: the registry's and Connect's default ports are off.
	cmd.Env = append(append(os.Environ(), "STRAND_SCHEMA_REGISTRY_LISTEN=", "STRAND_CONNECT_LISTEN="), a.env...)
	proc, err := testproc.Start(cmd, filepath.Join(a.logDir, a.lastLogTag))
	if err != nil {
		return err
	}
	a.proc, a.paused, a.killed = proc, false, false
	deadline := time.Now().Add(startTimeout)
	c := http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-proc.Exited():
			return fmt.Errorf("agent %d exited while starting:\n%s", a.id, testproc.Tail(filepath.Join(a.logDir, a.lastLogTag), 4000))
		default:
		}
		if resp, err := c.Get("http://" + a.http + "/readyz"); err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			// An agent whose clock is off the log's serves clients but
			// says it is not ready (TestHistoryClockSkew): up all the
			// same.
			if resp.StatusCode == http.StatusOK || strings.Contains(string(b), "off the log clock") {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	proc.Kill()
	return fmt.Errorf("agent %d not ready after %v:\n%s", a.id, startTimeout, testproc.Tail(filepath.Join(a.logDir, a.lastLogTag), 4000))
}

// kill kills the agent with SIGKILL and leaves it down until start.
func (a *histAgent) kill() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.killed = true
	a.proc.Kill()
}

func (a *histAgent) pause() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.proc.Pause()
	a.paused = true
}

// resume continues the agent if it is paused.
func (a *histAgent) resume() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.paused {
		a.proc.Resume()
		a.paused = false
	}
}

// logPath is the log file of the agent's current run.
func (a *histAgent) logPath() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return filepath.Join(a.logDir, a.lastLogTag)
}

// histCluster is the agents of one history test and what they share.
type histCluster struct {
	t      *testing.T
	log    *histLog
	s3     *faultyS3 // nil with the file log: objects in the data dir
	agents []*histAgent
	logDir string

	mu struct {
		sync.Mutex
		// now stamps the supervisor's notes: the history's clock, once
		// the workload has one.
		now func() time.Duration
		// exits are the agents that exited on their own, and why.
		exits []string
	}
}

// histClusterOpts shape a history cluster.
type histClusterOpts struct {
	bin    string
	agents int
	// seed seeds the object store's fault decisions.
	seed uint64
	// env is added to each agent's environment, agentEnv to one's (by
	// node id).
	env      []string
	agentEnv map[int32][]string
	// args are added to every agent's flags.
	args []string
	// snapshotInterval is the agents' --snapshot-interval.
	snapshotInterval time.Duration
}

// startHistCluster starts the agents of o on log (and, unless the log is
// a file in the one agent's data dir, on a fault-injecting S3 store).
func startHistCluster(t *testing.T, log *histLog, o histClusterOpts) *histCluster {
	t.Helper()
	c := &histCluster{t: t, log: log, logDir: t.TempDir()}
	if d := os.Getenv("STRAND_HISTORY_LOGS"); d != "" {
		c.logDir = filepath.Join(d, strings.ReplaceAll(t.Name(), "/", "_"))
		if err := os.MkdirAll(c.logDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if log.url != "" {
		c.s3 = startFaultyS3(t, o.seed)
	}
	for i := range o.agents {
		id := int32(i + 1)
		env := append(slices.Clone(o.env), o.agentEnv[id]...)
		a := &histAgent{id: id, kafka: freeAddr(t), http: freeAddr(t), bin: o.bin, env: env, logDir: c.logDir}
		p, err := faultproxy.Start(a.kafka)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		a.proxy = p
		a.args = []string{"--data-dir", t.TempDir(), "--node-id", strconv.Itoa(int(a.id)),
			"--kafka-listen", a.kafka, "--advertise", p.Addr(), "--http-listen", a.http,
			"--lease", histLease.String(), "--snapshot-interval", o.snapshotInterval.String(),
			"--group-initial-rebalance-delay", "300ms", "--log-level", "info"}
		a.args = append(a.args, o.args...)
		if log.url != "" {
			a.args = append(a.args, "--log", log.url, "--objstore", c.s3.url())
		}
		if err := a.start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			a.resume()
			a.kill()
		})
		c.agents = append(c.agents, a)
	}
	c.mu.now = func() time.Duration { return 0 }
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go c.supervise(stop, stopped)
	t.Cleanup(func() { close(stop); <-stopped })
	t.Cleanup(func() {
		if t.Failed() {
			for _, a := range c.agents {
				t.Logf("agent %d's last log (%s):\n%s", a.id, a.logPath(), testproc.Tail(a.logPath(), 6000))
			}
		}
	})
	return c
}

// seeds are the addresses clients bootstrap from: every agent's proxy.
func (c *histCluster) seeds() []string {
	var out []string
	for _, a := range c.agents {
		out = append(out, a.proxy.Addr())
	}
	return out
}

// superviseEvery is how often the supervisor looks for exited agents.
const superviseEvery = 250 * time.Millisecond

// supervise restarts, until stop, every agent that exited on its own (an
// agent exits when it cannot go on, e.g. its copy of the metadata was
// trimmed out of the log while it could not renew its lease), as a
// process supervisor would, and notes which, with the error it logged.
func (c *histCluster) supervise(stop <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	tick := time.NewTicker(superviseEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		for _, a := range c.agents {
			// An agent the schedule holds (starting, killing) is
			// looked at next round.
			if !a.mu.TryLock() {
				continue
			}
			c.restartIfExited(a)
			a.mu.Unlock()
		}
	}
}

// restartIfExited restarts a, whose lock the caller holds, if it exited
// on its own.
func (c *histCluster) restartIfExited(a *histAgent) {
	select {
	case <-a.proc.Exited():
	default:
		return
	}
	if a.killed || time.Now().Before(a.retryAt) {
		return
	}
	// The reason is the last error logged, or the signal that stopped
	// it; shutdown lines follow it.
	lines := strings.Split(strings.TrimSpace(testproc.Tail(filepath.Join(a.logDir, a.lastLogTag), 8000)), "\n")
	why := lines[len(lines)-1]
	for _, l := range slices.Backward(lines) {
		if strings.Contains(l, "level=ERROR") || strings.Contains(l, `msg="strand agent stopping"`) {
			why = l
			break
		}
	}
	err := a.startLocked()
	if err != nil {
		// As a process supervisor would: back off, so an agent that
		// cannot start (its log server is gone) does not spin.
		a.backoff = min(max(2*a.backoff, time.Second), 30*time.Second)
		a.retryAt = time.Now().Add(a.backoff)
	} else {
		a.backoff = 0
	}
	note := fmt.Sprintf("agent %d exited (%s); restarted", a.id, why)
	if err != nil {
		note = fmt.Sprintf("agent %d exited (%s); restart failed, next in %v: %v", a.id, why, a.backoff, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.exits = append(c.mu.exits, fmt.Sprintf("%7.1fs %s", c.mu.now().Seconds(), note))
}

// setClock makes the supervisor stamp its notes with now.
func (c *histCluster) setClock(now func() time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.now = now
}

// exits returns the supervisor's notes.
func (c *histCluster) exits() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.mu.exits)
}

// waitUp waits until every agent runs, the supervisor having restarted
// those that exited, or ctx ends.
func (c *histCluster) waitUp(ctx context.Context) error {
	for {
		var down []int32
		for _, a := range c.agents {
			a.mu.Lock()
			select {
			case <-a.proc.Exited():
				down = append(down, a.id)
			default:
			}
			a.mu.Unlock()
		}
		if len(down) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agents %v still down: %w", down, ctx.Err())
		case <-time.After(superviseEvery):
		}
	}
}

// heal undoes every fault in force: paused agents and log resumed,
// object store and connections clean. Agents that exited are the
// supervisor's.
func (c *histCluster) heal() {
	if c.log.resume != nil {
		c.log.resume()
	}
	if c.s3 != nil {
		c.s3.set(0, false, 0)
	}
	for _, a := range c.agents {
		a.proxy.SetDelay(0)
		a.resume()
	}
}
