// Package filelog owns the file loglet, Strand's embedded default: a
// sharedlog.Loglet kept in one directory of segment files, durable by
// fsync, with concurrent appends group-committed into one write and one
// fsync.
//
// # Directory
//
//	LOCK                      flock(2)ed while a Loglet has the directory open
//	STATE                     seal bit and trim point (absent: neither)
//	00000000000000000000.seg  segment holding positions from 0
//	00000000000000081920.seg  next segment, from position 81920 (name = first position)
//
// A segment is closed once it holds SegmentBytes and a new one started at
// the tail, so PrefixTrim deletes whole files. The last segment is the
// active one and is never deleted. New files (segments, STATE) are written
// as NAME.tmp, fsynced, renamed and the directory fsynced, so a crash
// leaves either the old file or the complete new one.
//
// # Segment file
//
// All integers little endian; CRC is CRC-32C (Castagnoli).
//
//	+------------+-------------+----------+---------+
//	| "STRNDSEG" | version u32 | base u64 | CRC u32 |   header, 24 bytes; CRC of the 20 before it
//	+------------+-------------+----------+---------+
//	| length u32 | CRC u32 | payload (length bytes) |   entry at base
//	+------------+---------+------------------------+
//	| length u32 | CRC u32 | payload                |   entry at base+1
//	+------------+---------+------------------------+
//	  ...
//
// An entry's CRC covers its length field and payload, so a zeroed or
// garbled length does not pass for an empty entry.
//
// # STATE file, 36 bytes
//
//	"STRNDSTA" | version u32 | flags u32 (1 = sealed) | trimmed u64 | sealed tail u64 | CRC u32
//
// # Durability and recovery
//
// Append returns once its entry is written and fsynced; entries become
// visible to ReadNext, CheckTail and WaitTail only then.
//
// # Preallocation
//
// An append that grows the active segment also writes zeros up to 1 MiB
// past its entries (never past SegmentBytes), and one fsync makes the
// entries, the zeros and the new size durable. The appends after it
// overwrite those zeros: the file's size and blocks are durable already,
// so fdatasync (Datasyncer) flushes their data alone, without the file
// system's journal commit, which on a disk shared with the object store
// also carries the objects' renames. Durability never rests on the
// preallocation: fdatasync flushes whatever size or block change the
// written data needs to be read back; the preallocation only makes sure
// that there is none to flush. Zeros from the end of the last entry
// to the end of the file are a preallocation, not a torn entry (no entry
// starts with a zero header: its CRC covers its length); a roll and a
// clean Close cut them, so a closed segment ends after its last entry.
// Appends into preallocated zeros do not find a full disk, so the loglet
// refuses appends (ENOSPC) while its file system has less than 4 MiB
// free (freeReserve, Freer): the metadata database applying what the
// log took, usually on the same disk, must not be the writer that finds
// the disk full, since the agent stops when its database cannot write.
//
// If a write or fsync fails (a full disk, an I/O error), the writes in
// flight and every queued request fail with ErrFailed, and the bytes
// past the last acknowledged entry are in an unknown state: maybe on
// disk, maybe not, maybe in part. Retrying the fsync would prove nothing
// (the kernel may have dropped the failed pages and report the next
// fsync clean), and writing other bytes there at once could leave a
// crash to find the failed entry at a position since handed to another
// (DESIGN.md §4: never write different bytes into a slot you may
// already own). So the next write request first truncates the active
// segment back to the end of the last acknowledged entry, which an
// earlier fsync made durable, and fsyncs the truncation; only then does
// it write. If the cut fails too, the request fails at once with
// ErrFailed and the next one tries again. The loglet runs no retry loop
// of its own: its callers' retries (meta's appendWithRetry, the next
// produce) drive it, so it takes writes again as soon as the file
// system does, without a reopen. A failed Seal still keeps appends out
// (ErrSealed) until a Seal succeeds. Reads of acknowledged entries work
// throughout, and WaitTail keeps waiting.
//
// Open scans every segment not wholly trimmed, checking each entry's
// length and checksum. The active segment may end in a torn or corrupt
// entry from a crash mid-write: it is cut off (the file truncated at the
// last intact entry and fsynced) and logged. No acknowledged entry is
// lost that way, since acknowledgement follows fsync. Damage anywhere
// else is ErrCorrupt.
package filelog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/strandkafka/strand/internal/sharedlog"
)

var (
	// ErrCorrupt: the directory holds data that fails its checks somewhere
	// a crash cannot explain. Open refuses it rather than guess.
	ErrCorrupt = errors.New("filelog: corrupt log")
	// ErrFailed: a write or fsync failed, now or in an earlier request
	// whose damage could not be cut off yet (see the package doc).
	// Whether an append that got it is durable is unknown, as with any
	// ambiguous append; the loglet takes writes again once the file
	// system does.
	ErrFailed = errors.New("filelog: write failed")
	// ErrLocked: another Loglet, in this process or another, has the
	// directory open.
	ErrLocked = errors.New("filelog: directory is locked by another loglet")
	// ErrEntryTooLarge: the entry exceeds Options.MaxEntryBytes; it was
	// not written.
	ErrEntryTooLarge = errors.New("filelog: entry too large")
)

// Options tune a Loglet. The zero value gives the defaults.
type Options struct {
	// SegmentBytes is the size at which the active segment is closed and
	// a new one started. Default 64 MiB.
	SegmentBytes int64
	// MaxBatchBytes bounds the entry bytes one group commit (one write,
	// one fsync) carries; a larger entry goes alone. Default 1 MiB.
	MaxBatchBytes int
	// MaxQueueBytes bounds the bytes of appends waiting for or inside a
	// group commit, counting a fixed overhead per entry; Append blocks
	// (honouring ctx) beyond it. Default 16 MiB.
	MaxQueueBytes int
	// MaxEntryBytes is the largest entry Append takes. Default 16 MiB,
	// at most 1 GiB.
	MaxEntryBytes int
	// MaxReadBytes bounds the bytes (entries with their headers) one
	// ReadNext reads, though it always returns at least one entry.
	// Default 4 MiB.
	MaxReadBytes int
	// Logger receives recovery and failure reports. Default slog.Default().
	Logger *slog.Logger
	// FS is the file system the loglet writes through. Nil means OS. It
	// is a test seam: tests fail writes and fsyncs through it.
	FS FS
}

func (o Options) withDefaults() (Options, error) {
	if o.SegmentBytes < 0 || o.MaxBatchBytes < 0 || o.MaxQueueBytes < 0 || o.MaxEntryBytes < 0 || o.MaxReadBytes < 0 {
		return o, fmt.Errorf("filelog: negative limit in %+v", o)
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = 64 << 20
	}
	if o.MaxBatchBytes == 0 {
		o.MaxBatchBytes = 1 << 20
	}
	if o.MaxQueueBytes == 0 {
		o.MaxQueueBytes = 16 << 20
	}
	if o.MaxEntryBytes == 0 {
		o.MaxEntryBytes = 16 << 20
	}
	if o.MaxEntryBytes > formatMaxEntryBytes {
		return o, fmt.Errorf("filelog: MaxEntryBytes %d above the format limit %d", o.MaxEntryBytes, formatMaxEntryBytes)
	}
	if o.MaxReadBytes == 0 {
		o.MaxReadBytes = 4 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.FS == nil {
		o.FS = OS
	}
	return o, nil
}

// Loglet is a sharedlog.Loglet in a directory. Safe for concurrent use.
type Loglet struct {
	dir  string
	opts Options
	lock *os.File
	// wake tells the writer goroutine the queue has work or the loglet is
	// closing. Capacity 1: a pending wake covers any number of requests.
	wake       chan struct{}
	writerDone chan struct{}
	w          writer // owned by the writer goroutine

	mu struct {
		sync.Mutex
		queue       []*request
		queuedBytes int // queue and the group commit in flight
		// queueFreed is closed and replaced when queuedBytes drops or the
		// loglet closes, to wake appenders held by backpressure.
		queueFreed chan struct{}
		// segments is ordered by base; the last is the active one. The
		// writer goroutine adds and removes segments and publishes their
		// entries, always under mu.
		segments []*segment
		tail     sharedlog.Pos // entries below are fsynced and visible
		trimmed  sharedlog.Pos
		sealing  bool // Seal was called: Append fails with ErrSealed
		sealed   bool // the seal is durable
		closed   bool
		// changed is closed and replaced when the tail moves or the
		// loglet is sealed or closes, to wake WaitTail callers.
		changed chan struct{}
	}
}

var (
	_ sharedlog.Loglet     = (*Loglet)(nil)
	_ sharedlog.TailWaiter = (*Loglet)(nil)
)

type segment struct {
	base sharedlog.Pos
	path string
	f    File
	// Guarded by Loglet.mu.
	offsets []int64 // file offset of each published entry
	end     int64   // end of the last published entry
}

// endOf returns the end offset of the published entry at index i.
func (s *segment) endOf(i int) int64 {
	if i+1 < len(s.offsets) {
		return s.offsets[i+1]
	}
	return s.end
}

// Open opens the loglet in dir, creating dir and an empty loglet if need
// be, and recovers it as the package doc describes.
func Open(dir string, opts Options) (*Loglet, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		// The new directory's own entry must be durable before anything
		// in it can be.
		if err := syncDir(filepath.Dir(dir), opts.FS); err != nil {
			return nil, err
		}
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	l := &Loglet{
		dir:        dir,
		opts:       opts,
		lock:       lock,
		wake:       make(chan struct{}, 1),
		writerDone: make(chan struct{}),
	}
	l.mu.queueFreed = make(chan struct{})
	l.mu.changed = make(chan struct{})
	if err := l.recover(); err != nil {
		for _, s := range l.mu.segments {
			_ = s.f.Close()
		}
		_ = lock.Close()
		return nil, err
	}
	go l.writeLoop()
	return l, nil
}

func (l *Loglet) Append(ctx context.Context, entry []byte) (sharedlog.Pos, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if len(entry) > l.opts.MaxEntryBytes {
		return 0, sharedlog.Rejected(fmt.Errorf("%w: %d bytes, limit %d", ErrEntryTooLarge, len(entry), l.opts.MaxEntryBytes))
	}
	// Encoded here, on the caller's goroutine: the checksums of a group
	// commit are computed in parallel, and the writer never touches the
	// caller's buffer, which a canceled caller may reuse.
	req := &request{
		kind: kindAppend,
		rec:  appendEntry(make([]byte, 0, entryHeaderBytes+len(entry)), entry),
		done: make(chan result, 1),
	}
	if err := l.enqueue(ctx, req); err != nil {
		return 0, err
	}
	select {
	case r := <-req.done:
		return r.pos, r.err
	case <-ctx.Done():
		// Ambiguous, as the contract allows: the entry may still land.
		return 0, ctx.Err()
	}
}

func (l *Loglet) CheckTail(ctx context.Context) (sharedlog.Pos, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return 0, false, sharedlog.ErrClosed
	}
	return l.mu.tail, l.mu.sealed, nil
}

func (l *Loglet) ReadNext(ctx context.Context, from, upTo sharedlog.Pos) ([]sharedlog.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil, sharedlog.ErrClosed
	}
	if from < l.mu.trimmed {
		l.mu.Unlock()
		return nil, sharedlog.ErrTrimmed
	}
	end := min(upTo, l.mu.tail)
	if from >= end {
		l.mu.Unlock()
		return nil, nil
	}
	segs := l.mu.segments
	seg := segs[sort.Search(len(segs), func(i int) bool { return segs[i].base > from })-1]
	first := int(from - seg.base)
	last := first + int(min(end-from, sharedlog.Pos(len(seg.offsets)-first))) - 1
	start := seg.offsets[first]
	// The largest last whose entries fit in MaxReadBytes, but at least
	// the first entry.
	last = first + sort.Search(last-first+1, func(k int) bool {
		return seg.endOf(first+k)-start > int64(l.opts.MaxReadBytes)
	}) - 1
	last = max(last, first)
	stop := seg.endOf(last)
	f := seg.f
	l.mu.Unlock()

	// Read outside the lock so appends go on; the range is published and
	// immutable.
	buf := make([]byte, stop-start)
	if _, err := f.ReadAt(buf, start); err != nil {
		if errors.Is(err, os.ErrClosed) {
			// Closed under us by Close, or by PrefixTrim deleting the
			// segment.
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.mu.closed {
				return nil, sharedlog.ErrClosed
			}
			if from < l.mu.trimmed {
				return nil, sharedlog.ErrTrimmed
			}
		}
		return nil, fmt.Errorf("filelog: reading %s: %w", seg.path, err)
	}
	out := make([]sharedlog.Entry, 0, last-first+1)
	for p := from; len(buf) > 0; p++ {
		data, n, err := decodeEntry(buf)
		if err != nil {
			// Checked at recovery, so this is damage since.
			return nil, fmt.Errorf("%w: entry %d in %s: %v", ErrCorrupt, p, seg.path, err)
		}
		out = append(out, sharedlog.Entry{Pos: p, Data: data})
		buf = buf[n:]
	}
	return out, nil
}

func (l *Loglet) Seal(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	sealed := l.mu.sealed
	l.mu.Unlock()
	if sealed {
		return l.closedErr()
	}
	return l.control(ctx, &request{kind: kindSeal})
}

func (l *Loglet) PrefixTrim(ctx context.Context, before sharedlog.Pos) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	done := before <= l.mu.trimmed
	l.mu.Unlock()
	if done {
		return l.closedErr()
	}
	return l.control(ctx, &request{kind: kindTrim, trimTo: before})
}

// closedErr is the result of a write that needs no work: ErrClosed after
// Close, nil before.
func (l *Loglet) closedErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return sharedlog.ErrClosed
	}
	return nil
}

// control runs a seal or trim request through the writer, which orders it
// after every append queued before it.
func (l *Loglet) control(ctx context.Context, req *request) error {
	req.done = make(chan result, 1)
	if err := l.enqueue(ctx, req); err != nil {
		return err
	}
	select {
	case r := <-req.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Loglet) WaitTail(ctx context.Context, after sharedlog.Pos) (sharedlog.Pos, error) {
	for {
		l.mu.Lock()
		if l.mu.closed {
			l.mu.Unlock()
			return 0, sharedlog.ErrClosed
		}
		tail, sealed, ch := l.mu.tail, l.mu.sealed, l.mu.changed
		l.mu.Unlock()
		if tail > after || sealed {
			// A broken loglet is no reason to return: it may take
			// writes again, and the caller has nothing else to read.
			return tail, nil
		}
		select {
		case <-ctx.Done():
			return tail, ctx.Err()
		case <-ch:
		}
	}
}

// Close stops the writer, failing queued appends with ErrClosed, and
// closes the files. It does not seal. Later calls return nil.
func (l *Loglet) Close() error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.closed = true
	l.wakeLocked()
	l.mu.Unlock()
	l.signalWriter()
	<-l.writerDone

	var errs []error
	if l.w.broken == nil {
		// Leave the active segment as a roll leaves a closed one; a
		// broken loglet's next Open cuts what the failure left.
		errs = append(errs, l.cutPreallocation())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.mu.segments {
		errs = append(errs, s.f.Close())
	}
	errs = append(errs, l.lock.Close())
	return errors.Join(errs...)
}

// wakeLocked wakes WaitTail callers and appenders held by backpressure.
func (l *Loglet) wakeLocked() {
	close(l.mu.changed)
	l.mu.changed = make(chan struct{})
	close(l.mu.queueFreed)
	l.mu.queueFreed = make(chan struct{})
}

func (l *Loglet) signalWriter() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}
