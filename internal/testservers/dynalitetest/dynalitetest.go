// Package dynalitetest owns the DynamoDB-compatible server that tests run
// against: dynalite (an npm package, run with node), started on a free
// loopback port for one test and stopped when it ends.
//
// Where dynalite is found, in order:
//
//   - STRAND_TEST_DYNAMODB_ENDPOINT: use that server; start nothing.
//   - STRAND_DYNALITE_DIR: a directory holding node_modules/dynalite.
//   - the user cache directory: <os.UserCacheDir()>/strand/dynalite-4.0.0,
//     where scripts/test installs it (npm install --prefix DIR dynalite@4.0.0).
//
// When node or dynalite is missing the test is skipped, unless in CI
// (testproc.InCI), where it fails: CI must not pass by skipping.
package dynalitetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/testservers/testproc"
)

const (
	// Version is the dynalite release the tests are written against.
	Version = "4.0.0"
	// EndpointEnv names an already running server to use instead.
	EndpointEnv = "STRAND_TEST_DYNAMODB_ENDPOINT"
	// DirEnv names the directory dynalite was installed into.
	DirEnv = "STRAND_DYNALITE_DIR"
	// Region is the region tests pass to the SDK; dynalite ignores it.
	Region = "us-east-1"
	// startTimeout bounds the wait for "listening" (0.5 s is usual).
	startTimeout = 20 * time.Second
	// startAttempts bounds retries when the chosen port was taken
	// between picking it and dynalite binding it.
	startAttempts = 3
)

// Server is a running dynalite, or the server EndpointEnv names.
type Server struct {
	// Endpoint is the server's URL, e.g. http://127.0.0.1:41234.
	Endpoint string

	cmd   *exec.Cmd
	stdin io.Closer
	// exited is closed when the process has been waited for.
	exited chan struct{}
	mu     sync.Mutex
	stderr strings.Builder
}

// Start returns a server for t, started now and stopped at t's cleanup
// (or the EndpointEnv one). Each Start gets an empty in-memory server.
func Start(t testing.TB) *Server {
	t.Helper()
	if ep := os.Getenv(EndpointEnv); ep != "" {
		return &Server{Endpoint: ep}
	}
	cli, err := findCLI()
	if err != nil {
		unavailable(t, err)
	}
	var lastErr error
	for range startAttempts {
		s, err := launch(cli)
		if err == nil {
			t.Cleanup(func() {
				if err := s.stop(); err != nil {
					t.Errorf("dynalitetest: stop: %v", err)
				}
			})
			return s
		}
		lastErr = err
	}
	t.Fatalf("dynalitetest: %v", lastErr)
	return nil
}

// unavailable skips t, or fails it when CI=true.
func unavailable(t testing.TB, err error) {
	t.Helper()
	dir, derr := Dir()
	if derr != nil {
		dir = "DIR"
	}
	msg := fmt.Sprintf("dynalitetest: dynalite %s is not available (%v); install it with "+
		"`npm install --prefix %q dynalite@%s` (or into any directory named by %s), or set %s",
		Version, err, dir, Version, DirEnv, EndpointEnv)
	if testproc.InCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Dir returns the directory dynalite is looked for in.
func Dir() (string, error) {
	if d := os.Getenv(DirEnv); d != "" {
		return d, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "strand", "dynalite-"+Version), nil
}

func findCLI() (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", err
	}
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	cli := filepath.Join(dir, "node_modules", "dynalite", "cli.js")
	if _, err := os.Stat(cli); err != nil {
		return "", err
	}
	return cli, nil
}

// bootstrap runs dynalite's CLI (argv[1]) and exits when its stdin
// closes, so a test binary killed with SIGKILL leaves no server behind.
// dynalite throws from a request's 'error' event, so a client killed
// in the middle of a request (what the crash tests do) would take the
// server down with it; an aborted request is the client's end, not the
// server's, and is ignored. Any other uncaught error still ends it.
const bootstrap = `process.stdin.on('end', () => process.exit(0)); process.stdin.resume();
process.on('uncaughtException', (err) => {
  if (err && (err.code === 'ECONNRESET' || err.message === 'aborted')) { return; }
  console.error(err); process.exit(70);
});
require(process.argv[1]);`

func launch(cli string) (*Server, error) {
	port, err := testproc.FreePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("node", "-e", bootstrap, cli,
		"--host", "127.0.0.1", "--port", fmt.Sprint(port), "--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	cmd.Stderr = (*lockedWriter)(s)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		cmd.Wait()
		close(s.exited)
	}()
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening at") {
				ready <- nil
				io.Copy(io.Discard, stdout)
				return
			}
		}
		ready <- errors.New("dynalite exited before listening")
	}()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("start dynalite on port %d: %w; stderr: %s", port, err, s.stderrText())
	}
	return s, nil
}

type lockedWriter Server

// maxStderrBytes bounds the stderr a Server keeps: the last of it,
// where a crash's stack trace is.
const maxStderrBytes = 64 << 10

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stderr.Write(p)
	if w.stderr.Len() > 2*maxStderrBytes {
		tail := w.stderr.String()[w.stderr.Len()-maxStderrBytes:]
		w.stderr.Reset()
		w.stderr.WriteString(tail)
	}
	return len(p), nil
}

func (s *Server) stderrText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// Exited is closed when a server Start started has exited, on its own
// or stopped; nil (never ready) for the server EndpointEnv names.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// Stderr returns the last of what the server wrote to stderr, for a
// test to show when the server died under it.
func (s *Server) Stderr() string { return s.stderrText() }

// Pause stops the server with SIGSTOP: connections stay open and no
// request is answered until Resume. (It keeps its tables in memory, so
// a test cannot kill and restart it.) A server EndpointEnv names is not
// ours to pause: both do nothing then.
func (s *Server) Pause() {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGSTOP)
	}
}

// Resume continues a paused server.
func (s *Server) Resume() {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Stop ends the server now rather than at cleanup; later calls do
// nothing. Tests use it to see a client's behaviour when the server dies.
func (s *Server) Stop() error { return s.stop() }

func (s *Server) stop() error {
	if s.cmd == nil {
		return nil
	}
	s.stdin.Close()
	select {
	case <-s.exited:
		return nil
	case <-time.After(5 * time.Second):
	}
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-s.exited
	return nil
}
