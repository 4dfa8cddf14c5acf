package sharedlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// The chain's encoding is JSON: it is tiny, written only when the log is
// reconfigured or trimmed, and an operator may need to read it by hand.
//
//	{"format":1,"version":3,"trim_point":0,"segments":[
//	  {"start":0,"end":120,"sealed":true,"url":"file:seg-00000000"},
//	  {"start":120,"url":"file:seg-00000002"}]}
//
// chainFormat is bumped on any change an older decoder would misread;
// decoders reject formats they do not know rather than guess.
const chainFormat = 1

const (
	// MaxChainBytes bounds an encoded chain, so a decoder never allocates
	// more than this for one and a MetaStore can size its reads.
	MaxChainBytes = 1 << 20
	// maxChainSegments bounds the segments of one chain. A log is
	// reconfigured a few times a month and trimming drops old segments,
	// so reaching this means trimming has stopped.
	maxChainSegments = 10000
	// maxURLBytes bounds one segment's loglet address.
	maxURLBytes = 4096
)

// ErrInvalidChain: a chain breaks one of the rules in Chain.Validate, or
// its encoding cannot be decoded.
var ErrInvalidChain = errors.New("sharedlog: invalid chain")

// Segment is one loglet's place in the VirtualLog: it holds the global
// positions [Start, End), global = Start + the loglet's own position.
type Segment struct {
	// Start is the global position of the loglet's position 0.
	Start Pos `json:"start"`
	// End is the global position one past the segment's last entry; it is
	// set, and final, once Sealed. Entries the loglet may hold at or above
	// End are not part of the log.
	End Pos `json:"end,omitempty"`
	// Sealed: the loglet was sealed and End is its sealed tail. Only the
	// last segment of a chain may be unsealed; it is the active segment,
	// which takes appends.
	Sealed bool `json:"sealed,omitempty"`
	// URL addresses the loglet, e.g. file:///var/strand/log/seg-00000001
	// or mem://test. Its meaning belongs to the Opener.
	URL string `json:"url"`
}

// Chain is the VirtualLog's configuration: the ordered segments that make
// up the log's address space and the log's trim point. It is stored in a
// MetaStore and changed only by compare-and-swap of a whole new chain.
type Chain struct {
	// Version is 0 for a MetaStore that was never written, and grows by
	// exactly one with every successful CAS.
	Version uint64 `json:"version"`
	// Segments are contiguous: each starts at the End of the one before.
	// Segments wholly below TrimPoint may have been dropped, so the first
	// need not start at 0.
	Segments []Segment `json:"segments"`
	// TrimPoint is the global position below which entries are gone.
	TrimPoint Pos `json:"trim_point,omitempty"`
}

// chainJSON is the encoded form: Chain plus the format number.
type chainJSON struct {
	Format int `json:"format"`
	Chain
}

// Empty reports whether c was never written: it has no segments.
func (c Chain) Empty() bool { return len(c.Segments) == 0 }

// Active returns the last segment, the one that takes appends unless it
// is sealed. It panics on an empty chain.
func (c Chain) Active() Segment { return c.Segments[len(c.Segments)-1] }

// Clone returns a deep copy, so the caller may change it freely.
func (c Chain) Clone() Chain {
	c.Segments = append([]Segment(nil), c.Segments...)
	return c
}

// Validate checks the rules every stored chain obeys:
//   - an empty chain has version 0 and no trim point, and a chain with
//     segments has a version above 0;
//   - every URL is present, at most 4 KiB, and unique in the chain (two
//     segments on one loglet would alias positions);
//   - every segment but the last is sealed, and a sealed segment has
//     End >= Start while an unsealed one has End 0;
//   - each segment starts at the End of the one before;
//   - the trim point is not below the first segment's Start, nor, when
//     the last segment is sealed, above its End.
func (c Chain) Validate() error {
	if len(c.Segments) == 0 {
		if c.Version != 0 || c.TrimPoint != 0 {
			return fmt.Errorf("%w: no segments but version %d, trim point %d", ErrInvalidChain, c.Version, c.TrimPoint)
		}
		return nil
	}
	if c.Version == 0 {
		return fmt.Errorf("%w: segments at version 0", ErrInvalidChain)
	}
	if len(c.Segments) > maxChainSegments {
		return fmt.Errorf("%w: %d segments, more than %d", ErrInvalidChain, len(c.Segments), maxChainSegments)
	}
	seen := make(map[string]bool, len(c.Segments))
	for i, s := range c.Segments {
		switch {
		case s.URL == "":
			return fmt.Errorf("%w: segment %d has no URL", ErrInvalidChain, i)
		case len(s.URL) > maxURLBytes:
			return fmt.Errorf("%w: segment %d URL is %d bytes, more than %d", ErrInvalidChain, i, len(s.URL), maxURLBytes)
		case seen[s.URL]:
			return fmt.Errorf("%w: segment %d reuses URL %q", ErrInvalidChain, i, s.URL)
		case !s.Sealed && i != len(c.Segments)-1:
			return fmt.Errorf("%w: segment %d is unsealed but not last", ErrInvalidChain, i)
		case s.Sealed && s.End < s.Start:
			return fmt.Errorf("%w: segment %d ends at %d before its start %d", ErrInvalidChain, i, s.End, s.Start)
		case !s.Sealed && s.End != 0:
			return fmt.Errorf("%w: unsealed segment %d has end %d", ErrInvalidChain, i, s.End)
		case i > 0 && s.Start != c.Segments[i-1].End:
			return fmt.Errorf("%w: segment %d starts at %d, previous ends at %d", ErrInvalidChain, i, s.Start, c.Segments[i-1].End)
		}
		seen[s.URL] = true
	}
	if c.TrimPoint < c.Segments[0].Start {
		return fmt.Errorf("%w: trim point %d below first segment start %d", ErrInvalidChain, c.TrimPoint, c.Segments[0].Start)
	}
	if last := c.Active(); last.Sealed && c.TrimPoint > last.End {
		return fmt.Errorf("%w: trim point %d past sealed end %d", ErrInvalidChain, c.TrimPoint, last.End)
	}
	return nil
}

// Contains reports whether some segment of c uses url.
func (c Chain) Contains(url string) bool {
	for _, s := range c.Segments {
		if s.URL == url {
			return true
		}
	}
	return false
}

// Extend returns the chain that follows c when its active segment is
// sealed with sealedTail entries (its loglet's own tail) and a new segment
// at nextURL takes over. The result has version c.Version+1.
func (c Chain) Extend(sealedTail Pos, nextURL string) (Chain, error) {
	if c.Empty() {
		return Chain{}, fmt.Errorf("%w: cannot extend an empty chain", ErrInvalidChain)
	}
	n := c.Clone()
	n.Version++
	last := &n.Segments[len(n.Segments)-1]
	if last.Sealed {
		return Chain{}, fmt.Errorf("extend chain version %d: %w", c.Version, ErrSealed)
	}
	last.Sealed = true
	last.End = last.Start + sealedTail
	n.Segments = append(n.Segments, Segment{Start: last.End, URL: nextURL})
	return n, n.Validate()
}

// checkExtend fails unless c can be extended by a segment at nextURL
// whatever the sealed tail: the extended chain must be valid and its
// encoding fit MaxChainBytes. A reconfiguration checks it before the
// seal, since past the seal a chain that cannot be stored stalls the log.
func (c Chain) checkExtend(nextURL string) error {
	// The largest tail has the longest encoding.
	var maxTail Pos
	if !c.Empty() {
		maxTail = math.MaxUint64 - c.Active().Start
	}
	n, err := c.Extend(maxTail, nextURL)
	if err != nil {
		return err
	}
	_, err = EncodeChain(n)
	return err
}

// segmentFor returns the index of the segment that holds global position
// p: the sealed segment with Start <= p < End, or the active segment when
// p is at or past its Start. ok is false when p is below the first
// segment or at or past the End of a sealed last segment.
func (c Chain) segmentFor(p Pos) (i int, ok bool) {
	for i, s := range c.Segments {
		if p < s.Start {
			return 0, false
		}
		if !s.Sealed || p < s.End {
			return i, true
		}
	}
	return 0, false
}

// EncodeChain returns c's stored form. It validates c first, so a broken
// chain never reaches a MetaStore.
func EncodeChain(c Chain) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(chainJSON{Format: chainFormat, Chain: c})
	if err != nil {
		return nil, fmt.Errorf("sharedlog: encode chain: %w", err)
	}
	if len(b) > MaxChainBytes {
		return nil, fmt.Errorf("%w: encoded chain is %d bytes, more than %d", ErrInvalidChain, len(b), MaxChainBytes)
	}
	return b, nil
}

// DecodeChain parses and validates a stored chain. Unknown fields and
// unknown formats are errors: a replica that cannot read the chain must
// stop rather than guess where the log continues.
func DecodeChain(b []byte) (Chain, error) {
	if len(b) > MaxChainBytes {
		return Chain{}, fmt.Errorf("%w: encoded chain is %d bytes, more than %d", ErrInvalidChain, len(b), MaxChainBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var cj chainJSON
	if err := dec.Decode(&cj); err != nil {
		return Chain{}, fmt.Errorf("%w: %v", ErrInvalidChain, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Chain{}, fmt.Errorf("%w: trailing data after the chain", ErrInvalidChain)
	}
	if cj.Format != chainFormat {
		return Chain{}, fmt.Errorf("%w: format %d, want %d", ErrInvalidChain, cj.Format, chainFormat)
	}
	if err := cj.Chain.Validate(); err != nil {
		return Chain{}, err
	}
	return cj.Chain, nil
}
