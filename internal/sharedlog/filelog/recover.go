package filelog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// recover loads the directory into l, as the package doc describes. It
// runs before the writer goroutine starts.
func (l *Loglet) recover() error {
	names, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	var bases []sharedlog.Pos
	for _, de := range names {
		name := de.Name()
		switch {
		case strings.HasSuffix(name, tmpSuffix):
			// An interrupted writeFileDurably: the rename never happened.
			if err := l.opts.FS.Remove(filepath.Join(l.dir, name)); err != nil {
				return err
			}
		case strings.HasSuffix(name, ".seg") && len(name) == 24:
			base, err := strconv.ParseUint(strings.TrimSuffix(name, ".seg"), 10, 64)
			if err != nil {
				return fmt.Errorf("%w: segment file name %q", ErrCorrupt, name)
			}
			bases = append(bases, sharedlog.Pos(base))
		}
	}
	slices.Sort(bases)

	var st state
	b, err := os.ReadFile(filepath.Join(l.dir, stateFileName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if st, err = decodeState(b); err != nil {
			return err
		}
	}

	if len(bases) == 0 {
		if st != (state{}) {
			return fmt.Errorf("%w: STATE says trimmed %d, sealed %v, but there are no segments", ErrCorrupt, st.trimmed, st.sealed)
		}
		seg, err := l.createSegment(0)
		if err != nil {
			return err
		}
		l.mu.segments = []*segment{seg}
		l.w.active, l.w.activeEnd, l.w.allocEnd = seg, segmentHeaderBytes, segmentHeaderBytes
		return nil
	}

	// Finish a trim that crashed between writing STATE and removing files.
	removed := false
	for len(bases) > 1 && bases[1] <= st.trimmed {
		if err := l.opts.FS.Remove(l.segmentPath(bases[0])); err != nil {
			return err
		}
		bases, removed = bases[1:], true
	}
	if removed {
		if err := l.syncDir(); err != nil {
			return err
		}
	}
	if bases[0] > st.trimmed {
		return fmt.Errorf("%w: first segment starts at %d but the log is trimmed only to %d", ErrCorrupt, bases[0], st.trimmed)
	}

	for i, base := range bases {
		last := i == len(bases)-1
		seg, err := l.openSegment(base, last)
		if err != nil {
			return err
		}
		l.mu.segments = append(l.mu.segments, seg)
		if !last {
			if want := bases[i+1]; seg.base+sharedlog.Pos(len(seg.offsets)) != want {
				return fmt.Errorf("%w: %s holds %d entries from %d, but the next segment starts at %d", ErrCorrupt, seg.path, len(seg.offsets), seg.base, want)
			}
		}
	}
	active := l.mu.segments[len(l.mu.segments)-1]
	l.w.active, l.w.activeEnd = active, active.end
	// Zeros past the last entry are a preallocation: appends overwrite
	// them with fdatasync. A kill may have cut the fsync that wrote them
	// short; fdatasync then flushes the size and blocks it needs too
	// (that is what it promises), it just costs as much as an fsync.
	fi, err := active.f.Stat()
	if err != nil {
		return err
	}
	l.w.allocEnd = max(fi.Size(), active.end)
	l.mu.tail = active.base + sharedlog.Pos(len(active.offsets))
	l.mu.trimmed = st.trimmed
	l.mu.sealed, l.mu.sealing = st.sealed, st.sealed
	switch {
	case st.trimmed > l.mu.tail:
		return fmt.Errorf("%w: trimmed to %d, past the tail %d", ErrCorrupt, st.trimmed, l.mu.tail)
	case st.sealed && st.sealedTail != l.mu.tail:
		return fmt.Errorf("%w: sealed at tail %d, but the segments hold a tail of %d", ErrCorrupt, st.sealedTail, l.mu.tail)
	}
	return nil
}

// openSegment opens and scans one segment. Only the last (active) segment
// may end in a torn entry, which is cut off.
func (l *Loglet) openSegment(base sharedlog.Pos, last bool) (*segment, error) {
	path := l.segmentPath(base)
	flag := os.O_RDONLY
	if last {
		flag = os.O_RDWR
	}
	f, err := l.opts.FS.OpenFile(path, flag, 0)
	if err != nil {
		return nil, err
	}
	seg, err := l.scanOpened(f, path, base, last)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return seg, nil
}

func (l *Loglet) scanOpened(f File, path string, base sharedlog.Pos, last bool) (*segment, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	s, err := scanSegment(f, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if s.base != base {
		return nil, fmt.Errorf("%w: %s has base %d in its header", ErrCorrupt, path, s.base)
	}
	if s.torn != nil {
		if !last {
			return nil, fmt.Errorf("%w: %s: %v at offset %d, in a segment that is not the last", ErrCorrupt, path, s.torn, s.end)
		}
		l.opts.Logger.Warn("filelog: cutting a torn tail left by a crash",
			"segment", path,
			"reason", s.torn.Error(),
			"position", base+sharedlog.Pos(len(s.offsets)),
			"offset", s.end,
			"droppedBytes", fi.Size()-s.end)
		if err := f.Truncate(s.end); err != nil {
			return nil, err
		}
		if err := f.Sync(); err != nil {
			return nil, err
		}
	}
	return &segment{base: base, path: path, f: f, offsets: s.offsets, end: s.end}, nil
}
