package bench

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// Record value formats (--value-format). Raw values are the send stamp
// and filler; Avro values are records of benchSchema in the schema
// registry's wire format, registered under <topic>-value through the
// registry's REST API (--schema-registry), as a producer using
// Confluent's serializer would, so that a topic with
// confluent.value.schema.validation=true takes them and the cost of
// validation on produce can be measured.
const (
	FormatRaw  = "raw"
	FormatAvro = "avro"
)

// DefaultSchemaRegistry is where `strand serve` serves the registry.
const DefaultSchemaRegistry = "http://127.0.0.1:8081"

// benchSchema puts the send stamp first, as a fixed, so that it sits at
// a fixed offset of every value (after the 5-byte header) and can be
// rewritten in place without re-encoding.
const benchSchema = `{"type":"record","name":"BenchRecord","namespace":"strand.bench","fields":[` +
	`{"name":"sent","type":{"type":"fixed","name":"Stamp","size":8}},{"name":"payload","type":"bytes"}]}`

// wireHeaderBytes is the wire format's magic byte and schema id.
const wireHeaderBytes = 5

// minAvroRecordSize is the smallest Avro value: header, stamp, and an
// empty payload's length.
const minAvroRecordSize = wireHeaderBytes + stampBytes + 1

// stampAt is where the send stamp sits in a value of format.
func stampAt(format string) int {
	if format == FormatAvro {
		return wireHeaderBytes
	}
	return 0
}

// registerBenchSchema registers benchSchema under <topic>-value at the
// registry at url and returns its id.
func registerBenchSchema(ctx context.Context, url, topic string) (int, error) {
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		return 0, fmt.Errorf("bench: schema registry %s: %w", url, err)
	}
	s, err := cl.CreateSchema(ctx, topic+"-value", sr.Schema{Schema: benchSchema})
	if err != nil {
		return 0, fmt.Errorf("bench: registering the bench schema at %s: %w", url, err)
	}
	return s.ID, nil
}

// avroValue is a value of size bytes (one less where the payload's
// length prefix would grow by a byte): benchSchema's record with filler
// as its payload, encoded by hamba/avro and framed with id by franz-go's
// sr, its stamp zero.
func avroValue(id, size int) ([]byte, error) {
	if size < minAvroRecordSize {
		return nil, fmt.Errorf("bench: an Avro value needs at least %d bytes, not %d", minAvroRecordSize, size)
	}
	// The payload's length prefix is a zigzag varint whose size
	// depends on the length: take the longest payload that fits.
	n := size - wireHeaderBytes - stampBytes - 1
	for n > 0 && wireHeaderBytes+stampBytes+varintLen(int64(n))+n > size {
		n--
	}
	payload := make([]byte, n)
	fillPayload(payload)
	schema, err := avro.Parse(benchSchema)
	if err != nil {
		return nil, err
	}
	serde := sr.NewSerde()
	serde.Register(id, map[string]any{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(schema, v) }))
	v, err := serde.Encode(map[string]any{"sent": [stampBytes]byte{}, "payload": payload})
	if err != nil {
		return nil, fmt.Errorf("bench: encoding the Avro value: %w", err)
	}
	return v, nil
}

func varintLen(n int64) int { return len(binary.AppendVarint(nil, n)) }
