// Package validate owns schema validation on produce, as Confluent
// Server does it for topics with confluent.key.schema.validation or
// confluent.value.schema.validation: every key (value) of a produced
// batch must be in Confluent's wire format,
//
//	+------+-------------------+----------------------------+---------+
//	| 0x00 | schema id (4, BE) | message indexes (Protobuf) | payload |
//	+------+-------------------+----------------------------+---------+
//
// name a schema id the registry holds, registered (in a live version)
// under the subject the topic's subject name strategy names, and
// decode with that schema. Confluent Server checks the id and the
// subject only; Strand also decodes the payload (schemareg's
// PayloadChecker, in each format's validate.go), so a record that no
// consumer could read is refused too. A null key or value (a
// tombstone) passes, as in Confluent.
//
// Schemas come from the agent's copy of the metadata. An id this copy
// does not hold may have just been registered through another agent,
// so the first miss of a batch syncs the copy with the log (one
// linearizable read) before the record is refused. Checkers are cached
// by id, bounded; a schema never changes under its id, so nothing is
// invalidated. Whether an id is registered under a subject is read
// from the copy for each batch (subjects lose versions), once per
// (subject, id) of the batch.
package validate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"golang.org/x/sync/singleflight"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/codec"
	"github.com/strandkafka/strand/internal/schemareg"
	"github.com/strandkafka/strand/internal/topicconfig"
)

// Metadata is what validation reads: the agent's copy of the metadata
// (replica.Replica; metatest.DB in tests).
type Metadata interface {
	View() *meta.View
	// Sync returns once the copy has applied everything appended to
	// the log before the call.
	Sync(ctx context.Context) error
}

// Bounds.
const (
	// DefaultMaxCachedSchemas and DefaultMaxCachedSchemaBytes bound the
	// checkers kept, by count and by their schemas' text (a parsed
	// schema costs a few times its text).
	DefaultMaxCachedSchemas     = 4096
	DefaultMaxCachedSchemaBytes = 64 << 20
	// SyncTimeout bounds the Sync after an unknown id.
	SyncTimeout = 10 * time.Second
	// maxMessageIndexes bounds a Protobuf payload's message indexes:
	// one per level of message nesting.
	maxMessageIndexes = 128
	// maxRecordErrors bounds the per-record errors of one batch:
	// Kafka's message shows three, the response carries each.
	maxRecordErrors = 1000
)

// ErrUnavailable: the metadata could not be read or synced, so the
// batch was not judged; retriable.
var ErrUnavailable = errors.New("validate: schemas unavailable")

// Policy is what a topic asks of its records.
type Policy struct {
	Topic                      string
	Key, Value                 bool
	KeyStrategy, ValueStrategy topicconfig.SubjectNameStrategy
}

// PolicyOf is the policy of topic with config c.
func PolicyOf(topic string, c topicconfig.Config) Policy {
	return Policy{Topic: topic, Key: c.KeySchemaValidation, Value: c.ValueSchemaValidation,
		KeyStrategy: c.KeySubjectNameStrategy, ValueStrategy: c.ValueSubjectNameStrategy}
}

// On reports whether the policy checks anything.
func (p Policy) On() bool { return p.Key || p.Value }

// RecordError is why one record of a batch was refused.
type RecordError struct {
	// Index is the record's position in its batch (Kafka's batchIndex).
	Index   int32
	Message string
}

// Validator checks produced batches against the registry. Safe for
// concurrent use.
type Validator struct {
	md     Metadata
	reg    *schemareg.Registry
	cache  *schemareg.IDCache[*checker]
	parses singleflight.Group
}

// New returns a validator over md, parsing schemas with reg (which
// must read the same metadata), caching at most maxSchemas checkers of
// at most maxBytes of schema text (zero: the defaults).
func New(md Metadata, reg *schemareg.Registry, maxSchemas int, maxBytes int64) *Validator {
	if maxSchemas <= 0 {
		maxSchemas = DefaultMaxCachedSchemas
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxCachedSchemaBytes
	}
	return &Validator{md: md, reg: reg, cache: schemareg.NewIDCache[*checker](maxSchemas, maxBytes)}
}

// Batch checks the records of batch, a whole record batch that passed
// recordbatch.ValidateProduce, under p. It returns the records refused
// (at most maxRecordErrors; none: the batch is good), or an error
// wrapping recordbatch's sentinels when the records do not decode, or
// ErrUnavailable.
func (v *Validator) Batch(ctx context.Context, p Policy, batch []byte) ([]RecordError, error) {
	h, err := recordbatch.ParseHeader(batch)
	if err != nil {
		return nil, err
	}
	raw, err := codec.RecordsOf(batch, h)
	if err != nil {
		return nil, err
	}
	b := batchCheck{v: v, ctx: ctx, p: p}
	defer b.close()
	var refused []RecordError
	err = recordbatch.EachRecord(raw, h, func(i int, r recordbatch.Record) error {
		msg, err := b.record(r)
		if err != nil {
			return err
		}
		if msg != "" && len(refused) < maxRecordErrors {
			refused = append(refused, RecordError{Index: int32(i), Message: msg})
		}
		return nil
	})
	return refused, err
}

// batchCheck is one batch's check: the view it reads, opened at the
// first record and replaced once by a synced one, and what it learned.
type batchCheck struct {
	v      *Validator
	ctx    context.Context
	p      Policy
	view   *meta.View
	synced bool
	// registered memoizes whether a subject has a live version of an id.
	registered map[subjectID]bool
}

type subjectID struct {
	subject string
	id      int32
}

func (b *batchCheck) close() {
	if b.view != nil {
		b.view.Close()
	}
}

// record returns why r is refused ("" if it is not).
func (b *batchCheck) record(r recordbatch.Record) (string, error) {
	if b.p.Key {
		if msg, err := b.field(r.Key, "key", b.p.KeyStrategy); msg != "" || err != nil {
			return msg, err
		}
	}
	if b.p.Value {
		return b.field(r.Value, "value", b.p.ValueStrategy)
	}
	return "", nil
}

// header decodes Confluent's wire format (franz-go's sr, the client's
// own code).
var header sr.ConfluentHeader

// field checks a key or value (what) under strategy.
func (b *batchCheck) field(data []byte, what string, strategy topicconfig.SubjectNameStrategy) (string, error) {
	if data == nil {
		return "", nil // a tombstone, or a null key
	}
	id, payload, err := header.DecodeID(data)
	if err != nil {
		return fmt.Sprintf("the %s is not in the schema registry's wire format (%s): it needs the magic byte 0 and a 4-byte schema id", what, describeStart(data)), nil
	}
	if id > 0x7FFFFFFF || id <= 0 {
		return fmt.Sprintf("the %s names schema id %d, which no registry assigns", what, id), nil
	}
	c, found, err := b.checker(int32(id))
	switch {
	case err != nil:
		return "", err
	case !found:
		return fmt.Sprintf("the %s names schema id %d, which is not registered", what, id), nil
	case c.payload == nil:
		return fmt.Sprintf("the %s names schema id %d, a %s schema, which cannot be checked", what, id, c.typ), nil
	}
	var index []int
	if c.typ == schemareg.TypeProtobuf {
		if index, payload, err = header.DecodeIndex(payload, maxMessageIndexes); err != nil {
			return fmt.Sprintf("the %s's Protobuf message indexes after schema id %d do not decode: %v", what, id, err), nil
		}
	}
	subject, err := b.subject(what, strategy, c, index)
	if err != nil {
		return fmt.Sprintf("the %s's subject under %s: %v", what, strategy, err), nil
	}
	ok, err := b.isRegistered(subject, int32(id))
	switch {
	case err != nil:
		return "", err
	case !ok:
		return fmt.Sprintf("the %s's schema id %d is not registered under subject %q (%s)", what, id, subject, strategy), nil
	}
	if err := c.payload.Check(index, payload); err != nil {
		return fmt.Sprintf("the %s does not decode with schema id %d (%s): %v", what, id, c.typ, err), nil
	}
	return "", nil
}

// subject is the subject strategy names for a key or value (what).
func (b *batchCheck) subject(what string, strategy topicconfig.SubjectNameStrategy, c *checker, index []int) (string, error) {
	if strategy == topicconfig.TopicNameStrategy {
		return b.p.Topic + "-" + what, nil
	}
	name, err := c.payload.RecordName(index)
	if err != nil {
		return "", err
	}
	if strategy == topicconfig.TopicRecordNameStrategy {
		return b.p.Topic + "-" + name, nil
	}
	return name, nil
}

// checker returns id's checker: cached, or parsed from the view, which
// is synced first if it does not hold id.
func (b *batchCheck) checker(id int32) (*checker, bool, error) {
	if c, ok := b.v.cache.Get(id); ok {
		return c, true, nil
	}
	b.open()
	c, ok, err := b.v.parse(b.view, id, !b.synced)
	if err != nil || ok || b.synced {
		return c, ok, err
	}
	if err := b.sync(); err != nil {
		return nil, false, err
	}
	return b.v.parse(b.view, id, false)
}

// isRegistered reports whether subject has a live version naming id.
// A miss syncs, once a batch, as an unknown id does: the version may
// have just been registered through another agent.
func (b *batchCheck) isRegistered(subject string, id int32) (bool, error) {
	key := subjectID{subject, id}
	if ok, seen := b.registered[key]; seen {
		return ok, nil
	}
	b.open()
	ok, err := hasVersion(b.view, subject, id)
	if err == nil && !ok && !b.synced {
		if err := b.sync(); err != nil {
			return false, err
		}
		ok, err = hasVersion(b.view, subject, id)
	}
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if b.registered == nil {
		b.registered = map[subjectID]bool{}
	}
	b.registered[key] = ok
	return ok, nil
}

func hasVersion(v *meta.View, subject string, id int32) (bool, error) {
	vs, err := v.SchemaVersions(subject)
	if err != nil {
		return false, err
	}
	for _, sv := range vs {
		if sv.ID == id && !sv.Deleted {
			return true, nil
		}
	}
	return false, nil
}

func (b *batchCheck) open() {
	if b.view == nil {
		b.view = b.v.md.View()
	}
}

// sync brings the copy up to the log and reopens the view on it.
func (b *batchCheck) sync() error {
	b.synced = true
	ctx, cancel := context.WithTimeout(b.ctx, SyncTimeout)
	defer cancel()
	if err := b.v.md.Sync(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	b.close()
	b.view = b.v.md.View()
	return nil
}

// parse builds id's checker from view and caches it. False: view holds
// no schema id. With shared, concurrent misses of one id share one
// parse; a lookup after a sync does not, since a parse begun earlier
// may read a view older than its sync.
func (v *Validator) parse(view *meta.View, id int32, shared bool) (*checker, bool, error) {
	var c *checker
	var err error
	if shared {
		var res any
		res, err, _ = v.parses.Do(strconv.Itoa(int(id)), func() (any, error) { return v.parseNow(view, id) })
		c, _ = res.(*checker)
	} else {
		c, err = v.parseNow(view, id)
	}
	return c, c != nil && err == nil, err
}

func (v *Validator) parseNow(view *meta.View, id int32) (*checker, error) {
	if c, ok := v.cache.Get(id); ok {
		return c, nil
	}
	st, ok, err := view.SchemaByID(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if !ok {
		return nil, nil
	}
	c := &checker{typ: schemareg.Type(st.SchemaType), weight: int64(len(st.Schema))}
	s, _, err := v.reg.ParseID(view, id)
	if err != nil {
		// It parsed when it was registered, so this build parses
		// differently: its records are refused rather than let
		// through unchecked, and it is not cached, to try again.
		return c, nil
	}
	if pc, ok := s.(schemareg.PayloadCheckable); ok {
		if c.payload, err = pc.PayloadChecker(); err != nil {
			c.payload = nil
		}
	}
	if c.payload != nil {
		v.cache.Put(id, c, c.weight)
	}
	return c, nil
}

// describeStart says how data fails the wire format, for the message.
func describeStart(data []byte) string {
	switch {
	case len(data) == 0:
		return "it is empty"
	case data[0] != 0:
		return fmt.Sprintf("it starts with byte 0x%02x", data[0])
	}
	return fmt.Sprintf("it is %d bytes long", len(data))
}
