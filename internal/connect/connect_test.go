package connect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/objstore/memobj"
)

// testStore is a metatest.DB with Changed, keeping every command it
// was asked to write, encoded as the log would hold it.
type testStore struct {
	*metatest.DB
	mu struct {
		sync.Mutex
		changed chan struct{}
		log     [][]byte
	}
}

func newTestStore(t *testing.T) *testStore {
	s := &testStore{DB: metatest.New(nil)}
	s.mu.changed = make(chan struct{})
	s.DB.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel8}}})
	return s
}

func (s *testStore) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.changed
}

func (s *testStore) Propose(ctx context.Context, c meta.Command) (meta.Result, error) {
	res, err := s.DB.Propose(ctx, c)
	s.mu.Lock()
	s.mu.log = append(s.mu.log, meta.EncodeCommand(c).Payload)
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
	s.mu.Unlock()
	return res, err
}

// logHolds reports whether any command written holds b.
func (s *testStore) logHolds(b string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.mu.log {
		if bytes.Contains(p, []byte(b)) {
			return true
		}
	}
	return false
}

// statuses counts the ConnectorTaskStatus commands written.
func (s *testStore) statuses(t *testing.T) (n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.log)
}

// waitFor waits until cond holds of the store, on its changes.
func (s *testStore) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ch := s.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-time.After(20 * time.Millisecond):
			// A task's own state (not the store's) may be what
			// changed: look again.
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// fakeClass is a source whose config says what its task does:
// mode=ok runs until stopped, mode=fail fails at once with "boom".
// database.password is its secret; the password each run saw is kept.
type fakeClass struct {
	mu struct {
		sync.Mutex
		passwords []string
		running   int
		// maxRunning is the most tasks that ever ran at once.
		maxRunning int
		// forgotten are the connectors Forget was called for.
		forgotten []string
	}
}

const fakeClassName = "com.example.FakeSourceConnector"

func (f *fakeClass) class() Class {
	return Class{
		Name: fakeClassName,
		Kind: KindSource,
		Validate: func(cfg map[string]string) error {
			switch cfg["mode"] {
			case "ok", "fail":
				return nil
			}
			return errors.New("mode must be ok or fail")
		},
		Secret: func(k string) bool { return k == "database.password" },
		Forget: func(name string) {
			f.mu.Lock()
			f.mu.forgotten = append(f.mu.forgotten, name)
			f.mu.Unlock()
		},
		New: func(cfg map[string]string) (Task, error) {
			return taskFunc(func(ctx context.Context, env Env) error {
				f.mu.Lock()
				f.mu.passwords = append(f.mu.passwords, cfg["database.password"])
				f.mu.Unlock()
				if cfg["mode"] == "fail" {
					return errors.New("boom")
				}
				f.mu.Lock()
				f.mu.running++
				f.mu.maxRunning = max(f.mu.maxRunning, f.mu.running)
				f.mu.Unlock()
				defer func() {
					f.mu.Lock()
					f.mu.running--
					f.mu.Unlock()
				}()
				env.Running()
				<-ctx.Done()
				return ctx.Err()
			}), nil
		},
	}
}

func (f *fakeClass) lastPassword() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.mu.passwords) == 0 {
		return ""
	}
	return f.mu.passwords[len(f.mu.passwords)-1]
}

func (f *fakeClass) running() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.running
}

type taskFunc func(ctx context.Context, env Env) error

func (f taskFunc) Run(ctx context.Context, env Env) error { return f(ctx, env) }

// harness is an API and a runner over one store, as one agent.
type harness struct {
	t      *testing.T
	store  *testStore
	fake   *fakeClass
	srv    *httptest.Server
	store2 *memobj.Store
	runner *Runner
	cancel context.CancelFunc
	done   chan struct{}
}

func newHarness(t *testing.T) *harness { return newHarnessSweeping(t, -1) }

// newHarnessSweeping is newHarness whose runner sweeps secrets every
// sweep (negative: never).
func newHarnessSweeping(t *testing.T, sweep time.Duration) *harness {
	h := &harness{t: t, store: newTestStore(t), fake: &fakeClass{}, store2: memobj.New()}
	classes := Classes(h.fake.class())
	secrets := NewSecrets(h.store2)
	h.srv = httptest.NewServer(NewAPI(APIConfig{Store: h.store, Classes: classes, Secrets: secrets,
		Placed: func(string) (int32, string) { return 1, "agent-1:8083" }, Principal: func(*http.Request) string { return "User:alice" }}))
	t.Cleanup(h.srv.Close)
	r, err := NewRunner(Config{Store: h.store, Classes: classes, Secrets: secrets, Dir: t.TempDir(),
		Kafka: func() []kgo.Opt { return nil }, Owner: func(string) int32 { return 1 }, Self: 1, Worker: "agent-1:8083",
		RetryBackoff: 5 * time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond, RecheckInterval: 20 * time.Millisecond, SweepInterval: sweep})
	if err != nil {
		t.Fatal(err)
	}
	h.runner = r
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan struct{})
	go func() { defer close(h.done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-h.done })
	return h
}

// do sends a request and decodes its JSON answer into out (if not nil).
func (h *harness) do(method, path, body string, out any) int {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			h.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

func (h *harness) status(name string) Status {
	h.t.Helper()
	var st Status
	if code := h.do("GET", "/connectors/"+name+"/status", "", &st); code != 200 {
		h.t.Fatalf("status of %s: %d", name, code)
	}
	return st
}

func (h *harness) waitState(name, connector, task string) Status {
	h.t.Helper()
	var st Status
	h.store.waitFor(h.t, name+" "+connector+"/"+task, func() bool {
		st = h.status(name)
		return st.Connector.State == connector && len(st.Tasks) == 1 && st.Tasks[0].State == task
	})
	return st
}

type connectError struct {
	ErrorCode int    `json:"error_code"`
	Message   string `json:"message"`
}

// TestAPILifecycle: create, status transitions with a running task,
// pause, resume, restart, update, delete, through the REST API with a
// fake class, and Connect's answers on the way.
func TestAPILifecycle(t *testing.T) {
	h := newHarness(t)
	var info ConnectorInfo
	code := h.do("POST", "/connectors", `{"name":"pg","config":{"connector.class":"FakeSourceConnector","mode":"ok","tasks.max":2,"database.password":"s3cret"}}`, &info)
	if code != 201 || info.Name != "pg" || info.Type != KindSource || info.Config["database.password"] != Mask || info.Config["tasks.max"] != "2" || info.Config["name"] != "pg" {
		t.Fatalf("create: %d %+v", code, info)
	}
	var e connectError
	if code := h.do("POST", "/connectors", `{"name":"pg","config":{"connector.class":"FakeSourceConnector","mode":"ok"}}`, &e); code != 409 || e.ErrorCode != 409 || e.Message != "Connector pg already exists" {
		t.Fatalf("create again: %d %+v", code, e)
	}
	st := h.waitState("pg", "RUNNING", "RUNNING")
	if st.Name != "pg" || st.Type != "source" || st.Tasks[0].ID != 0 || st.Tasks[0].WorkerID != "agent-1:8083" || st.Connector.WorkerID != "agent-1:8083" {
		t.Fatalf("status: %+v", st)
	}
	if got := h.fake.lastPassword(); got != "s3cret" {
		t.Fatalf("the task saw password %q, want the one given", got)
	}

	var names []string
	if code := h.do("GET", "/connectors", "", &names); code != 200 || len(names) != 1 || names[0] != "pg" {
		t.Fatalf("list: %d %v", code, names)
	}
	var expanded map[string]struct {
		Status *Status        `json:"status"`
		Info   *ConnectorInfo `json:"info"`
	}
	if code := h.do("GET", "/connectors?expand=status&expand=info", "", &expanded); code != 200 || expanded["pg"].Status == nil ||
		expanded["pg"].Info == nil || expanded["pg"].Status.Tasks[0].State != "RUNNING" || expanded["pg"].Info.Config["database.password"] != Mask {
		t.Fatalf("expanded list: %d %+v", code, expanded)
	}
	var cfg map[string]string
	if code := h.do("GET", "/connectors/pg/config", "", &cfg); code != 200 || cfg["database.password"] != Mask || cfg["mode"] != "ok" {
		t.Fatalf("config: %d %v", code, cfg)
	}
	var tasks []struct {
		ID TaskID `json:"id"`
	}
	if code := h.do("GET", "/connectors/pg/tasks", "", &tasks); code != 200 || len(tasks) != 1 || tasks[0].ID != (TaskID{"pg", 0}) {
		t.Fatalf("tasks: %d %+v", code, tasks)
	}
	var ts TaskStatus
	if code := h.do("GET", "/connectors/pg/tasks/0/status", "", &ts); code != 200 || ts.State != "RUNNING" {
		t.Fatalf("task status: %d %+v", code, ts)
	}
	if code := h.do("GET", "/connectors/pg/tasks/1/status", "", &e); code != 404 || e.ErrorCode != 404 {
		t.Fatalf("task 1 status: %d %+v", code, e)
	}

	// Pause stops the task; resume starts it again.
	if code := h.do("PUT", "/connectors/pg/pause", "", nil); code != 202 {
		t.Fatalf("pause: %d", code)
	}
	h.waitState("pg", "PAUSED", "PAUSED")
	h.store.waitFor(t, "the task to stop", func() bool { return h.fake.running() == 0 })
	if code := h.do("PUT", "/connectors/pg/resume", "", nil); code != 202 {
		t.Fatalf("resume: %d", code)
	}
	h.store.waitFor(t, "the task to run again", func() bool { return h.fake.running() == 1 })
	h.waitState("pg", "RUNNING", "RUNNING")

	// A restart raises the generation: the status is about the new task.
	before := h.connector("pg").Generation
	if code := h.do("POST", "/connectors/pg/restart", "", nil); code != 204 {
		t.Fatalf("restart: %d", code)
	}
	if g := h.connector("pg").Generation; g != before+1 {
		t.Fatalf("generation %d after restart, want %d", g, before+1)
	}
	h.waitState("pg", "RUNNING", "RUNNING")
	// onlyFailed leaves a running task alone, and answers the status.
	if code := h.do("POST", "/connectors/pg/restart?includeTasks=true&onlyFailed=true", "", &st); code != 202 || st.Tasks[0].State != "RUNNING" {
		t.Fatalf("restart onlyFailed: %d %+v", code, st)
	}
	if g := h.connector("pg").Generation; g != before+1 {
		t.Fatalf("onlyFailed restarted a running task: generation %d", g)
	}
	if code := h.do("POST", "/connectors/pg/tasks/0/restart", "", nil); code != 204 {
		t.Fatalf("task restart: %d", code)
	}
	if code := h.do("POST", "/connectors/pg/tasks/3/restart", "", &e); code != 404 {
		t.Fatalf("task 3 restart: %d", code)
	}

	// PUT config: the same config with the mask is 200 and changes
	// nothing; a failing mode fails the task with its trace.
	gen := h.connector("pg").Generation
	if code := h.do("PUT", "/connectors/pg/config", `{"connector.class":"FakeSourceConnector","mode":"ok","tasks.max":"2","database.password":"[hidden]","name":"pg"}`, &info); code != 200 {
		t.Fatalf("put same config: %d", code)
	}
	if g := h.connector("pg").Generation; g != gen {
		t.Fatalf("an unchanged config (secret masked) raised the generation %d -> %d", gen, g)
	}
	if code := h.do("PUT", "/connectors/pg/config", `{"connector.class":"FakeSourceConnector","mode":"fail","database.password":"[hidden]"}`, &info); code != 200 {
		t.Fatalf("put failing config: %d", code)
	}
	st = h.waitState("pg", "RUNNING", "FAILED")
	if st.Tasks[0].Trace != "boom" {
		t.Fatalf("trace %q, want boom", st.Tasks[0].Trace)
	}
	if got := h.fake.lastPassword(); got != "s3cret" {
		t.Fatalf("after a masked PUT the task saw password %q, want the stored one", got)
	}
	// A new name by PUT is 201.
	if code := h.do("PUT", "/connectors/other/config", `{"connector.class":"FakeSourceConnector","mode":"ok"}`, &info); code != 201 || info.Name != "other" {
		t.Fatalf("put new: %d %+v", code, info)
	}

	if code := h.do("DELETE", "/connectors/pg", "", nil); code != 204 {
		t.Fatalf("delete: %d", code)
	}
	if code := h.do("GET", "/connectors/pg/status", "", &e); code != 404 || e.ErrorCode != 404 || e.Message != "Connector pg not found" {
		t.Fatalf("status after delete: %d %+v", code, e)
	}
	if code := h.do("DELETE", "/connectors/pg", "", &e); code != 404 {
		t.Fatalf("delete again: %d", code)
	}
	// Its series go with it (Class.Forget), once; "other" keeps its.
	h.store.waitFor(t, "pg forgotten", func() bool {
		h.fake.mu.Lock()
		defer h.fake.mu.Unlock()
		return slices.Contains(h.fake.mu.forgotten, "pg")
	})
	h.fake.mu.Lock()
	if !slices.Equal(h.fake.mu.forgotten, []string{"pg"}) {
		t.Errorf("forgotten %v, want [pg]: a restart or reconfiguration is not a goodbye", h.fake.mu.forgotten)
	}
	h.fake.mu.Unlock()
	if h.store.logHolds("s3cret") {
		t.Fatal("the log holds the secret's value")
	}
	h.fake.mu.Lock()
	defer h.fake.mu.Unlock()
	if h.fake.mu.maxRunning != 1 {
		t.Fatalf("%d runs of one connector overlapped, want 1 at a time", h.fake.mu.maxRunning)
	}
}

func (h *harness) connector(name string) meta.Connector {
	h.t.Helper()
	v := h.store.View()
	defer v.Close()
	c, ok, err := v.Connector(name)
	if err != nil || !ok {
		h.t.Fatalf("connector %s: %v %v", name, ok, err)
	}
	return c
}

// TestAPIRefusals: Connect's 400 and 404 answers, in its shape.
func TestAPIRefusals(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		method, path, body string
		code               int
		msg                string
	}{
		{"POST", "/connectors", `{"name":"x","config":{"mode":"ok"}}`, 400, "contains no connector type"},
		{"POST", "/connectors", `{"name":"x","config":{"connector.class":"Nope"}}`, 400, "Failed to find any class"},
		{"POST", "/connectors", `{"name":"x","config":{"connector.class":"FakeSourceConnector","mode":"bad"}}`, 400, "mode must be ok or fail"},
		{"POST", "/connectors", `{"name":"x","config":{"connector.class":"FakeSourceConnector","mode":"ok","name":"y"}}`, 400, "doesn't match"},
		{"POST", "/connectors", `{"name":"","config":{"connector.class":"FakeSourceConnector","mode":"ok"}}`, 400, "Connector name is empty"},
		{"POST", "/connectors", `{"name":"x","config":{"connector.class":"FakeSourceConnector","mode":"ok","database.password":"[hidden]"}}`, 400, "none is stored"},
		{"POST", "/connectors", `not json`, 400, "not valid JSON"},
		{"GET", "/connectors/missing", "", 404, "Connector missing not found"},
		{"GET", "/connectors/missing/config", "", 404, "Connector missing not found"},
		{"PUT", "/connectors/missing/pause", "", 404, "Connector missing not found"},
		{"POST", "/connectors/missing/restart", "", 404, "Connector missing not found"},
		{"DELETE", "/connectors/missing", "", 404, "Connector missing not found"},
		{"GET", "/no/such/path", "", 404, "HTTP 404 Not Found"},
	} {
		var e connectError
		if code := h.do(c.method, c.path, c.body, &e); code != c.code || e.ErrorCode != c.code || !strings.Contains(e.Message, c.msg) {
			t.Errorf("%s %s %s: %d %+v, want %d %q", c.method, c.path, c.body, code, e, c.code, c.msg)
		}
	}
}

// TestAPIPlugins: the classes, and validation in Connect's shape.
func TestAPIPlugins(t *testing.T) {
	h := newHarness(t)
	var plugins []struct{ Class, Type string }
	if code := h.do("GET", "/connector-plugins", "", &plugins); code != 200 || len(plugins) != 1 || plugins[0].Class != fakeClassName || plugins[0].Type != "source" {
		t.Fatalf("plugins: %d %+v", code, plugins)
	}
	var v struct {
		Name       string `json:"name"`
		ErrorCount int    `json:"error_count"`
		Configs    []struct {
			Value struct {
				Name   string   `json:"name"`
				Value  string   `json:"value"`
				Errors []string `json:"errors"`
			} `json:"value"`
		} `json:"configs"`
	}
	if code := h.do("PUT", "/connector-plugins/FakeSourceConnector/config/validate", `{"mode":"bad","database.password":"pw"}`, &v); code != 200 || v.ErrorCount != 1 || v.Name != fakeClassName {
		t.Fatalf("validate bad: %d %+v", code, v)
	}
	for _, c := range v.Configs {
		if c.Value.Name == "database.password" && c.Value.Value != Mask {
			t.Errorf("validate shows the password: %+v", c.Value)
		}
		if c.Value.Name == "connector.class" && len(c.Value.Errors) != 1 {
			t.Errorf("connector.class errors %v, want the class's", c.Value.Errors)
		}
	}
	if code := h.do("PUT", "/connector-plugins/"+fakeClassName+"/config/validate", `{"mode":"ok"}`, &v); code != 200 || v.ErrorCount != 0 {
		t.Fatalf("validate ok: %d %+v", code, v)
	}
	var root map[string]string
	if code := h.do("GET", "/", "", &root); code != 200 || root["version"] != Version {
		t.Fatalf("root: %d %v", code, root)
	}
}

// TestFailedStatusOnce: a task failing the same way again and again
// writes FAILED once, and keeps being retried.
func TestFailedStatusOnce(t *testing.T) {
	h := newHarness(t)
	if code := h.do("POST", "/connectors", `{"name":"f","config":{"connector.class":"FakeSourceConnector","mode":"fail"}}`, nil); code != 201 {
		t.Fatalf("create: %d", code)
	}
	h.waitState("f", "RUNNING", "FAILED")
	written := h.store.statuses(t)
	h.store.waitFor(t, "several retries", func() bool {
		h.fake.mu.Lock()
		defer h.fake.mu.Unlock()
		return len(h.fake.mu.passwords) >= 4
	})
	if got := h.store.statuses(t); got != written {
		t.Fatalf("%d more commands written while the task failed the same way", got-written)
	}
	if f, r := metricValue(t, h.runner.Metrics().failures), metricValue(t, h.runner.Metrics().restarts); f < 4 || r < 3 {
		t.Fatalf("failures %v, restarts %v: want at least 4 and 3", f, r)
	}
	h.store.waitFor(t, "the failed connector counted", func() bool {
		return metricValue(t, h.runner.Metrics().owned.WithLabelValues("failed")) == 1
	})
}

// TestSecretSweep: a secret no connector refers to is deleted at the
// second sweep that finds it so, not the first (its PUT may not have
// proposed yet); a referenced one stays.
func TestSecretSweep(t *testing.T) {
	ctx := context.Background()
	st := memobj.New()
	s := NewSecrets(st)
	class := (&fakeClass{}).class()
	sealed, err := s.Seal(ctx, "a", class, map[string]string{"database.password": "one", "mode": "ok"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !IsRef(sealed["database.password"]) || sealed["mode"] != "ok" {
		t.Fatalf("sealed %v", sealed)
	}
	again, err := s.Seal(ctx, "a", class, map[string]string{"database.password": "one"}, sealed)
	if err != nil || again["database.password"] != sealed["database.password"] {
		t.Fatalf("an unchanged secret got a new reference: %v %v", again, err)
	}
	orphan, err := s.Seal(ctx, "b", class, map[string]string{"database.password": "two"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{refKey(sealed["database.password"]): true}
	var sw sweeper
	if n, err := sw.sweep(ctx, s, live); err != nil || n != 0 {
		t.Fatalf("first sweep deleted %d, %v", n, err)
	}
	if n, err := sw.sweep(ctx, s, live); err != nil || n != 1 {
		t.Fatalf("second sweep deleted %d, %v; want the orphan", n, err)
	}
	if _, err := s.Resolve(ctx, orphan); err == nil {
		t.Fatal("the orphan secret is still there")
	}
	if got, err := s.Resolve(ctx, sealed); err != nil || got["database.password"] != "one" {
		t.Fatalf("the live secret: %v %v", got, err)
	}
}

// metricValue reads a counter's or gauge's value.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// TestStatusOfMovedTask: a status written by an agent the connector is
// no longer placed on reads UNASSIGNED on the placed agent, not the old
// agent's RUNNING; paused reads PAUSED.
func TestStatusOfMovedTask(t *testing.T) {
	classes := Classes((&fakeClass{}).class())
	c := meta.Connector{Name: "pg", State: meta.ConnectorRunning, Generation: 2, Config: map[string]string{"connector.class": "FakeSourceConnector"},
		Task: meta.ConnectorTask{Generation: 2, State: meta.TaskRunning, Node: 2, Worker: "agent-2:8083"}}
	on := func(node int32, w string) func(string) (int32, string) {
		return func(string) (int32, string) { return node, w }
	}
	for _, tc := range []struct {
		name          string
		c             meta.Connector
		placed        func(string) (int32, string)
		state, worker string
	}{
		{"on its agent", c, on(2, "agent-2:8083"), "RUNNING", "agent-2:8083"},
		{"moved", c, on(1, "agent-1:8083"), "UNASSIGNED", "agent-1:8083"},
		{"no placement known", c, nil, "RUNNING", "agent-2:8083"},
		{"an older generation's", func() meta.Connector { c := c; c.Generation = 3; return c }(), on(2, "agent-2:8083"), "UNASSIGNED", "agent-2:8083"},
		{"paused", func() meta.Connector { c := c; c.State = meta.ConnectorPaused; return c }(), on(1, "agent-1:8083"), "PAUSED", "agent-1:8083"},
	} {
		st := StatusOf(tc.c, classes, tc.placed)
		if st.Tasks[0].State != tc.state || st.Tasks[0].WorkerID != tc.worker || st.Connector.WorkerID != tc.worker || st.Type != KindSource {
			t.Errorf("%s: %+v, want task %s on %s", tc.name, st, tc.state, tc.worker)
		}
	}
}

// TestRunnerSweepsSecrets: a deleted connector's secret, and a replaced
// password, leave the object store; the live one stays.
func TestRunnerSweepsSecrets(t *testing.T) {
	h := newHarnessSweeping(t, 10*time.Millisecond)
	for _, name := range []string{"gone", "kept"} {
		if code := h.do("POST", "/connectors", `{"name":"`+name+`","config":{"connector.class":"FakeSourceConnector","mode":"ok","database.password":"pw-`+name+`"}}`, nil); code != 201 {
			t.Fatalf("create %s: %d", name, code)
		}
	}
	if code := h.do("PUT", "/connectors/kept/config", `{"connector.class":"FakeSourceConnector","mode":"ok","database.password":"pw-new"}`, nil); code != 200 {
		t.Fatalf("new password: %d", code)
	}
	if code := h.do("DELETE", "/connectors/gone", "", nil); code != 204 {
		t.Fatalf("delete: %d", code)
	}
	live := refKey(h.connector("kept").Config["database.password"])
	h.store.waitFor(t, "the unreferenced secrets swept", func() bool {
		objs, err := h.store2.List(context.Background(), SecretPrefix)
		return err == nil && len(objs) == 1 && objs[0].Key == live
	})
}
