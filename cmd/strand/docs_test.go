package main

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/bench"
	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// The documentation's commands are tested here (TestDocCommands): every
// shell block of README.md and docs/*.md is either run, against an agent
// the test starts, or checked, when it needs what CI does not have (an S3
// bucket, PostgreSQL, several agents, Kafka's own tools) or would take
// minutes. A checked `strand` command must name commands and flags that
// exist and take its arguments; a checked `go test` must name packages
// that exist and a -run, -bench or -fuzz pattern that matches a test of
// them; a script must exist. Only blocks fenced as ```sh are commands: a
// fenced block without a language, or an indented one, fails the test,
// so no command can hide from it. Commands written in prose (a code span
// that starts with strand, go test or a script) are checked too, by
// their subcommand and flag names.

// checkOnly lists the blocks with `strand` commands that are only
// checked, by file and the block's first line, with the reason. A block
// that is not listed runs; an entry that matches no block fails, so the
// list stays as small as the docs allow.
var checkOnly = map[string]string{
	"README.md: go run ./cmd/strand serve": "the test starts this agent itself, on free ports and a temporary data dir, and runs the tour against it",
	"docs/operations.md: strand serve --node-id 1 --data-dir a1 --kafka-listen 127.0.0.1:19092 --http-listen 127.0.0.1:19644 \\":                                                                "needs PostgreSQL and etcd (a cluster's shared log)",
	"docs/operations.md: strand features describe --brokers 127.0.0.1:19092    # SUPPORTED-MAX is what every live agent supports":                                                               "an upgrade of a running cluster of older agents; e2e/upgrade_test.go runs one",
	"docs/operations.md: strand serve --node-id 1 --rack us-east-1a \\":                                                                                                                         "a zone layout of several agents",
	"docs/security.md: strand serve --listeners PLAINTEXT://127.0.0.1:9092,SSL://:9093 \\":                                                                                                      "needs a server certificate and a second agent's ports; e2e/tls_test.go runs TLS listeners",
	"docs/security.md: STRAND_SASL_BOOTSTRAP_PASSWORD=... strand serve \\":                                                                                                                      "needs certificates and password files; e2e/sasl_test.go runs SASL listeners",
	"docs/performance.md: go run ./cmd/strand bench --embedded --producers 4 --consumers 0 --duration 20s --warmup 5s --compare-kfake --disk-bandwidth":                                         "benchmarks of 20-30 s each, beyond the test's budget",
	"docs/performance.md: go test -run '^$' -bench . ./internal/sharedlog/filelog/ ./internal/replica/ ./internal/produce/ # core benchmarks":                                                   "long runs, minutes to hours each",
	"docs/performance.md: strand bench --embedded --compare-kfake --producers 2 --consumers 1 --rate 48828 --duration 20s   # 50 MB/s: \"server cpu ... CPU-s per GB\" for both, and the ratio": "two 20 s load phases, beyond the test's budget",
	"docs/performance.md: strand bench --embedded --compare-kfake --producers 2 --consumers 1 --rate 48828 --duration 20s --max-puts-per-sec 20   # fewer, larger flushes":                      "two 20 s load phases, beyond the test's budget",
	"docs/sql.md: strand sql --user alice --password-file alice.pw --tls-ca ca.pem   # a prompt: statements end with ';', \\q quits":                                                            "needs a TLS SQL endpoint, a user and the orders source; internal/cli/sql_test.go runs strand sql",
	"docs/cdc.md: strand connect create -f inventory.json   # {\"name\", \"config\"}, or a config with \"name\"":                                                                                "needs PostgreSQL with logical replication; e2e/cdc_test.go runs connectors",
	"docs/performance.md: strand bench --embedded --objstore-latency s3-express --express-zones 3 --max-puts-per-sec 20 --rate 48828 --duration 30s --warmup 5s --cost":                         "a 35 s benchmark, beyond the test's budget",
	"docs/performance.md: STRAND_TIER_OUTAGE=1m go test -count=1 -v -run TestExpressZoneOutage ./internal/produce/":                                                                             "a minute of outage, beyond the test's budget",
}

// external lists the programs other than strand, go and the scripts
// that blocks may name, and why the test does not run them. A program
// not listed here or run by the test fails it.
var external = map[string]string{
	"kcat":             "a Kafka client installed by scripts/test; e2e/kcat_test.go runs it",
	"kafka-configs.sh": "Kafka's own tool, not installed in CI; e2e and internal/kafka tests send the same requests with kadm",
	"psql":             "PostgreSQL's client; the SQL tests drive the endpoint with pgx",
	"curl":             "calls the Connect REST API of an agent with connectors; internal/connect tests call it over HTTP",
	"docker":           "builds the image; deploy/docker_test.go checks the Dockerfile's static build",
	"helm":             "installs the chart into Kubernetes; deploy/helm_test.go runs helm lint and template",
	"sudo":             "installs the systemd unit; deploy/systemd_test.go runs systemd-analyze verify",
}

// runnable are the shell programs a run block may call besides strand.
var runnable = []string{"seq", "printf", "echo", "openssl"}

func TestDocCommands(t *testing.T) {
	clearStrandEnv(t)
	files := docFiles(t)
	var blocks []docBlock
	for _, f := range files {
		bs, err := readBlocks(f)
		if err != nil {
			t.Error(err)
			continue
		}
		blocks = append(blocks, bs...)
	}
	checkSetUp(t, blocks)

	used := map[string]bool{}
	var run []docBlock
	for _, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		key := b.key()
		_, only := checkOnly[key]
		used[key] = only
		cmds, err := shellCommands(b.text)
		if err != nil {
			t.Errorf("%s: %v", b.where(0), err)
			continue
		}
		hasStrand := slices.ContainsFunc(cmds, func(c shellCommand) bool { return c.strand() })
		wantRun := !only && len(cmds) > 0 && !slices.ContainsFunc(cmds, func(c shellCommand) bool { return !c.runnable() })
		if hasStrand && !only && !wantRun {
			t.Errorf("%s: a block with strand commands runs unless checkOnly names it with the reason; this one also calls programs the test does not run", b.where(0))
		}
		for _, c := range cmds {
			if err := checkCommand(c, wantRun); err != nil {
				t.Errorf("%s: %s\n  %v", b.where(c.line), c.text, err)
			}
		}
		if wantRun {
			run = append(run, b)
		}
	}
	for _, f := range files {
		spans, err := inlineCommands(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, span := range spans {
			if err := checkInline(span); err != nil {
				t.Errorf("%s: `%s`\n  %v", strings.TrimPrefix(f, "../../"), span, err)
			}
		}
	}
	checkLinks(t, files)
	for key := range checkOnly {
		if !used[key] {
			t.Errorf("checkOnly names a block no doc has: %s", key)
		}
	}
	if t.Failed() {
		return
	}
	if testing.Short() {
		t.Skip("-short: commands checked, not run")
	}
	runBlocks(t, run)
}

// docFiles is README.md and every docs/*.md, from the repository root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	if len(files) < 8 {
		t.Fatalf("docs: found only %v", files)
	}
	return files
}

type docBlock struct {
	file    string // from the repository root
	line    int    // of the block's first line
	section string // the ## heading above it
	lang    string
	text    string
}

// key names the block in checkOnly: its file and first line.
func (b docBlock) key() string {
	first, _, _ := strings.Cut(b.text, "\n")
	return b.file + ": " + first
}

func (b docBlock) where(offset int) string {
	return fmt.Sprintf("%s:%d (%s)", b.file, b.line+offset, b.section)
}

// readBlocks returns the fenced code blocks of a markdown file, and an
// error for a block that does not say its language or is indented.
func readBlocks(path string) ([]docBlock, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	name := strings.TrimPrefix(path, "../../")
	lines := strings.Split(string(data), "\n")
	var blocks []docBlock
	var errs []error
	section := "top"
	var cur *docBlock
	var body []string
	prevBlank, listItem := true, regexp.MustCompile(`^\s*([-*+]|\d+\.)\s`)
	var prevText string
	for i, l := range lines {
		if cur != nil {
			if strings.HasPrefix(l, "```") {
				cur.text = strings.Join(body, "\n")
				blocks = append(blocks, *cur)
				cur, body = nil, nil
				continue
			}
			body = append(body, l)
			continue
		}
		switch {
		case strings.HasPrefix(l, "```"):
			lang := strings.TrimSpace(strings.TrimPrefix(l, "```"))
			if lang == "" {
				errs = append(errs, fmt.Errorf("%s:%d: a fenced block without a language: ```sh for commands, ```text for output", name, i+1))
			}
			if lang == "bash" || lang == "shell" || lang == "console" {
				errs = append(errs, fmt.Errorf("%s:%d: commands are fenced as ```sh (the test reads those)", name, i+1))
			}
			cur = &docBlock{file: name, line: i + 2, section: section, lang: lang}
		case strings.HasPrefix(l, "## "):
			section = strings.TrimPrefix(l, "## ")
		case strings.HasPrefix(l, "    ") && prevBlank && strings.TrimSpace(l) != "" &&
			!listItem.MatchString(prevText) && !strings.HasPrefix(prevText, "    ") && !strings.HasPrefix(prevText, "|"):
			errs = append(errs, fmt.Errorf("%s:%d: an indented code block: fence it with its language (```sh for commands)", name, i+1))
		}
		prevBlank = strings.TrimSpace(l) == ""
		if !prevBlank {
			prevText = l
		}
	}
	if cur != nil {
		errs = append(errs, fmt.Errorf("%s:%d: a fenced block that does not end", name, cur.line-1))
	}
	return blocks, errors.Join(errs...)
}

// readmeMaxLines keeps the README what a newcomer reads in five
// minutes (issue 33); the rest belongs in docs/.
const readmeMaxLines = 200

// checkSetUp holds the README to its length and its two set-up
// commands, literally.
func checkSetUp(t *testing.T, blocks []docBlock) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n >= readmeMaxLines {
		t.Errorf("README.md has %d lines, want under %d: move the detail into docs/", n, readmeMaxLines)
	}
	for _, want := range []string{"go run ./cmd/strand serve", "./scripts/test"} {
		if !slices.ContainsFunc(blocks, func(b docBlock) bool {
			return b.file == "README.md" && b.lang == "sh" && b.text == want
		}) {
			t.Errorf("README.md lacks the set-up command %q as a block of its own", want)
		}
	}
}

// shellCommand is one command line of a block (continuations joined,
// the comment cut) split into pipeline stages.
type shellCommand struct {
	line   int    // within its block, from 0
	text   string // as written, continuations included
	stages [][]string
}

// strand says whether any stage runs the strand binary.
func (c shellCommand) strand() bool {
	return slices.ContainsFunc(c.stages, func(s []string) bool { s = skipAssignments(s); return len(s) > 0 && isStrand(s) })
}

// runnable says whether the test can run every stage: strand, or a
// program of the runnable list.
func (c shellCommand) runnable() bool {
	return !slices.ContainsFunc(c.stages, func(s []string) bool {
		s = skipAssignments(s)
		return len(s) > 0 && !isStrand(s) && !slices.Contains(runnable, s[0])
	})
}

// skipAssignments drops the VAR=value words before a program.
func skipAssignments(s []string) []string {
	for len(s) > 0 && assignmentRE.MatchString(s[0]) {
		s = s[1:]
	}
	return s
}

var assignmentRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)

func isStrand(words []string) bool {
	return words[0] == "strand" || (len(words) > 2 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/strand")
}

// shellCommands splits a block into commands: a line, with the lines
// its trailing backslashes or an open quote continue.
func shellCommands(text string) ([]shellCommand, error) {
	var cmds []shellCommand
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		start := i
		src := lines[i]
		var words []string
		var stages [][]string
		for {
			var err error
			words, stages, err = splitShell(strings.ReplaceAll(src, "\\\n", " "))
			switch {
			case err == nil && !strings.HasSuffix(src, `\`):
			case (err == errOpenQuote || strings.HasSuffix(src, `\`)) && i+1 < len(lines):
				i++
				src += "\n" + lines[i]
				continue
			case err != nil:
				return nil, fmt.Errorf("line %d: %v", start+1, err)
			}
			break
		}
		if len(words) == 0 {
			continue
		}
		cmds = append(cmds, shellCommand{line: start, text: src, stages: stages})
	}
	return cmds, nil
}

var errOpenQuote = errors.New("unterminated quote")

// splitShell reads a line as a shell would, enough for the docs: quotes,
// $(...), comments, and the operators that separate commands. It returns
// the line up to its comment, as words, and the commands' words.
func splitShell(line string) (raw []string, stages [][]string, err error) {
	var word strings.Builder
	inWord := false
	var cur []string
	flush := func() {
		if inWord {
			cur = append(cur, word.String())
			raw = append(raw, word.String())
			word.Reset()
			inWord = false
		}
	}
	endStage := func(op string) {
		flush()
		if len(cur) > 0 {
			stages = append(stages, cur)
		}
		cur = nil
		raw = append(raw, op)
	}
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, nil, errOpenQuote
			}
			word.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case ch == '"':
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 {
				return nil, nil, errOpenQuote
			}
			word.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case ch == '$' && i+1 < len(line) && line[i+1] == '(', ch == '<' && i+1 < len(line) && line[i+1] == '(':
			depth, j := 0, i+1
			for ; j < len(line); j++ {
				if line[j] == '(' {
					depth++
				} else if line[j] == ')' {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			if j == len(line) {
				return nil, nil, fmt.Errorf("unterminated $(")
			}
			word.WriteString(line[i : j+1])
			inWord = true
			i = j
		case ch == '#' && !inWord:
			i = len(line)
		case ch == ' ' || ch == '\t':
			flush()
		case ch == '|' || ch == ';' || ch == '&':
			op := string(ch)
			if i+1 < len(line) && (line[i+1] == '|' || line[i+1] == '&') {
				op += string(line[i+1])
				i++
			}
			endStage(op)
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	flush()
	if len(cur) > 0 {
		stages = append(stages, cur)
	}
	if len(raw) > 0 && raw[len(raw)-1] == "&" {
		raw = raw[:len(raw)-1] // a background agent: run it in the foreground of its own block
	}
	return raw, stages, nil
}

// checkCommand checks every stage of c. In a block that runs, the
// programs must be ones the test can run.
func checkCommand(c shellCommand, run bool) error {
	var errs []error
	for _, s := range c.stages {
		s = skipAssignments(s)
		if len(s) == 0 {
			continue
		}
		prog := s[0]
		switch {
		case isStrand(s):
			if prog == "go" {
				s = s[2:]
			}
			errs = append(errs, checkStrand(s[1:]))
		case prog == "go":
			errs = append(errs, checkGo(s[1:]))
		case strings.HasPrefix(prog, "./scripts/") || strings.HasPrefix(prog, "scripts/"):
			if fi, err := os.Stat(filepath.Join("../..", prog)); err != nil || fi.Mode()&0o111 == 0 {
				errs = append(errs, fmt.Errorf("%s: no such executable script", prog))
			}
		case slices.Contains(runnable, prog):
		case external[prog] != "":
			if run {
				errs = append(errs, fmt.Errorf("%s in a block that runs: the test cannot run it (%s); put it in a block of its own", prog, external[prog]))
			}
		default:
			errs = append(errs, fmt.Errorf("%s: a program the test neither runs nor knows (add it to external in cmd/strand/docs_test.go with the reason)", prog))
		}
	}
	return errors.Join(errs...)
}

// placeholder arguments the docs write for "and the rest".
var placeholders = []string{"..."}

// checkStrand resolves args in a fresh command tree: the subcommands must
// exist, the flags parse and the positional arguments be what the command
// takes.
func checkStrand(args []string) error {
	root := addCompletion(newRootCmd())
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag()
	if err := cmd.ParseFlags(rest); err != nil {
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	pos := slices.DeleteFunc(cmd.Flags().Args(), func(a string) bool { return slices.Contains(placeholders, a) })
	if cmd.HasSubCommands() && len(pos) > 0 {
		return fmt.Errorf("%s has no subcommand %q", cmd.CommandPath(), pos[0])
	}
	if help, _ := cmd.Flags().GetBool("help"); help {
		return nil
	}
	if err := cmd.ValidateArgs(pos); err != nil {
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	return nil
}

// goTestFlagsWithValue are go test's flags that take a value, as the
// docs use them.
var goTestFlagsWithValue = []string{"-run", "-bench", "-benchtime", "-fuzz", "-fuzztime", "-timeout", "-count", "-tags", "-o", "-p", "-cpu"}

// checkGo checks a go command: its packages exist, and a test's
// patterns match tests of them.
func checkGo(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("go without a command")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "test", "build", "install", "vet", "run":
	case "tool":
		return nil // go tool pprof and the like: Go's own
	default:
		return fmt.Errorf("go %s: not a command the docs should need", sub)
	}
	patterns := map[string]string{}
	var pkgs []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-args" {
			break
		}
		if strings.HasPrefix(a, "-") {
			name, val, hasVal := strings.Cut(a, "=")
			if slices.Contains(goTestFlagsWithValue, name) && !hasVal && i+1 < len(args) {
				i++
				val = args[i]
			}
			patterns[name] = val
			continue
		}
		if strings.HasPrefix(a, "./") {
			pkgs = append(pkgs, a)
		}
	}
	if len(pkgs) == 0 {
		return fmt.Errorf("go %s names no package (./...)", sub)
	}
	var errs []error
	for _, p := range pkgs {
		if strings.HasSuffix(p, "/...") {
			continue
		}
		dir := filepath.Join("../..", p)
		if m, _ := filepath.Glob(filepath.Join(dir, "*.go")); len(m) == 0 {
			errs = append(errs, fmt.Errorf("%s: no Go package there", p))
		}
	}
	if sub != "test" || len(errs) > 0 {
		return errors.Join(errs...)
	}
	for flagName, prefix := range map[string]string{"-run": "Test", "-bench": "Benchmark", "-fuzz": "Fuzz"} {
		pat, ok := patterns[flagName]
		if !ok || pat == "^$" || pat == "XXX" {
			continue
		}
		top, _, _ := strings.Cut(pat, "/")
		re, err := regexp.Compile(top)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %v", flagName, pat, err))
			continue
		}
		found := false
		for _, p := range pkgs {
			names, err := testFuncs(filepath.Join("../..", p), prefix)
			if err != nil {
				errs = append(errs, err)
			}
			found = found || slices.ContainsFunc(names, re.MatchString)
		}
		if !found {
			errs = append(errs, fmt.Errorf("%s %q matches no %s function of %v", flagName, pat, prefix, pkgs))
		}
	}
	return errors.Join(errs...)
}

var testFuncRE = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)\w*)\(`)

// testFuncs lists the test functions of a package directory with a prefix.
func testFuncs(dir, prefix string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range testFuncRE.FindAllStringSubmatch(string(data), -1) {
			if strings.HasPrefix(m[1], prefix) {
				names = append(names, m[1])
			}
		}
	}
	return names, nil
}

// afterRun checks what a block left behind, beyond its exit status, by
// the block's key.
var afterRun = map[string]func(t *testing.T, dir string){
	"docs/security.md: openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj '/CN=strand-ca' -keyout ca-key.pem -out ca.pem": checkAlicePrincipal,
}

// checkAlicePrincipal: the certificate the security guide makes for a
// subject written /OU=eng/CN=alice is the principal User:CN=alice,OU=eng
// on an SSL listener, as the guide says.
func checkAlicePrincipal(t *testing.T, dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "alice.pem"))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(data)
	if blk == nil {
		t.Fatal("alice.pem holds no PEM block")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := auth.CertificatePrincipal(cert).String(), "User:CN=alice,OU=eng"; got != want {
		t.Errorf("the guide's certificate is principal %s, the guide says %s", got, want)
	}
}

// runBlocks starts an agent and runs the blocks in order, each in a
// directory of its own, with `strand` (and `go run ./cmd/strand`) this
// test binary's main.
func runBlocks(t *testing.T, blocks []docBlock) {
	bin := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	shim := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", runMainEnv, self)
	if err := os.WriteFile(filepath.Join(bin, "strand"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	ports := freePorts(t, 5)
	env := append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+home,
		"STRAND_CONFIG_DIR="+filepath.Join(home, "config"),
		"STRAND_BROKERS="+ports[0],
		"STRAND_REGISTRY_URL=http://"+ports[2],
		"STRAND_SQL_URL=postgres://"+ports[4]+"/strand",
		"STRAND_CONNECT_URL=http://"+ports[3],
	)
	startAgent(t, bin, env, ports)
	// The docs write the agent's default addresses; the test's agent
	// listens on free ports instead, so that it runs beside anything
	// else on the machine.
	defaults := strings.NewReplacer(
		"go run ./cmd/strand", "strand",
		"127.0.0.1:9092", ports[0], "localhost:9092", ports[0],
		"127.0.0.1:9644", ports[1], "localhost:9644", ports[1],
		"127.0.0.1:8081", ports[2], "localhost:8081", ports[2],
		"127.0.0.1:8083", ports[3], "localhost:8083", ports[3],
		"127.0.0.1:6875", ports[4], "localhost:6875", ports[4],
	)

	for _, b := range blocks {
		t.Run(fmt.Sprintf("%s:%d", b.file, b.line), func(t *testing.T) { runBlock(t, b, defaults, env) })
	}
	for key := range afterRun {
		if !slices.ContainsFunc(blocks, func(b docBlock) bool { return b.key() == key }) {
			t.Errorf("afterRun names a block that did not run: %s", key)
		}
	}
}

// runBlock runs one block's commands in a directory of its own, in
// order, and stops at the first that fails.
func runBlock(t *testing.T, b docBlock, defaults *strings.Replacer, env []string) {
	dir := t.TempDir()
	cmds, _ := shellCommands(b.text)
	for _, c := range cmds {
		for _, s := range c.stages {
			if s = skipAssignments(s); len(s) > 0 && !isStrand(s) {
				if _, err := testproc.FindBinary(s[0]); err != nil && !isShellBuiltin(s[0]) {
					testproc.SkipOrFail(t, err)
				}
			}
		}
	}
	for _, c := range cmds {
		script := defaults.Replace(c.text)
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = dir, env
		cmd.Stdin = strings.NewReader("")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: %s\n  failed after %v: %v\n%s", b.where(c.line), c.text, time.Since(start).Round(time.Millisecond), err, out)
		}
		t.Logf("%s: %s (%v)", b.where(c.line), c.text, time.Since(start).Round(time.Millisecond))
	}
	if check := afterRun[b.key()]; check != nil {
		check(t, dir)
	}
}

// isShellBuiltin: bash runs these itself, so no binary need exist.
func isShellBuiltin(name string) bool {
	return name == "echo" || name == "printf"
}

// runMainEnv makes the test binary run main: the docs' `strand`.
const runMainEnv = "STRAND_DOCS_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	// A bench run by main re-executes this binary as its server.
	bench.RunServerCommandIfChild()
	if os.Getenv(runMainEnv) == "1" {
		os.Unsetenv(runMainEnv)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// freePorts picks n loopback addresses free at the time of asking.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
}

// startAgent runs `strand serve` on ports (Kafka, HTTP, schema registry,
// Connect, SQL) until the test ends, and waits for it to be ready.
func startAgent(t *testing.T, bin string, env []string, ports []string) {
	t.Helper()
	// testproc's Command: its own process group, killed if the test
	// binary dies, so no agent outlives a crashed run.
	cmd := (testproc.Identity{}).Command(filepath.Join(bin, "strand"), "serve",
		"--data-dir", t.TempDir(),
		"--kafka-listen", ports[0], "--http-listen", ports[1],
		"--schema-registry-listen", ports[2], "--connect-listen", ports[3], "--sql-listen", ports[4],
		"--group-initial-rebalance-delay", "0s")
	cmd.Env = env
	logPath := filepath.Join(t.TempDir(), "agent.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		logFile.Close()
		if t.Failed() {
			showLog(t, logPath)
		}
	})
	// A subprocess offers no notification of readiness but its HTTP
	// port: ask /readyz until it answers 200, the agent exits, or a
	// deadline passes.
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + ports[1] + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the agent exited before it was ready: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent was not ready within 60 s")
		}
	}
}

// showLog logs the agent's last lines.
func showLog(t *testing.T, path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 40 {
			lines = lines[1:]
		}
	}
	t.Logf("agent log (last lines):\n%s", strings.Join(lines, "\n"))
}

// TestDocCommandChecks: the checks refuse what no longer works, so
// TestDocCommands can fail.
func TestDocCommandChecks(t *testing.T) {
	clearStrandEnv(t)
	for _, tt := range []struct {
		line string
		ok   bool
	}{
		{"strand topic create orders -p 4", true},
		{"go run ./cmd/strand serve --data-dir d", true},
		{"seq 1 5 | strand produce orders", true},
		{"STRAND_X=1 strand serve --node-id 1 ...", true},
		{"strand topic craete orders", false},         // no such subcommand
		{"strand topic create orders --bogus", false}, // no such flag
		{"strand version extra", false},               // takes no arguments
		{"go test ./internal/meta/ -run TestScenarios -rewrite", true},
		{"go test -run '^$' -bench Snapshot1M ./internal/replica/", true},
		{"go test ./internal/meta/ -run TestNoSuchTest", false},
		{"go test ./internal/nosuchpackage/", false},
		{"./scripts/test", true},
		{"scripts/nosuchscript", false},
		{"kcat -b 127.0.0.1:9092 -L", true},
		{"nosuchprogram --flag", false},
	} {
		cmds, err := shellCommands(tt.line)
		if err != nil || len(cmds) != 1 {
			t.Fatalf("%q: %v, %d commands", tt.line, err, len(cmds))
		}
		if err := checkCommand(cmds[0], false); (err == nil) != tt.ok {
			t.Errorf("%q: err = %v, want ok %v", tt.line, err, tt.ok)
		}
	}

	t.Run("blocks", func(t *testing.T) {
		for _, tt := range []struct {
			md string
			ok bool
		}{
			{"text\n\n```sh\nstrand topic list\n```\n", true},
			{"text\n\n```\nstrand topic list\n```\n", false},
			{"text\n\n    strand topic list\n", false},
			{"- a list item\n\n    its second paragraph\n", true},
			{"```sh\nstrand topic list\n", false},
		} {
			path := filepath.Join(t.TempDir(), "doc.md")
			if err := os.WriteFile(path, []byte(tt.md), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := readBlocks(path); (err == nil) != tt.ok {
				t.Errorf("%q: err = %v, want ok %v", tt.md, err, tt.ok)
			}
		}
	})

	t.Run("inline", func(t *testing.T) {
		for _, tt := range []struct {
			span string
			ok   bool
		}{
			{"strand log status|migrate", true},
			{"strand log status|migrat", false},
			{"strand topic describe --http", true},
			{"strand topic describe --htp", false},
			{"strand bench ... --cost", true},
			{"strand serve --sql-listen 127.0.0.1:6875 [--sql-tls]", true},
			{"go test ./e2e -run TestRegistryClients", true},
			{"go test ./e2e -run TestRegistryClientz", false},
		} {
			if err := checkInline(tt.span); (err == nil) != tt.ok {
				t.Errorf("%q: err = %v, want ok %v", tt.span, err, tt.ok)
			}
		}
	})

	t.Run("continuations", func(t *testing.T) {
		cmds, err := shellCommands("strand acl create --allow-principal User:app \\\n  --topic orders\ncurl -d '{\n  \"a\": 1}' x\n")
		if err != nil {
			t.Fatal(err)
		}
		if len(cmds) != 2 || cmds[0].stages[0][len(cmds[0].stages[0])-1] != "orders" || cmds[1].stages[0][2] != "{\n  \"a\": 1}" {
			t.Fatalf("commands = %+v", cmds)
		}
	})
}

// inlineCommandRE finds the code spans of prose that are commands the
// test can check: strand's, go test's and the scripts'.
var inlineCommandRE = regexp.MustCompile("`((?:[A-Z_]+=\\S* )*(?:strand |go run \\./cmd/strand|go test |\\./scripts/|scripts/)[^`]*)`")

// inlineCommands returns the command spans of a file's prose (outside
// fenced blocks); a span may run over a line break.
func inlineCommands(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var prose []string
	fenced := false
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			prose = append(prose, l)
		}
	}
	var spans []string
	for _, m := range inlineCommandRE.FindAllStringSubmatch(strings.Join(prose, " "), -1) {
		spans = append(spans, m[1])
	}
	return spans, nil
}

// checkInline checks a command written in prose. Prose abbreviates
// (`strand log status|migrate`, `strand topic describe --http`), so a
// strand command is held to its names: each subcommand and flag must
// exist; values and arguments are not checked.
func checkInline(span string) error {
	words := strings.Fields(span)
	for len(words) > 0 && assignmentRE.MatchString(words[0]) {
		words = words[1:]
	}
	switch {
	case len(words) >= 3 && words[0] == "go" && words[1] == "run":
		words = append([]string{"strand"}, words[3:]...)
	case words[0] == "go":
		if len(words) == 2 {
			return nil // `go test`: the command itself
		}
		cmds, err := shellCommands(span)
		if err != nil {
			return err
		}
		return checkCommand(cmds[0], false)
	case words[0] != "strand":
		cmds, err := shellCommands(span)
		if err != nil {
			return err
		}
		return checkCommand(cmds[0], false)
	}
	return checkStrandNames(words[1:])
}

func checkStrandNames(words []string) error {
	cmds := []*cobra.Command{addCompletion(newRootCmd())}
	var errs []error
	pathDone := false
	for i := 0; i < len(words); i++ {
		w := strings.Trim(words[i], "[]")
		if w == "..." || w == "" {
			continue
		}
		if strings.HasPrefix(w, "-") {
			pathDone = true
			name, _, hasVal := strings.Cut(w, "=")
			for _, c := range cmds {
				c.InitDefaultHelpFlag()
				c.InitDefaultVersionFlag()
				var fl *pflag.Flag
				if long, ok := strings.CutPrefix(name, "--"); ok {
					fl = c.Flags().Lookup(long)
					if fl == nil {
						fl = c.InheritedFlags().Lookup(long)
					}
				} else {
					fl = c.Flags().ShorthandLookup(strings.TrimPrefix(name, "-"))
					if fl == nil {
						fl = c.InheritedFlags().ShorthandLookup(strings.TrimPrefix(name, "-"))
					}
				}
				if fl == nil {
					errs = append(errs, fmt.Errorf("%s has no flag %s", c.CommandPath(), name))
					continue
				}
				if !hasVal && fl.Value.Type() != "bool" && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
					i++ // its value
				}
			}
			continue
		}
		if pathDone {
			continue // an argument
		}
		// A word of alternatives (status|migrate) names a subcommand each.
		var next []*cobra.Command
		for _, c := range cmds {
			if !c.HasSubCommands() {
				pathDone = true
				next = cmds
				break
			}
			for _, alt := range strings.Split(w, "|") {
				sub, _, err := c.Find([]string{alt})
				if err != nil || sub == c {
					errs = append(errs, fmt.Errorf("%s has no subcommand %q", c.CommandPath(), alt))
					continue
				}
				next = append(next, sub)
			}
		}
		if len(next) == 0 {
			break
		}
		cmds = next
	}
	return errors.Join(errs...)
}

// linkRE finds markdown links and images: [text](target).
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// checkLinks: every relative link of the docs names a file that exists,
// and an anchor (#section) a heading of it, so a guide moved or a
// heading renamed cannot leave a link dangling.
func checkLinks(t *testing.T, files []string) {
	t.Helper()
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		if data, err := os.ReadFile(path); err == nil {
			fenced := false
			for _, l := range strings.Split(string(data), "\n") {
				if strings.HasPrefix(l, "```") {
					fenced = !fenced
				}
				if !fenced && strings.HasPrefix(l, "#") {
					a[slug(strings.TrimLeft(l, "# "))] = true
				}
			}
		}
		anchors[path] = a
		return a
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := f
			if file != "" {
				path = filepath.Join(filepath.Dir(f), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %s: no such file", strings.TrimPrefix(f, "../../"), target)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[anchor] {
				t.Errorf("%s: link %s: no such heading", strings.TrimPrefix(f, "../../"), target)
			}
		}
	}
}

// slug is the anchor GitHub gives a heading: lower case, spaces as
// hyphens, punctuation other than hyphens and underscores dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
