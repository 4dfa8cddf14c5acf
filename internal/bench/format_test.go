package bench

import (
	"encoding/binary"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// An Avro value decodes with the bench schema (by hamba/avro, after
// sr's header), has the size asked (or one byte less), and carries a
// stamp written at stampAt as its sent field.
func TestAvroValue(t *testing.T) {
	schema := avro.MustParse(benchSchema)
	for _, size := range []int{minAvroRecordSize, 77, 78, 79, 1024, 100_000} {
		v, err := avroValue(42, size)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if len(v) != size && len(v) != size-1 {
			t.Fatalf("size %d: value of %d bytes", size, len(v))
		}
		binary.BigEndian.PutUint64(v[stampAt(FormatAvro):], 0x0102030405060708)
		var h sr.ConfluentHeader
		id, payload, err := h.DecodeID(v)
		if err != nil || id != 42 {
			t.Fatalf("size %d: header %d, %v", size, id, err)
		}
		var rec struct {
			Sent    [8]byte `avro:"sent"`
			Payload []byte  `avro:"payload"`
		}
		if err := avro.Unmarshal(schema, payload, &rec); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if rec.Sent != [8]byte{1, 2, 3, 4, 5, 6, 7, 8} {
			t.Fatalf("size %d: stamp decoded as %x", size, rec.Sent)
		}
	}
	if _, err := avroValue(1, minAvroRecordSize-1); err == nil {
		t.Fatal("a value too small for the header and stamp was built")
	}
}

func TestValueFormatOption(t *testing.T) {
	o := Options{Embedded: true, ValueFormat: "protobuf"}
	o.SetDefaults()
	if err := o.Validate(); err == nil {
		t.Fatal("an unknown --value-format passed")
	}
	o = Options{Embedded: true, ValueFormat: FormatAvro, RecordSize: 10}
	o.SetDefaults()
	if err := o.Validate(); err == nil {
		t.Fatal("--record-size 10 passed for Avro")
	}
	o = Options{Embedded: true, ValueFormat: FormatAvro}
	o.SetDefaults()
	if err := o.Validate(); err != nil || o.SchemaRegistry != DefaultSchemaRegistry || o.stampAt != wireHeaderBytes {
		t.Fatalf("avro: %v, registry %q, stamp at %d", err, o.SchemaRegistry, o.stampAt)
	}
}
