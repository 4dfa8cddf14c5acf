// Package testproc owns what the test-server packages (pgtest, etcdtest)
// share: finding a server binary, picking a free loopback port, running a
// server as a child process that dies with the test binary, and the rule
// for a missing binary (skip locally, fail in CI).
package testproc

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ErrNoBinary: the server binary is not installed. Tests skip on it,
// unless CI is set, where a missing binary is a broken setup.
var ErrNoBinary = errors.New("testproc: server binary not installed")

// InCI reports whether the tests run in CI (CI=true), where a server that
// cannot be started fails the tests instead of skipping them.
func InCI() bool {
	v := os.Getenv("CI")
	return v == "true" || v == "1"
}

// SkipOrFail ends t because the server it needs is unavailable: a skip
// when the binary is missing outside CI, a failure otherwise.
func SkipOrFail(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNoBinary) && !InCI() {
		t.Skip(err)
	}
	t.Fatal(err)
}

// FindBinary returns the path of name: from PATH, else from the first of
// the glob patterns that matches (the newest version first when a pattern
// matches several, as /usr/lib/postgresql/*/bin does).
func FindBinary(name string, globs ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, g := range globs {
		ms, _ := filepath.Glob(filepath.Join(g, name))
		sort.Slice(ms, func(i, j int) bool { return versionLess(ms[j], ms[i]) })
		for _, m := range ms {
			if fi, err := os.Stat(m); err == nil && fi.Mode()&0o111 != 0 {
				return m, nil
			}
		}
	}
	return "", fmt.Errorf("%w: %s (not in PATH nor %v)", ErrNoBinary, name, globs)
}

// versionLess orders paths so that ".../9/bin" sorts before ".../15/bin".
func versionLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// FreePort returns a loopback TCP port that was free a moment ago. The
// caller retries its start on a clash, since another process may take
// the port before the server binds it.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Identity is the user a server runs as. Servers that refuse to run as
// root (PostgreSQL) run as an unprivileged account when the tests are
// root.
type Identity struct {
	cred *syscall.Credential // nil: run as ourselves
}

// UnprivilegedIdentity returns the identity to run a root-refusing server
// as: ourselves when not root, else the account named user (which must
// exist, as the Debian package's "postgres" does).
func UnprivilegedIdentity(name string) (Identity, error) {
	if os.Geteuid() != 0 {
		return Identity{}, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return Identity{}, fmt.Errorf("testproc: running as root and no %q account to run the server as: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return Identity{}, fmt.Errorf("testproc: account %q: %w", name, err)
	}
	return Identity{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}, nil
}

// MkdirTemp creates a directory the identity owns, mode 0700.
func (id Identity) MkdirTemp(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	if id.cred != nil {
		if err := os.Chown(dir, int(id.cred.Uid), int(id.cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// Command returns cmd set up to run as the identity, in its own process
// group, and killed when the test binary dies (Pdeathsig), so no server
// outlives a crashed test run.
func (id Identity) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(cmd.SysProcAttr)
	if id.cred != nil {
		cmd.SysProcAttr.Credential = id.cred
	}
	return cmd
}

// Proc is a running server process.
type Proc struct {
	cmd    *exec.Cmd
	log    *os.File
	done   chan struct{}
	mu     sync.Mutex
	waitEr error
}

// Start starts cmd with its output going to logPath.
func Start(cmd *exec.Cmd, logPath string) (*Proc, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	p := &Proc{cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitEr = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Stop sends sig and waits up to grace for the process to exit, then
// kills it. It returns the process's exit error, if any besides the
// signal.
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	p.log.Close()
}

// Kill kills the process and every process in its group (it leads one,
// see Command) at once, with SIGKILL, as a crash of the machine would,
// and waits for it.
func (p *Proc) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.cmd.Process.Kill()
	<-p.done
	// The leader's children are not ours to wait for, and until they are
	// gone a restart on the same files can fail (PostgreSQL refuses while
	// its old backends still hold the shared memory block). Wait while
	// the group has a live member, bounded. A zombie nobody reaps (a
	// container's init may not) holds nothing, so only live members
	// count; without /proc, any member does.
	deadline := time.Now().Add(killGroupWait)
	for groupAlive(p.cmd.Process.Pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// Pause stops the process and every process in its group with SIGSTOP,
// as a machine that hangs (or a long GC pause) would: connections stay
// open and nothing answers. Resume undoes it.
//
// Pause returns once every thread of the group is stopped: kill(2)
// only queues SIGSTOP, and a thread running on another core can still
// answer a request before it takes the signal. The wait is bounded.
func (p *Proc) Pause() {
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGSTOP)
	deadline := time.Now().Add(pauseWait)
	for groupHas(pgid, running) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

// pauseWait bounds how long Pause waits for the group to stop.
const pauseWait = 10 * time.Second

// Resume continues a paused process group with SIGCONT.
func (p *Proc) Resume() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT) }

// killGroupWait bounds how long Kill waits for the process group to
// empty: long, since a loaded machine can take seconds to tear down a
// killed server's processes, and a restart before that fails.
const killGroupWait = 30 * time.Second

// groupAlive reports whether process group pgid has a member that is not
// a zombie.
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	return groupHas(pgid, live)
}

// Thread states of /proc/<pid>/task/<tid>/stat.
func live(state string) bool    { return state != "Z" && state != "X" }
func running(state string) bool { return live(state) && state != "T" && state != "t" }

// groupHas reports whether a thread of a process in group pgid is in a
// state match accepts. Without /proc it answers true: callers wait on it
// with a bound.
func groupHas(pgid int, match func(state string) bool) bool {
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range dir {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		state, pg, ok := procStat(filepath.Join("/proc", e.Name(), "stat"))
		if !ok || pg != pgid {
			continue
		}
		// Every thread: the process's own line is its main thread's.
		tasks, _ := os.ReadDir(filepath.Join("/proc", e.Name(), "task"))
		if len(tasks) == 0 && match(state) {
			return true
		}
		for _, task := range tasks {
			if st, _, ok := procStat(filepath.Join("/proc", e.Name(), "task", task.Name(), "stat")); ok && match(st) {
				return true
			}
		}
	}
	return false
}

// procStat reads a stat file's state and process group.
func procStat(path string) (state string, pgrp int, ok bool) {
	stat, err := os.ReadFile(path)
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces and
	// parentheses, so read from the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 3 {
		return "", 0, false
	}
	pgrp, err = strconv.Atoi(f[2])
	return f[0], pgrp, err == nil
}

// Tail returns up to the last n bytes of the file at path, for error
// messages about a server that would not start.
func Tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-n, 0)
	b := make([]byte, fi.Size()-off)
	_, _ = f.ReadAt(b, off)
	return string(b)
}
