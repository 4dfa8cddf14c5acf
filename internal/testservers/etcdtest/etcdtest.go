// Package etcdtest owns the etcd server that tests run against: URL (or
// Endpoints) starts one single-member etcd for the test binary on first
// use, with its data in a temporary directory and its client and peer
// ports on 127.0.0.1; Run, called from TestMain, stops it when the tests
// end.
//
// STRAND_TEST_ETCD_ENDPOINTS (comma-separated host:port) points the tests
// at an existing cluster instead. Without one, and without an etcd binary
// (Debian's etcd-server package installs /usr/bin/etcd), the tests skip,
// except in CI (CI=true), where they fail.
//
//	func TestMain(m *testing.M) { os.Exit(etcdtest.Run(m)) }
//
//	func TestX(t *testing.T) {
//		eps := etcdtest.Endpoints(t) // ["127.0.0.1:PORT"]
//		...
//	}
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// EnvEndpoints names the environment variable that points tests at an
// existing cluster.
const EnvEndpoints = "STRAND_TEST_ETCD_ENDPOINTS"

const (
	// startTimeout bounds how long etcd may take to become healthy, as a
	// deadlock guard.
	startTimeout = 60 * time.Second
	// startAttempts bounds retries on a port taken between FreePort and
	// etcd's bind.
	startAttempts = 3
	stopGrace     = 10 * time.Second
)

// Server is an etcd member started for tests.
type Server struct {
	endpoint string
	dir      string
	proc     *testproc.Proc
	// start starts etcd again on the same files and ports.
	start func() (*testproc.Proc, error)
}

// Start starts a single-member cluster in a new temporary directory. The
// error wraps testproc.ErrNoBinary when etcd is not installed.
func Start() (*Server, error) {
	bin, err := testproc.FindBinary("etcd")
	if err != nil {
		return nil, err
	}
	var id testproc.Identity // etcd runs as root without complaint
	dir, err := id.MkdirTemp("strand-etcdtest-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range startAttempts {
		s, err := startServer(id, bin, dir)
		if err == nil {
			return s, nil
		}
		lastErr = err
		os.RemoveAll(filepath.Join(dir, "data"))
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func startServer(id testproc.Identity, bin, dir string) (*Server, error) {
	cport, err1 := testproc.FreePort()
	pport, err2 := testproc.FreePort()
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", cport)
	peer := fmt.Sprintf("http://127.0.0.1:%d", pport)
	logPath := filepath.Join(dir, "etcd.log")
	cmd := id.Command(bin,
		"--name", "default",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", "default="+peer,
		"--initial-cluster-state", "new",
		"--logger", "zap",
		"--log-outputs", "stderr",
		"--log-level", "warn",
	)
	endpoint := fmt.Sprintf("127.0.0.1:%d", cport)
	s := &Server{endpoint: endpoint, dir: dir}
	s.start = func() (*testproc.Proc, error) {
		proc, err := testproc.Start(id.Command(cmd.Path, cmd.Args[1:]...), logPath)
		if err != nil {
			return nil, fmt.Errorf("etcdtest: start etcd: %w", err)
		}
		if err := waitHealthy(endpoint, proc, logPath); err != nil {
			return nil, err
		}
		return proc, nil
	}
	var err error
	if s.proc, err = s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

func waitHealthy(endpoint string, proc *testproc.Proc, logPath string) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		if err := healthy(ctx, []string{endpoint}); err == nil {
			return nil
		}
		select {
		case <-proc.Exited():
			return fmt.Errorf("etcdtest: etcd exited during start:\n%s", testproc.Tail(logPath, 2000))
		case <-ctx.Done():
			proc.Stop(syscall.SIGKILL, stopGrace)
			return fmt.Errorf("etcdtest: etcd not healthy in %v:\n%s", startTimeout, testproc.Tail(logPath, 2000))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// healthy reports whether the cluster serves a linearizable read.
func healthy(ctx context.Context, endpoints []string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = cli.Get(ctx, "health")
	return err
}

// Endpoint returns the client address, host:port.
func (s *Server) Endpoint() string { return s.endpoint }

// Crash kills etcd with SIGKILL and starts it again on the same files and
// ports.
func (s *Server) Crash() error {
	s.Kill()
	return s.Restart()
}

// Kill kills etcd with SIGKILL and leaves it down; Restart brings it back.
func (s *Server) Kill() { s.proc.Kill() }

// Restart starts a killed etcd again on the same files and ports.
func (s *Server) Restart() error {
	var err error
	for range startAttempts {
		var proc *testproc.Proc
		if proc, err = s.start(); err == nil {
			s.proc = proc
			return nil
		}
	}
	return err
}

// Pause stops etcd with SIGSTOP: connections stay open and no request is
// answered until Resume.
func (s *Server) Pause() { s.proc.Pause() }

// Resume continues a paused etcd.
func (s *Server) Resume() { s.proc.Resume() }

// Stop stops etcd and removes its files.
func (s *Server) Stop() {
	s.proc.Stop(syscall.SIGTERM, stopGrace)
	os.RemoveAll(s.dir)
}

var shared struct {
	once      sync.Once
	endpoints []string
	srv       *Server
	err       error
}

// Runner is a *testing.M, or another Run wrapping one, so a TestMain can
// chain the servers of several packages.
type Runner interface{ Run() int }

// Run runs the tests and stops the shared server, if one was started.
func Run(m Runner) int {
	defer func() {
		if shared.srv != nil {
			shared.srv.Stop()
		}
	}()
	return m.Run()
}

// Endpoints returns the shared cluster's client endpoints, starting a
// server on first use. It skips t when etcd is not installed (failing
// instead in CI) and fails t when the server does not start.
func Endpoints(t testing.TB) []string {
	t.Helper()
	shared.once.Do(func() {
		if e := os.Getenv(EnvEndpoints); e != "" {
			shared.endpoints = strings.Split(e, ",")
			return
		}
		shared.srv, shared.err = Start()
		switch {
		case errors.Is(shared.err, testproc.ErrNoBinary):
			shared.err = fmt.Errorf("%w; install Debian's etcd-server package or set %s", shared.err, EnvEndpoints)
		case shared.err == nil:
			shared.endpoints = []string{shared.srv.Endpoint()}
		}
	})
	if shared.err != nil {
		testproc.SkipOrFail(t, shared.err)
	}
	return shared.endpoints
}
