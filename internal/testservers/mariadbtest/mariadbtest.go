// Package mariadbtest owns the MariaDB server that tests run against:
// Run, called from TestMain, starts one private server for the test
// binary on first use (mariadb-install-db in a temporary directory,
// mariadbd on 127.0.0.1 and a free port, InnoDB flushing its log at
// every commit) and stops it when the tests end; URL hands its DSN to a
// test. Start gives a test a server of its own, which it can Kill and
// Restart on the same files and port.
//
// STRAND_TEST_MARIADB_DSN points the tests at an existing server
// instead. Without one, and without MariaDB's binaries (Debian's
// mariadb-server package), the tests skip, except in CI (CI=true),
// where they fail.
//
// mariadbd refuses to run as root; when the tests run as root the
// server runs as the "mysql" account the Debian package creates.
//
//	func TestMain(m *testing.M) { os.Exit(mariadbtest.Run(m)) }
//
//	func TestX(t *testing.T) {
//		dsn := mariadbtest.URL(t) // strand@tcp(127.0.0.1:PORT)/strand
//		...
//	}
package mariadbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// EnvDSN names the environment variable that points tests at an existing
// server (a go-sql-driver/mysql DSN).
const EnvDSN = "STRAND_TEST_MARIADB_DSN"

const (
	// user is the account the init file creates; tests connect as it,
	// without a password, from 127.0.0.1 only.
	user = "strand"
	// database is the database the init file creates for the tests.
	database = "strand"
	// startTimeout bounds how long a server may take to accept
	// connections, as a deadlock guard (InnoDB crash recovery
	// included).
	startTimeout = 60 * time.Second
	// startAttempts bounds retries on a port taken between FreePort and
	// the server's bind.
	startAttempts = 3
	// stopGrace is how long a clean shutdown may take before SIGKILL.
	stopGrace = 20 * time.Second
)

// binGlobs are where distributions keep the server binaries off PATH
// (Debian's is /usr/sbin, not on a user's PATH).
var binGlobs = []string{"/usr/sbin", "/usr/libexec", "/usr/local/mysql/bin"}

// initSQL runs at every start of the server (--init-file): idempotent.
// The user is matched by address since the server skips name
// resolution.
const initSQL = "CREATE USER IF NOT EXISTS '" + user + "'@'127.0.0.1';\n" +
	"GRANT ALL PRIVILEGES ON *.* TO '" + user + "'@'127.0.0.1' WITH GRANT OPTION;\n" +
	"CREATE DATABASE IF NOT EXISTS " + database + ";\n"

// Server is a MariaDB server started for tests.
type Server struct {
	port int
	dir  string
	proc *testproc.Proc
	// start starts mariadbd again on the same files and port.
	start func() (*testproc.Proc, error)
}

// Start initializes a new data directory in a temporary directory and
// starts mariadbd on it. The error wraps testproc.ErrNoBinary when
// MariaDB is not installed.
func Start() (*Server, error) {
	install, err := testproc.FindBinary("mariadb-install-db", append([]string{"/usr/bin"}, binGlobs...)...)
	if err != nil {
		return nil, err
	}
	mariadbd, err := testproc.FindBinary("mariadbd", binGlobs...)
	if err != nil {
		return nil, err
	}
	id, err := testproc.UnprivilegedIdentity("mysql")
	if err != nil {
		return nil, err
	}
	dir, err := id.MkdirTemp("strand-mariadbtest-")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	// --no-defaults everywhere: the machine's my.cnf (a system server's
	// socket, port, datadir) must not leak into a test server.
	cmd := id.Command(install, "--no-defaults", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("mariadbtest: mariadb-install-db: %v\n%s", err, out)
	}
	initPath := filepath.Join(dir, "init.sql")
	if err := os.WriteFile(initPath, []byte(initSQL), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var lastErr error
	for range startAttempts {
		s, err := startServer(id, mariadbd, dir, data, initPath)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func startServer(id testproc.Identity, mariadbd, dir, data, initPath string) (*Server, error) {
	port, err := testproc.FreePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "mariadbd.log")
	args := []string{"--no-defaults",
		"--datadir=" + data,
		"--port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(dir, "mariadbd.sock"),
		"--pid-file=" + filepath.Join(dir, "mariadbd.pid"),
		"--init-file=" + initPath,
		"--skip-name-resolve",
		// Durable commits, so that a kill -9 of the server is a test of
		// what a committed transaction guarantees.
		"--innodb-flush-log-at-trx-commit=1",
		"--innodb-buffer-pool-size=64M",
		"--max-connections=200",
		"--character-set-server=utf8mb4",
		"--collation-server=utf8mb4_bin",
	}
	s := &Server{port: port, dir: dir}
	s.start = func() (*testproc.Proc, error) {
		proc, err := testproc.Start(id.Command(mariadbd, args...), logPath)
		if err != nil {
			return nil, fmt.Errorf("mariadbtest: start mariadbd: %w", err)
		}
		if err := waitReady(s.DSN(), proc, logPath); err != nil {
			return nil, err
		}
		return proc, nil
	}
	if s.proc, err = s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

// waitReady waits until the server at dsn accepts connections.
func waitReady(dsn string, proc *testproc.Proc, logPath string) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		if err := ping(ctx, dsn); err == nil {
			return nil
		}
		select {
		case <-proc.Exited():
			return fmt.Errorf("mariadbtest: mariadbd exited during start:\n%s", testproc.Tail(logPath, 2000))
		case <-ctx.Done():
			proc.Stop(syscall.SIGTERM, stopGrace)
			return fmt.Errorf("mariadbtest: mariadbd did not accept connections in %v:\n%s", startTimeout, testproc.Tail(logPath, 2000))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func ping(ctx context.Context, dsn string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	// The init file runs before the server listens, but a connection
	// as the test user proves it ran.
	return db.PingContext(ctx)
}

// DSN returns a go-sql-driver/mysql DSN for the test user and database.
func (s *Server) DSN() string {
	c := mysql.NewConfig()
	c.User = user
	c.Net = "tcp"
	c.Addr = "127.0.0.1:" + strconv.Itoa(s.port)
	c.DBName = database
	return c.FormatDSN()
}

// Port returns the TCP port the server listens on.
func (s *Server) Port() int { return s.port }

// URL returns the server as a JDBC URL, as connector configurations
// name it: jdbc:mariadb://127.0.0.1:PORT/strand (user strand, no
// password).
func (s *Server) URL() string {
	return fmt.Sprintf("jdbc:mariadb://127.0.0.1:%d/%s", s.port, database)
}

// Stop shuts the server down (SIGTERM: a clean shutdown) and removes
// its files.
func (s *Server) Stop() {
	s.proc.Stop(syscall.SIGTERM, stopGrace)
	os.RemoveAll(s.dir)
}

// Kill kills the server with SIGKILL and leaves it down; Restart brings
// it back after InnoDB's crash recovery.
func (s *Server) Kill() { s.proc.Kill() }

// Crash is Kill then Restart.
func (s *Server) Crash() error {
	s.Kill()
	return s.Restart()
}

// Restart starts a killed server again on the same files and port.
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

var shared struct {
	once sync.Once
	dsn  string
	srv  *Server
	err  error
}

// Runner is a *testing.M, or another Run wrapping one, so a TestMain can
// chain the servers of several packages: mariadbtest.Run(pgRunner{m}).
type Runner interface{ Run() int }

// Run runs the tests and stops the shared server, if DSN started one.
// A server that cannot be started is not an error here: DSN reports it
// to each test that needs it.
func Run(m Runner) int {
	defer func() {
		if shared.srv != nil {
			shared.srv.Stop()
		}
	}()
	return m.Run()
}

// DSN returns the go-sql-driver/mysql DSN of the shared server,
// starting it on first use. It skips t when MariaDB is not installed
// (failing instead in CI) and fails t when the server does not start.
func DSN(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() {
		if d := os.Getenv(EnvDSN); d != "" {
			shared.dsn = d
			return
		}
		shared.srv, shared.err = Start()
		switch {
		case errors.Is(shared.err, testproc.ErrNoBinary):
			shared.err = fmt.Errorf("%w; install Debian's mariadb-server package or set %s", shared.err, EnvDSN)
		case shared.err == nil:
			shared.dsn = shared.srv.DSN()
		}
	})
	if shared.err != nil {
		testproc.SkipOrFail(t, shared.err)
	}
	return shared.dsn
}

// URL returns the shared server as a JDBC URL (see Server.URL), for a
// connector's connection.url; user strand, no password.
func URL(t testing.TB) string {
	t.Helper()
	dsn := DSN(t)
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("mariadbtest: %s: %v", EnvDSN, err)
	}
	return "jdbc:mariadb://" + c.Addr + "/" + c.DBName
}
