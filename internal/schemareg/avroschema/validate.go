package avroschema

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/hamba/avro/v2"
	"github.com/modern-go/reflect2"

	"github.com/strandkafka/strand/internal/schemareg"
)

// Payloads are checked with hamba/avro's generic decoder (into an any),
// which checks what the binary encoding can get wrong: lengths, union
// branches, enum symbols, booleans, and that every byte is used.
//
// The decoder is built once per schema and kept by the checker, not in
// hamba's per-config cache, which never forgets a schema. Allocation is
// bounded by the payload: a string or bytes field may claim at most the
// next power of two above the payload's length, an array or map at
// most that many items, so a 10-byte record cannot make the decoder
// allocate a gigabyte before it finds the bytes missing. hamba reads
// those limits from the Reader's config, so each size class has a
// config and a pool of readers.

// decoders builds decoders; nothing is cached in it.
var decoders = avro.Config{DisableCaching: true}.Freeze()

// anyType is what payloads are decoded into.
var anyType = reflect2.TypeOf((*any)(nil))

// sizeClass is the reader config for payloads of up to 1<<bits bytes.
type sizeClass struct {
	readers sync.Pool
}

var sizeClasses [bits.UintSize]func() *sizeClass

func init() {
	for b := range sizeClasses {
		sizeClasses[b] = sync.OnceValue(func() *sizeClass {
			limit := 1 << b
			api := avro.Config{DisableCaching: true, MaxByteSliceSize: limit, MaxSliceAllocSize: limit}.Freeze()
			c := &sizeClass{}
			c.readers.New = func() any { return avro.NewReader(nil, 0, avro.WithReaderConfig(api)) }
			return c
		})
	}
}

// maxRecursivePayloadBytes bounds the payloads of a recursive schema
// that are decoded. The generic decoder recurses once per level of
// nesting, and each level costs a payload as little as one byte, so a
// megabyte could nest deep enough to exhaust the goroutine stack and
// take the agent down. Longer payloads of a recursive schema are not
// decoded (their id and subject still are checked).
const maxRecursivePayloadBytes = 64 << 10

// payloadChecker is an Avro schema's PayloadChecker.
type payloadChecker struct {
	schema    avro.Schema
	decoder   avro.ValDecoder
	recursive bool
}

var _ schemareg.PayloadCheckable = (*Schema)(nil)

// PayloadChecker returns the checker of payloads written with s.
func (s *Schema) PayloadChecker() (schemareg.PayloadChecker, error) {
	return &payloadChecker{
		schema:    s.parsed,
		decoder:   decoders.DecoderOf(s.parsed, anyType),
		recursive: IsRecursive(s.parsed),
	}, nil
}

// RecordName is a named type's full name, as Confluent's
// AvroSchema.name(); a schema of another type is named by its type
// ("string", "array", ...).
func (c *payloadChecker) RecordName(index []int) (string, error) {
	if len(index) > 0 {
		return "", fmt.Errorf("%w: Avro payloads carry no message indexes", schemareg.ErrInvalidPayload)
	}
	if n, ok := Deref(c.schema).(avro.NamedSchema); ok {
		return n.FullName(), nil
	}
	return string(c.schema.Type()), nil
}

func (c *payloadChecker) Check(index []int, data []byte) error {
	if len(index) > 0 {
		return fmt.Errorf("%w: Avro payloads carry no message indexes", schemareg.ErrInvalidPayload)
	}
	if c.recursive && len(data) > maxRecursivePayloadBytes {
		return nil
	}
	class := sizeClasses[bits.Len(uint(len(data)))]()
	r := class.readers.Get().(*avro.Reader)
	defer class.readers.Put(r)
	r.Reset(data)
	r.Error = nil // Reset keeps the last payload's
	var v any
	c.decoder.Decode(unsafe.Pointer(&v), r)
	if r.Error != nil {
		if errors.Is(r.Error, io.EOF) || errors.Is(r.Error, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: Avro payload of %d bytes ends before the %s does", schemareg.ErrInvalidPayload, len(data), c.schema.Type())
		}
		return fmt.Errorf("%w: %v", schemareg.ErrInvalidPayload, r.Error)
	}
	// Peek at the end sets io.EOF; any other answer is a byte left over.
	r.Peek()
	if r.Error == nil {
		return fmt.Errorf("%w: bytes left after the Avro %s: the payload is longer than the schema reads", schemareg.ErrInvalidPayload, c.schema.Type())
	}
	return nil
}

// IsRecursive reports whether a named type of s contains itself: a
// decoder of such a schema recurses as deep as the payload nests.
func IsRecursive(s avro.Schema) bool {
	onPath := map[string]bool{}
	done := map[string]bool{}
	var visit func(avro.Schema) bool
	visit = func(s avro.Schema) bool {
		s = Deref(s)
		var name string
		if n, ok := s.(avro.NamedSchema); ok {
			name = n.FullName()
			if onPath[name] {
				return true
			}
			if done[name] {
				return false
			}
			onPath[name] = true
			defer func() { onPath[name], done[name] = false, true }()
		}
		switch s := s.(type) {
		case *avro.RecordSchema:
			for _, f := range s.Fields() {
				if visit(f.Type()) {
					return true
				}
			}
		case *avro.ArraySchema:
			return visit(s.Items())
		case *avro.MapSchema:
			return visit(s.Values())
		case *avro.UnionSchema:
			for _, t := range s.Types() {
				if visit(t) {
					return true
				}
			}
		}
		return false
	}
	return visit(s)
}
