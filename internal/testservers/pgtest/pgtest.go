// Package pgtest owns the PostgreSQL server that tests run against: Run,
// called from TestMain, starts one private server for the test binary
// (initdb in a temporary directory, postgres on 127.0.0.1 and a free
// port, fsync on) and stops it when the tests end; URL hands its address
// to a test.
//
// STRAND_TEST_POSTGRES_URL points the tests at an existing server
// instead. Without one, and without PostgreSQL's binaries (Debian's
// postgresql package puts them in /usr/lib/postgresql/<version>/bin), the
// tests skip, except in CI (CI=true), where they fail.
//
// PostgreSQL refuses to run as root; when the tests run as root the
// server runs as the "postgres" account the Debian package creates.
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
//
//	func TestX(t *testing.T) {
//		url := pgtest.URL(t) // postgres://strand@127.0.0.1:PORT/postgres?sslmode=disable
//		...
//	}
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// EnvURL names the environment variable that points tests at an existing
// server.
const EnvURL = "STRAND_TEST_POSTGRES_URL"

const (
	// superuser is the role initdb creates; tests connect as it.
	superuser = "strand"
	// startTimeout bounds how long a server may take to accept
	// connections, as a deadlock guard.
	startTimeout = 60 * time.Second
	// startAttempts bounds retries on a port taken between FreePort and
	// the server's bind.
	startAttempts = 3
	// stopGrace is how long a fast shutdown may take before SIGKILL.
	stopGrace = 10 * time.Second
)

// binGlobs are where distributions keep the server binaries off PATH.
var binGlobs = []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/usr/local/pgsql/bin"}

// Server is a PostgreSQL server started for tests.
type Server struct {
	url  string
	dir  string
	proc *testproc.Proc
	// start starts postgres again on the same files and port.
	start func() (*testproc.Proc, error)
}

// Options tune Start.
type Options struct {
	// Settings are extra postgres -c settings, name to value.
	Settings map[string]string
}

// Start initializes a new cluster in a temporary directory and starts
// postgres on it. The error wraps testproc.ErrNoBinary when PostgreSQL is
// not installed.
func Start(opts Options) (*Server, error) {
	initdb, err := testproc.FindBinary("initdb", binGlobs...)
	if err != nil {
		return nil, err
	}
	postgres, err := testproc.FindBinary("postgres", filepath.Dir(initdb))
	if err != nil {
		return nil, err
	}
	id, err := testproc.UnprivilegedIdentity("postgres")
	if err != nil {
		return nil, err
	}
	dir, err := id.MkdirTemp("strand-pgtest-")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	logPath := filepath.Join(dir, "postgres.log")
	// initdb's own fsyncs (-N) buy nothing for a throwaway cluster; the
	// server itself runs with fsync on.
	cmd := id.Command(initdb, "-D", data, "-U", superuser, "-A", "trust", "-E", "UTF8", "--locale=C", "-N")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	var lastErr error
	for range startAttempts {
		s, err := startServer(id, postgres, dir, data, logPath, opts)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func startServer(id testproc.Identity, postgres, dir, data, logPath string, opts Options) (*Server, error) {
	port, err := testproc.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{"-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		"-c", "fsync=on",
		"-c", "synchronous_commit=on",
		"-c", "max_connections=200",
		"-c", "shared_buffers=64MB",
	}
	for k, v := range opts.Settings {
		args = append(args, "-c", k+"="+v)
	}
	s := &Server{
		url: fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", superuser, port),
		dir: dir,
	}
	s.start = func() (*testproc.Proc, error) {
		proc, err := testproc.Start(id.Command(postgres, args...), logPath)
		if err != nil {
			return nil, fmt.Errorf("pgtest: start postgres: %w", err)
		}
		if err := waitReady(s.url, proc, logPath); err != nil {
			return nil, err
		}
		return proc, nil
	}
	if s.proc, err = s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

// waitReady waits until the server at url accepts connections.
func waitReady(url string, proc *testproc.Proc, logPath string) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		if err := ping(ctx, url); err == nil {
			return nil
		}
		select {
		case <-proc.Exited():
			return fmt.Errorf("pgtest: postgres exited during start:\n%s", testproc.Tail(logPath, 2000))
		case <-ctx.Done():
			proc.Stop(syscall.SIGQUIT, stopGrace)
			return fmt.Errorf("pgtest: postgres did not accept connections in %v:\n%s", startTimeout, testproc.Tail(logPath, 2000))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func ping(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return c.Ping(ctx)
}

// URL returns a connection URL for the superuser and database postgres.
func (s *Server) URL() string { return s.url }

// Stop shuts the server down (fast shutdown) and removes its files.
func (s *Server) Stop() {
	s.proc.Stop(syscall.SIGINT, stopGrace)
	os.RemoveAll(s.dir)
}

// Crash kills the server with SIGKILL, as a power cut would (to the
// extent fsync=on makes a kill -9 of the server alike), and starts it
// again on the same files and port, after crash recovery.
func (s *Server) Crash() error {
	s.Kill()
	return s.Restart()
}

// Kill kills the server and its backends with SIGKILL and leaves it
// down; Restart brings it back.
func (s *Server) Kill() { s.proc.Kill() }

// Restart starts a killed server again on the same files and port.
func (s *Server) Restart() error {
	var err error
	// A start can lose the port to a process that grabbed it meanwhile;
	// try a few times.
	for range startAttempts {
		var proc *testproc.Proc
		if proc, err = s.start(); err == nil {
			s.proc = proc
			return nil
		}
	}
	return err
}

// Pause stops the server and its backends with SIGSTOP: connections stay
// open and no query is answered until Resume.
func (s *Server) Pause() { s.proc.Pause() }

// Resume continues a paused server.
func (s *Server) Resume() { s.proc.Resume() }

var shared struct {
	once sync.Once
	url  string
	srv  *Server
	err  error
}

// Runner is a *testing.M, or another Run wrapping one, so a TestMain can
// chain the servers of several packages: pgtest.Run(etcdRunner{m}).
type Runner interface{ Run() int }

// Run runs the tests and stops the shared server, if URL started one. A
// server that cannot be started is not an error here: URL reports it to
// each test that needs it.
func Run(m Runner) int {
	defer func() {
		if shared.srv != nil {
			shared.srv.Stop()
		}
	}()
	return m.Run()
}

// URL returns the connection URL of the shared server, starting it on
// first use. It skips t when PostgreSQL is not installed (failing instead
// in CI) and fails t when the server does not start.
func URL(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() {
		if u := os.Getenv(EnvURL); u != "" {
			shared.url = u
			return
		}
		shared.srv, shared.err = Start(Options{})
		switch {
		case errors.Is(shared.err, testproc.ErrNoBinary):
			shared.err = fmt.Errorf("%w; install Debian's postgresql package or set %s", shared.err, EnvURL)
		case shared.err == nil:
			shared.url = shared.srv.URL()
		}
	})
	if shared.err != nil {
		testproc.SkipOrFail(t, shared.err)
	}
	return shared.url
}
