package schemareg

import (
	"errors"

	"github.com/strandkafka/strand/internal/meta"
)

// Validation on produce (package schemareg/validate) checks each
// record's key or value against the schema its id names. Checking
// payloads is an optional power of a Schema, found by type assertion as
// database/sql finds a driver's optional interfaces: each format
// implements it in its validate.go.

// PayloadChecker checks payloads written with one schema: the bytes of
// a key or value after Confluent's wire-format header (the magic byte,
// the schema id and, for Protobuf, the message indexes). It is safe for
// concurrent use and meant to be built once per schema and kept.
type PayloadChecker interface {
	// RecordName is the fully-qualified name of the type a payload with
	// message indexes index holds, the name RecordNameStrategy and
	// TopicRecordNameStrategy put in a subject. index is Protobuf's (nil
	// for the other formats).
	RecordName(index []int) (string, error)
	// Check reports why data does not decode with the schema (the
	// message of index, for Protobuf), wrapping ErrInvalidPayload.
	// Decoding must consume every byte.
	Check(index []int, data []byte) error
}

// PayloadCheckable is a Schema that can check payloads.
type PayloadCheckable interface {
	Schema
	PayloadChecker() (PayloadChecker, error)
}

// ErrInvalidPayload: a payload that does not decode with its schema.
var ErrInvalidPayload = errors.New("schemareg: payload does not match its schema")

// ParseID parses the schema registered under id as v holds it, with
// its references; false if v holds no schema with that id.
func (r *Registry) ParseID(v *meta.View, id int32) (Schema, bool, error) {
	if _, ok, err := v.SchemaByID(id); err != nil || !ok {
		return nil, false, err
	}
	s, err := r.parseStored(v, id)
	return s, err == nil, err
}
