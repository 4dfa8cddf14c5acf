package agent

// One agent per data directory. Two agents on one directory would
// each replay the log into the same Pebble database and write the same
// state files; Pebble's own lock stops the second one, but only deep in
// its start, with "open pebble: resource temporarily unavailable". The
// agent takes a lock of its own first, on <data-dir>/agent.lock, with
// its pid written in it, so the second one says which process holds
// the directory before it binds a port or reads the log. The lock is
// the operating system's (flock): it goes with the process, kill -9
// included, so a stale file never keeps an agent out.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// errDataDirInUse is the start's refusal when another agent holds the
// data directory.
var errDataDirInUse = errors.New("data dir in use by another agent")

// lockDataDir takes dir's agent lock, returning the file to close to
// release it.
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "agent.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := tryLock(f); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = "pid " + strconv.Itoa(pid)
			}
		}
		f.Close()
		return nil, fmt.Errorf("%w (%s): %s; run one agent per --data-dir", errDataDirInUse, holder, dir)
	}
	// The pid is for the message above, not for the lock.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
