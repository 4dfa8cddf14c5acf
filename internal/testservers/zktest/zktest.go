// Package zktest owns the ZooKeeper server that tests run against
// (Burrow needs one for its own coordination): Start runs a standalone
// ZooKeeper in the foreground, as a child process, on a free loopback
// port with its data in a new temporary directory; Stop stops it and
// removes the directory.
//
// It runs Debian's zookeeper package (its jar, which names its
// dependencies in its manifest) with the java on PATH, through
// ZooKeeperServerMain and a config file of its own, not zkServer.sh,
// whose environment file fixes the config and log directories to the
// system's. A missing java or jar is testproc.ErrNoBinary: the tests
// skip, except in CI.
package zktest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// Jars lists where the ZooKeeper server jar is looked for, in order:
// STRAND_TEST_ZOOKEEPER_JAR, then Debian's package.
var Jars = []string{"/usr/share/java/zookeeper.jar"}

// EnvJar names a ZooKeeper server jar to use instead.
const EnvJar = "STRAND_TEST_ZOOKEEPER_JAR"

const (
	// startTimeout bounds how long ZooKeeper may take to answer, as a
	// deadlock guard: a JVM on two busy cores takes seconds.
	startTimeout = 60 * time.Second
	// startAttempts bounds retries on a port taken between FreePort and
	// ZooKeeper's bind.
	startAttempts = 3
	stopGrace     = 10 * time.Second
	pollInterval  = 100 * time.Millisecond
)

// Server is a standalone ZooKeeper started for tests.
type Server struct {
	addr string
	dir  string
	proc *testproc.Proc
}

// Start starts a ZooKeeper in a new temporary directory and waits until
// it serves requests. The error wraps testproc.ErrNoBinary when java or
// the jar is missing.
func Start() (*Server, error) {
	java, err := testproc.FindBinary("java")
	if err != nil {
		return nil, err
	}
	jar, err := findJar()
	if err != nil {
		return nil, err
	}
	var id testproc.Identity
	dir, err := id.MkdirTemp("strand-zktest-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range startAttempts {
		s, err := start(id, java, jar, dir)
		if err == nil {
			return s, nil
		}
		lastErr = err
		os.RemoveAll(filepath.Join(dir, "data"))
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func findJar() (string, error) {
	cands := Jars
	if j := os.Getenv(EnvJar); j != "" {
		cands = append([]string{j}, cands...)
	}
	for _, j := range cands {
		if _, err := os.Stat(j); err == nil {
			return j, nil
		}
	}
	return "", fmt.Errorf("%w: no ZooKeeper jar at %v (Debian: apt-get install zookeeper; or set %s)", testproc.ErrNoBinary, cands, EnvJar)
}

func start(id testproc.Identity, java, jar, dir string) (*Server, error) {
	port, err := testproc.FreePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	// The admin server (an HTTP port of its own) is off; "srvr" is the
	// only four-letter word, for the readiness check.
	cfg := fmt.Sprintf("tickTime=2000\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=srvr\n",
		filepath.Join(dir, "data"), port)
	cfgPath := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "zookeeper.log")
	cmd := id.Command(java, "-Xmx256m", "-Dzookeeper.log.dir="+dir, "-cp", jar,
		"org.apache.zookeeper.server.ZooKeeperServerMain", cfgPath)
	proc, err := testproc.Start(cmd, logPath)
	if err != nil {
		return nil, fmt.Errorf("zktest: start zookeeper: %w", err)
	}
	deadline := time.Now().Add(startTimeout)
	for !serving(addr) {
		select {
		case <-proc.Exited():
			return nil, fmt.Errorf("zktest: zookeeper exited during start:\n%s", testproc.Tail(logPath, 2000))
		case <-time.After(pollInterval):
		}
		if time.Now().After(deadline) {
			proc.Stop(syscall.SIGKILL, stopGrace)
			return nil, fmt.Errorf("zktest: zookeeper did not answer on %s in %v:\n%s", addr, startTimeout, testproc.Tail(logPath, 2000))
		}
	}
	return &Server{addr: addr, dir: dir, proc: proc}, nil
}

// serving reports whether a ZooKeeper on addr serves requests: "srvr"
// answers with its version then. "ruok" is no test: it answers "imok"
// while the server still refuses sessions.
func serving(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "srvr"); err != nil {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(c, 4096))
	return (err == nil || errors.Is(err, io.EOF)) && strings.HasPrefix(string(b), "Zookeeper version:")
}

// Addr is the client address, host:port.
func (s *Server) Addr() string { return s.addr }

// Stop stops ZooKeeper and removes its files.
func (s *Server) Stop() {
	s.proc.Stop(syscall.SIGTERM, stopGrace)
	os.RemoveAll(s.dir)
}
