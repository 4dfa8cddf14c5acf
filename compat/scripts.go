package compat

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

//go:embed clients/*.sh clients/*.py clients/*.js
var clientFiles embed.FS

// ErrClientMissing: a client (its binary, interpreter or library) is not
// installed. Outside CI its row is n/a; under CI it is a failure.
var ErrClientMissing = errors.New("compat: client not installed")

// Bounds on one client script.
const (
	// scriptTimeout bounds one script run; each of its steps has its own
	// shorter bound (Options.StepTimeout), so this only guards a hang.
	scriptTimeout = 10 * time.Minute
	// scriptStderrBytes is how much of a script's stderr is kept to
	// explain a missing result line.
	scriptStderrBytes = 4 << 10
	// resultPrefix starts every machine-readable line a script prints.
	resultPrefix = "COMPAT "
)

// KafkaJSVersion is the kafkajs release the matrix runs; scripts/test
// installs it (with the kafkajs-snappy and kafkajs-lz4 codecs) under the
// user cache directory, or STRAND_KAFKAJS_DIR names the install prefix.
const (
	KafkaJSVersion = "2.2.4"
	KafkaJSDirEnv  = "STRAND_KAFKAJS_DIR"
)

// systemPython is Debian's interpreter: a python3 earlier on PATH may be
// a version manager's shim that does not see the Debian packages.
const systemPython = "/usr/bin/python3"

// scriptClient is one client driven by a script in clients/.
type scriptClient struct {
	name   string
	script string
	// command returns the interpreter argv (the script path is appended)
	// and extra environment, or an error wrapping ErrClientMissing.
	command func() (argv, env []string, err error)
}

var scriptClients = []scriptClient{
	{name: "kcat", script: "kcat.sh", command: kcatCommand},
	{name: "kafka-python", script: "kafka_python.py", command: pythonCommand("kafka", "python3-kafka")},
	{name: "confluent-kafka-python", script: "confluent_kafka_py.py", command: pythonCommand("confluent_kafka", "python3-confluent-kafka")},
	{name: "kafkajs", script: "kafkajs.js", command: kafkajsCommand},
}

func kcatCommand() ([]string, []string, error) {
	for _, tool := range []string{"kcat", "bash", "timeout", "awk", "cmp"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, nil, fmt.Errorf("%w: %s not in PATH (Debian: apt-get install kcat)", ErrClientMissing, tool)
		}
	}
	return []string{"bash"}, nil, nil
}

func pythonCommand(module, debianPackage string) func() ([]string, []string, error) {
	return func() ([]string, []string, error) {
		out, err := exec.Command(systemPython, "-c", "import "+module).CombinedOutput()
		if err != nil {
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			return nil, nil, fmt.Errorf("%w: %s -c 'import %s': %v: %s (Debian: apt-get install %s)",
				ErrClientMissing, systemPython, module, err, lines[len(lines)-1], debianPackage)
		}
		return []string{systemPython}, nil, nil
	}
}

// KafkaJSDir is where kafkajs is looked for: STRAND_KAFKAJS_DIR, else
// <user cache dir>/strand/kafkajs-<version>.
func KafkaJSDir() (string, error) {
	if d := os.Getenv(KafkaJSDirEnv); d != "" {
		return d, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "strand", "kafkajs-"+KafkaJSVersion), nil
}

func kafkajsCommand() ([]string, []string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, nil, fmt.Errorf("%w: node not in PATH (Debian: apt-get install nodejs)", ErrClientMissing)
	}
	dir, err := KafkaJSDir()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrClientMissing, err)
	}
	modules := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "kafkajs", "package.json")); err != nil {
		return nil, nil, fmt.Errorf("%w: kafkajs not in %s (npm install --prefix %q kafkajs@%s kafkajs-snappy@1.1.0 kafkajs-lz4@1.2.1)",
			ErrClientMissing, dir, dir, KafkaJSVersion)
	}
	return []string{node}, []string{"NODE_PATH=" + modules}, nil
}

// writeClientFiles copies the embedded scripts into dir.
func writeClientFiles(dir string) error {
	return fs.WalkDir(clientFiles, "clients", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := clientFiles.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, filepath.Base(path)), b, 0o755)
	})
}

// scriptLine is one parsed result line.
type scriptLine struct {
	Client  string     `json:"client"`
	Version string     `json:"version"`
	Note    string     `json:"note"`
	Cap     Capability `json:"cap"`
	Status  Status     `json:"status"`
	Detail  string     `json:"detail"`
	claim
}

// parseScriptOutput reads the result lines in out. Lines without the
// prefix are ignored; a malformed result line is an error.
func parseScriptOutput(out []byte) ([]scriptLine, error) {
	var lines []scriptLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		text, ok := strings.CutPrefix(sc.Text(), resultPrefix)
		if !ok {
			continue
		}
		var l scriptLine
		if err := json.Unmarshal([]byte(text), &l); err != nil {
			return lines, fmt.Errorf("malformed result line %q: %v", sc.Text(), err)
		}
		if l.Cap != "" {
			switch l.Status {
			case Pass, Fail, NA:
			default:
				return lines, fmt.Errorf("result line %q: status %q, want pass, fail or n/a", sc.Text(), l.Status)
			}
		}
		lines = append(lines, l)
	}
	return lines, sc.Err()
}

// runScript runs one client script for caps and builds its row: every
// cap gets a cell; a pass is kept only if the agent confirms its claim.
func runScript(ctx context.Context, c scriptClient, scriptsDir string, env Env, caps []Capability) (row Row) {
	start := time.Now()
	row.Client = c.name
	defer func() { row.Elapsed = time.Since(start) }()
	argv, extraEnv, err := c.command()
	if err != nil {
		row.missing(caps, err)
		return row
	}
	names := make([]string, len(caps))
	for i, cp := range caps {
		names[i] = string(cp)
	}
	argv = append(argv, filepath.Join(scriptsDir, c.script),
		"--bootstrap", env.bootstrap(),
		"--prefix", env.Prefix,
		"--caps", strings.Join(names, ","),
		"--count", strconv.Itoa(env.Records),
		"--timeout-s", strconv.Itoa(int(env.StepTimeout.Seconds())))
	ctx, cancel := context.WithTimeout(ctx, scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.Dir = scriptsDir
	ownProcessGroup(cmd)
	var stdout bytes.Buffer
	stderr := newTailWriter(scriptStderrBytes)
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	runErr := cmd.Run()
	lines, parseErr := parseScriptOutput(stdout.Bytes())

	why := "the script printed no result for it"
	switch {
	case ctx.Err() != nil:
		why = fmt.Sprintf("the script did not finish within %v", scriptTimeout)
	case runErr != nil:
		why = fmt.Sprintf("the script failed (%v): %s", runErr, lastLines(stderr.String(), 3))
	case parseErr != nil:
		why = parseErr.Error()
	}
	for _, l := range lines {
		switch {
		case l.Client != "":
			row.Version = l.Version
		case l.Note != "":
			row.Notes = append(row.Notes, l.Note)
		}
	}
	v, verr := newVerifier(env.Addr)
	if verr == nil {
		defer v.close()
	}
	for _, cp := range caps {
		l, ok := lastFor(lines, cp)
		if !ok {
			row.set(cp, Cell{Status: Fail, Detail: why})
			continue
		}
		cell := Cell{Status: l.Status, Detail: l.Detail}
		if l.Status == Pass && !l.claim.empty() {
			if verr != nil {
				cell = Cell{Status: Fail, Detail: "cannot check the claim: " + verr.Error()}
			} else if err := v.check(ctx, l.claim); err != nil {
				cell = Cell{Status: Fail, Detail: err.Error()}
			}
		}
		row.set(cp, cell)
	}
	return row
}

func lastFor(lines []scriptLine, cp Capability) (scriptLine, bool) {
	for i := len(lines) - 1; i >= 0; i-- {
		if lines[i].Cap == cp {
			return lines[i], true
		}
	}
	return scriptLine{}, false
}

// missing fills row for a client that is not installed: n/a outside
// CI, a failure under CI, where every client must be there.
func (r *Row) missing(caps []Capability, err error) {
	st := NA
	if InCI() {
		st = Fail
	}
	for _, cp := range caps {
		r.set(cp, Cell{Status: st, Detail: err.Error()})
	}
}

// InCI reports whether CI=true (or 1): a missing client fails there.
func InCI() bool {
	v := os.Getenv("CI")
	return v == "true" || v == "1"
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max int
	buf []byte
}

func newTailWriter(maxBytes int) *tailWriter { return &tailWriter{max: maxBytes} }

func (w *tailWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	if len(w.buf) > w.max {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-w.max:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string { return string(w.buf) }

// lastLines returns the last n non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, " | ")
}
