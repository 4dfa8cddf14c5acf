package jsonschema

import (
	"fmt"

	"github.com/strandkafka/strand/internal/schemareg"
)

// A JSON Schema payload is one JSON document (nothing after it) that the
// schema accepts. Its record name is the schema's title, which is what
// Confluent's JsonSchema.name() returns for RecordNameStrategy.

var _ schemareg.PayloadCheckable = (*Schema)(nil)

// PayloadChecker returns the checker of payloads written with s.
func (s *Schema) PayloadChecker() (schemareg.PayloadChecker, error) {
	return payloadChecker{s: s}, nil
}

type payloadChecker struct{ s *Schema }

func (c payloadChecker) RecordName(index []int) (string, error) {
	if len(index) > 0 {
		return "", fmt.Errorf("%w: JSON payloads carry no message indexes", schemareg.ErrInvalidPayload)
	}
	if c.s.compiled.Title == "" {
		return "", fmt.Errorf("%w: the schema has no title, which names its records for RecordNameStrategy", schemareg.ErrInvalidPayload)
	}
	return c.s.compiled.Title, nil
}

func (c payloadChecker) Check(index []int, data []byte) error {
	if len(index) > 0 {
		return fmt.Errorf("%w: JSON payloads carry no message indexes", schemareg.ErrInvalidPayload)
	}
	doc, err := Decode(data)
	if err != nil {
		return fmt.Errorf("%w: not one JSON document: %v", schemareg.ErrInvalidPayload, err)
	}
	if err := Validate(c.s, doc); err != nil {
		return fmt.Errorf("%w: %v", schemareg.ErrInvalidPayload, err)
	}
	return nil
}
