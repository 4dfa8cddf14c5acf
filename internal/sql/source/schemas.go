package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"math/bits"
	"reflect"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/schemareg"
	"github.com/strandkafka/strand/internal/schemareg/avroschema"
	"github.com/strandkafka/strand/internal/schemareg/protoschema"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Metadata is the agent's copy of the metadata the registry's schemas
// are read from (replica.Replica; metatest.DB in tests).
type Metadata interface {
	View() *meta.View
	// Sync returns once the copy holds everything appended to the log
	// before the call: an id just registered through another agent.
	Sync(ctx context.Context) error
}

// Bounds of the schema cache.
const (
	DefaultMaxCachedSchemas     = 1024
	DefaultMaxCachedSchemaBytes = 32 << 20
	// syncTimeout bounds the Sync after an unknown id.
	syncTimeout = 10 * time.Second
	// maxRecursivePayloadBytes bounds the payloads of a recursive Avro
	// schema that are decoded: the generic decoder recurses once per
	// level, a level can cost a byte, and the stack is not bounded
	// otherwise (as in schemareg/validate).
	maxRecursivePayloadBytes = 64 << 10
)

// Schemas are the registry's parsed schemas by id, for the sources of
// an agent to share: bounded by count and by the schemas' text, least
// recently used out. A schema never changes under its id, so entries
// are never stale. Safe for concurrent use.
type Schemas struct {
	md    Metadata
	reg   *schemareg.Registry
	cache *schemareg.IDCache[*parsedSchema]
}

// parsedSchema is one id's schema, as decoding needs it.
type parsedSchema struct {
	id        int32
	weight    int64
	avro      avro.Schema // nil unless Avro
	recursive bool
	proto     protoreflect.FileDescriptor // nil unless Protobuf
}

// NewSchemas returns a cache over md parsing with reg (which reads the
// same metadata); zero bounds take the defaults.
func NewSchemas(md Metadata, reg *schemareg.Registry, maxEntries int, maxBytes int64) *Schemas {
	if maxEntries <= 0 {
		maxEntries = DefaultMaxCachedSchemas
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxCachedSchemaBytes
	}
	return &Schemas{md: md, reg: reg, cache: schemareg.NewIDCache[*parsedSchema](maxEntries, maxBytes)}
}

// Len is how many schemas are cached.
func (s *Schemas) Len() int { return s.cache.Len() }

// get returns id's schema; a *BadRecord when the registry holds no such
// id, even after syncing, or one that does not parse.
func (s *Schemas) get(ctx context.Context, id int32) (*parsedSchema, error) {
	if p, ok := s.cache.Get(id); ok {
		return p, nil
	}
	p, ok, err := s.parse(id)
	if err == nil && !ok {
		sctx, cancel := context.WithTimeout(ctx, syncTimeout)
		err = s.md.Sync(sctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("schema registry: %w", err)
		}
		p, ok, err = s.parse(id)
	}
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, badf(ReasonUnknownSchema, sqlerr.InvalidParameterValue, "the value names schema id %d, which is not registered", id)
	}
	s.cache.Put(p.id, p, p.weight)
	return p, nil
}

// parse reads and parses id; false if the copy holds no such id.
func (s *Schemas) parse(id int32) (*parsedSchema, bool, error) {
	v := s.md.View()
	defer v.Close()
	st, ok, err := v.SchemaByID(id)
	if err != nil || !ok {
		return nil, false, err
	}
	sc, ok, err := s.reg.ParseID(v, id)
	if err != nil || !ok {
		// It parsed when it was registered, so this build parses it
		// differently: its records cannot be read.
		return nil, false, bad(ReasonUnknownSchema, fmt.Errorf("schema id %d does not parse: %v", id, err))
	}
	p := &parsedSchema{id: id, weight: int64(len(st.Schema))}
	switch x := sc.(type) {
	case *avroschema.Schema:
		p.avro = x.Avro()
		p.recursive = avroschema.IsRecursive(p.avro)
	case *protoschema.Schema:
		p.proto = x.Descriptor()
	default:
		return nil, false, badf(ReasonUnknownSchema, sqlerr.InvalidParameterValue, "schema id %d is a %s schema", id, st.SchemaType)
	}
	return p, true, nil
}

// Avro payloads are decoded with hamba/avro's generic decoder, as
// schemareg/validate checks them, under reader configs whose allocation
// limits scale with the payload: a string, bytes, array or map may claim
// at most the next power of two above the payload's length, so a short
// record cannot make the decoder allocate gigabytes.
var avroSizeClasses [bits.UintSize]func() *sync.Pool

func init() {
	for b := range avroSizeClasses {
		avroSizeClasses[b] = sync.OnceValue(func() *sync.Pool {
			limit := 1 << b
			api := avro.Config{DisableCaching: true, MaxByteSliceSize: limit, MaxSliceAllocSize: limit}.Freeze()
			return &sync.Pool{New: func() any { return avro.NewReader(nil, 0, avro.WithReaderConfig(api)) }}
		})
	}
}

func (d *Decoder) avro(ctx context.Context, v []byte, row types.Row) error {
	id, payload, err := schemaID(v)
	if err != nil {
		return err
	}
	p, err := d.schemas.get(ctx, id)
	if err != nil {
		return err
	}
	if p.avro == nil {
		return badf(ReasonUnknownSchema, sqlerr.InvalidParameterValue, "schema id %d is not an Avro schema", id)
	}
	if p.recursive && len(payload) > maxRecursivePayloadBytes {
		return badf(ReasonPayload, sqlerr.ProgramLimitExceeded, "an Avro payload of a recursive schema longer than %d bytes is not decoded", maxRecursivePayloadBytes)
	}
	pool := avroSizeClasses[bits.Len(uint(len(payload)))]()
	r := pool.Get().(*avro.Reader)
	defer pool.Put(r)
	r.Reset(payload)
	r.Error = nil
	var val any
	r.ReadVal(p.avro, &val)
	if r.Error != nil {
		if errors.Is(r.Error, io.EOF) || errors.Is(r.Error, io.ErrUnexpectedEOF) {
			return badf(ReasonPayload, sqlerr.InvalidParameterValue, "the Avro payload of %d bytes ends before its %s does", len(payload), p.avro.Type())
		}
		return bad(ReasonPayload, fmt.Errorf("Avro: %v", r.Error))
	}
	if r.Peek(); r.Error == nil {
		return badf(ReasonPayload, sqlerr.InvalidParameterValue, "bytes left after the Avro %s", p.avro.Type())
	}
	rs, ok := avroschema.Deref(p.avro).(*avro.RecordSchema)
	m, ok2 := val.(map[string]any)
	if !ok || !ok2 {
		return badf(ReasonPayload, sqlerr.InvalidParameterValue, "the Avro value is a %s, not a record", p.avro.Type())
	}
	for _, i := range d.payload {
		col := d.def.Columns[i]
		f := fieldOf(rs, col.Name)
		if f == nil {
			continue
		}
		nv, err := avroNative(f.Type(), m[col.Name])
		if err != nil {
			return d.columnErr(i, err)
		}
		cv, err := fromNative(col.Type, nv)
		if err != nil {
			return d.columnErr(i, err)
		}
		row[i] = cv
	}
	return nil
}

func fieldOf(rs *avro.RecordSchema, name string) *avro.Field {
	for _, f := range rs.Fields() {
		if f.Name() == name {
			return f
		}
	}
	return nil
}

// avroNative unwraps what hamba's generic decoder gave for schema s to
// a value fromNative takes: a union's branch, a decimal as a numeric, a
// fixed as bytes, records, maps and arrays as JSON.
func avroNative(s avro.Schema, v any) (any, error) {
	s = avroschema.Deref(s)
	if v == nil {
		return nil, nil
	}
	switch s := s.(type) {
	case *avro.UnionSchema:
		// A nullable union decodes to its branch's value; any other to
		// {"branch name": value}.
		if nullable, bt := nullableBranch(s); nullable {
			return avroNative(bt, v)
		}
		m, ok := v.(map[string]any)
		if !ok || len(m) != 1 {
			return nil, fmt.Errorf("Avro union value %T", v)
		}
		for name, bv := range m {
			for _, bt := range s.Types() {
				if unionName(bt) == name {
					return avroNative(bt, bv)
				}
			}
			return nil, fmt.Errorf("Avro union has no branch %q", name)
		}
	case *avro.PrimitiveSchema, *avro.FixedSchema:
		if r, ok := v.(*big.Rat); ok {
			scale := 0
			if ls, ok := s.(avro.LogicalTypeSchema); ok {
				if dl, ok := ls.Logical().(*avro.DecimalLogicalSchema); ok {
					scale = dl.Scale()
				}
			}
			return types.ParseDecimal(r.FloatString(scale))
		}
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Array && rv.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, rv.Len())
			reflect.Copy(reflect.ValueOf(b), rv)
			return b, nil
		}
		if ld, ok := v.(avro.LogicalDuration); ok {
			return nil, fmt.Errorf("Avro duration %v is not supported", ld)
		}
		return v, nil
	case *avro.EnumSchema:
		return v, nil
	}
	// Records, maps and arrays: JSON, through the generic value's JSON
	// encoding (union branches keep their {"type": value} wrapping, as
	// Avro's JSON encoding has it).
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return types.ParseJSON(string(b))
}

// nullableBranch is the other branch of a union of null and one type.
func nullableBranch(u *avro.UnionSchema) (bool, avro.Schema) {
	ts := u.Types()
	if len(ts) != 2 {
		return false, nil
	}
	switch {
	case ts[0].Type() == avro.Null:
		return true, ts[1]
	case ts[1].Type() == avro.Null:
		return true, ts[0]
	}
	return false, nil
}

// unionName is the key hamba's generic decoder gives a union branch.
func unionName(s avro.Schema) string {
	s = avroschema.Deref(s)
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		return string(s.Type()) + "." + string(ls.Logical().Type())
	}
	return string(s.Type())
}

func (d *Decoder) protobuf(ctx context.Context, v []byte, row types.Row) error {
	id, payload, err := schemaID(v)
	if err != nil {
		return err
	}
	p, err := d.schemas.get(ctx, id)
	if err != nil {
		return err
	}
	if p.proto == nil {
		return badf(ReasonUnknownSchema, sqlerr.InvalidParameterValue, "schema id %d is not a Protobuf schema", id)
	}
	index, payload, err := header.DecodeIndex(payload, maxMessageIndexes)
	if err != nil {
		return bad(ReasonWireFormat, fmt.Errorf("the Protobuf message indexes after schema id %d do not decode: %v", id, err))
	}
	var md protoreflect.MessageDescriptor
	msgs := p.proto.Messages()
	for depth, i := range index {
		if i < 0 || i >= msgs.Len() {
			return badf(ReasonPayload, sqlerr.InvalidParameterValue, "message index %v: no message %d at depth %d", index, i, depth)
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	if md == nil {
		return badf(ReasonPayload, sqlerr.InvalidParameterValue, "a Protobuf value names no message")
	}
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(payload, m); err != nil {
		return bad(ReasonPayload, fmt.Errorf("not a %s: %v", md.FullName(), err))
	}
	for _, i := range d.payload {
		col := d.def.Columns[i]
		fd := md.Fields().ByName(protoreflect.Name(col.Name))
		if fd == nil || (fd.HasPresence() && !m.Has(fd)) {
			continue
		}
		nv, err := protoNative(fd, m.Get(fd))
		if err != nil {
			return d.columnErr(i, err)
		}
		cv, err := fromNative(col.Type, nv)
		if err != nil {
			return d.columnErr(i, err)
		}
		row[i] = cv
	}
	return nil
}

// protoNative is a field's value as fromNative takes it: scalars as Go
// values, an enum as its name, messages, lists and maps as their
// canonical JSON (protojson: a Timestamp as RFC 3339 text, which a
// timestamp column reads).
func protoNative(fd protoreflect.FieldDescriptor, v protoreflect.Value) (any, error) {
	if fd.IsList() || fd.IsMap() || fd.Message() != nil {
		var b []byte
		var err error
		opts := protojson.MarshalOptions{UseProtoNames: true}
		switch {
		case fd.IsList() && v.List().Len() == 0:
			return types.MakeJSONArray(nil), nil
		case fd.IsMap() && v.Map().Len() == 0:
			return types.MakeJSONObject(nil, nil), nil
		case fd.IsList() || fd.IsMap():
			// Marshal the field alone in a message of its own kind, then
			// take the field back out.
			holder := dynamicpb.NewMessage(fd.ContainingMessage())
			holder.Set(fd, v)
			b, err = opts.Marshal(holder)
			if err == nil {
				var j types.JSON
				if j, err = types.ParseJSON(string(b)); err == nil {
					f, _ := j.Field(string(fd.Name()))
					return f, nil
				}
			}
			return nil, err
		default:
			b, err = opts.Marshal(v.Message().Interface())
		}
		if err != nil {
			return nil, err
		}
		j, err := types.ParseJSON(string(b))
		if err != nil {
			return nil, err
		}
		if j.Kind() == types.JSONString {
			// A well-known type written as a string (Timestamp,
			// Duration): its text, for the column's input function.
			return j.Str(), nil
		}
		return j, nil
	}
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name()), nil
		}
		return int64(v.Enum()), nil
	case protoreflect.BoolKind:
		return v.Bool(), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return v.Int(), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return v.Uint(), nil
	case protoreflect.FloatKind:
		return float32(v.Float()), nil
	case protoreflect.DoubleKind:
		return v.Float(), nil
	case protoreflect.StringKind:
		return v.String(), nil
	case protoreflect.BytesKind:
		return v.Bytes(), nil
	}
	return nil, fmt.Errorf("Protobuf kind %s", fd.Kind())
}
