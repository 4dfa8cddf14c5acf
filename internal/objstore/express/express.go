// Package express owns Strand's low-latency tier: data objects written
// to two of two or three S3 Express One Zone directory buckets (one per
// availability zone) before they are committed, and read back from the
// nearest bucket that holds them until compaction moves their bytes into
// the regional store and the gc deletes the zone copies.
//
// Store wraps the regional (main) store and the zone buckets behind the
// objstore.Store interface, so fetch, compaction, the gc and snapshots
// need not know the tier exists: a key names the buckets that hold its
// object, and every method routes by key.
//
// # Keys
//
// A tier object's key is a data object key (package segment) whose
// writer part ends in "~x" and the indexes of the zones that acknowledged
// it, in increasing order: "data/<minute>/<ms>-<agent>~x02-<seq>.strd"
// is held by zones 0 and 2. In the buckets it is stored under the key
// with no zone digits ("...-<agent>~x-<seq>.strd"), the same in every
// bucket, so a write can go to whichever zones answer first and the
// committed key (the CommitObject's) records which did, without a new
// metadata field: an older agent that meets such a key reads it as any
// other data object key. Every agent of a cluster that writes to the tier
// must be configured with the same zones in the same order.
//
// Directory buckets list only prefixes that end in '/', and not in key
// order; the gc lists one key bucket ("data/<minute>/") at a time, which
// suits them, and List sorts what the buckets return.
//
// # Writes
//
// PutExpress writes a flush to a pair of zones that rotates with each
// write (01, 12, 20 with three zones), so each bucket takes two thirds
// of the flushes. When one of the pair fails, or both are still running
// after the hedge delay, the third zone is written too; the write is done
// when two have acknowledged. A copy in a zone that did not make the
// committed key (a hedge that lost, or a request that landed after its
// caller gave up) is deleted with the object: Delete removes the bucket
// key from every zone. Writes use If-None-Match (PutIfAbsent): a bucket
// key is written once, and a retry whose first try landed finds it
// there, which counts as done since the bytes are the same.
package express

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/segment"
)

// Tag ends the writer part of a tier object's key, before the zone
// digits.
const Tag = "~x"

// MaxZones bounds the zones: one digit each in a key.
const MaxZones = 3

// Defaults for Config.
const (
	// DefaultPutAttempts bounds the tries of one bucket's write; a zone
	// that keeps failing is covered by the third.
	DefaultPutAttempts = 3
	// DefaultPutTimeout bounds one try.
	DefaultPutTimeout = 10 * time.Second
	putBackoff        = 10 * time.Millisecond
)

// Zone is one directory bucket.
type Zone struct {
	// Name labels the zone in logs and metrics ("use1-az4").
	Name  string
	Store objstore.Store
}

// Config configures a Store.
type Config struct {
	// Main is the regional store: every key that is not a tier key.
	Main objstore.Store
	// Zones are the directory buckets, two or three, in the same order
	// on every agent (a key names them by index).
	Zones []Zone
	// Local is the index of the zone this agent runs in, read first;
	// -1 when it is in none of them.
	Local       int
	PutAttempts int
	PutTimeout  time.Duration
	Clock       clock.Clock
}

// Store is the tier in front of the main store. Safe for concurrent use.
type Store struct {
	cfg Config
	// next rotates the pair each write starts with.
	next atomic.Uint64
	// puts and putBytes count acknowledged writes per zone.
	puts, putBytes []atomic.Int64
	thirds         atomic.Int64
}

var _ objstore.Store = (*Store)(nil)

// New returns a Store.
func New(cfg Config) (*Store, error) {
	if cfg.PutAttempts == 0 {
		cfg.PutAttempts = DefaultPutAttempts
	}
	if cfg.PutTimeout == 0 {
		cfg.PutTimeout = DefaultPutTimeout
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	switch {
	case cfg.Main == nil:
		return nil, errors.New("express: Config.Main is required")
	case len(cfg.Zones) < 2 || len(cfg.Zones) > MaxZones:
		return nil, fmt.Errorf("express: %d zones; two or three are needed", len(cfg.Zones))
	case cfg.Local < -1 || cfg.Local >= len(cfg.Zones):
		return nil, fmt.Errorf("express: local zone %d out of range", cfg.Local)
	case cfg.PutAttempts < 1 || cfg.PutTimeout < 0:
		return nil, errors.New("express: PutAttempts must be positive and PutTimeout not negative")
	}
	for i, z := range cfg.Zones {
		if z.Store == nil {
			return nil, fmt.Errorf("express: zone %d has no store", i)
		}
	}
	return &Store{cfg: cfg, puts: make([]atomic.Int64, len(cfg.Zones)), putBytes: make([]atomic.Int64, len(cfg.Zones))}, nil
}

// Zones returns the number of zones.
func (s *Store) Zones() int { return len(s.cfg.Zones) }

// Stats counts the tier's writes since New.
type Stats struct {
	// Puts counts acknowledged bucket writes per zone, in zone order,
	// and PutBytes their bytes.
	Puts, PutBytes []int64
	// Thirds counts writes that went to a third zone.
	Thirds int64
}

// Stats returns the write counts.
func (s *Store) Stats() Stats {
	st := Stats{Puts: make([]int64, len(s.puts)), PutBytes: make([]int64, len(s.puts)), Thirds: s.thirds.Load()}
	for i := range s.puts {
		st.Puts[i] = s.puts[i].Load()
		st.PutBytes[i] = s.putBytes[i].Load()
	}
	return st
}

// parsed is a tier key taken apart.
type parsed struct {
	// bucket is the key in the zones' buckets.
	bucket string
	// zones holds the zones the key names, in increasing order.
	zones []int
}

// parse takes a tier key apart; ok is false for any other key. A key that
// ends in the tag without digits (a bucket key) has no zones.
func parse(key string) (parsed, bool) {
	agent, seq, ms, err := segment.ParseObjectKey(key)
	if err != nil {
		return parsed{}, false
	}
	i := strings.LastIndex(agent, Tag)
	if i < 0 {
		return parsed{}, false
	}
	digits := agent[i+len(Tag):]
	var p parsed
	last := -1
	for _, c := range digits {
		z := int(c - '0')
		if c < '0' || c > '9' || z <= last {
			return parsed{}, false
		}
		p.zones = append(p.zones, z)
		last = z
	}
	p.bucket = segment.ObjectKey(agent[:i+len(Tag)], seq, ms)
	return p, true
}

// Key is the key of the object at bucket key bucketKey held by zones
// (in any order).
func Key(bucketKey string, zones []int) (string, error) {
	agent, seq, ms, err := segment.ParseObjectKey(bucketKey)
	if err != nil {
		return "", err
	}
	zs := slices.Clone(zones)
	slices.Sort(zs)
	var b strings.Builder
	b.WriteString(agent)
	for _, z := range zs {
		if z < 0 || z > 9 {
			return "", fmt.Errorf("express: zone %d", z)
		}
		b.WriteByte(byte('0' + z))
	}
	return segment.ObjectKey(b.String(), seq, ms), nil
}

// IsKey reports whether key names a tier object: one compaction should
// move into the main store soon, since zone storage costs several times
// the regional.
func IsKey(key string) bool {
	p, ok := parse(key)
	return ok && len(p.zones) > 0
}

// BucketKey is the key in the buckets of the tier key key, or, for a
// plain data object key, the one a tier write of it (PutExpress) uses:
// its writer part tagged.
func BucketKey(key string) (string, error) {
	if p, ok := parse(key); ok && len(p.zones) > 0 {
		return p.bucket, nil
	}
	agent, seq, ms, err := segment.ParseObjectKey(key)
	if err != nil {
		return "", err
	}
	return segment.ObjectKey(agent+Tag, seq, ms), nil
}

// tierKey returns the parsed key if key names tier zones that exist.
func (s *Store) tierKey(key string) (parsed, bool, error) {
	p, ok := parse(key)
	if !ok || len(p.zones) == 0 {
		return parsed{}, false, nil
	}
	if p.zones[len(p.zones)-1] >= len(s.cfg.Zones) {
		return parsed{}, false, fmt.Errorf("express: key %s names zone %d; %d are configured", key, p.zones[len(p.zones)-1], len(s.cfg.Zones))
	}
	return p, true, nil
}

// readOrder is the order the zones holding p are read in: the local one
// first.
func (s *Store) readOrder(p parsed) []int {
	zs := slices.Clone(p.zones)
	if i := slices.Index(zs, s.cfg.Local); i > 0 {
		zs[0], zs[i] = zs[i], zs[0]
	}
	return zs
}

// Put writes a tier key to every zone it names (in parallel), any other
// key to the main store.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	p, ok, err := s.tierKey(key)
	if err != nil {
		return err
	}
	if !ok {
		return s.cfg.Main.Put(ctx, key, data)
	}
	return s.each(p.zones, func(z int) error { return s.cfg.Zones[z].Store.Put(ctx, p.bucket, data) })
}

// PutIfAbsent is Put's conditional form: for a tier key, ErrExists if
// any zone it names held the bucket key already.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	p, ok, err := s.tierKey(key)
	if err != nil {
		return err
	}
	if !ok {
		return s.cfg.Main.PutIfAbsent(ctx, key, data)
	}
	err = s.each(p.zones, func(z int) error { return s.cfg.Zones[z].Store.PutIfAbsent(ctx, p.bucket, data) })
	if errors.Is(err, objstore.ErrExists) {
		return objstore.ErrExists
	}
	return err
}

// Get reads a tier object from the zones that hold it, the local one
// first, the next when one fails.
func (s *Store) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	p, ok, err := s.tierKey(key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return s.cfg.Main.Get(ctx, key, offset, length)
	}
	var errs []error
	for _, z := range s.readOrder(p) {
		b, err := s.cfg.Zones[z].Store.Get(ctx, p.bucket, offset, length)
		if err == nil || errors.Is(err, objstore.ErrInvalidRange) || ctx.Err() != nil {
			return b, err
		}
		errs = append(errs, fmt.Errorf("zone %s: %w", s.cfg.Zones[z].Name, err))
	}
	if len(errs) == len(p.zones) && allNotFound(errs) {
		return nil, fmt.Errorf("express: %s: %w", key, objstore.ErrNotFound)
	}
	return nil, fmt.Errorf("express: reading %s: %w", key, errors.Join(errs...))
}

func allNotFound(errs []error) bool {
	for _, err := range errs {
		if !errors.Is(err, objstore.ErrNotFound) {
			return false
		}
	}
	return true
}

// Delete removes a tier object's bucket key from every zone, whichever
// the key names: a zone that lost the race may hold a copy too.
func (s *Store) Delete(ctx context.Context, key string) error {
	p, ok, err := s.tierKey(key)
	if err != nil {
		return err
	}
	if !ok {
		return s.cfg.Main.Delete(ctx, key)
	}
	all := make([]int, len(s.cfg.Zones))
	for i := range all {
		all[i] = i
	}
	return s.each(all, func(z int) error { return s.cfg.Zones[z].Store.Delete(ctx, p.bucket) })
}

// List lists prefix in the main store and in every zone, and returns
// each tier object once, under the key naming the zones it was found in
// (Aliases names the keys it may be committed under), sorted by key.
func (s *Store) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	out, err := s.cfg.Main.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	type found struct {
		size  int64
		zones []int
	}
	byKey := map[string]*found{}
	for z, zone := range s.cfg.Zones {
		infos, err := zone.Store.List(ctx, prefix)
		if err != nil {
			return nil, fmt.Errorf("express: listing zone %s: %w", zone.Name, err)
		}
		for _, info := range infos {
			p, ok := parse(info.Key)
			if !ok || len(p.zones) > 0 {
				continue // not written by the tier: left alone
			}
			f := byKey[p.bucket]
			if f == nil {
				f = &found{size: info.Size}
				byKey[p.bucket] = f
			}
			f.zones = append(f.zones, z)
		}
	}
	for bucketKey, f := range byKey {
		key, err := Key(bucketKey, f.zones)
		if err != nil {
			return nil, err
		}
		out = append(out, objstore.ObjectInfo{Key: key, Size: f.size})
	}
	slices.SortFunc(out, func(a, b objstore.ObjectInfo) int { return cmp.Compare(a.Key, b.Key) })
	return out, nil
}

// Aliases returns every key the object of key may be committed under:
// the same bucket key with any non-empty set of zones. A key List returns
// names the zones that hold a copy now, which need not be those that
// acknowledged the write. For a key that is not a tier key it returns
// key alone.
func (s *Store) Aliases(key string) []string {
	p, ok, err := s.tierKey(key)
	if err != nil || !ok {
		return []string{key}
	}
	n := len(s.cfg.Zones)
	var out []string
	for set := 1; set < 1<<n; set++ {
		var zs []int
		for z := range n {
			if set&(1<<z) != 0 {
				zs = append(zs, z)
			}
		}
		k, err := Key(p.bucket, zs)
		if err == nil {
			out = append(out, k)
		}
	}
	return out
}

// each runs fn for every zone in zones in parallel and joins the errors.
func (s *Store) each(zones []int, fn func(z int) error) error {
	errs := make([]error, len(zones))
	var wg sync.WaitGroup
	for i, z := range zones {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(z); err != nil {
				errs[i] = fmt.Errorf("zone %s: %w", s.cfg.Zones[z].Name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
