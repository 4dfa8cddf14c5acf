package compat

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// KgoModule is the franz-go module whose pkg/kgo suite is run, at the
// version Strand's go.mod pins.
const KgoModule = "github.com/twmb/franz-go"

// Bounds on the kgo suite.
const (
	// kgoOutputLines is how many output lines are kept per failing or
	// skipped test: a failing TestTxnEtl logs one line per record.
	kgoOutputLines = 8
	// kgoRetryPasses bounds the reruns of tests a timed-out or crashed
	// process never started.
	kgoRetryPasses = 2
	// kgoBuildTimeout bounds copying and compiling the suite.
	kgoBuildTimeout = 10 * time.Minute
)

// DefaultKgoIsolated are the tests run each in a process of its own:
// they share a semaphore, so a TestTxnEtl that hangs until its timeout
// (as it does without transactions) would hold TestGroupETL back too.
var DefaultKgoIsolated = []string{"TestGroupETL", "TestTxnEtl"}

// KgoOptions configures one run of franz-go's pkg/kgo integration suite.
type KgoOptions struct {
	// Seeds is KGO_SEEDS: the agent's address.
	Seeds string
	// Records is KGO_TEST_RECORDS (the suite's default is 500,000).
	Records int
	// Run selects top-level tests, as -run does; empty runs them all.
	Run string
	// Timeout bounds each test process (-test.timeout).
	Timeout time.Duration
	// Isolated tests run each in a process of their own, concurrently
	// with the rest; nil means DefaultKgoIsolated.
	Isolated []string
	// Env is extra environment for every test process, such as
	// KGO_TEST_SCRAM and KGO_TEST_SCRAM_SEEDS, which un-skip the suite's
	// SCRAM tests. The commands in the report show it with passwords
	// masked.
	Env []string
	// Variants are extra runs of a few tests with other environment,
	// alongside the main run.
	Variants []KgoVariant
	// WorkDir receives the module copy and the test binary.
	WorkDir string
	// Logf, if set, reports progress.
	Logf func(format string, args ...any)
}

// KgoVariant is one extra run of some of the suite's tests with its own
// environment (another SCRAM mechanism, seeds behind TLS): it fills the
// cell of Cap in the franz-go row.
type KgoVariant struct {
	Name  string
	Cap   Capability
	Tests []string
	// Env goes after the main run's environment and Options.Env, so it
	// may override KGO_SEEDS.
	Env []string
}

// KgoVariantReport is how one variant's tests ended.
type KgoVariantReport struct {
	Name  string     `json:"name"`
	Cap   Capability `json:"capability"`
	Tests []KgoTest  `json:"tests"`
}

// KgoTestStatus is one test's outcome.
type KgoTestStatus string

const (
	KgoPass KgoTestStatus = "pass"
	KgoFail KgoTestStatus = "fail"
	KgoSkip KgoTestStatus = "skip"
)

// KgoTest is one top-level test of the suite.
type KgoTest struct {
	Name   string        `json:"name"`
	Status KgoTestStatus `json:"status"`
	// Broker: the test reaches the broker through KGO_SEEDS (found by
	// reading the test source). Others are unit tests or bring their own
	// in-process fake broker, and pass whatever the agent does.
	Broker  bool    `json:"broker"`
	Elapsed float64 `json:"elapsed_s"`
	// Output holds the first lines a failing or skipped test printed.
	Output      []string     `json:"output,omitempty"`
	OutputLines int          `json:"output_lines,omitempty"`
	SubPassed   int          `json:"subtests_passed,omitempty"`
	SubFailed   int          `json:"subtests_failed,omitempty"`
	SubSkipped  int          `json:"subtests_skipped,omitempty"`
	Caps        []Capability `json:"capabilities,omitempty"`
}

// KgoCounts tallies tests by outcome.
type KgoCounts struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// Ran is the tests that passed or failed.
func (c KgoCounts) Ran() int { return c.Passed + c.Failed }

// Percent is the share of tests that ran which passed.
func (c KgoCounts) Percent() float64 {
	if c.Ran() == 0 {
		return 0
	}
	return 100 * float64(c.Passed) / float64(c.Ran())
}

func (c *KgoCounts) add(s KgoTestStatus) {
	switch s {
	case KgoPass:
		c.Passed++
	case KgoFail:
		c.Failed++
	case KgoSkip:
		c.Skipped++
	}
}

// KgoReport is the outcome of one suite run.
type KgoReport struct {
	Module   string        `json:"module"`
	Version  string        `json:"version"`
	Records  int           `json:"records"`
	Run      string        `json:"run,omitempty"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	All      KgoCounts     `json:"all"`
	Broker   KgoCounts     `json:"broker"`
	Unit     KgoCounts     `json:"unit"`
	Tests    []KgoTest     `json:"tests"`
	Commands []string      `json:"commands"`
	// Variants are the extra runs' tests, outside the counts above.
	Variants []KgoVariantReport `json:"variants,omitempty"`
}

// Test returns the named test, or nil.
func (r *KgoReport) Test(name string) *KgoTest {
	for i := range r.Tests {
		if r.Tests[i].Name == name {
			return &r.Tests[i]
		}
	}
	return nil
}

// WriteSummary prints the counts and every failing test with the first
// lines of its output.
func (r *KgoReport) WriteSummary(w io.Writer) {
	fmt.Fprintf(w, "franz-go %s pkg/kgo suite (KGO_TEST_RECORDS=%d", r.Version, r.Records)
	if r.Run != "" {
		fmt.Fprintf(w, ", -run %s", r.Run)
	}
	fmt.Fprintf(w, ", %v):\n", r.Elapsed.Round(time.Second))
	line := func(what string, c KgoCounts) {
		fmt.Fprintf(w, "  %-28s %d passed / %d run (%.1f%%), %d skipped\n", what, c.Passed, c.Ran(), c.Percent(), c.Skipped)
	}
	line("all top-level tests", r.All)
	line("tests that use the broker", r.Broker)
	line("unit / in-process tests", r.Unit)
	for _, t := range r.Tests {
		if t.Status != KgoFail {
			continue
		}
		kind := "unit"
		if t.Broker {
			kind = "broker"
		}
		fmt.Fprintf(w, "  FAIL %s (%s, %.1fs, %d/%d subtests failed)\n", t.Name, kind, t.Elapsed, t.SubFailed, t.SubPassed+t.SubFailed)
		for _, l := range t.Output {
			fmt.Fprintf(w, "       %s\n", l)
		}
		if t.OutputLines > len(t.Output) {
			fmt.Fprintf(w, "       ... %d more lines\n", t.OutputLines-len(t.Output))
		}
	}
	// The SCRAM-gated tests are named whatever their outcome: that they
	// ran at all, rather than skipped, is what a reader looks for.
	for _, n := range kgoSCRAMTests {
		if t := r.Test(n); t != nil && t.Status != KgoFail {
			fmt.Fprintf(w, "  %s %s (main run, %.1fs)\n", strings.ToUpper(string(t.Status)), t.Name, t.Elapsed)
		}
	}
	for _, v := range r.Variants {
		for _, t := range v.Tests {
			fmt.Fprintf(w, "  %s %s (%s run, %.1fs)\n", strings.ToUpper(string(t.Status)), t.Name, v.Name, t.Elapsed)
			if t.Status == KgoPass {
				continue
			}
			for _, l := range t.Output {
				fmt.Fprintf(w, "       %s\n", l)
			}
		}
	}
}

// kgoCapTests maps capability columns to the broker tests of the suite
// that exercise them. kgo produces idempotently and snappy-compressed by
// default, so its ETL chains count for those columns too.
var kgoCapTests = map[Capability][]string{
	Produce: {"TestClient_Produce", "TestClient_ProduceLargeMessages", "TestIssue769", "TestIssue831",
		"TestIssueProduceSyncManualPartitionNegativeDoesNotPanic"},
	Consume: {"TestIssue325", "TestConsumeTopicRetrieval", "TestConsumeTopicRetrieval_Many", "TestConsumeRegex",
		"TestIssue337", "TestDirectPartitionPurge", "TestIssue434", "TestPauseIssue489", "TestPauseIssueOct2023",
		"TestIssue523", "TestIssue648", "TestIssue810", "TestIssue865", "TestIssueFetchLargerThanBrokerMaxReadBytes",
		"TestLookbackMilli"},
	Gzip:         {"TestConsumeMaxDecompressBatchBytes"},
	Snappy:       {"TestGroupETL"},
	Groups:       {"TestGroupETL", "TestGroupSimple", "Test848RegexBrokerResolves"},
	OffsetCommit: {"TestGroupETL"},
	Idempotence:  {"TestGroupETL", "TestClient_Produce"},
	Transactions: {"TestTxnEtl"},
	Admin:        {"TestAddRemovePartitions", "TestPing", "TestUnknownGroupOffsetFetchPinned"},
	ShareGroups:  kgoShareTests,
	// The main run gets KGO_TEST_SCRAM with SHA-512 (RunMatrix); the
	// other mechanism and TLS are variants.
	ScramSHA512: kgoSCRAMTests,
}

// kgoShareTests are the suite's share group tests (KIP-932), which skip
// unless the broker serves ShareFetch and ShareAcknowledge v2.
var kgoShareTests = []string{"TestShareGroup", "TestShareGroupETL", "TestShareGroupAckOnClose", "TestShareGroupOffsetsAdmin"}

// kgoSCRAMTests are the suite's tests gated on KGO_TEST_SCRAM and
// KGO_TEST_SCRAM_SEEDS: one authenticates and asks for metadata, one
// must be refused with a wrong password.
var kgoSCRAMTests = []string{"TestSCRAMAuth", "TestSCRAMAuthBadCredentials"}

// Row turns the report into the franz-go row: a cell per capability
// with mapped tests that ran. A cell fails if any of its tests failed.
func (r *KgoReport) Row() Row {
	row := Row{Client: "franz-go (kgo suite)", Version: r.Version, Elapsed: r.Elapsed}
	for _, cp := range Capabilities {
		names := kgoCapTests[cp]
		var passed, failed, skipped []string
		for _, n := range names {
			t := r.Test(n)
			if t == nil {
				continue
			}
			switch t.Status {
			case KgoPass:
				passed = append(passed, n)
			case KgoFail:
				failed = append(failed, n)
			case KgoSkip:
				skipped = append(skipped, n)
			}
		}
		switch {
		case len(failed) > 0:
			row.set(cp, Cell{Status: Fail, Detail: fmt.Sprintf("%d of %d tests failed: %s", len(failed), len(failed)+len(passed), strings.Join(failed, ", "))})
		case len(passed) > 0:
			row.set(cp, Cell{Status: Pass, Detail: strings.Join(passed, ", ")})
		case len(skipped) > 0:
			t := r.Test(skipped[0])
			why := ""
			if len(t.Output) > 0 {
				why = ": " + t.Output[0]
			}
			row.set(cp, Cell{Status: NA, Detail: "skipped by the suite" + why})
		}
	}
	for _, v := range r.Variants {
		row.set(v.Cap, v.cell())
	}
	return row
}

// cell is the variant's verdict: every test must have passed. A variant
// runs only with the environment its tests need, so a skip is a failure
// too (the suite did not see what the runner set).
func (v KgoVariantReport) cell() Cell {
	var passed, bad []string
	for _, t := range v.Tests {
		if t.Status == KgoPass {
			passed = append(passed, t.Name)
			continue
		}
		why := string(t.Status)
		if len(t.Output) > 0 {
			why += ": " + t.Output[0]
		}
		bad = append(bad, t.Name+" "+why)
	}
	switch {
	case len(bad) > 0:
		return Cell{Status: Fail, Detail: v.Name + " run: " + strings.Join(bad, "; ")}
	case len(passed) == 0:
		return Cell{Status: Fail, Detail: v.Name + " run: no test ran"}
	}
	return Cell{Status: Pass, Detail: v.Name + " run: " + strings.Join(passed, ", ")}
}

// moduleInfo is what `go list -m -json` says of a module.
type moduleInfo struct {
	Path    string
	Version string
	Dir     string
}

// pinnedModule finds path at the version the current module requires,
// downloaded into the module cache.
func pinnedModule(ctx context.Context, path string) (moduleInfo, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-json", path)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%v: %s", err, ee.Stderr)
		}
		return moduleInfo{}, fmt.Errorf("go list -m %s: %w", path, err)
	}
	var m moduleInfo
	if err := json.Unmarshal(out, &m); err != nil {
		return moduleInfo{}, fmt.Errorf("go list -m %s: %w", path, err)
	}
	if m.Dir == "" {
		dl := exec.CommandContext(ctx, "go", "mod", "download", "-json", path+"@"+m.Version)
		out, err := dl.Output()
		if err != nil {
			return moduleInfo{}, fmt.Errorf("go mod download %s@%s: %w", path, m.Version, err)
		}
		if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
			return moduleInfo{}, fmt.Errorf("go mod download %s@%s: no directory (%v)", path, m.Version, err)
		}
	}
	return m, nil
}

// copyTree copies the regular files under src to dst, writable: the
// module cache is read-only and `go test` wants to write beside the
// sources.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// kgoSuite is the compiled suite, ready to run.
type kgoSuite struct {
	mod    moduleInfo
	pkgDir string // the copy's pkg/kgo
	binary string
	tests  []string        // top-level Test functions, in -test.list order
	broker map[string]bool // from brokerTests
}

// buildKgoSuite copies the pinned franz-go into workDir, compiles the
// pkg/kgo test binary, lists its tests and finds which use the broker.
func buildKgoSuite(ctx context.Context, workDir string) (*kgoSuite, error) {
	ctx, cancel := context.WithTimeout(ctx, kgoBuildTimeout)
	defer cancel()
	mod, err := pinnedModule(ctx, KgoModule)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(workDir, "franz-go@"+mod.Version)
	if err := copyTree(mod.Dir, root); err != nil {
		return nil, fmt.Errorf("copying %s: %w", mod.Dir, err)
	}
	s := &kgoSuite{mod: mod, pkgDir: filepath.Join(root, "pkg", "kgo"), binary: filepath.Join(workDir, "kgo.test")}
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", s.binary, ".")
	build.Dir = s.pkgDir
	// The copy is a module of its own: no workspace, and go.sum may be
	// completed from the module cache.
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"))
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go test -c in %s's pkg/kgo: %v\n%s", mod.Version, err, out)
	}
	list := exec.CommandContext(ctx, s.binary, "-test.list", "^Test")
	list.Dir = s.pkgDir
	out, err := list.Output()
	if err != nil {
		return nil, fmt.Errorf("kgo.test -test.list: %v", err)
	}
	for _, l := range strings.Fields(string(out)) {
		if strings.HasPrefix(l, "Test") {
			s.tests = append(s.tests, l)
		}
	}
	if len(s.tests) == 0 {
		return nil, errors.New("kgo.test -test.list listed no tests")
	}
	s.broker, err = brokerTests(s.pkgDir)
	if err != nil {
		return nil, fmt.Errorf("reading the kgo test sources: %w", err)
	}
	return s, nil
}

// RunKgo runs franz-go's pkg/kgo integration suite against opts.Seeds
// and reports every top-level test.
func RunKgo(ctx context.Context, opts KgoOptions) (*KgoReport, error) {
	start := time.Now()
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if opts.Isolated == nil {
		opts.Isolated = DefaultKgoIsolated
	}
	s, err := buildKgoSuite(ctx, opts.WorkDir)
	if err != nil {
		return nil, err
	}
	logf("kgo: %s %s compiled, %d tests", s.mod.Path, s.mod.Version, len(s.tests))
	wanted := s.tests
	if opts.Run != "" {
		re, err := regexp.Compile(opts.Run)
		if err != nil {
			return nil, fmt.Errorf("kgo run pattern: %w", err)
		}
		wanted = slices.DeleteFunc(slices.Clone(s.tests), func(n string) bool { return !re.MatchString(n) })
	}
	rep := &KgoReport{Module: s.mod.Path, Version: s.mod.Version, Records: opts.Records, Run: opts.Run}
	var commandsMu sync.Mutex
	command := func(env, args []string) {
		commandsMu.Lock()
		defer commandsMu.Unlock()
		base := []string{"KGO_SEEDS=" + opts.Seeds, "KGO_TEST_RF=1", "KGO_TEST_RECORDS=" + strconv.Itoa(opts.Records)}
		rep.Commands = append(rep.Commands, maskedEnv(mergeEnv(base, env))+"go "+strings.Join(args, " "))
	}
	var variants sync.WaitGroup
	rep.Variants = make([]KgoVariantReport, len(opts.Variants))
	for i, v := range opts.Variants {
		env := mergeEnv(opts.Env, v.Env)
		args := s.args(v.Tests, opts.Timeout)
		command(env, args)
		variants.Go(func() {
			results := newKgoResults()
			logf("kgo: running the %s variant", v.Name)
			err := s.run(ctx, -1-i, args, env, opts, results)
			logf("kgo: %s variant done (%v)", v.Name, err)
			vr := KgoVariantReport{Name: v.Name, Cap: v.Cap}
			for _, n := range v.Tests {
				t := results.test(n)
				t.Broker = s.broker[n]
				vr.Tests = append(vr.Tests, t)
			}
			rep.Variants[i] = vr
		})
	}
	defer variants.Wait()
	results := newKgoResults()
	pending := wanted
	proc := 0
	for pass := 0; len(pending) > 0 && pass <= kgoRetryPasses; pass++ {
		var groups [][]string
		var rest []string
		for _, n := range pending {
			if slices.Contains(opts.Isolated, n) {
				groups = append(groups, []string{n})
			} else {
				rest = append(rest, n)
			}
		}
		if len(rest) > 0 {
			groups = append(groups, rest)
		}
		var wg sync.WaitGroup
		for _, g := range groups {
			proc++
			proc := proc // each goroutine keeps its own id
			args := s.args(g, opts.Timeout)
			command(opts.Env, args)
			wg.Go(func() {
				logf("kgo: running %d tests (pass %d)", len(g), pass+1)
				err := s.run(ctx, proc, args, opts.Env, opts, results)
				logf("kgo: %d tests done (%v)", len(g), err)
			})
		}
		wg.Wait()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		pending = slices.DeleteFunc(slices.Clone(pending), results.started)
	}
	for _, n := range wanted {
		t := results.test(n)
		t.Broker = s.broker[n]
		for cp, names := range kgoCapTests {
			if slices.Contains(names, n) {
				t.Caps = append(t.Caps, cp)
			}
		}
		slices.Sort(t.Caps)
		rep.Tests = append(rep.Tests, t)
		rep.All.add(t.Status)
		if t.Broker {
			rep.Broker.add(t.Status)
		} else {
			rep.Unit.add(t.Status)
		}
	}
	variants.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// args is the go command line running tests under test2json.
func (s *kgoSuite) args(tests []string, timeout time.Duration) []string {
	return []string{"tool", "test2json", "-t", "-p", "kgo", s.binary,
		"-test.v=test2json", "-test.count=1", "-test.run", anchored(tests),
		"-test.timeout", timeout.String()}
}

// mergeEnv is base with over's assignments replacing those of the same
// names, so a printed command sets each variable once.
func mergeEnv(base, over []string) []string {
	out := slices.DeleteFunc(slices.Clone(base), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.ContainsFunc(over, func(o string) bool { return strings.HasPrefix(o, name+"=") })
	})
	return append(out, over...)
}

// maskedEnv prints env as shell assignments followed by a space, with
// the password of KGO_TEST_SCRAM (user:password:bits) masked: the
// commands are printed and written to the JSON.
func maskedEnv(env []string) string {
	var b strings.Builder
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "KGO_TEST_SCRAM="); ok {
			if user, rest, ok := strings.Cut(v, ":"); ok {
				_, bits, _ := strings.Cut(rest, ":")
				kv = "KGO_TEST_SCRAM=" + user + ":***:" + bits
			}
		}
		b.WriteString(kv + " ")
	}
	return b.String()
}

// anchored is a -test.run pattern matching exactly the top-level names
// (and all their subtests).
func anchored(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = regexp.QuoteMeta(n)
	}
	return "^(" + strings.Join(q, "|") + ")$"
}

// run runs the test binary once under test2json and feeds its events to
// results.
func (s *kgoSuite) run(ctx context.Context, proc int, args, env []string, opts KgoOptions, results *kgoResults) error {
	// The process's own timeout ends it; this one only guards a hang
	// of test2json itself.
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = s.pkgDir
	cmd.Env = append(os.Environ(),
		"KGO_SEEDS="+opts.Seeds,
		"KGO_TEST_RF=1",
		"KGO_TEST_RECORDS="+strconv.Itoa(opts.Records),
		"KGO_LOG_LEVEL=none",
	)
	cmd.Env = append(cmd.Env, env...)
	ownProcessGroup(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr := newTailWriter(4 << 10)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	parseErr := results.consume(proc, stdout)
	waitErr := cmd.Wait()
	// Tests still running when the process ended got no verdict.
	results.endProcess(proc, fmt.Sprintf("did not finish: the test process ended (%v) while it ran", waitErr))
	if parseErr != nil {
		return parseErr
	}
	return waitErr
}

// testEvent is one line of test2json output.
type testEvent struct {
	Action  string
	Test    string
	Elapsed float64
	Output  string
}

// kgoResults gathers test2json events of one or more processes.
type kgoResults struct {
	mu struct {
		sync.Mutex
		tests map[string]*KgoTest
		// running holds the top-level tests started and not ended, with
		// the process running them.
		running map[string]runState
	}
}

// runState is where a started test is: which process runs it, and
// whether it is active or paused by t.Parallel.
type runState struct {
	proc   int
	active bool
}

func newKgoResults() *kgoResults {
	r := &kgoResults{}
	r.mu.tests = make(map[string]*KgoTest)
	r.mu.running = make(map[string]runState)
	return r
}

// consume reads test2json events of process proc from rd until EOF.
func (r *kgoResults) consume(proc int, rd io.Reader) error {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var ev testEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue // a line the binary printed outside a test
		}
		r.add(proc, ev)
	}
	return sc.Err()
}

func (r *kgoResults) add(proc int, ev testEvent) {
	if ev.Test == "" {
		return
	}
	top, sub, isSub := strings.Cut(ev.Test, "/")
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.mu.tests[top]
	if t == nil {
		t = &KgoTest{Name: top}
		r.mu.tests[top] = t
	}
	switch ev.Action {
	case "run":
		if !isSub {
			r.mu.running[top] = runState{proc: proc, active: true}
			// A rerun of a test that never finished starts afresh.
			*t = KgoTest{Name: top}
		}
	case "pause", "cont":
		// test2json also reports "cont" for a test that already ended
		// when the log switches back to it: only a running test moves.
		if st, ok := r.mu.running[top]; ok && !isSub {
			st.active = ev.Action == "cont"
			r.mu.running[top] = st
		}
	case "output":
		line := strings.TrimRight(ev.Output, "\n")
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "=== ") || strings.HasPrefix(trimmed, "--- PASS") ||
			strings.HasPrefix(trimmed, "--- FAIL") || strings.HasPrefix(trimmed, "--- SKIP") {
			return
		}
		t.OutputLines++
		if len(t.Output) < kgoOutputLines {
			if isSub {
				trimmed = sub + ": " + trimmed
			}
			if len(trimmed) > 300 {
				trimmed = trimmed[:300] + "..."
			}
			t.Output = append(t.Output, trimmed)
		}
	case "pass", "fail", "skip":
		st := KgoTestStatus(ev.Action)
		if isSub {
			switch st {
			case KgoPass:
				t.SubPassed++
			case KgoFail:
				t.SubFailed++
			case KgoSkip:
				t.SubSkipped++
			}
			return
		}
		t.Status = st
		t.Elapsed = ev.Elapsed
		delete(r.mu.running, top)
	}
}

// endProcess fails the tests process proc was running when it ended.
// Parallel tests still paused then never did their work: they are
// forgotten, so the next pass runs them.
func (r *kgoResults) endProcess(proc int, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for n, st := range r.mu.running {
		if st.proc != proc {
			continue
		}
		if !st.active {
			delete(r.mu.tests, n)
			delete(r.mu.running, n)
			continue
		}
		t := r.mu.tests[n]
		t.Status = KgoFail
		t.Output = append([]string{why}, t.Output...)
		if len(t.Output) > kgoOutputLines {
			t.Output = t.Output[:kgoOutputLines]
		}
		delete(r.mu.running, n)
	}
}

// started reports whether n got a verdict.
func (r *kgoResults) started(n string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.mu.tests[n]
	return t != nil && t.Status != ""
}

// test returns n's result; a test that never ran is a failure.
func (r *kgoResults) test(n string) KgoTest {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.mu.tests[n]
	if t == nil || t.Status == "" {
		return KgoTest{Name: n, Status: KgoFail, Output: []string{"never started: every process that should have run it ended first"}}
	}
	return *t
}
