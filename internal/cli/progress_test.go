package cli

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// fakeTTY is a writer with a file descriptor, as *os.File is.
type fakeTTY struct {
	bytes.Buffer
	fd uintptr
}

func (f *fakeTTY) Fd() uintptr { return f.fd }

// TestProgressDecision: a progress line only on a terminal stderr, and
// not when the results go to the same kind of screen.
func TestProgressDecision(t *testing.T) {
	const ttyFd, pipeFd = 7, 8
	isTerminal := func(fd uintptr) bool { return fd == ttyFd }
	tty, pipe, buf := &fakeTTY{fd: ttyFd}, &fakeTTY{fd: pipeFd}, &bytes.Buffer{}
	for _, tt := range []struct {
		name        string
		stderr, out io.Writer
		want        bool
	}{
		{"terminal, no results", tty, nil, true},
		{"terminal, results to a pipe", tty, pipe, true},
		{"terminal, results to a buffer", tty, buf, true},
		{"terminal, results to the terminal", tty, tty, false},
		{"pipe", pipe, nil, false},
		{"buffer (tests)", buf, nil, false},
	} {
		if got := newProgressIf(tt.stderr, tt.out, isTerminal, time.Now) != nil; got != tt.want {
			t.Errorf("%s: progress %v, want %v", tt.name, got, tt.want)
		}
	}
	// What commands use: a test's buffers are never terminals.
	if newProgress(buf, nil) != nil {
		t.Error("newProgress on a buffer")
	}
}

// TestProgressRendering: each update replaces the line in place, at most
// once per interval, and clear erases it.
func TestProgressRendering(t *testing.T) {
	tty := &fakeTTY{fd: 1}
	now := time.Unix(0, 0)
	p := newProgressIf(tty, nil, func(uintptr) bool { return true }, func() time.Time { return now })
	p.update(countLine("produced", 10, 0))
	p.update(countLine("produced", 20, 0)) // within the interval: skipped
	now = now.Add(progressInterval)
	p.update(countLine("consumed", 30, 120))
	p.clear()
	p.clear() // nothing shown: nothing to erase
	want := "\rproduced 10 records\x1b[K" + "\rconsumed 30/120 records (25%)\x1b[K" + "\r\x1b[K"
	if tty.String() != want {
		t.Errorf("wrote %q, want %q", tty.String(), want)
	}
	var nilProgress *progress
	nilProgress.update("x") // off: no-ops
	nilProgress.clear()
}
