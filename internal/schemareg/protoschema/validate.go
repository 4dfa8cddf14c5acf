package protoschema

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/strandkafka/strand/internal/schemareg"
)

// A Protobuf payload names its message by the indexes Confluent's wire
// format carries after the schema id: the message's position among the
// file's top-level messages, then among that message's nested ones, and
// so on. It is checked by unmarshalling into a dynamicpb message of that
// descriptor, as strictly as protobuf-go reads: every known field must
// have its declared wire type and a valid value (UTF-8 in proto3
// strings), proto2 required fields must be there. protobuf-go keeps a
// known field sent with another wire type as an unknown field; that is
// refused here (a reader would lose it). Fields the schema does not
// know pass, as any Protobuf reader keeps them: a newer writer may have
// added them.

var _ schemareg.PayloadCheckable = (*Schema)(nil)

// PayloadChecker returns the checker of payloads written with s.
func (s *Schema) PayloadChecker() (schemareg.PayloadChecker, error) {
	return payloadChecker{file: s.file}, nil
}

type payloadChecker struct {
	file protoreflect.FileDescriptor
}

// message is the message descriptor index names.
func (c payloadChecker) message(index []int) (protoreflect.MessageDescriptor, error) {
	if len(index) == 0 {
		return nil, fmt.Errorf("%w: a Protobuf payload needs message indexes", schemareg.ErrInvalidPayload)
	}
	var md protoreflect.MessageDescriptor
	msgs := c.file.Messages()
	for depth, i := range index {
		if i < 0 || i >= msgs.Len() {
			return nil, fmt.Errorf("%w: message index %v: no message %d at depth %d (there are %d)",
				schemareg.ErrInvalidPayload, index, i, depth, msgs.Len())
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	return md, nil
}

// RecordName is the full name of the message index names, as
// Confluent's ProtobufSchema names the message it serialized.
func (c payloadChecker) RecordName(index []int) (string, error) {
	md, err := c.message(index)
	if err != nil {
		return "", err
	}
	return string(md.FullName()), nil
}

func (c payloadChecker) Check(index []int, data []byte) error {
	md, err := c.message(index)
	if err != nil {
		return err
	}
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(data, m); err != nil {
		return fmt.Errorf("%w: not a %s: %v", schemareg.ErrInvalidPayload, md.FullName(), err)
	}
	if err := knownAsUnknown(m); err != nil {
		return fmt.Errorf("%w: not a %s: %v", schemareg.ErrInvalidPayload, md.FullName(), err)
	}
	return nil
}

// knownAsUnknown finds, in m and the messages it holds, a field the
// descriptor declares that arrived with another wire type and so was
// kept among the unknown fields.
func knownAsUnknown(m protoreflect.Message) error {
	unknown := m.GetUnknown()
	for len(unknown) > 0 {
		num, typ, n := protowire.ConsumeField(unknown)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if fd := m.Descriptor().Fields().ByNumber(num); fd != nil {
			return fmt.Errorf("field %s (%d) sent with wire type %d, which its type %s does not have", fd.Name(), num, typ, fd.Kind())
		}
		unknown = unknown[n:]
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					err = knownAsUnknown(mv.Message())
					return err == nil
				})
			}
		case fd.Message() == nil:
		case fd.IsList():
			for i := range v.List().Len() {
				if err = knownAsUnknown(v.List().Get(i).Message()); err != nil {
					break
				}
			}
		default:
			err = knownAsUnknown(v.Message())
		}
		return err == nil
	})
	return err
}
