package compat

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Env is what every client run gets.
type Env struct {
	// Addr is the agent's PLAINTEXT address, where the runner checks
	// what clients claim.
	Addr string
	// Bootstrap is the address the client dials; empty: Addr.
	Bootstrap string
	// Prefix starts every topic and group name a client makes.
	Prefix string
	// Records is how many records each check produces.
	Records int
	// StepTimeout bounds each step of a check (a produce, a consume to
	// the end, a group join).
	StepTimeout time.Duration
}

func (e Env) bootstrap() string {
	if e.Bootstrap != "" {
		return e.Bootstrap
	}
	return e.Addr
}

// Options configures RunMatrix. Zero values mean the full matrix.
type Options struct {
	// Quick runs QuickClients for QuickCaps and the QuickKgoRun tests.
	Quick bool
	// Clients selects rows by name ("kcat", "kafka-python",
	// "confluent-kafka-python", "kafkajs", "burrow", "kgo", "kadm"); nil:
	// all.
	Clients []string
	// Caps selects the columns the script clients check; nil: all
	// (QuickCaps when Quick).
	Caps []Capability
	// Records per check (default 1000; 200 when Quick).
	Records int
	// StepTimeout bounds each step of a client check (default 60 s).
	StepTimeout time.Duration
	// KgoRun selects kgo tests as -run does; empty: all (QuickKgoRun
	// when Quick).
	KgoRun string
	// KgoRecords is KGO_TEST_RECORDS (default 20,000; 2,000 when Quick).
	KgoRecords int
	// KgoTimeout bounds each kgo test process (default 10 min).
	KgoTimeout time.Duration
	// AgentBinary is a strand binary to run; empty: build cmd/strand.
	AgentBinary string
	// WorkDir holds the run's files; empty: a temp dir removed at the end.
	WorkDir string
	// Logf, if set, reports progress.
	Logf func(format string, args ...any)
}

// The quick subset that runs with every `go test`.
var (
	QuickCaps    = []Capability{Produce, Consume, Groups, OffsetCommit, Idempotence, Transactions, ScramSHA512}
	QuickClients = []string{"kcat", "kafka-python", "confluent-kafka-python", "kafkajs", "kgo"}
	// QuickKgoRun: produce, consume, a group and admin through the
	// broker, the SCRAM tests, a few seconds each, and the share group
	// tests (KIP-932; the ETL one takes about 10 s).
	QuickKgoRun = "^(TestClient_Produce|TestIssue769|TestIssue325|TestGroupSimple|TestUnknownGroupOffsetFetchPinned|TestAddRemovePartitions|TestPing|TestSCRAMAuth|TestSCRAMAuthBadCredentials|TestShareGroup|TestShareGroupETL|TestShareGroupAckOnClose|TestShareGroupOffsetsAdmin)$"
)

// ClientNames lists every row RunMatrix can run, in print order.
var ClientNames = []string{"kgo", "kadm", "kcat", "kafka-python", "confluent-kafka-python", "kafkajs", "burrow"}

func (o *Options) setDefaults() {
	if o.Quick {
		if o.Clients == nil {
			o.Clients = QuickClients
		}
		if o.Caps == nil {
			o.Caps = QuickCaps
		}
		if o.KgoRun == "" {
			o.KgoRun = QuickKgoRun
		}
		if o.Records == 0 {
			o.Records = 200
		}
		if o.KgoRecords == 0 {
			o.KgoRecords = 2000
		}
	}
	if o.Clients == nil {
		o.Clients = ClientNames
	}
	if o.Caps == nil {
		o.Caps = slices.DeleteFunc(slices.Clone(Capabilities), func(c Capability) bool { return c == Lag })
	}
	if o.Records == 0 {
		o.Records = 1000
	}
	if o.KgoRecords == 0 {
		o.KgoRecords = 20000
	}
	if o.StepTimeout == 0 {
		o.StepTimeout = 60 * time.Second
	}
	if o.KgoTimeout == 0 {
		o.KgoTimeout = 10 * time.Minute
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// RunMatrix starts an agent, runs the selected clients against it (the
// kgo suite alongside the scripts) and returns the matrix. An error
// means the run itself broke (no agent, no suite binary); client
// failures are cells.
func RunMatrix(ctx context.Context, opts Options) (_ *Matrix, err error) {
	opts.setDefaults()
	for _, c := range opts.Clients {
		if !slices.Contains(ClientNames, c) {
			return nil, fmt.Errorf("unknown client %q (have %s)", c, strings.Join(ClientNames, ", "))
		}
	}
	m := &Matrix{Started: time.Now(), Quick: opts.Quick}
	if opts.WorkDir == "" {
		dir, err := os.MkdirTemp("", "strand-compat-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		opts.WorkDir = dir
	}
	bin := opts.AgentBinary
	if bin == "" {
		opts.Logf("building cmd/strand")
		if bin, err = BuildAgent(ctx, opts.WorkDir); err != nil {
			return nil, err
		}
	}
	m.Agent = agentVersion()
	sec, err := NewSecurity(filepath.Join(opts.WorkDir, "security"))
	if err != nil {
		return nil, err
	}
	agent, err := StartAgent(ctx, bin, filepath.Join(opts.WorkDir, "agent-data"), sec.AgentArgs()...)
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := agent.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	if err := sec.setAddrs(agent); err != nil {
		return nil, err
	}
	opts.Logf("agent serving on %v", agent.Listeners)
	env := Env{Addr: sec.Addrs["PLAINTEXT"], Prefix: "compat-" + randomSuffix(), Records: opts.Records, StepTimeout: opts.StepTimeout}

	rows := make(map[string]Row)
	var kgoErr error
	var wg sync.WaitGroup
	if slices.Contains(opts.Clients, "kgo") {
		wg.Go(func() {
			kdir := filepath.Join(opts.WorkDir, "kgo")
			if kgoErr = os.MkdirAll(kdir, 0o755); kgoErr != nil {
				return
			}
			m.Kgo, kgoErr = RunKgo(ctx, KgoOptions{
				Seeds: env.Addr, Records: opts.KgoRecords, Run: opts.KgoRun,
				Timeout: opts.KgoTimeout, WorkDir: kdir, Logf: opts.Logf,
				Env: sec.kgoEnv(), Variants: sec.kgoVariants(opts.Caps),
			})
		})
	}
	scriptsDir := filepath.Join(opts.WorkDir, "clients")
	if err := os.MkdirAll(scriptsDir, 0o755); err != nil {
		return nil, err
	}
	if err := writeClientFiles(scriptsDir); err != nil {
		return nil, err
	}
	// The security columns are not the scripts' own checks: runSecurity
	// runs each client again over the secured listeners.
	scriptCaps := slices.DeleteFunc(slices.Clone(opts.Caps), func(cp Capability) bool { return slices.Contains(SecurityCaps, cp) })
	for _, c := range scriptClients {
		if !slices.Contains(opts.Clients, c.name) {
			continue
		}
		opts.Logf("running %s", c.name)
		row := Row{Client: c.name}
		if len(scriptCaps) > 0 {
			row = runScript(ctx, c, scriptsDir, env, scriptCaps)
		}
		runSecurity(ctx, c, scriptsDir, env, sec, opts.Caps, &row)
		rows[c.name] = row
		opts.Logf("%s done in %v", c.name, row.Elapsed.Round(time.Millisecond))
	}
	if slices.Contains(opts.Clients, "kadm") {
		opts.Logf("running kadm")
		row := Row{Client: "kadm"}
		if slices.Contains(opts.Caps, Admin) {
			row = runKadm(ctx, env)
		}
		if slices.Contains(opts.Caps, SASLPlain) {
			row.set(SASLPlain, kadmSASLPlain(ctx, env, sec))
		}
		for cp, mech := range map[Capability]kadm.ScramMechanism{ScramSHA256: kadm.ScramSha256, ScramSHA512: kadm.ScramSha512} {
			if slices.Contains(opts.Caps, cp) {
				row.set(cp, kadmSCRAMUser(ctx, env, sec, cp, mech))
			}
		}
		if row.Cells != nil {
			rows["kadm"] = row
		}
	}
	if slices.Contains(opts.Clients, "burrow") {
		opts.Logf("running burrow")
		rows["burrow"] = runBurrow(ctx, env)
	}
	wg.Wait()
	if kgoErr != nil {
		return nil, fmt.Errorf("kgo suite: %w", kgoErr)
	}
	if m.Kgo != nil {
		r := m.Kgo.Row()
		if _, ok := r.Cells[ScramSHA512]; ok {
			r.Notes = append(r.Notes, "scram-sha-512: the suite's SCRAM tests dial KGO_TEST_SCRAM_SEEDS without TLS, so this cell is SASL_PLAINTEXT, not SASL_SSL")
		}
		if slices.Contains(opts.Caps, SASLPlain) {
			r.Notes = append(r.Notes, "sasl-plain: the suite has no PLAIN test; the kadm row's cell is franz-go over PLAIN")
		}
		rows["kgo"] = r
	}
	for _, name := range ClientNames {
		if r, ok := rows[name]; ok {
			m.Rows = append(m.Rows, r)
		}
	}
	m.Elapsed = time.Since(m.Started)
	// An agent that died part way makes every later cell a lie about
	// the clients: the run is broken, not the clients.
	if aerr := agent.Alive(); aerr != nil {
		return m, aerr
	}
	return m, nil
}

// agentVersion names the tree the agent was built from: the commit and
// whether the work tree had changes.
func agentVersion() string {
	rev, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "strand (cmd/strand, unknown commit)"
	}
	v := "strand " + strings.TrimSpace(string(rev))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		v += " with uncommitted changes"
	}
	return v
}

func randomSuffix() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
