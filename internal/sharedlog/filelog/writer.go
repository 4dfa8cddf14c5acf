package filelog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// requestOverheadBytes is charged to the queue budget per append on top of
// its encoded size, so the byte bound also bounds the entry count.
const requestOverheadBytes = 128

type requestKind uint8

const (
	kindAppend requestKind = iota
	kindSeal
	kindTrim
)

// request is one operation for the writer goroutine.
type request struct {
	kind   requestKind
	rec    []byte        // kindAppend: the encoded entry
	trimTo sharedlog.Pos // kindTrim
	done   chan result   // capacity 1: the writer never blocks on a reply
}

type result struct {
	pos sharedlog.Pos
	err error
}

func (r *request) cost() int {
	if r.kind != kindAppend {
		return 0 // seals and trims are few and must not wait behind appends
	}
	return len(r.rec) + requestOverheadBytes
}

// writer is the state only the writer goroutine touches.
type writer struct {
	active    *segment
	activeEnd int64 // end of the last acknowledged entry in the active segment
	// allocEnd is the active segment's size on disk, made durable by a
	// full fsync: past activeEnd it holds zeros (preallocation), which
	// appends overwrite and then need only fdatasync.
	allocEnd int64
	batch    []byte // reused group-commit buffer
	// broken is the failure that left bytes of unknown state past
	// activeEnd, until repair cuts them off.
	broken error
	// failing is the first failure of a spell of them, until a write
	// succeeds: a full disk may let the cut through and fail every
	// write after it, and the spell is reported once, not per write.
	failing error
	// rollFailed: a roll failed, maybe after creating the new segment's
	// file, which the next roll must replace.
	rollFailed bool
}

// enqueue queues req for the writer, blocking while the queue is over its
// byte budget. A request alone is admitted even if larger than the budget.
func (l *Loglet) enqueue(ctx context.Context, req *request) error {
	cost := req.cost()
	l.mu.Lock()
	for {
		switch {
		case l.mu.closed:
			l.mu.Unlock()
			return sharedlog.ErrClosed
		case req.kind == kindAppend && l.mu.sealing:
			l.mu.Unlock()
			return sharedlog.ErrSealed
		}
		if cost == 0 || l.mu.queuedBytes == 0 || l.mu.queuedBytes+cost <= l.opts.MaxQueueBytes {
			break
		}
		freed := l.mu.queueFreed
		l.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
		l.mu.Lock()
	}
	if req.kind == kindSeal {
		// From here on no append joins the queue, so every append the
		// writer will ever write is ahead of this seal.
		l.mu.sealing = true
	}
	l.mu.queue = append(l.mu.queue, req)
	l.mu.queuedBytes += cost
	l.mu.Unlock()
	l.signalWriter()
	return nil
}

// writeLoop is the writer goroutine: it takes a group of appends, or one
// seal or trim, off the queue at a time, so while it writes and fsyncs
// one group the next one gathers.
func (l *Loglet) writeLoop() {
	defer close(l.writerDone)
	for {
		reqs, stop := l.nextRequests()
		switch {
		case stop:
			return
		case len(reqs) == 0:
			<-l.wake
		case reqs[0].kind == kindAppend:
			l.commit(reqs)
		case reqs[0].kind == kindSeal:
			l.seal(reqs[0])
		case reqs[0].kind == kindTrim:
			l.trim(reqs[0])
		}
	}
}

// nextRequests takes the next group of appends, at most MaxBatchBytes
// but at least one, or the next control request. stop is set once the
// loglet is closed; queued requests then get ErrClosed.
func (l *Loglet) nextRequests() (reqs []*request, stop bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		for _, r := range l.mu.queue {
			r.done <- result{err: sharedlog.ErrClosed}
		}
		l.mu.queue, l.mu.queuedBytes = nil, 0
		return nil, true
	}
	q := l.mu.queue
	if len(q) == 0 {
		return nil, false
	}
	n := 1
	if q[0].kind == kindAppend {
		for bytes := len(q[0].rec); n < len(q) && q[n].kind == kindAppend && bytes+len(q[n].rec) <= l.opts.MaxBatchBytes; n++ {
			bytes += len(q[n].rec)
		}
	}
	reqs = slices.Clone(q[:n])
	clear(q[:n])
	l.mu.queue = q[n:]
	if len(l.mu.queue) == 0 {
		l.mu.queue = q[:0] // reuse the backing array
	}
	return reqs, false
}

// commit writes a group of appends with one write and one fsync, then
// publishes and acknowledges them.
func (l *Loglet) commit(reqs []*request) {
	w := &l.w
	if err := l.repair(); err != nil {
		l.fail(err, reqs)
		return
	}
	if w.activeEnd >= l.opts.SegmentBytes && w.activeEnd > segmentHeaderBytes {
		if err := l.roll(); err != nil {
			l.fail(err, reqs)
			return
		}
	}
	buf := w.batch[:0]
	offsets := make([]int64, len(reqs))
	cost := 0
	for i, r := range reqs {
		offsets[i] = w.activeEnd + int64(len(buf))
		buf = append(buf, r.rec...)
		cost += r.cost()
	}
	if err := checkReserve(w.active.f); err != nil {
		l.fail(fmt.Errorf("writing %s: %w", w.active.path, err), reqs)
		return
	}
	if _, err := w.active.f.WriteAt(buf, w.activeEnd); err != nil {
		l.fail(fmt.Errorf("writing %s: %w", w.active.path, err), reqs)
		return
	}
	end := w.activeEnd + int64(len(buf))
	if end <= w.allocEnd {
		// The blocks and the size are durable already: flush the data.
		if err := datasync(w.active.f); err != nil {
			l.fail(fmt.Errorf("fdatasync %s: %w", w.active.path, err), reqs)
			return
		}
	} else {
		// The file grows: zero the next stretch too, so that the appends
		// after this one write inside the file, and make both durable,
		// size and blocks, with one fsync.
		alloc := max(end, min(end+preallocBytes, l.opts.SegmentBytes))
		if err := writeZeros(w.active.f, end, alloc); err != nil {
			l.fail(fmt.Errorf("writing %s: %w", w.active.path, err), reqs)
			return
		}
		if err := w.active.f.Sync(); err != nil {
			l.fail(fmt.Errorf("fsync %s: %w", w.active.path, err), reqs)
			return
		}
		w.allocEnd = alloc
	}
	w.activeEnd = end
	if cap(buf) <= 2*l.opts.MaxBatchBytes {
		w.batch = buf[:0]
	} else {
		w.batch = nil // one huge entry: don't keep its buffer
	}

	l.mu.Lock()
	first := l.mu.tail
	w.active.offsets = append(w.active.offsets, offsets...)
	w.active.end = w.activeEnd
	l.mu.tail += sharedlog.Pos(len(reqs))
	l.mu.queuedBytes -= cost
	l.wakeLocked()
	l.mu.Unlock()
	for i, r := range reqs {
		r.done <- result{pos: first + sharedlog.Pos(i)}
	}
	l.recovered()
	// Let the appenders just woken queue their next entries before the
	// next group is cut. Without this, closed-loop appenders split into
	// two alternating halves, one in the fsync and one queued, and a
	// group commit carries half of them.
	runtime.Gosched()
}

// freeReserve is the free space below which the loglet refuses appends
// as a full disk would (ENOSPC). Without preallocation the log was the
// first writer to find a full disk, since every append grew its file,
// and a refused append is a produce answered with an error, after which
// the agent serves again once space is back. Appends into preallocated
// zeros no longer find it, and the next writer, the metadata database
// applying what the log took (usually on the same disk), would, and an
// agent stops when its database cannot write. So the log refuses first,
// while the disk still has room for the database to apply what was
// taken.
const freeReserve = 4 * preallocBytes

// checkReserve fails with ENOSPC when f's file system has less than
// freeReserve free; a file that cannot tell is not refused.
func checkReserve(f File) error {
	fr, ok := f.(Freer)
	if !ok {
		return nil
	}
	free, err := fr.FreeBytes()
	if err != nil || free >= freeReserve {
		return nil // a statfs that fails is no reason to refuse a write
	}
	return fmt.Errorf("%w: %d bytes free, fewer than the %d the log leaves to the metadata database", syscall.ENOSPC, free, freeReserve)
}

// preallocBytes is how far past its entries the writer zeroes the active
// segment when an append grows it: one full fsync per this many bytes of
// log, fdatasync for the appends in between.
const preallocBytes = 1 << 20

// zeros is written to preallocate.
var zeros [64 << 10]byte

// writeZeros writes zeros to f over [from, to).
func writeZeros(f File, from, to int64) error {
	for off := from; off < to; {
		n, err := f.WriteAt(zeros[:min(int64(len(zeros)), to-off)], off)
		if err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// cutPreallocation truncates the active segment's zeros, as a roll and a
// clean Close leave a segment: ending after its last entry.
func (l *Loglet) cutPreallocation() error {
	w := &l.w
	if w.allocEnd <= w.activeEnd {
		return nil
	}
	if err := w.active.f.Truncate(w.activeEnd); err != nil {
		return fmt.Errorf("cutting the preallocation of %s: %w", w.active.path, err)
	}
	if err := w.active.f.Sync(); err != nil {
		return fmt.Errorf("cutting the preallocation of %s: %w", w.active.path, err)
	}
	w.allocEnd = w.activeEnd
	return nil
}

// roll starts a new active segment at the tail.
func (l *Loglet) roll() error {
	w := &l.w
	// A closed segment ends after its last entry, as every version of
	// this package writes and reads them.
	if err := l.cutPreallocation(); err != nil {
		return err
	}
	l.mu.Lock()
	base := l.mu.tail
	l.mu.Unlock()
	if w.rollFailed {
		// The failed roll may have got as far as renaming the new file
		// into place. It holds no entry (the active segment never
		// switched to it) and nothing else creates files in the locked
		// directory, so it goes.
		if err := l.opts.FS.Remove(l.segmentPath(base)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	w.rollFailed = true
	seg, err := l.createSegment(base)
	if err != nil {
		return err
	}
	w.rollFailed = false
	l.mu.Lock()
	l.mu.segments = append(l.mu.segments, seg)
	l.mu.Unlock()
	w.active, w.activeEnd, w.allocEnd = seg, segmentHeaderBytes, segmentHeaderBytes
	return nil
}

func (l *Loglet) seal(req *request) {
	// The sealed tail written to STATE must match what Open will scan,
	// so a failed write's leftovers go first.
	if err := l.repair(); err != nil {
		l.fail(err, []*request{req})
		return
	}
	l.mu.Lock()
	st := state{sealed: true, trimmed: l.mu.trimmed, sealedTail: l.mu.tail}
	already := l.mu.sealed
	l.mu.Unlock()
	if !already {
		if err := l.writeState(st); err != nil {
			l.fail(err, []*request{req})
			return
		}
		l.recovered()
		l.mu.Lock()
		l.mu.sealed = true
		l.wakeLocked()
		l.mu.Unlock()
	}
	req.done <- result{}
}

func (l *Loglet) trim(req *request) {
	if err := l.repair(); err != nil {
		l.fail(err, []*request{req})
		return
	}
	l.mu.Lock()
	before := min(req.trimTo, l.mu.tail)
	st := state{sealed: l.mu.sealed, trimmed: before}
	if st.sealed {
		st.sealedTail = l.mu.tail
	}
	noop := before <= l.mu.trimmed
	l.mu.Unlock()
	if noop {
		req.done <- result{}
		return
	}
	if err := l.writeState(st); err != nil {
		l.fail(err, []*request{req})
		return
	}
	l.recovered()

	// Whole segments below the trim point go; the active one stays.
	l.mu.Lock()
	l.mu.trimmed = before
	segs := l.mu.segments
	drop := 0
	for drop < len(segs)-1 && segs[drop+1].base <= before {
		drop++
	}
	dead := segs[:drop]
	l.mu.segments = slices.Clone(segs[drop:])
	l.mu.Unlock()
	// Readers that picked a dead segment's file before the swap see it
	// closed and report ErrTrimmed. A crash before the removals are
	// durable only leaves files that Open deletes again.
	for _, s := range dead {
		_ = s.f.Close()
		if err := l.opts.FS.Remove(s.path); err != nil {
			l.opts.Logger.Warn("filelog: removing trimmed segment", "path", s.path, "err", err)
		}
	}
	req.done <- result{}
}

// fail breaks the loglet (see the package doc) if it is not broken yet,
// and answers reqs and everything queued with the error: queued requests
// would only meet the same fault, and their callers retry.
func (l *Loglet) fail(cause error, reqs []*request) {
	err := fmt.Errorf("%w: %w", ErrFailed, cause)
	if l.w.broken == nil {
		l.w.broken = cause
	}
	if l.w.failing == nil {
		l.w.failing = err
		l.opts.Logger.Error("filelog: write failed; writes fail until the file system takes them again", "dir", l.dir, "err", cause)
	}
	l.mu.Lock()
	queued := l.mu.queue
	l.mu.queue, l.mu.queuedBytes = nil, 0
	l.wakeLocked()
	l.mu.Unlock()
	for _, r := range queued {
		r.done <- result{err: err}
	}
	for _, r := range reqs {
		r.done <- result{err: err}
	}
}

// repair cuts off what a failed write may have left, as the package doc
// describes: it truncates the active segment to the end of the last
// acknowledged entry and fsyncs it. Everything before that end was
// fsynced before the failure, and nothing past it was acknowledged or
// published, so cutting it loses nothing and leaves the positions from
// the tail on free to write. It returns an error while the cut cannot be
// made durable, and nil at once when the loglet is not broken.
func (l *Loglet) repair() error {
	w := &l.w
	if w.broken == nil {
		return nil
	}
	f := w.active.f
	err := f.Truncate(w.activeEnd)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return fmt.Errorf("cutting %s back to %d bytes after %v: %w", w.active.path, w.activeEnd, w.broken, err)
	}
	w.broken = nil
	w.allocEnd = w.activeEnd
	return nil
}

// recovered ends a spell of failures after a successful write.
func (l *Loglet) recovered() {
	if l.w.failing == nil {
		return
	}
	l.mu.Lock()
	tail := l.mu.tail
	l.mu.Unlock()
	l.opts.Logger.Warn("filelog: writes work again; what the failed writes left was cut off",
		"dir", l.dir, "tail", tail, "failure", l.w.failing)
	l.w.failing = nil
}

const (
	stateFileName = "STATE"
	tmpSuffix     = ".tmp"
)

func (l *Loglet) segmentPath(base sharedlog.Pos) string {
	return filepath.Join(l.dir, fmt.Sprintf("%020d.seg", uint64(base)))
}

// writeState replaces the STATE file durably.
func (l *Loglet) writeState(st state) error {
	return l.writeFileDurably(filepath.Join(l.dir, stateFileName), st.encode(), false)
}

// createSegment creates an empty segment file durably and returns it open
// for writing.
func (l *Loglet) createSegment(base sharedlog.Pos) (*segment, error) {
	path := l.segmentPath(base)
	if err := l.writeFileDurably(path, encodeSegmentHeader(base), true); err != nil {
		return nil, err
	}
	f, err := l.opts.FS.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return &segment{base: base, path: path, f: f, end: segmentHeaderBytes}, nil
}

// writeFileDurably writes data to path.tmp, fsyncs it, renames it over
// path and fsyncs the directory. With exclusive, an existing path is an
// error rather than replaced.
func (l *Loglet) writeFileDurably(path string, data []byte, exclusive bool) error {
	if exclusive {
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("filelog: %s already exists", path)
		}
	}
	tmp := path + tmpSuffix
	f, err := l.opts.FS.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("filelog: writing %s: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = l.opts.FS.Rename(tmp, path)
	}
	if err == nil {
		err = l.syncDir()
	}
	if err != nil {
		return fmt.Errorf("filelog: writing %s: %w", path, err)
	}
	return nil
}

func (l *Loglet) syncDir() error { return syncDir(l.dir, l.opts.FS) }

// syncDir makes dir's entries (creations, renames, removals) durable.
func syncDir(dir string, fsys FS) error {
	d, err := fsys.OpenFile(dir, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
