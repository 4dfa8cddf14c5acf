package meta

// ACLs (Kafka's CreateAcls and DeleteAcls): each binding is one 0x23
// key, the binding itself, so every copy holds the same set in the same
// order, and one counter record says how many there are and how often
// the set changed, so an agent's authorizer rebuilds only after a
// change. What a binding means is package acl's; apply checks each one
// as Kafka's AclControlManager does and bounds the set. A DeleteACLs
// carries filters, not bindings: which bindings they select is decided
// at apply, so every copy deletes the same ones whatever it held when
// the command was proposed.
//
// A subject binding or filter (acl.ResourceTypeSubject, for the schema
// registry) is INVALID_REQUEST below metadata level 6, as builds before
// it found the type invalid, so every copy of such a log applies it
// alike whatever its build. A relation binding or filter
// (acl.ResourceTypeRelation, for the SQL catalog) is, likewise, below
// level 7, and a connector binding or filter (acl.ResourceTypeConnector,
// for the Connect REST API) below level 8.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
)

// prefixACL keys the ACL records: 0x23 0x00 is the counter record
// (generation, count), 0x23 0x01 followed by a binding's encoding one
// binding.
const prefixACL byte = 0x23

var (
	keyACLCounter   = []byte{prefixACL, 0x00}
	keyACLBindings  = []byte{prefixACL, 0x01}
	keyACLBindingsE = []byte{prefixACL, 0x02}
)

// Limits on ACLs. Like apply's other limits they are part of what apply
// means: a build that changed them would apply the same log
// differently.
const (
	// MaxACLsPerCommand bounds the bindings of a CreateACLs and the
	// filters of a DeleteACLs.
	MaxACLsPerCommand = 1000
	// MaxACLs bounds the bindings the cluster holds; every agent keeps
	// them all in memory to authorize requests.
	MaxACLs = 100_000
)

// Command types 24 and 26, written from metadata level 4.
const (
	TypeCreateACLs CommandType = 24
	TypeDeleteACLs CommandType = 26
)

// CreateACLs adds bindings. One already held is a success that changes
// nothing, as in Kafka.
// Result: Codes, one per binding: INVALID_REQUEST for a binding
// acl.Binding.Validate refuses or one past MaxACLs, each changing
// nothing. More than MaxACLsPerCommand bindings is INVALID_REQUEST for
// the command, changing nothing.
type CreateACLs struct {
	ACLs []acl.Binding
}

// DeleteACLs deletes the bindings its filters select, as the state holds
// them when it is applied.
// Result: Codes, one per filter (INVALID_REQUEST for a filter
// acl.Filter.Validate refuses, which deletes nothing), and DeletedACLs,
// one list per filter of what it deleted; a binding two filters select
// is listed under the first. More than MaxACLsPerCommand filters is
// INVALID_REQUEST for the command, changing nothing.
type DeleteACLs struct {
	Filters []acl.Filter
}

func (CreateACLs) Type() CommandType { return TypeCreateACLs }
func (CreateACLs) version() uint16   { return 1 }
func (DeleteACLs) Type() CommandType { return TypeDeleteACLs }
func (DeleteACLs) version() uint16   { return 1 }

func (c CreateACLs) appendPayload(b []byte) []byte {
	b = appendUvarint(b, uint64(len(c.ACLs)))
	for _, a := range c.ACLs {
		b = appendACLBinding(b, a)
	}
	return b
}

func decodeCreateACLsV1(p []byte) (CreateACLs, error) {
	r := &reader{b: p}
	var c CreateACLs
	// A binding is at least 2 enum bytes, 3 empty strings, 2 enums.
	if n := r.count(7); n > 0 {
		c.ACLs = make([]acl.Binding, n)
		for i := range c.ACLs {
			c.ACLs[i] = r.aclBinding()
		}
	}
	return c, r.done()
}

func (c DeleteACLs) appendPayload(b []byte) []byte {
	b = appendUvarint(b, uint64(len(c.Filters)))
	for _, f := range c.Filters {
		b = appendVarint(b, int64(f.ResourceType))
		b = appendOptString(b, f.ResourceName)
		b = appendVarint(b, int64(f.PatternType))
		b = appendOptString(b, f.Principal)
		b = appendOptString(b, f.Host)
		b = appendVarint(b, int64(f.Operation))
		b = appendVarint(b, int64(f.Permission))
	}
	return b
}

func decodeDeleteACLsV1(p []byte) (DeleteACLs, error) {
	r := &reader{b: p}
	var c DeleteACLs
	if n := r.count(7); n > 0 {
		c.Filters = make([]acl.Filter, n)
		for i := range c.Filters {
			f := &c.Filters[i]
			f.ResourceType = kmsg.ACLResourceType(r.int8())
			f.ResourceName = r.optString()
			f.PatternType = kmsg.ACLResourcePatternType(r.int8())
			f.Principal = r.optString()
			f.Host = r.optString()
			f.Operation = kmsg.ACLOperation(r.int8())
			f.Permission = kmsg.ACLPermissionType(r.int8())
		}
	}
	return c, r.done()
}

// appendACLBinding encodes a binding; the same bytes after 0x23 0x01 are
// its key.
func appendACLBinding(b []byte, a acl.Binding) []byte {
	b = appendVarint(b, int64(a.ResourceType))
	b = appendVarint(b, int64(a.PatternType))
	b = appendString(b, a.ResourceName)
	b = appendString(b, a.Principal)
	b = appendString(b, a.Host)
	b = appendVarint(b, int64(a.Operation))
	return appendVarint(b, int64(a.Permission))
}

func (r *reader) aclBinding() acl.Binding {
	var a acl.Binding
	a.ResourceType = kmsg.ACLResourceType(r.int8())
	a.PatternType = kmsg.ACLResourcePatternType(r.int8())
	a.ResourceName = r.string()
	a.Principal = r.string()
	a.Host = r.string()
	a.Operation = kmsg.ACLOperation(r.int8())
	a.Permission = kmsg.ACLPermissionType(r.int8())
	return a
}

// int8 reads a varint that must fit an int8 (the wire's ACL enums).
func (r *reader) int8() int8 {
	v := r.varint()
	if v < -128 || v > 127 {
		r.fail(errTooMany)
		return 0
	}
	return int8(v)
}

func appendOptString(b []byte, s *string) []byte {
	if s == nil {
		return appendBool(b, false)
	}
	return appendString(appendBool(b, true), *s)
}

func (r *reader) optString() *string {
	if !r.bool() {
		return nil
	}
	s := r.string()
	return &s
}

func aclKey(a acl.Binding) []byte {
	return appendACLBinding(append([]byte(nil), keyACLBindings...), a)
}

// aclCounter is the 0x23 0x00 record: Generation counts the commands
// that changed the set, Count is its size.
type aclCounter struct {
	Generation uint64
	Count      uint64
}

func (a *Applier) aclCounter() (aclCounter, error) {
	v, ok, err := a.get(keyACLCounter)
	if err != nil || !ok {
		return aclCounter{}, err
	}
	return decodeACLCounter(v)
}

func decodeACLCounter(v []byte) (aclCounter, error) {
	r := recordReader(v)
	c := aclCounter{Generation: r.uvarint(), Count: r.uvarint()}
	if err := r.done(); err != nil {
		return aclCounter{}, corrupt("acl counter", err)
	}
	return c, nil
}

func (a *Applier) setACLCounter(c aclCounter) error {
	b := appendUvarint([]byte{recordV1}, c.Generation)
	return a.b.Set(keyACLCounter, appendUvarint(b, c.Count))
}

func (a *Applier) createACLs(c CreateACLs) (Result, error) {
	if len(c.ACLs) > MaxACLsPerCommand {
		return failed(kerr.InvalidRequest, "%d ACLs in one command, at most %d", len(c.ACLs), MaxACLsPerCommand), nil
	}
	cnt, err := a.aclCounter()
	if err != nil {
		return Result{}, err
	}
	level, err := a.metadataLevel()
	if err != nil {
		return Result{}, err
	}
	res := Result{Codes: make([]int16, len(c.ACLs))}
	changed := false
	for i, b := range c.ACLs {
		if b.Validate() != nil || level < ACLTypeLevel(b.ResourceType) {
			res.Codes[i] = kerr.InvalidRequest.Code
			continue
		}
		key := aclKey(b)
		_, ok, err := a.get(key)
		switch {
		case err != nil:
			return Result{}, err
		case ok:
			continue
		case cnt.Count >= MaxACLs:
			res.Codes[i] = kerr.InvalidRequest.Code
			continue
		}
		if err := a.b.Set(key, []byte{recordV1}); err != nil {
			return Result{}, err
		}
		cnt.Count++
		changed = true
	}
	if changed {
		cnt.Generation++
		if err := a.setACLCounter(cnt); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

func (a *Applier) deleteACLs(c DeleteACLs) (Result, error) {
	if len(c.Filters) > MaxACLsPerCommand {
		return failed(kerr.InvalidRequest, "%d ACL filters in one command, at most %d", len(c.Filters), MaxACLsPerCommand), nil
	}
	cnt, err := a.aclCounter()
	if err != nil {
		return Result{}, err
	}
	held, err := readACLs(a.b)
	if err != nil {
		return Result{}, err
	}
	level, err := a.metadataLevel()
	if err != nil {
		return Result{}, err
	}
	res := Result{Codes: make([]int16, len(c.Filters)), DeletedACLs: make([][]acl.Binding, len(c.Filters))}
	gone := make([]bool, len(held))
	changed := false
	for i, f := range c.Filters {
		if f.Validate() != nil || level < ACLTypeLevel(f.ResourceType) {
			res.Codes[i] = kerr.InvalidRequest.Code
			continue
		}
		for j, b := range held {
			if gone[j] || !f.Matches(b) {
				continue
			}
			gone[j] = true
			if err := a.b.Delete(aclKey(b)); err != nil {
				return Result{}, err
			}
			res.DeletedACLs[i] = append(res.DeletedACLs[i], b)
			cnt.Count--
			changed = true
		}
	}
	if changed {
		cnt.Generation++
		if err := a.setACLCounter(cnt); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// ACLTypeLevel is the metadata level from which apply takes bindings
// and filters of resource type t: Strand's own types from the level
// that added them (SUBJECT 6, RELATION 7, CONNECTOR 8), Kafka's from 1.
func ACLTypeLevel(t acl.ResourceType) int16 {
	switch t {
	case acl.ResourceTypeSubject:
		return MetadataLevel6
	case acl.ResourceTypeRelation:
		return MetadataLevel7
	case acl.ResourceTypeConnector:
		return MetadataLevel8
	}
	return MetadataLevel1
}

// readACLs returns every binding r holds, in key order.
func readACLs(r Reader) ([]acl.Binding, error) {
	it, err := r.NewIter(keyACLBindings, keyACLBindingsE)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []acl.Binding
	for ok := it.First(); ok; ok = it.Next() {
		rd := reader{b: it.Key()[len(keyACLBindings):]}
		b := rd.aclBinding()
		if err := rd.done(); err != nil {
			return nil, corrupt("acl binding", err)
		}
		out = append(out, b)
	}
	return out, it.Error()
}

// ACLGeneration counts the commands that changed the ACLs: an agent
// rebuilds its authorizer when it moves. Zero before the first ACL.
func (v *View) ACLGeneration() (uint64, error) {
	val, ok, err := v.get(keyACLCounter)
	if err != nil || !ok {
		return 0, err
	}
	c, err := decodeACLCounter(val)
	return c.Generation, err
}

// ACLs returns every ACL, in key order (by resource type, pattern type,
// name, principal, host, operation, permission). The caller owns the
// slice.
func (v *View) ACLs() ([]acl.Binding, error) { return readACLs(v.r) }
