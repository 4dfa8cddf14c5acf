package avroconv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// maxSchemas bounds each of a Converter's caches (schemas by their
// Connect text, by registry id); a full cache is emptied, as a
// connector's tables change their schema rarely.
const maxSchemas = 1024

// Converter is one side's (key or value) AvroConverter. Safe for
// concurrent use.
type Converter struct {
	cfg *Config
	cl  *sr.Client
	hdr sr.ConfluentHeader

	mu struct {
		sync.Mutex
		// out: by subject, then Connect schema text, the registered id
		// and the parsed Avro schema (nested so that a lookup by the
		// text's bytes copies nothing); outLen counts its entries.
		out    map[string]map[string]*outSchema
		outLen int
		// in: by registry id, the Avro schema and its Connect schema.
		in map[int]*inSchema
	}
}

type outSchema struct {
	id      int
	avro    avro.Schema
	api     avro.API
	connect map[string]any
}

type inSchema struct {
	avro       avro.Schema
	api        avro.API
	connect    map[string]any
	connectRaw []byte
}

// New returns cfg's converter; it talks to the registry only when a
// record needs it.
func New(cfg *Config) (*Converter, error) {
	opts := []sr.ClientOpt{sr.URLs(cfg.URLs...), sr.UserAgent("strand-connect")}
	if cfg.User != "" {
		opts = append(opts, sr.BasicAuth(cfg.User, cfg.Password))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	c := &Converter{cfg: cfg, cl: cl}
	c.mu.out = map[string]map[string]*outSchema{}
	c.mu.in = map[int]*inSchema{}
	return c, nil
}

// Subject is the TopicNameStrategy's subject of topic for this side.
func (c *Converter) Subject(topic string) string {
	if c.cfg.Key {
		return topic + "-key"
	}
	return topic + "-value"
}

// FromConnect converts a record key or value the JsonConverter would
// write with schemas ({"schema": ..., "payload": ...}) to Confluent's
// wire format: 0, the schema's registry id (big-endian uint32), the
// payload in Avro's binary encoding. The schema is registered under
// the topic's subject (or looked up, with auto.register.schemas=false)
// once per distinct schema. A nil input (a tombstone, a keyless
// table's key) stays nil, as the AvroConverter writes null.
func (c *Converter) FromConnect(ctx context.Context, topic string, b []byte) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	var env struct {
		Schema  json.RawMessage `json:"schema"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(b, &env); err != nil || len(env.Schema) == 0 {
		return nil, fmt.Errorf("avro converter: the record has no Connect schema to convert (%v)", err)
	}
	return c.FromConnectParts(ctx, topic, env.Schema, env.Payload)
}

// FromConnectParts is FromConnect with the schema and the payload
// apart, as a connector that renders them holds them: the schema (most
// of the bytes) is then only a cache key, never scanned again.
func (c *Converter) FromConnectParts(ctx context.Context, topic string, schema, payload []byte) ([]byte, error) {
	s, err := c.outSchema(ctx, c.Subject(topic), schema)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var pv any
	if err := dec.Decode(&pv); err != nil {
		return nil, fmt.Errorf("avro converter: payload: %w", err)
	}
	if pv == nil {
		return nil, nil
	}
	out, err := c.hdr.AppendEncode(make([]byte, 0, 5+len(payload)), s.id, nil)
	if err != nil {
		return nil, err
	}
	w := avro.NewWriter(nil, len(payload))
	if err := write(w, s.connect, pv); err != nil {
		return nil, fmt.Errorf("avro converter: %s: %w", c.Subject(topic), err)
	}
	return append(out, w.Buffer()...), nil
}

func (c *Converter) outSchema(ctx context.Context, subject string, raw []byte) (*outSchema, error) {
	c.mu.Lock()
	s, ok := c.mu.out[subject][string(raw)]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	var cs map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&cs); err != nil || cs == nil {
		return nil, fmt.Errorf("avro converter: the Connect schema is not an object")
	}
	text, err := AvroSchema(cs)
	if err != nil {
		return nil, fmt.Errorf("avro converter: %s: %w", subject, err)
	}
	as, err := parse(text)
	if err != nil {
		return nil, fmt.Errorf("avro converter: %s: the Avro schema: %w", subject, err)
	}
	var reg sr.SubjectSchema
	if c.cfg.AutoRegister {
		reg, err = c.cl.CreateSchema(ctx, subject, sr.Schema{Schema: text, Type: sr.TypeAvro})
	} else {
		reg, err = c.cl.LookupSchema(ctx, subject, sr.Schema{Schema: text, Type: sr.TypeAvro})
	}
	if err != nil {
		verb := "registering"
		if !c.cfg.AutoRegister {
			verb = "looking up (auto.register.schemas=false)"
		}
		return nil, fmt.Errorf("avro converter: %s the schema of subject %s: %w", verb, subject, err)
	}
	s = &outSchema{id: reg.ID, avro: as, api: codec(), connect: cs}
	c.mu.Lock()
	if c.mu.outLen >= maxSchemas {
		clear(c.mu.out)
		c.mu.outLen = 0
	}
	bySubject := c.mu.out[subject]
	if bySubject == nil {
		bySubject = map[string]*outSchema{}
		c.mu.out[subject] = bySubject
	}
	if _, ok := bySubject[string(raw)]; !ok {
		c.mu.outLen++
	}
	bySubject[string(raw)] = s
	c.mu.Unlock()
	return s, nil
}

// AvroSchema renders Connect schema cs (JsonConverter form, decoded) as
// the Avro schema text AvroData makes of it.
func AvroSchema(cs map[string]any) (string, error) {
	a := &toAvro{defined: map[string]bool{}}
	t, err := a.optional(cs)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(t)
	return string(b), err
}

// parse parses an Avro schema with a cache of its own: hamba's shared
// cache would keep a name's first definition, and a table's schema
// changes under the same record names.
func parse(text string) (avro.Schema, error) {
	return avro.ParseWithCache(text, "", &avro.SchemaCache{})
}

// codec is a schema's own hamba/avro configuration: hamba caches
// encoders by a schema fingerprint that two versions of a table's
// envelope can share (the nested Value record differs, the cached
// encoder of the first is used for the second, leaving the added
// column out), so each schema gets a cache of its own.
//
// Its bounds keep a hostile or corrupt record from allocating more
// than a record could hold: an array's block count is taken before its
// elements are read (an array of nulls is 0 bytes an element), a
// string's length before its bytes.
func codec() avro.API {
	return avro.Config{MaxByteSliceSize: maxBytesLen, MaxSliceAllocSize: maxArrayLen}.Freeze()
}

// Decoding bounds: a bytes or string value (a bytea or text column) of
// at most maxBytesLen bytes, an array of at most maxArrayLen
// elements.
const (
	maxBytesLen = 64 << 20
	maxArrayLen = 1 << 20
)

// ToConnect converts a record key or value in Confluent's wire format
// to what the JsonConverter would have read ({"schema", "payload"}),
// fetching the writer's schema from the registry by its id (cached).
// A nil input stays nil.
func (c *Converter) ToConnect(ctx context.Context, b []byte) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	id, body, err := c.hdr.DecodeID(b)
	if err != nil {
		return nil, fmt.Errorf("avro converter: not Confluent's wire format: %w", err)
	}
	s, err := c.inSchema(ctx, id)
	if err != nil {
		return nil, err
	}
	var v any
	if err := s.api.Unmarshal(s.avro, body, &v); err != nil {
		return nil, fmt.Errorf("avro converter: schema id %d: %w", id, err)
	}
	out := make([]byte, 0, 32+len(s.connectRaw)+2*len(body))
	out = append(out, `{"schema":`...)
	out = append(out, s.connectRaw...)
	out = append(out, `,"payload":`...)
	if out, err = appendJSON(out, s.connect, v); err != nil {
		return nil, fmt.Errorf("avro converter: schema id %d: %w", id, err)
	}
	return append(out, '}'), nil
}

func (c *Converter) inSchema(ctx context.Context, id int) (*inSchema, error) {
	c.mu.Lock()
	s, ok := c.mu.in[id]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	reg, err := c.cl.SchemaByID(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("avro converter: schema id %d: %w", id, err)
	}
	if reg.Type != sr.TypeAvro {
		return nil, fmt.Errorf("avro converter: schema id %d is %s, not Avro", id, reg.Type)
	}
	if len(reg.References) > 0 {
		return nil, fmt.Errorf("avro converter: schema id %d has references, which Strand's converter does not resolve", id)
	}
	as, err := parse(reg.Schema)
	if err != nil {
		return nil, fmt.Errorf("avro converter: schema id %d: %w", id, err)
	}
	var tree any
	dec := json.NewDecoder(bytes.NewReader([]byte(reg.Schema)))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("avro converter: schema id %d: %w", id, err)
	}
	f := &fromAvro{named: map[string]map[string]any{}}
	cs, err := f.schema(tree, "")
	if err != nil {
		return nil, fmt.Errorf("avro converter: schema id %d: %w", id, err)
	}
	raw, err := json.Marshal(cs)
	if err != nil {
		return nil, err
	}
	s = &inSchema{avro: as, api: codec(), connect: cs, connectRaw: raw}
	c.mu.Lock()
	if len(c.mu.in) >= maxSchemas {
		clear(c.mu.in)
	}
	c.mu.in[id] = s
	c.mu.Unlock()
	return s, nil
}
