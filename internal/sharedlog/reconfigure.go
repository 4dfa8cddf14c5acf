package sharedlog

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"
)

// Reconfiguration: moving the log onto a new segment (Reconfigure), and
// finishing a move another client started and abandoned (moveOn).

// checkEmpty fails unless ll is a fresh loglet: a segment maps its
// loglet's position 0 to its Start.
func checkEmpty(ctx context.Context, ll Loglet, url string) error {
	tail, sealed, err := ll.CheckTail(ctx)
	if err != nil {
		return fmt.Errorf("sharedlog: check new segment %q: %w", url, err)
	}
	if tail != 0 || sealed {
		return fmt.Errorf("%w: %q has tail %d, sealed %v", ErrSegmentNotEmpty, url, tail, sealed)
	}
	return nil
}

// Reconfigure moves the log to a new segment on the loglet at nextURL,
// which must be empty: it seals the active loglet, reads its tail, and
// CASes a chain where the active segment ends at that tail and a new
// segment starts there. If nextURL is already the active segment it does
// nothing. When a racing reconfiguration (from any client) wins instead,
// it returns an error wrapping ErrConflict; the log has still moved to a
// new segment, only not to nextURL.
//
// A move refused before the seal (nextURL cannot be opened or reached,
// holds entries, or would make a chain no MetaStore takes) leaves the log
// as it was. An error saying the active loglet is sealed means the move
// failed past the seal; calling Reconfigure again finishes it.
func (v *VirtualLog) Reconfigure(ctx context.Context, nextURL string) error {
	if nextURL == "" {
		return errors.New("sharedlog: reconfigure needs a URL")
	}
	v.reconfigMu.Lock()
	defer v.reconfigMu.Unlock()
	c, err := v.reload(ctx)
	if err != nil {
		return err
	}
	act := c.Active()
	switch {
	case act.URL == nextURL && !act.Sealed:
		return nil
	case act.Sealed:
		return fmt.Errorf("sharedlog: reconfigure: the log is sealed: %w", ErrSealed)
	case c.Contains(nextURL):
		return fmt.Errorf("%w: %q is already a segment of the chain", ErrInvalidChain, nextURL)
	}
	won, err := v.extendLocked(ctx, c, act.URL, nextURL)
	if err != nil || won {
		return err
	}
	if cur, err := v.current(); err == nil && cur.Active().URL == nextURL {
		return nil
	}
	return fmt.Errorf("sharedlog: reconfigure to %q lost to a racing reconfiguration: %w", nextURL, ErrConflict)
}

// extendLocked seals the segment at from, which is c's active segment,
// and CASes the chain extended by a segment at nextURL. won is false when
// another client moved the log off from first. Needs reconfigMu.
//
// Whatever can refuse the move is checked before the seal, and a refusal
// leaves the log as it was: the extended chain must be valid and fit a
// MetaStore, and the new loglet must open and answer a CheckTail with an
// empty tail. Past the seal the log takes no appends until a chain
// extends it, so there is no going back, only forward: a failed CAS is
// settled by rereading the chain (an ambiguous one may have landed) and
// retried while the MetaStore answers. If it still fails, the error says
// the log is sealed; the next Reconfigure, or an appender after
// StallTimeout, finishes the move.
func (v *VirtualLog) extendLocked(ctx context.Context, c Chain, from, nextURL string) (won bool, err error) {
	var next Loglet // opened once, kept if nextURL joins the chain
	defer func() {
		if next != nil && !won {
			if cur, cerr := v.current(); cerr == nil {
				v.adopt(cur, nextURL, next)
			} else {
				next.Close()
			}
		}
	}()
	var sealErr error // set once from's loglet may be sealed: why no chain follows it
	for range maxChainAttempts {
		act := c.Active()
		if act.URL != from || act.Sealed {
			return false, nil
		}
		if err := c.checkExtend(nextURL); err != nil {
			return false, err
		}
		if err := v.checkTarget(ctx, &next, nextURL); err != nil {
			// A racing client may already have made nextURL active and
			// appended to it.
			if nc, rerr := v.reload(ctx); rerr == nil && nc.Version != c.Version {
				c = nc
				continue
			}
			return false, stalledIf(sealErr != nil, from, err)
		}
		if v.testHooks.beforeSeal != nil {
			v.testHooks.beforeSeal()
		}
		ll, err := v.loglet(ctx, act.URL)
		if err != nil {
			return false, stalledIf(sealErr != nil, from, err)
		}
		if err := ll.Seal(ctx); err != nil {
			// Seal's errors are ambiguous too: the seal may have landed.
			return false, stalledIf(true, from, fmt.Errorf("sharedlog: seal %q: %w", act.URL, err))
		}
		tail, sealed, err := ll.CheckTail(ctx)
		switch {
		case err != nil:
			return false, stalledIf(true, from, fmt.Errorf("sharedlog: tail of sealed %q: %w", act.URL, err))
		case !sealed:
			return false, fmt.Errorf("sharedlog: %q reports unsealed after Seal returned", act.URL)
		}
		nc, err := c.Extend(tail, nextURL)
		if err != nil {
			return false, stalledIf(true, from, err)
		}
		err = v.ms.CAS(ctx, c.Version, nc)
		if err == nil {
			v.adopt(nc, nextURL, next)
			v.install(nc)
			return true, nil
		}
		sealErr = fmt.Errorf("sharedlog: CAS of chain version %d: %w", nc.Version, err)
		// Lost to a trim (the loop tries again on the new version) or to
		// another reconfiguration (the loop stops on the next round); or
		// failed, perhaps after storing nc, which the chain now tells.
		cur, rerr := v.reload(ctx)
		if rerr != nil {
			return false, stalledIf(true, from, fmt.Errorf("%w (rereading it: %w)", sealErr, rerr))
		}
		if cur.Active().URL == nextURL {
			v.adopt(cur, nextURL, next)
			return true, nil
		}
		c = cur
	}
	if sealErr == nil {
		return false, fmt.Errorf("sharedlog: reconfiguration: the chain changed %d times in a row: %w", maxChainAttempts, ErrConflict)
	}
	return false, stalledIf(true, from, fmt.Errorf("sharedlog: reconfiguration failed %d CASes in a row, the last: %w", maxChainAttempts, sealErr))
}

// checkTarget opens the loglet at url into *next, unless it is open
// already, and checks that it is empty, within TargetCheckTimeout.
func (v *VirtualLog) checkTarget(ctx context.Context, next *Loglet, url string) error {
	ctx, cancel := context.WithTimeout(ctx, v.opts.TargetCheckTimeout)
	defer cancel()
	if *next == nil {
		ll, err := v.open(ctx, url)
		if err != nil {
			return fmt.Errorf("sharedlog: open new segment %q: %w", url, err)
		}
		*next = ll
	}
	return checkEmpty(ctx, *next, url)
}

// stalledIf wraps err, when sealed, to say that the loglet at from is
// sealed, or may be, and no chain extends the log past it yet: appends
// wait until one does.
func stalledIf(sealed bool, from string, err error) error {
	if !sealed {
		return err
	}
	return fmt.Errorf("sharedlog: %q is sealed, or may be, and no chain extends the log past it yet; "+
		"appends wait until a retried reconfiguration, or an appender after the stall timeout, writes one: %w", from, err)
}

// seal seals the whole log: the active segment is sealed in place and no
// segment follows, so appends fail with ErrSealed for good. Not exported:
// Strand moves its log but never ends it; the conformance tests need it
// to run the Loglet suite against a VirtualLog.
func (v *VirtualLog) seal(ctx context.Context) error {
	v.reconfigMu.Lock()
	defer v.reconfigMu.Unlock()
	c, err := v.reload(ctx)
	if err != nil {
		return err
	}
	for range maxChainAttempts {
		act := c.Active()
		if act.Sealed {
			return nil
		}
		ll, err := v.loglet(ctx, act.URL)
		if err != nil {
			return err
		}
		if err := ll.Seal(ctx); err != nil {
			return err
		}
		tail, sealed, err := ll.CheckTail(ctx)
		if err != nil {
			return err
		}
		if !sealed {
			return fmt.Errorf("sharedlog: %q reports unsealed after Seal returned", act.URL)
		}
		nc := c.Clone()
		nc.Version++
		last := &nc.Segments[len(nc.Segments)-1]
		last.Sealed, last.End = true, last.Start+tail
		err = v.ms.CAS(ctx, c.Version, nc)
		if err == nil {
			v.install(nc)
			return nil
		}
		if !errors.Is(err, ErrConflict) {
			return err
		}
		if c, err = v.reload(ctx); err != nil {
			return err
		}
	}
	return fmt.Errorf("sharedlog: seal lost %d CASes in a row: %w", maxChainAttempts, ErrConflict)
}

// moveOn returns once this handle's chain no longer has url as its
// unsealed active segment, after the appender found url's loglet sealed.
// The appenders that meet one seal share one flight.
func (v *VirtualLog) moveOn(ctx context.Context, url string) error {
	v.mu.Lock()
	if v.mu.closed {
		v.mu.Unlock()
		return ErrClosed
	}
	if act := v.mu.chain.Active(); act.URL != url || act.Sealed {
		v.mu.Unlock()
		return nil
	}
	if f := v.mu.moving; f != nil {
		v.mu.Unlock()
		select {
		case <-f.done:
			return nil // the caller rereads the chain and retries
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	v.mu.moving = f
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		v.mu.moving = nil
		v.mu.Unlock()
		close(f.done)
	}()
	if err := v.awaitMoveOff(ctx, url, max(v.opts.StallTimeout, 0)); err != errStillActive {
		return err
	}
	// Nobody extended the chain in time: finish the reconfiguration.
	v.reconfigMu.Lock()
	defer v.reconfigMu.Unlock()
	c, err := v.reload(ctx)
	if err != nil {
		return err
	}
	if act := c.Active(); act.URL != url || act.Sealed {
		return nil
	}
	nextURL, err := v.opts.NextURL(c)
	if err != nil {
		return fmt.Errorf("sharedlog: name a segment to follow sealed %q: %w", url, err)
	}
	_, err = v.extendLocked(ctx, c, url, nextURL)
	return err
}

// errStillActive: awaitMoveOff's wait ran out.
var errStillActive = errors.New("sharedlog: segment still active")

// awaitMoveOff waits until the chain's active segment is no longer the
// unsealed url, rereading the MetaStore every PollInterval and whenever
// this handle installs a chain. A negative timeout waits until ctx is
// done; otherwise it gives up with errStillActive after timeout.
func (v *VirtualLog) awaitMoveOff(ctx context.Context, url string, timeout time.Duration) error {
	var deadline time.Time
	if timeout >= 0 {
		deadline = v.clk.Now().Add(timeout)
	}
	for {
		ch := v.changed()
		c, err := v.reload(ctx)
		if err != nil {
			return err
		}
		if act := c.Active(); act.URL != url || act.Sealed {
			return nil
		}
		wait := v.opts.PollInterval
		if !deadline.IsZero() {
			left := deadline.Sub(v.clk.Now())
			if left <= 0 {
				return errStillActive
			}
			wait = min(wait, left)
		}
		if err := v.waitChange(ctx, ch, wait); err != nil {
			return err
		}
	}
}

// trailingNumber splits off the number that ends a URL path.
var trailingNumber = regexp.MustCompile(`^(.*?)([0-9]+)$`)

// DefaultNextURL names a segment's loglet after the chain version that
// adds it: the active segment's URL with the number that ends its path
// replaced by c.Version+1, zero-padded to 8 digits; with "-" and that
// number appended to the path when it ends in no number; or with path
// "/seg-" and the number when it has no path. So file:seg-00000000 is
// followed by file:seg-00000002 when the chain is at version 1, and
// mem://test by mem://test/seg-00000002. Versions only grow, so the name
// is new unless an operator picked it by hand. Backends whose URLs do not
// name loglets by path (a table in the query string, say) must supply
// their own VirtualOptions.NextURL.
func DefaultNextURL(c Chain) (string, error) {
	if c.Empty() {
		return "", fmt.Errorf("%w: no segment to follow", ErrInvalidChain)
	}
	u, err := url.Parse(c.Active().URL)
	if err != nil {
		return "", fmt.Errorf("sharedlog: next segment name: %w", err)
	}
	n := fmt.Sprintf("%08d", c.Version+1)
	rename := func(p string) string {
		if m := trailingNumber.FindStringSubmatch(p); m != nil {
			return m[1] + n
		}
		return p + "-" + n
	}
	switch {
	case u.Opaque != "":
		u.Opaque = rename(u.Opaque)
	case u.Path != "":
		u.Path, u.RawPath = rename(u.Path), ""
	default:
		u.Path = "/seg-" + n
	}
	next := u.String()
	if c.Contains(next) {
		return "", fmt.Errorf("%w: next segment name %q is taken", ErrInvalidChain, next)
	}
	return next, nil
}
