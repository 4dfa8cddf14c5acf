package protoschema

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// printFile re-prints a linked file the way Confluent's
// ProtobufSchemaUtils.toString lays out its parsed file: syntax,
// package, imports, file options, messages then enums (each in
// declaration order, which message indexes on the wire depend on),
// extensions, services; two-space indents.
//
// It works from descriptors, not source, so comments and layout are
// gone and every type is printed by its full name with a leading dot
// (".pkg.Msg"), whatever the source wrote. That is where it departs
// from Confluent's non-normalized text, which keeps names as written:
// here "Msg" and ".pkg.Msg" are the same schema without normalize too.
// Other spelling the descriptors do not keep is printed one way:
// reserved and extension ranges one per statement in number order,
// options sorted by name, json_name only when it differs from the
// default, a map field as map<K, V> without its synthetic entry message.
//
// With normalize, as Confluent's normalize: no syntax line for proto2,
// imports sorted, fields by number, oneofs by their first field's
// number, enum values by number.
func printFile(fd protoreflect.FileDescriptor, normalize bool) string {
	p := &printer{normalize: normalize, exts: extensionTypes(fd)}
	switch fd.Syntax() {
	case protoreflect.Proto2:
		if !normalize {
			p.line(`syntax = "proto2";`)
		}
	case protoreflect.Proto3:
		p.line(`syntax = "proto3";`)
	case protoreflect.Editions:
		p.line(fmt.Sprintf("edition = %q;", editionName(fd)))
	}
	if fd.Package() != "" {
		p.line("package " + string(fd.Package()) + ";")
	}
	p.imports(fd.Imports())
	if opts := p.options(fd.Options()); len(opts) > 0 {
		p.blank()
		for _, o := range opts {
			p.line("option " + o + ";")
		}
	}
	msgs, enums := fd.Messages(), fd.Enums()
	if msgs.Len()+enums.Len() > 0 {
		p.blank()
		for i := range msgs.Len() {
			p.message(msgs.Get(i))
		}
		for i := range enums.Len() {
			p.enum(enums.Get(i))
		}
	}
	p.extends(fd.Extensions())
	if svcs := fd.Services(); svcs.Len() > 0 {
		p.blank()
		for i := range svcs.Len() {
			p.service(svcs.Get(i))
		}
	}
	return p.b.String()
}

// editionName is the edition as the edition statement spells it.
func editionName(fd protoreflect.FileDescriptor) string {
	type editioned interface{ Edition() int32 }
	if e, ok := fd.(editioned); ok {
		return strings.TrimPrefix(descriptorpb.Edition(e.Edition()).String(), "EDITION_")
	}
	return "2023"
}

type printer struct {
	b         strings.Builder
	depth     int
	normalize bool
	// open: the last line opened a block, which needs no blank line
	// before its first section.
	open bool
	// exts resolves custom options, which the options messages carry
	// as unknown fields until decoded against the file's extensions.
	exts *protoregistry.Types
}

func (p *printer) line(s string) {
	for range p.depth {
		p.b.WriteString("  ")
	}
	p.b.WriteString(s)
	p.b.WriteByte('\n')
	p.open = strings.HasSuffix(s, "{")
}

// blank separates sections, as Confluent's printer does; never at the
// top of the text or of a block.
func (p *printer) blank() {
	if p.b.Len() > 0 && !p.open {
		p.b.WriteByte('\n')
	}
}

func (p *printer) imports(imps protoreflect.FileImports) {
	if imps.Len() == 0 {
		return
	}
	var plain, public []string
	for i := range imps.Len() {
		imp := imps.Get(i)
		switch {
		case imp.IsPublic:
			public = append(public, imp.Path())
		case imp.IsWeak:
			plain = append(plain, "weak \""+imp.Path()+"\"")
		default:
			plain = append(plain, strconv.Quote(imp.Path()))
		}
	}
	if p.normalize {
		slices.Sort(plain)
		slices.Sort(public)
	}
	p.blank()
	for _, s := range plain {
		p.line("import " + s + ";")
	}
	for _, s := range public {
		p.line("import public " + strconv.Quote(s) + ";")
	}
}

func (p *printer) message(md protoreflect.MessageDescriptor) {
	p.line("message " + string(md.Name()) + " {")
	p.depth++
	p.body(md)
	p.depth--
	p.line("}")
}

// body is a message's (or a group's) contents.
func (p *printer) body(md protoreflect.MessageDescriptor) {
	p.reserved(fieldRanges(md.ReservedRanges()), false, md.ReservedNames())
	p.optionLines(md.Options())
	var plain []protoreflect.FieldDescriptor
	fields := md.Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); realOneof(f) == nil {
			plain = append(plain, f)
		}
	}
	if p.normalize {
		slices.SortFunc(plain, byNumber)
	}
	if len(plain) > 0 {
		p.blank()
		for _, f := range plain {
			p.field(f)
		}
	}
	var oneofs []protoreflect.OneofDescriptor
	for i := range md.Oneofs().Len() {
		if o := md.Oneofs().Get(i); !o.IsSynthetic() && o.Fields().Len() > 0 {
			oneofs = append(oneofs, o)
		}
	}
	if p.normalize {
		slices.SortFunc(oneofs, func(a, b protoreflect.OneofDescriptor) int {
			return cmp.Compare(minNumber(a), minNumber(b))
		})
	}
	if len(oneofs) > 0 {
		p.blank()
		for _, o := range oneofs {
			p.oneof(o)
		}
	}
	if rs := fieldRanges(md.ExtensionRanges()); len(rs) > 0 {
		slices.SortFunc(rs, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
		p.blank()
		for _, r := range rs {
			p.line("extensions " + formatInclusive(r[0], r[1], false) + ";")
		}
	}
	p.extends(md.Extensions())
	var nested []protoreflect.MessageDescriptor
	for i := range md.Messages().Len() {
		if n := md.Messages().Get(i); !n.IsMapEntry() && !isGroupMessage(n) {
			nested = append(nested, n)
		}
	}
	if len(nested)+md.Enums().Len() > 0 {
		p.blank()
		for _, n := range nested {
			p.message(n)
		}
		for i := range md.Enums().Len() {
			p.enum(md.Enums().Get(i))
		}
	}
}

func (p *printer) oneof(o protoreflect.OneofDescriptor) {
	p.line("oneof " + string(o.Name()) + " {")
	p.depth++
	p.optionLines(o.Options())
	var fields []protoreflect.FieldDescriptor
	for i := range o.Fields().Len() {
		fields = append(fields, o.Fields().Get(i))
	}
	if p.normalize {
		slices.SortFunc(fields, byNumber)
	}
	for _, f := range fields {
		p.field(f)
	}
	p.depth--
	p.line("}")
}

func (p *printer) field(f protoreflect.FieldDescriptor) {
	var s strings.Builder
	// Editions spell presence as a feature, not a label.
	l := labelOf(f)
	if f.ParentFile().Syntax() == protoreflect.Editions && l != labelRepeated {
		l = labelNone
	}
	if l != labelNone && !f.IsMap() && realOneof(f) == nil {
		s.WriteString(l.String() + " ")
	}
	group := f.Kind() == protoreflect.GroupKind && isGroupMessage(f.Message())
	switch {
	case f.IsMap():
		s.WriteString("map<" + typeName(f.MapKey()) + ", " + typeName(f.MapValue()) + ">")
	case group:
		s.WriteString("group")
	default:
		s.WriteString(typeName(f))
	}
	name := string(f.Name())
	if group {
		name = string(f.Message().Name())
	}
	fmt.Fprintf(&s, " %s = %d", name, f.Number())
	var opts []string
	if f.HasDefault() {
		opts = append(opts, "default = "+p.scalar(f, f.Default()))
	}
	if !f.IsExtension() && f.JSONName() != jsonCamelCase(string(f.Name())) {
		opts = append(opts, "json_name = "+quote([]byte(f.JSONName()), false))
	}
	opts = append(opts, p.options(f.Options())...)
	if len(opts) > 0 {
		s.WriteString(" [" + strings.Join(opts, ", ") + "]")
	}
	if !group {
		p.line(s.String() + ";")
		return
	}
	p.line(s.String() + " {")
	p.depth++
	p.body(f.Message())
	p.depth--
	p.line("}")
}

// extends prints extension fields in blocks by extendee: consecutive
// ones as declared, all of one extendee together when normalizing.
func (p *printer) extends(xs protoreflect.ExtensionDescriptors) {
	if xs.Len() == 0 {
		return
	}
	var all []protoreflect.FieldDescriptor
	for i := range xs.Len() {
		all = append(all, xs.Get(i))
	}
	if p.normalize {
		slices.SortStableFunc(all, func(a, b protoreflect.FieldDescriptor) int {
			return cmp.Or(cmp.Compare(a.ContainingMessage().FullName(), b.ContainingMessage().FullName()),
				byNumber(a, b))
		})
	}
	p.blank()
	for i := 0; i < len(all); {
		extendee := all[i].ContainingMessage().FullName()
		p.line("extend ." + string(extendee) + " {")
		p.depth++
		for ; i < len(all) && all[i].ContainingMessage().FullName() == extendee; i++ {
			p.field(all[i])
		}
		p.depth--
		p.line("}")
	}
}

func (p *printer) enum(ed protoreflect.EnumDescriptor) {
	p.line("enum " + string(ed.Name()) + " {")
	p.depth++
	p.reserved(enumRanges(ed.ReservedRanges()), true, ed.ReservedNames())
	p.optionLines(ed.Options())
	var vals []protoreflect.EnumValueDescriptor
	for i := range ed.Values().Len() {
		vals = append(vals, ed.Values().Get(i))
	}
	if p.normalize {
		slices.SortStableFunc(vals, func(a, b protoreflect.EnumValueDescriptor) int {
			return cmp.Or(cmp.Compare(a.Number(), b.Number()), cmp.Compare(a.Name(), b.Name()))
		})
	}
	for _, v := range vals {
		s := fmt.Sprintf("%s = %d", v.Name(), v.Number())
		if opts := p.options(v.Options()); len(opts) > 0 {
			s += " [" + strings.Join(opts, ", ") + "]"
		}
		p.line(s + ";")
	}
	p.depth--
	p.line("}")
}

func (p *printer) service(sd protoreflect.ServiceDescriptor) {
	p.line("service " + string(sd.Name()) + " {")
	p.depth++
	p.optionLines(sd.Options())
	for i := range sd.Methods().Len() {
		m := sd.Methods().Get(i)
		in, out := "."+string(m.Input().FullName()), "."+string(m.Output().FullName())
		if m.IsStreamingClient() {
			in = "stream " + in
		}
		if m.IsStreamingServer() {
			out = "stream " + out
		}
		s := fmt.Sprintf("rpc %s (%s) returns (%s)", m.Name(), in, out)
		opts := p.options(m.Options())
		if len(opts) == 0 {
			p.line(s + ";")
			continue
		}
		p.line(s + " {")
		p.depth++
		for _, o := range opts {
			p.line("option " + o + ";")
		}
		p.depth--
		p.line("}")
	}
	p.depth--
	p.line("}")
}

// reserved prints one statement per inclusive range or name, in
// number order then name order: the descriptors keep neither the
// statements' grouping nor their order.
func (p *printer) reserved(ranges [][2]int64, isEnum bool, names protoreflect.Names) {
	if len(ranges)+names.Len() == 0 {
		return
	}
	slices.SortFunc(ranges, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	p.blank()
	for _, r := range ranges {
		p.line("reserved " + formatInclusive(r[0], r[1], isEnum) + ";")
	}
	var ns []string
	for i := range names.Len() {
		ns = append(ns, string(names.Get(i)))
	}
	slices.Sort(ns)
	for _, n := range ns {
		p.line("reserved " + strconv.Quote(n) + ";")
	}
}

// fieldRanges are message ranges (end-exclusive) made inclusive.
func fieldRanges(rs protoreflect.FieldRanges) [][2]int64 {
	var out [][2]int64
	for i := range rs.Len() {
		r := rs.Get(i)
		out = append(out, [2]int64{int64(r[0]), int64(r[1]) - 1})
	}
	return out
}

// enumRanges are enum ranges, inclusive already.
func enumRanges(rs protoreflect.EnumRanges) [][2]int64 {
	var out [][2]int64
	for i := range rs.Len() {
		r := rs.Get(i)
		out = append(out, [2]int64{int64(r[0]), int64(r[1])})
	}
	return out
}

const (
	maxFieldNumber = 1<<29 - 1
	maxEnumNumber  = math.MaxInt32
)

func formatInclusive(lo, hi int64, isEnum bool) string {
	if lo == hi {
		return strconv.FormatInt(lo, 10)
	}
	top := "max"
	if (isEnum && hi < maxEnumNumber) || (!isEnum && hi < maxFieldNumber) {
		top = strconv.FormatInt(hi, 10)
	}
	return strconv.FormatInt(lo, 10) + " to " + top
}

// optionLines prints a declaration's options as option statements.
func (p *printer) optionLines(opts proto.Message) {
	if os := p.options(opts); len(os) > 0 {
		p.blank()
		for _, o := range os {
			p.line("option " + o + ";")
		}
	}
}

// options is a declaration's options as "name = value", sorted by
// name, a repeated option once per element. Custom options are decoded
// with the file's extensions; one the file cannot decode stays unknown
// and is dropped.
func (p *printer) options(opts proto.Message) []string {
	if opts == nil || !opts.ProtoReflect().IsValid() {
		return nil
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(opts)
	if err != nil || len(raw) == 0 {
		return nil
	}
	m := opts.ProtoReflect().New().Interface()
	if err := (proto.UnmarshalOptions{Resolver: p.exts}).Unmarshal(raw, m); err != nil {
		return nil
	}
	type opt struct {
		key, text string
	}
	var out []opt
	m.ProtoReflect().Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := string(f.Name())
		if f.IsExtension() {
			name = "(" + string(f.FullName()) + ")"
		}
		key := strings.Trim(name, "()")
		if f.IsList() {
			l := v.List()
			for i := range l.Len() {
				out = append(out, opt{key, name + " = " + p.value(f, l.Get(i))})
			}
		} else {
			out = append(out, opt{key, name + " = " + p.value(f, v)})
		}
		return true
	})
	slices.SortStableFunc(out, func(a, b opt) int { return cmp.Compare(a.key, b.key) })
	texts := make([]string, len(out))
	for i, o := range out {
		texts[i] = o.text
	}
	return texts
}

// value is one (non-list) value in protobuf text format: a message as
// an aggregate { name: value, ... } with fields in number order.
func (p *printer) value(f protoreflect.FieldDescriptor, v protoreflect.Value) string {
	if f.Kind() != protoreflect.MessageKind && f.Kind() != protoreflect.GroupKind {
		return p.scalar(f, v)
	}
	type entry struct {
		f protoreflect.FieldDescriptor
		v protoreflect.Value
	}
	var es []entry
	v.Message().Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		es = append(es, entry{f, v})
		return true
	})
	slices.SortFunc(es, func(a, b entry) int { return byNumber(a.f, b.f) })
	var parts []string
	for _, e := range es {
		name := string(e.f.Name())
		if e.f.IsExtension() {
			name = "[" + string(e.f.FullName()) + "]"
		} else if e.f.Kind() == protoreflect.GroupKind {
			name = string(e.f.Message().Name())
		}
		switch {
		case e.f.IsList():
			l := e.v.List()
			items := make([]string, l.Len())
			for i := range l.Len() {
				items[i] = p.value(e.f, l.Get(i))
			}
			parts = append(parts, name+": ["+strings.Join(items, ", ")+"]")
		case e.f.IsMap():
			// A map in an option is a list of entries, key then value.
			var items []string
			e.v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				items = append(items, "{ key: "+p.scalar(e.f.MapKey(), k.Value())+
					", value: "+p.value(e.f.MapValue(), mv)+" }")
				return true
			})
			slices.Sort(items)
			parts = append(parts, name+": ["+strings.Join(items, ", ")+"]")
		default:
			parts = append(parts, name+": "+p.value(e.f, e.v))
		}
	}
	if len(parts) == 0 {
		return "{}"
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

func (p *printer) scalar(f protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch f.Kind() {
	case protoreflect.BoolKind:
		return strconv.FormatBool(v.Bool())
	case protoreflect.EnumKind:
		if ev := f.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return strconv.Itoa(int(v.Enum()))
	case protoreflect.StringKind:
		return quote([]byte(v.String()), false)
	case protoreflect.BytesKind:
		return quote(v.Bytes(), true)
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		bits := 64
		if f.Kind() == protoreflect.FloatKind {
			bits = 32
		}
		x := v.Float()
		switch {
		case math.IsInf(x, 1):
			return "inf"
		case math.IsInf(x, -1):
			return "-inf"
		case math.IsNaN(x):
			return "nan"
		}
		return strconv.FormatFloat(x, 'g', -1, bits)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.FormatInt(v.Int(), 10)
	default:
		return strconv.FormatUint(v.Uint(), 10)
	}
}

// quote is a protobuf string literal: C escapes, and octal for other
// control bytes and for bytes outside valid UTF-8 (all of them when
// binary), so that any value reads back as itself.
func quote(b []byte, binary bool) string {
	var s strings.Builder
	s.WriteByte('"')
	for i := 0; i < len(b); {
		c := b[i]
		if c >= utf8.RuneSelf {
			_, n := utf8.DecodeRune(b[i:])
			if binary || n == 1 {
				fmt.Fprintf(&s, `\%03o`, c)
				i++
				continue
			}
			s.Write(b[i : i+n])
			i += n
			continue
		}
		switch c {
		case '\a':
			s.WriteString(`\a`)
		case '\b':
			s.WriteString(`\b`)
		case '\f':
			s.WriteString(`\f`)
		case '\n':
			s.WriteString(`\n`)
		case '\r':
			s.WriteString(`\r`)
		case '\t':
			s.WriteString(`\t`)
		case '\v':
			s.WriteString(`\v`)
		case '\\':
			s.WriteString(`\\`)
		case '\'':
			s.WriteString(`\'`)
		case '"':
			s.WriteString(`\"`)
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(&s, `\%03o`, c)
			} else {
				s.WriteByte(c)
			}
		}
		i++
	}
	s.WriteByte('"')
	return s.String()
}

// typeName is a field's type as written in a field declaration.
func typeName(f protoreflect.FieldDescriptor) string {
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return "." + string(f.Message().FullName())
	case protoreflect.EnumKind:
		return "." + string(f.Enum().FullName())
	default:
		return f.Kind().String()
	}
}

// jsonCamelCase is protoc's default json_name for a field name.
func jsonCamelCase(name string) string {
	var b strings.Builder
	upper := false
	for i := range len(name) {
		c := name[i]
		switch {
		case c == '_':
			upper = true
		case upper && 'a' <= c && c <= 'z':
			b.WriteByte(c - 'a' + 'A')
			upper = false
		default:
			b.WriteByte(c)
			upper = false
		}
	}
	return b.String()
}

// isGroupMessage reports whether md is the message a proto2 group
// declares, printed inline with its field rather than as a message.
func isGroupMessage(md protoreflect.MessageDescriptor) bool {
	if md.ParentFile().Syntax() != protoreflect.Proto2 {
		return false
	}
	parent, ok := md.Parent().(protoreflect.MessageDescriptor)
	if !ok {
		return false
	}
	fields := parent.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if f.Kind() == protoreflect.GroupKind && f.Message() == md &&
			strings.EqualFold(string(f.Name()), string(md.Name())) {
			return true
		}
	}
	return false
}

func byNumber(a, b protoreflect.FieldDescriptor) int { return cmp.Compare(a.Number(), b.Number()) }

func minNumber(o protoreflect.OneofDescriptor) protoreflect.FieldNumber {
	n := protoreflect.FieldNumber(math.MaxInt32)
	for i := range o.Fields().Len() {
		n = min(n, o.Fields().Get(i).Number())
	}
	return n
}

// realOneof is the oneof f is declared in, nil for none or for the
// synthetic oneof of a proto3 optional field (which Confluent, like
// the source, treats as a plain optional field).
func realOneof(f protoreflect.FieldDescriptor) protoreflect.OneofDescriptor {
	if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
		return o
	}
	return nil
}

// extensionTypes are the extensions fd and its transitive imports
// declare, for decoding custom options.
func extensionTypes(fd protoreflect.FileDescriptor) *protoregistry.Types {
	types := new(protoregistry.Types)
	seen := map[string]bool{}
	var walk func(protoreflect.FileDescriptor)
	addAll := func(xs protoreflect.ExtensionDescriptors) {
		for i := range xs.Len() {
			// A clash is a duplicate the compiler already refused.
			_ = types.RegisterExtension(dynamicpb.NewExtensionType(xs.Get(i)))
		}
	}
	var addMsgs func(protoreflect.MessageDescriptors)
	addMsgs = func(ms protoreflect.MessageDescriptors) {
		for i := range ms.Len() {
			addAll(ms.Get(i).Extensions())
			addMsgs(ms.Get(i).Messages())
		}
	}
	walk = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		addAll(f.Extensions())
		addMsgs(f.Messages())
		for i := range f.Imports().Len() {
			walk(f.Imports().Get(i).FileDescriptor)
		}
	}
	walk(fd)
	return types
}
