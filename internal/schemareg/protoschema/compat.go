package protoschema

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/strandkafka/strand/internal/schemareg"
)

// Compatible applies Confluent's Protobuf rules (its diff package:
// SchemaDiff, MessageSchemaDiff, FieldSchemaDiff, EnumSchemaDiff) to
// data written with writer and read with reader: it lists every
// difference from writer to reader and keeps those Confluent does not
// count as compatible, as Confluent words them, "%s" filled with
// "reader" and "writer" where Confluent fills "new" and "old".
//
// As in Confluent, every message of the file is compared, matched by
// its name within the file (the package is compared once, as
// PACKAGE_CHANGED), not only the first; field types are followed into
// the messages they name, in referenced files too.
func (Format) Compatible(reader, writer schemareg.Schema) []string {
	r, ok1 := reader.(*Schema)
	w, ok2 := writer.(*Schema)
	if !ok1 || !ok2 {
		return []string{"Incompatible because of different schema type"}
	}
	var out []string
	for _, d := range diff(w.file, r.file) {
		if !compatibleChanges[d.typ] {
			out = append(out, d.String())
		}
	}
	return out
}

// diffType is one of Confluent's Difference.Type values.
type diffType string

const (
	packageChanged             diffType = "PACKAGE_CHANGED"
	messageAdded               diffType = "MESSAGE_ADDED"
	messageRemoved             diffType = "MESSAGE_REMOVED"
	messageMoved               diffType = "MESSAGE_MOVED"
	enumAdded                  diffType = "ENUM_ADDED"
	enumRemoved                diffType = "ENUM_REMOVED"
	enumConstAdded             diffType = "ENUM_CONST_ADDED"
	enumConstChanged           diffType = "ENUM_CONST_CHANGED"
	enumConstRemoved           diffType = "ENUM_CONST_REMOVED"
	fieldAdded                 diffType = "FIELD_ADDED"
	fieldRemoved               diffType = "FIELD_REMOVED"
	fieldNameChanged           diffType = "FIELD_NAME_CHANGED"
	fieldKindChanged           diffType = "FIELD_KIND_CHANGED"
	fieldScalarKindChanged     diffType = "FIELD_SCALAR_KIND_CHANGED"
	fieldNamedTypeChanged      diffType = "FIELD_NAMED_TYPE_CHANGED"
	fieldNumericLabelChanged   diffType = "FIELD_NUMERIC_LABEL_CHANGED"
	fieldStringOrBytesLabelChg diffType = "FIELD_STRING_OR_BYTES_LABEL_CHANGED"
	requiredFieldAdded         diffType = "REQUIRED_FIELD_ADDED"
	requiredFieldRemoved       diffType = "REQUIRED_FIELD_REMOVED"
	oneofAdded                 diffType = "ONEOF_ADDED"
	oneofRemoved               diffType = "ONEOF_REMOVED"
	oneofFieldAdded            diffType = "ONEOF_FIELD_ADDED"
	oneofFieldRemoved          diffType = "ONEOF_FIELD_REMOVED"
	oneofFieldMovedToTopLevel  diffType = "ONEOF_FIELD_MOVED_TO_TOP_LEVEL"
	multipleFieldsMovedToOneof diffType = "MULTIPLE_FIELDS_MOVED_TO_ONEOF"
	fieldMovedToExistingOneof  diffType = "FIELD_MOVED_TO_EXISTING_ONEOF"
)

// compatibleChanges is Confluent's SchemaDiff.COMPATIBLE_CHANGES.
var compatibleChanges = map[diffType]bool{
	messageAdded:               true,
	messageMoved:               true,
	enumAdded:                  true,
	enumRemoved:                true,
	enumConstAdded:             true,
	enumConstChanged:           true,
	enumConstRemoved:           true,
	fieldAdded:                 true,
	fieldRemoved:               true,
	fieldNameChanged:           true,
	fieldStringOrBytesLabelChg: true,
	oneofAdded:                 true,
	oneofRemoved:               true,
	oneofFieldAdded:            true,
	oneofFieldMovedToTopLevel:  true,
}

// descriptions are Confluent's Difference.error texts for the
// incompatible types, path first, then reader and writer.
var descriptions = map[diffType]string{
	packageChanged:             "The package at '%[1]s' in the %[2]s schema does not match the package in the %[3]s schema",
	messageRemoved:             "The %[2]s schema is missing a MESSAGE type at path '%[1]s' in the %[3]s schema",
	fieldKindChanged:           "The type of a field at path '%[1]s' in the %[2]s schema does not match the %[3]s schema",
	fieldScalarKindChanged:     "The kind of a SCALAR field at path '%[1]s' in the %[2]s schema does not match its kind in the %[3]s schema",
	fieldNamedTypeChanged:      "The type of a MESSAGE field at path '%[1]s' in the %[2]s schema does not match its type in the %[3]s schema",
	fieldNumericLabelChanged:   "The label for a NUMERIC field at path '%[1]s' in the %[2]s schema does not match its label in the %[3]s schema",
	requiredFieldAdded:         "A required field  at path '%[1]s' in the %[2]s schema is missing in the %[3]s schema",
	requiredFieldRemoved:       "The %[2]s schema is missing a required field at path: '%[1]s' in the %[3]s schema",
	oneofFieldRemoved:          "The %[2]s schema is missing a oneof field at path '%[1]s' in the %[3]s schema",
	oneofFieldMovedToTopLevel:  "The oneof field at path '%[1]s' in the %[2]s schema was moved out of its oneof to a top-level field in the %[3]s schema",
	multipleFieldsMovedToOneof: "Multiple fields in the oneof at path '%[1]s' in the %[2]s schema are outside a oneof in the %[3]s schema",
	fieldMovedToExistingOneof:  "A field in the oneof at path '%[1]s' in the %[2]s schema is outside an existing oneof in the %[3]s schema",
}

// difference is one change from the writer's schema (Confluent's
// original) to the reader's (its update), at a path of names and field
// numbers such as "#/Outer/Inner/3".
type difference struct {
	typ  diffType
	path string
}

// String is Confluent's Difference.toString with its format filled.
func (d difference) String() string {
	desc := ""
	if f, ok := descriptions[d.typ]; ok {
		desc = fmt.Sprintf(f, d.path, "reader", "writer")
	}
	return fmt.Sprintf(`{errorType:"%s", description:"%s"}`, d.typ, desc)
}

// diff lists the differences from writer to reader, each once, in a
// deterministic order: types by name, fields by number.
func diff(writer, reader protoreflect.FileDescriptor) []difference {
	c := &comparison{
		memo:       map[[2]protoreflect.FullName][]difference{},
		inProgress: map[protoreflect.FullName]bool{},
	}
	d := &differ{c: c}
	if writer.Package() != reader.Package() {
		d.add(packageChanged)
	}
	d.types(writer.Messages(), reader.Messages(), writer.Enums(), reader.Enums())
	seen := map[difference]bool{}
	var out []difference
	for _, x := range d.diffs {
		// A message is compared at its own path and again wherever a
		// field names it; Confluent lists both, which is one too many.
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// comparison is what all differs of one diff share.
type comparison struct {
	// memo holds a message pair's differences, at the writer message's
	// own path, so a type named by many fields is compared once.
	memo map[[2]protoreflect.FullName][]difference
	// inProgress are the writer messages being compared, so a
	// recursive type ends the descent, as Confluent's SchemaScope.
	inProgress map[protoreflect.FullName]bool
}

// differ collects differences under a path, Confluent's Context.
type differ struct {
	c     *comparison
	path  []string
	diffs []difference
}

func (d *differ) add(t diffType) {
	d.diffs = append(d.diffs, difference{t, "#/" + strings.Join(d.path, "/")})
}

// at runs f with name appended to the path.
func (d *differ) at(name string, f func()) {
	d.path = append(d.path, name)
	f()
	d.path = d.path[:len(d.path)-1]
}

func (d *differ) addAt(name string, t diffType) { d.at(name, func() { d.add(t) }) }

// types compares the messages and enums declared in one scope, matched
// by name.
func (d *differ) types(wm, rm protoreflect.MessageDescriptors, we, re protoreflect.EnumDescriptors) {
	wMsgs, wIdx := messagesByName(wm)
	rMsgs, rIdx := messagesByName(rm)
	for _, name := range unionKeys(wMsgs, rMsgs) {
		w, r := wMsgs[name], rMsgs[name]
		switch {
		case r == nil:
			d.addAt(name, messageRemoved)
		case w == nil:
			d.addAt(name, messageAdded)
		default:
			d.diffs = append(d.diffs, d.c.messages(w, r)...)
			if wIdx[name] != rIdx[name] {
				// Message indexes on the wire are relative to the
				// schema of the id they are sent with.
				d.addAt(name, messageMoved)
			}
		}
	}
	wEnums, rEnums := enumsByName(we), enumsByName(re)
	for _, name := range unionKeys(wEnums, rEnums) {
		w, r := wEnums[name], rEnums[name]
		d.at(name, func() {
			switch {
			case r == nil:
				d.add(enumRemoved)
			case w == nil:
				d.add(enumAdded)
			default:
				d.enum(w, r)
			}
		})
	}
}

// messagesByName indexes a scope's messages and their positions,
// leaving out map entries and proto2 group bodies: Confluent's parsed
// file has neither as a message.
func messagesByName(ms protoreflect.MessageDescriptors) (map[string]protoreflect.MessageDescriptor, map[string]int) {
	byName := map[string]protoreflect.MessageDescriptor{}
	idx := map[string]int{}
	for i := range ms.Len() {
		m := ms.Get(i)
		if m.IsMapEntry() || isGroupMessage(m) {
			continue
		}
		idx[string(m.Name())] = len(byName)
		byName[string(m.Name())] = m
	}
	return byName, idx
}

func enumsByName(es protoreflect.EnumDescriptors) map[string]protoreflect.EnumDescriptor {
	byName := map[string]protoreflect.EnumDescriptor{}
	for i := range es.Len() {
		byName[string(es.Get(i).Name())] = es.Get(i)
	}
	return byName
}

func unionKeys[V any](a, b map[string]V) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// localName is a type's name within its package: what Confluent
// matches named types by and roots their paths at.
func localName(d protoreflect.Descriptor) string {
	name := string(d.FullName())
	if pkg := string(d.ParentFile().Package()); pkg != "" {
		name = strings.TrimPrefix(name, pkg+".")
	}
	return name
}

// messages compares writer message w with reader message r at w's own
// path (Confluent's MessageSchemaDiff.compare in a subcontext).
func (c *comparison) messages(w, r protoreflect.MessageDescriptor) []difference {
	key := [2]protoreflect.FullName{w.FullName(), r.FullName()}
	if diffs, ok := c.memo[key]; ok {
		return diffs
	}
	if c.inProgress[w.FullName()] {
		return nil
	}
	c.inProgress[w.FullName()] = true
	d := &differ{c: c, path: strings.Split(localName(w), ".")}
	d.message(w, r)
	delete(c.inProgress, w.FullName())
	c.memo[key] = d.diffs
	return d.diffs
}

func (d *differ) message(w, r protoreflect.MessageDescriptor) {
	wByTag, wOneofOf, wOneofs := collectFields(w)
	rByTag, rOneofOf, rOneofs := collectFields(r)

	// A oneof removed by name none of whose fields survive anywhere is
	// a deletion Confluent allows; a partly surviving one reports its
	// lost fields below.
	deleted := map[string]bool{}
	for name, o := range wOneofs {
		if _, ok := rOneofs[name]; ok {
			continue
		}
		survives := false
		for i := range o.Fields().Len() {
			if _, ok := rByTag[o.Fields().Get(i).Number()]; ok {
				survives = true
				break
			}
		}
		if !survives {
			deleted[name] = true
		}
	}

	// A reader oneof whose fields were independent in the writer makes
	// them mutually exclusive: data setting two of them loses one.
	roneofs := r.Oneofs()
	for i := range roneofs.Len() {
		o := roneofs.Get(i)
		if o.IsSynthetic() {
			continue
		}
		groups := map[string]bool{}
		movedIn := 0
		for j := range o.Fields().Len() {
			n := o.Fields().Get(j).Number()
			if wo, ok := wOneofOf[n]; ok {
				groups["oneof:"+wo] = true
			} else if _, ok := wByTag[n]; ok {
				groups["field:"+strconv.Itoa(int(n))] = true
				movedIn++
			}
		}
		if len(groups) > 1 {
			t := fieldMovedToExistingOneof
			if movedIn > 1 {
				t = multipleFieldsMovedToOneof
			}
			d.addAt(string(o.Name()), t)
		}
	}

	for _, name := range unionKeys(wOneofs, rOneofs) {
		if _, ok := rOneofs[name]; !ok {
			d.addAt(name, oneofRemoved)
		} else if _, ok := wOneofs[name]; !ok {
			d.addAt(name, oneofAdded)
		}
	}

	tags := make([]protoreflect.FieldNumber, 0, len(wByTag)+len(rByTag))
	for n := range wByTag {
		tags = append(tags, n)
	}
	for n := range rByTag {
		if _, ok := wByTag[n]; !ok {
			tags = append(tags, n)
		}
	}
	slices.Sort(tags)
	for _, n := range tags {
		wf, rf := wByTag[n], rByTag[n]
		wo, inWOneof := wOneofOf[n]
		ro, inROneof := rOneofOf[n]
		num := strconv.Itoa(int(n))
		switch {
		case rf == nil:
			if inWOneof {
				if !deleted[wo] {
					d.at(wo, func() { d.addAt(num, oneofFieldRemoved) })
				}
			} else if labelOf(wf) == labelRequired {
				d.addAt(num, requiredFieldRemoved)
			} else {
				d.addAt(num, fieldRemoved)
			}
		case wf == nil:
			if inROneof {
				d.at(ro, func() { d.addAt(num, oneofFieldAdded) })
			} else if labelOf(rf) == labelRequired {
				d.addAt(num, requiredFieldAdded)
			} else {
				d.addAt(num, fieldAdded)
			}
		default:
			if inWOneof && !inROneof {
				d.addAt(num, oneofFieldMovedToTopLevel)
			}
			if inROneof {
				d.at(ro, func() { d.at(num, func() { d.field(wf, rf) }) })
			} else {
				d.at(num, func() { d.field(wf, rf) })
			}
		}
	}

	d.types(w.Messages(), r.Messages(), w.Enums(), r.Enums())
}

// collectFields indexes a message's fields by number, with the real
// oneof (by name) each belongs to and the real oneofs by name.
func collectFields(m protoreflect.MessageDescriptor) (
	byTag map[protoreflect.FieldNumber]protoreflect.FieldDescriptor,
	oneofOf map[protoreflect.FieldNumber]string,
	oneofs map[string]protoreflect.OneofDescriptor,
) {
	byTag = map[protoreflect.FieldNumber]protoreflect.FieldDescriptor{}
	oneofOf = map[protoreflect.FieldNumber]string{}
	oneofs = map[string]protoreflect.OneofDescriptor{}
	for i := range m.Fields().Len() {
		f := m.Fields().Get(i)
		byTag[f.Number()] = f
		if o := realOneof(f); o != nil {
			oneofOf[f.Number()] = string(o.Name())
			oneofs[string(o.Name())] = o
		}
	}
	return byTag, oneofOf, oneofs
}

// field compares a field present, by number, in both messages.
func (d *differ) field(w, r protoreflect.FieldDescriptor) {
	if w.Name() != r.Name() {
		d.add(fieldNameChanged)
	}
	d.labelsAndTypes(labelOf(w), labelOf(r), w, r)
}

// kind is Confluent's FieldSchemaDiff.Kind: an enum is a scalar.
type kind int

const (
	kindScalar kind = iota
	kindMap
	kindMessage
)

func kindOf(f protoreflect.FieldDescriptor) kind {
	switch {
	case f.IsMap():
		return kindMap
	case f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind:
		return kindMessage
	default:
		return kindScalar
	}
}

func (d *differ) labelsAndTypes(wl, rl label, w, r protoreflect.FieldDescriptor) {
	k := kindOf(w)
	if k != kindOf(r) {
		d.add(fieldKindChanged)
		return
	}
	switch k {
	case kindScalar:
		wk, rk := scalarKindOf(w), scalarKindOf(r)
		if wk != rk {
			d.add(fieldScalarKindChanged)
			return
		}
		// A label Confluent's parser leaves unset (proto3 without
		// "optional") compares equal to any.
		if wl == labelNone || rl == labelNone || wl == rl {
			return
		}
		if wk == scalarStringOrBytes {
			d.add(fieldStringOrBytesLabelChg)
		} else {
			d.add(fieldNumericLabelChanged)
		}
	case kindMessage:
		d.messageTypes(w.Message(), r.Message())
	case kindMap:
		d.labelsAndTypes(labelNone, labelNone, w.MapKey(), r.MapKey())
		d.labelsAndTypes(labelNone, labelNone, w.MapValue(), r.MapValue())
	}
}

// messageTypes compares the messages two fields name: by name within
// their packages, then by content, reporting the content's differences
// at the message's own path and, if any is incompatible, the field.
func (d *differ) messageTypes(w, r protoreflect.MessageDescriptor) {
	if localName(w) != localName(r) {
		d.add(fieldNamedTypeChanged)
		return
	}
	diffs := d.c.messages(w, r)
	d.diffs = append(d.diffs, diffs...)
	for _, x := range diffs {
		if !compatibleChanges[x.typ] {
			d.add(fieldNamedTypeChanged)
			return
		}
	}
}

func (d *differ) enum(w, r protoreflect.EnumDescriptor) {
	wv, rv := w.Values(), r.Values()
	var nums []protoreflect.EnumNumber
	for i := range wv.Len() {
		nums = append(nums, wv.Get(i).Number())
	}
	for i := range rv.Len() {
		nums = append(nums, rv.Get(i).Number())
	}
	slices.Sort(nums)
	nums = slices.Compact(nums)
	for _, n := range nums {
		wc, rc := wv.ByNumber(n), rv.ByNumber(n)
		d.at(strconv.Itoa(int(n)), func() {
			switch {
			case rc == nil:
				d.add(enumConstRemoved)
			case wc == nil:
				d.add(enumConstAdded)
			case wc.Name() != rc.Name():
				d.add(enumConstChanged)
			}
		})
	}
}

// scalarKind groups the scalar types whose encodings read as each
// other (protobuf's "updating a message type" rules), Confluent's
// ScalarKind. An enum reads as the varint integers.
type scalarKind int

const (
	scalarGeneralNumber scalarKind = iota // int32 int64 uint32 uint64 bool enum
	scalarSignedNumber                    // sint32 sint64
	scalarStringOrBytes                   // string bytes
	scalarFixed32                         // fixed32 sfixed32
	scalarFixed64                         // fixed64 sfixed64
	scalarFloat
	scalarDouble
)

func scalarKindOf(f protoreflect.FieldDescriptor) scalarKind {
	switch f.Kind() {
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return scalarSignedNumber
	case protoreflect.StringKind, protoreflect.BytesKind:
		return scalarStringOrBytes
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return scalarFixed32
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return scalarFixed64
	case protoreflect.FloatKind:
		return scalarFloat
	case protoreflect.DoubleKind:
		return scalarDouble
	default:
		return scalarGeneralNumber
	}
}

// label is a field's label as Confluent's parser records it: none for
// a proto3 (or editions) singular field without "optional".
type label int

const (
	labelNone label = iota
	labelOptional
	labelRequired
	labelRepeated
)

func (l label) String() string {
	switch l {
	case labelOptional:
		return "optional"
	case labelRequired:
		return "required"
	case labelRepeated:
		return "repeated"
	}
	return ""
}

func labelOf(f protoreflect.FieldDescriptor) label {
	switch {
	case f.Cardinality() == protoreflect.Repeated:
		return labelRepeated
	case f.Cardinality() == protoreflect.Required:
		return labelRequired
	case realOneof(f) != nil:
		return labelNone
	case f.ParentFile().Syntax() == protoreflect.Proto2 || f.HasOptionalKeyword():
		return labelOptional
	}
	return labelNone
}
