package cli

import (
	"fmt"
	"io"
	"time"

	"golang.org/x/term"
)

// progressInterval is how often a progress line is redrawn: often enough
// to look alive, rarely enough to cost nothing next to the work.
const progressInterval = 250 * time.Millisecond

// progress keeps one status line of a long operation (a produce of many
// records, a consume to a count) on a terminal, redrawn in place with
// \r. It is nil, and every method a no-op, unless its writer is a
// terminal: a pipe, a file or a test buffer never sees it. It is used
// from one goroutine.
type progress struct {
	w     io.Writer
	now   func() time.Time
	last  time.Time
	shown bool
}

// fder is what *os.File offers to ask whether it is a terminal.
type fder interface{ Fd() uintptr }

// newProgress returns a progress line on stderr if stderr is a terminal
// and out, where the command prints its results (nil: nowhere), is not:
// results scrolling on the same screen would tear the line. Otherwise it
// returns nil.
func newProgress(stderr, out io.Writer) *progress {
	return newProgressIf(stderr, out, func(fd uintptr) bool { return term.IsTerminal(int(fd)) }, time.Now)
}

// newProgressIf is newProgress with the terminal test and the clock as
// inputs, so the decision is testable without a terminal.
func newProgressIf(stderr, out io.Writer, isTerminal func(fd uintptr) bool, now func() time.Time) *progress {
	tty := func(w io.Writer) bool {
		f, ok := w.(fder)
		return ok && isTerminal(f.Fd())
	}
	if !tty(stderr) || (out != nil && tty(out)) {
		return nil
	}
	return &progress{w: stderr, now: now}
}

// update redraws the line, at most once per progressInterval.
func (p *progress) update(line string) {
	if p == nil {
		return
	}
	t := p.now()
	if p.shown && t.Sub(p.last) < progressInterval {
		return
	}
	p.last, p.shown = t, true
	fmt.Fprint(p.w, renderProgress(line))
}

// clear erases the line, so the summary that follows starts clean.
func (p *progress) clear() {
	if p == nil || !p.shown {
		return
	}
	p.shown = false
	fmt.Fprint(p.w, "\r\x1b[K")
}

// renderProgress is the bytes that replace the current terminal line with
// line: back to its start, the text, then erase what a longer previous
// line left to the right.
func renderProgress(line string) string { return "\r" + line + "\x1b[K" }

// countLine renders "produced 1200 records" or, with a target,
// "consumed 1200/5000 records (24%)".
func countLine(verb string, n, total int) string {
	if total <= 0 {
		return fmt.Sprintf("%s %d records", verb, n)
	}
	return fmt.Sprintf("%s %d/%d records (%d%%)", verb, n, total, n*100/total)
}
