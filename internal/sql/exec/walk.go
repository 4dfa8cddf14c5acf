package exec

import (
	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// walk calls fn on every Node under n (n included), descending while fn
// returns true.
func walk(n *pg.Node, fn func(*pg.Node) bool) {
	if n == nil || !fn(n) {
		return
	}
	walkMessage(n.ProtoReflect(), fn, true)
}

func walkMessage(m protoreflect.Message, fn func(*pg.Node) bool, top bool) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := range l.Len() {
				visit(l.Get(i).Message(), fn)
			}
		case fd.Message() != nil && !fd.IsMap():
			if top {
				// The Node's one set field: the node itself, already seen.
				walkMessage(v.Message(), fn, false)
			} else {
				visit(v.Message(), fn)
			}
		}
		return true
	})
}

func visit(m protoreflect.Message, fn func(*pg.Node) bool) {
	if n, ok := m.Interface().(*pg.Node); ok {
		walk(n, fn)
		return
	}
	walkMessage(m, fn, false)
}

// nodeKey identifies an expression by its structure, ignoring where it
// was written: GROUP BY a+1 matches a+1 in the select list.
func nodeKey(n *pg.Node) string {
	c := proto.Clone(n)
	clearLocations(c.ProtoReflect())
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	return string(b)
}

func clearLocations(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Name() == "location":
			m.Clear(fd)
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := range l.Len() {
				clearLocations(l.Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsMap():
			clearLocations(v.Message())
		}
		return true
	})
}
