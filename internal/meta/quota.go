package meta

// Client quotas (KIP-546): per entity, the byte rates and request
// percentage a client may use, each entity's a 0x26 record. An entity is
// a user, a client id or both, each part a name or Kafka's <default>
// (a null name on the wire), as in Kafka's /config/users/<user>/clients/
// <client-id>. Every agent enforces what its copy holds, so a change
// applies everywhere once applied. Which keys exist and what values they
// take is the Kafka layer's business, as for configs; apply checks the
// entity, that values are positive numbers, and the limits.

import (
	"encoding/binary"
	"maps"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// prefixClientQuota keys an entity's client quotas: the entity's user
// part, then its client id part (appendQuotaName). The prefix alone keys
// the quota version, which every change to a quota raises, so an agent
// learns whether to reread the quotas from one key.
const prefixClientQuota byte = 0x26

// keyClientQuotaVersion sorts before every entity: an entity has a part.
var keyClientQuotaVersion = []byte{prefixClientQuota}

// Limits of apply, part of what apply means.
const (
	// maxClientQuotaKeys bounds the keys of one entity; Kafka has four.
	maxClientQuotaKeys = 16
	// MaxQuotaNameBytes bounds a user or client id name in an entity.
	MaxQuotaNameBytes = 1024
)

// TypeAlterClientQuota is type 27, written from metadata level 4.
const TypeAlterClientQuota CommandType = 27

// QuotaNameKind says what part of an entity a QuotaName is.
type QuotaNameKind uint8

const (
	// QuotaAbsent: the entity has no such part.
	QuotaAbsent QuotaNameKind = iota
	// QuotaDefault is Kafka's <default>: a quota for every user (or
	// client id) that has none of its own, each measured separately.
	QuotaDefault
	// QuotaNamed: the part names one user or client id.
	QuotaNamed
)

// QuotaName is the user or the client id part of a quota entity.
type QuotaName struct {
	Kind QuotaNameKind
	// Name is set for QuotaNamed only.
	Name string
}

// QuotaEntity names whose quota a record is: a user, a client id, or a
// user's client id.
type QuotaEntity struct {
	User, ClientID QuotaName
}

// Named returns the QuotaNamed part name.
func Named(name string) QuotaName { return QuotaName{Kind: QuotaNamed, Name: name} }

// DefaultQuotaName is the <default> part.
var DefaultQuotaName = QuotaName{Kind: QuotaDefault}

// AlterClientQuota sets and removes quota keys of one entity. A key
// removed that is not set is no change; an entity left with no keys has
// no record. A change raises the quota version.
// Result: INVALID_REQUEST, changing nothing, for an entity with neither
// part, a part with an empty or too long name, an empty key, a key both
// set and removed, a value that is not a positive finite number, or more
// than 16 keys.
type AlterClientQuota struct {
	Entity QuotaEntity
	Set    map[string]float64
	Remove []string
}

func (AlterClientQuota) Type() CommandType { return TypeAlterClientQuota }
func (AlterClientQuota) version() uint16   { return 1 }

func (c AlterClientQuota) appendPayload(b []byte) []byte {
	b = appendQuotaEntity(b, c.Entity)
	b = appendFloatMap(b, c.Set)
	return appendStringList(b, c.Remove)
}

func decodeAlterClientQuotaV1(p []byte) (AlterClientQuota, error) {
	r := &reader{b: p}
	var c AlterClientQuota
	c.Entity = r.quotaEntity()
	c.Set = r.floatMap()
	c.Remove = r.stringList()
	return c, r.done()
}

func appendQuotaName(b []byte, n QuotaName) []byte {
	b = append(b, byte(n.Kind))
	if n.Kind == QuotaNamed {
		b = appendString(b, n.Name)
	}
	return b
}

func appendQuotaEntity(b []byte, e QuotaEntity) []byte {
	return appendQuotaName(appendQuotaName(b, e.User), e.ClientID)
}

func (r *reader) quotaName() QuotaName {
	var kind [1]byte
	r.fixed(kind[:])
	n := QuotaName{Kind: QuotaNameKind(kind[0])}
	switch n.Kind {
	case QuotaAbsent, QuotaDefault:
	case QuotaNamed:
		n.Name = r.string()
	default:
		r.fail(errRange)
	}
	return n
}

func (r *reader) quotaEntity() QuotaEntity {
	var e QuotaEntity
	e.User = r.quotaName()
	e.ClientID = r.quotaName()
	return e
}

// appendFloatMap encodes m sorted by key, each value as its IEEE 754
// bits, so every value has one encoding.
func appendFloatMap(b []byte, m map[string]float64) []byte {
	keys := slices.Sorted(maps.Keys(m))
	b = appendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(m[k]))
	}
	return b
}

// floatMap decodes what appendFloatMap wrote; empty decodes as nil.
func (r *reader) floatMap() map[string]float64 {
	n := r.count(9) // an empty key and its value
	if n == 0 {
		return nil
	}
	m := make(map[string]float64, n)
	var prev string
	var bits [8]byte
	for i := 0; i < n && r.err == nil; i++ {
		k := r.string()
		r.fixed(bits[:])
		if i > 0 && k <= prev {
			r.fail(errUnsorted)
		}
		prev = k
		m[k] = math.Float64frombits(binary.BigEndian.Uint64(bits[:]))
	}
	return m
}

func clientQuotaKey(e QuotaEntity) []byte {
	return appendQuotaEntity([]byte{prefixClientQuota}, e)
}

// checkQuotaName returns why part (named what) is not valid, "" if it is.
func checkQuotaName(what string, n QuotaName) string {
	switch {
	case n.Kind == QuotaNamed && n.Name == "":
		return "Empty " + what + " not supported"
	case n.Kind == QuotaNamed && len(n.Name) > MaxQuotaNameBytes:
		return what + " name longer than 1024 bytes"
	case n.Kind > QuotaNamed:
		return "invalid " + what + " part"
	}
	return ""
}

func (a *Applier) alterClientQuota(c AlterClientQuota) (Result, error) {
	e := c.Entity
	if e.User.Kind == QuotaAbsent && e.ClientID.Kind == QuotaAbsent {
		return failed(kerr.InvalidRequest, "Invalid empty client quota entity"), nil
	}
	for _, p := range []struct {
		what string
		n    QuotaName
	}{{"user", e.User}, {"client-id", e.ClientID}} {
		if why := checkQuotaName(p.what, p.n); why != "" {
			return failed(kerr.InvalidRequest, "%s", why), nil
		}
	}
	// In key order, so every copy reports the same first problem.
	for _, k := range slices.Sorted(maps.Keys(c.Set)) {
		v := c.Set[k]
		switch {
		case k == "":
			return failed(kerr.InvalidRequest, "empty quota key"), nil
		case math.IsNaN(v) || math.IsInf(v, 0) || v <= 0:
			return failed(kerr.InvalidRequest, "Quota %s must be greater than 0", k), nil
		case slices.Contains(c.Remove, k):
			return failed(kerr.InvalidRequest, "quota key %q both set and removed", k), nil
		}
	}
	key := clientQuotaKey(e)
	next := map[string]float64{}
	v, ok, err := a.get(key)
	if err != nil {
		return Result{}, err
	}
	if ok {
		if next, err = decodeClientQuotaValues(v); err != nil {
			return Result{}, err
		}
	}
	before := len(next)
	changed := false
	for _, k := range c.Remove {
		if _, ok := next[k]; ok {
			delete(next, k)
			changed = true
		}
	}
	for k, v := range c.Set {
		if old, ok := next[k]; !ok || math.Float64bits(old) != math.Float64bits(v) {
			next[k] = v
			changed = true
		}
	}
	switch {
	case len(next) > maxClientQuotaKeys:
		return failed(kerr.InvalidRequest, "%d quota keys, at most %d", len(next), maxClientQuotaKeys), nil
	case !changed:
		return Result{}, nil
	case len(next) == 0 && before > 0:
		err = a.b.Delete(key)
	default:
		err = a.b.Set(key, appendFloatMap([]byte{recordV1}, next))
	}
	if err != nil {
		return Result{}, err
	}
	return Result{}, a.bumpClientQuotaVersion()
}

// bumpClientQuotaVersion raises the quota version by one.
func (a *Applier) bumpClientQuotaVersion() error {
	v, ok, err := a.get(keyClientQuotaVersion)
	if err != nil {
		return err
	}
	var n uint64
	if ok {
		if n, err = decodeClientQuotaVersion(v); err != nil {
			return err
		}
	}
	return a.b.Set(keyClientQuotaVersion, appendUvarint([]byte{recordV1}, n+1))
}

func decodeClientQuotaVersion(v []byte) (uint64, error) {
	r := recordReader(v)
	n := r.uvarint()
	if err := r.done(); err != nil {
		return 0, corrupt("client quota version", err)
	}
	return n, nil
}

// ClientQuotaVersion is raised by every change to a client quota: the
// quotas a reader read at one version are the quotas until the next. 0
// before the first change.
func (v *View) ClientQuotaVersion() (uint64, error) {
	val, ok, err := v.r.Get(keyClientQuotaVersion)
	if err != nil || !ok {
		return 0, err
	}
	return decodeClientQuotaVersion(val)
}

func decodeClientQuotaValues(v []byte) (map[string]float64, error) {
	r := recordReader(v)
	m := r.floatMap()
	if err := r.done(); err != nil {
		return nil, corrupt("client quota", err)
	}
	if m == nil {
		m = map[string]float64{}
	}
	return m, nil
}

// ClientQuota is one entity's quotas.
type ClientQuota struct {
	Entity QuotaEntity
	// Values holds the quotas by key; the caller owns it.
	Values map[string]float64
}

// ClientQuotas returns every entity's quotas, in key order: by user
// part (absent, <default>, names), then client id part.
func (v *View) ClientQuotas() ([]ClientQuota, error) {
	// Past the version key, which is the prefix alone.
	it, err := v.r.NewIter([]byte{prefixClientQuota, 0}, []byte{prefixClientQuota + 1})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var qs []ClientQuota
	for ok := it.First(); ok; ok = it.Next() {
		r := &reader{b: it.Key()[1:]}
		e := r.quotaEntity()
		if err := r.done(); err != nil {
			return nil, corrupt("client quota key", err)
		}
		m, err := decodeClientQuotaValues(it.Value())
		if err != nil {
			return nil, err
		}
		qs = append(qs, ClientQuota{Entity: e, Values: m})
	}
	return qs, it.Error()
}
