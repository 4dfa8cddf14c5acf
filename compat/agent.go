package compat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Bounds on the agent child process.
const (
	// agentStartTimeout bounds `strand serve` coming up on an empty dir.
	agentStartTimeout = 60 * time.Second
	// agentStopTimeout bounds a graceful stop before SIGKILL.
	agentStopTimeout = 30 * time.Second
	// agentLogLines is how many of the agent's last log lines are kept
	// to explain a failure; the kgo suite makes it log for minutes.
	agentLogLines = 400
)

// ErrAgentExited: the agent process ended while clients still needed it.
var ErrAgentExited = errors.New("compat: strand agent exited")

// BuildAgent builds cmd/strand into dir and returns the binary. It must
// run inside the Strand module (any directory of the repo).
func BuildAgent(ctx context.Context, dir string) (string, error) {
	path := filepath.Join(dir, "strand")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", path, "github.com/strandkafka/strand/cmd/strand")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/strand: %v\n%s", err, out)
	}
	return path, nil
}

// Agent is `strand serve` running as a child process on a loopback port
// the kernel chose, with its own data dir.
type Agent struct {
	// Addr is the Kafka listener's host:port.
	Addr string
	// Listeners maps each listener's name to its bound host:port when
	// the agent was started with --listeners.
	Listeners map[string]string
	DataDir   string

	cmd    *exec.Cmd
	log    *lineTail
	exited chan struct{}
	// waitErr is cmd.Wait's result, set before exited is closed.
	waitErr error
}

// servingRE finds the Kafka address in the agent's "serving" log line.
var servingRE = regexp.MustCompile(`msg="strand agent serving".* kafka=(\S+)`)

// listenerRE finds NAME(PROTOCOL)=bound->advertised in the serving
// line's listeners field.
var listenerRE = regexp.MustCompile(`([A-Za-z0-9_]+)\([A-Z_]+\)=([^,"]+?)->`)

// StartAgent runs binary as `strand serve` with its data under dataDir
// and returns once it serves Kafka. Extra args go after the defaults
// (a later flag wins); with --listeners among them, --kafka-listen is
// left out, as the agent takes one or the other. The agent is killed if
// this process dies.
func StartAgent(ctx context.Context, binary, dataDir string, extra ...string) (*Agent, error) {
	args := []string{"serve", "--data-dir", dataDir, "--http-listen", "", "--log-level", "info"}
	if !slices.Contains(extra, "--listeners") {
		args = append(args, "--kafka-listen", "127.0.0.1:0")
	}
	args = append(args, extra...)
	cmd := exec.Command(binary, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	dieWithParent(cmd.SysProcAttr)
	// `strand serve` reads STRAND_<FLAG> for every flag not given: one
	// left in this environment (STRAND_OBJSTORE, STRAND_LOG, ...) must not
	// point the agent elsewhere.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "STRAND_") })
	// The schema registry's and Connect's default ports would be one
	// for every agent on this machine: off unless extra asks
	// (--schema-registry-listen, --connect-listen).
	cmd.Env = append(cmd.Env, "STRAND_SCHEMA_REGISTRY_LISTEN=", "STRAND_CONNECT_LISTEN=")
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	cmd.Stdout = pw
	a := &Agent{DataDir: dataDir, cmd: cmd, log: newLineTail(agentLogLines), exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", binary, err)
	}
	serving := make(chan string, 1)
	go scanLines(pr, func(line string) {
		a.log.add(line)
		if !servingRE.MatchString(line) {
			return
		}
		select {
		case serving <- line:
		default:
		}
	})
	go func() {
		a.waitErr = cmd.Wait()
		pw.Close()
		close(a.exited)
	}()
	timer := time.NewTimer(agentStartTimeout)
	defer timer.Stop()
	select {
	case line := <-serving:
		a.Addr = servingRE.FindStringSubmatch(line)[1]
		for _, m := range listenerRE.FindAllStringSubmatch(line, -1) {
			if a.Listeners == nil {
				a.Listeners = make(map[string]string)
			}
			a.Listeners[m[1]] = m[2]
		}
		return a, nil
	case <-a.exited:
		return nil, fmt.Errorf("%w before serving (%v):\n%s", ErrAgentExited, a.waitErr, a.log.String())
	case <-timer.C:
		a.kill()
		return nil, fmt.Errorf("strand serve not serving after %v:\n%s", agentStartTimeout, a.log.String())
	case <-ctx.Done():
		a.kill()
		return nil, ctx.Err()
	}
}

// Alive returns ErrAgentExited, with the log tail, if the agent is gone.
func (a *Agent) Alive() error {
	select {
	case <-a.exited:
		return fmt.Errorf("%w (%v); last log lines:\n%s", ErrAgentExited, a.waitErr, a.log.String())
	default:
		return nil
	}
}

// LogTail returns the agent's last log lines.
func (a *Agent) LogTail() string { return a.log.String() }

// Stop shuts the agent down with SIGTERM, then SIGKILL after
// agentStopTimeout. It reports an agent that had already died or did not
// exit cleanly.
func (a *Agent) Stop() error {
	if err := a.Alive(); err != nil {
		return err
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(agentStopTimeout)
	defer timer.Stop()
	select {
	case <-a.exited:
		if a.waitErr != nil {
			return fmt.Errorf("strand serve exited with %v after SIGTERM; last log lines:\n%s", a.waitErr, a.log.String())
		}
		return nil
	case <-timer.C:
		a.kill()
		return fmt.Errorf("strand serve still running %v after SIGTERM; killed", agentStopTimeout)
	}
}

func (a *Agent) kill() {
	a.cmd.Process.Kill()
	<-a.exited
}

// lineTail keeps the last max lines written to it.
type lineTail struct {
	mu struct {
		sync.Mutex
		lines []string
		next  int
		full  bool
	}
	max int
}

func newLineTail(maxLines int) *lineTail {
	t := &lineTail{max: maxLines}
	t.mu.lines = make([]string, maxLines)
	return t
}

func (t *lineTail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.lines[t.mu.next] = line
	t.mu.next++
	if t.mu.next == t.max {
		t.mu.next, t.mu.full = 0, true
	}
}

func (t *lineTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	if t.mu.full {
		out = append(out, t.mu.lines[t.mu.next:]...)
	}
	out = append(out, t.mu.lines[:t.mu.next]...)
	return strings.Join(out, "\n")
}

// scanLines calls f with each line read from r, then drains r so the
// writer never blocks.
func scanLines(r io.Reader, f func(string)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f(sc.Text())
	}
	io.Copy(io.Discard, r)
}
