package catalog

import (
	"slices"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// maxTreeNodes bounds the walk of one statement's tree: a statement is
// at most parse.MaxQueryBytes, but a walk is no place to find out how
// deep a hostile one nests.
const maxTreeNodes = 1 << 20

// rangeVars returns the relations a tree names in FROM clauses (and
// anywhere else a RangeVar stands: subqueries, joins, CTE bodies), in
// the order they appear, without the names its WITH clauses define
// (a CTE is not a relation of the catalog).
func rangeVars(n proto.Message) []*pg.RangeVar {
	var out []*pg.RangeVar
	var ctes []string
	seen := 0
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		if seen++; seen > maxTreeNodes {
			return
		}
		switch v := m.Interface().(type) {
		case *pg.RangeVar:
			out = append(out, v)
			return
		case *pg.CommonTableExpr:
			ctes = append(ctes, v.Ctename)
		}
		m.Range(func(fd protoreflect.FieldDescriptor, val protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				l := val.List()
				for i := 0; i < l.Len(); i++ {
					walk(l.Get(i).Message())
				}
			case fd.Message() != nil && !fd.IsMap():
				walk(val.Message())
			}
			return true
		})
	}
	walk(n.ProtoReflect())
	return slices.DeleteFunc(out, func(rv *pg.RangeVar) bool {
		return rv.Schemaname == "" && slices.Contains(ctes, rv.Relname)
	})
}

// relationName is the catalog name a RangeVar names: relations live in
// one namespace, which PostgreSQL's clients call public. A name in any
// other schema (pg_catalog's tables) is not the catalog's.
func relationName(rv *pg.RangeVar) (string, bool) {
	if rv.Catalogname != "" || (rv.Schemaname != "" && rv.Schemaname != "public") {
		return "", false
	}
	return rv.Relname, true
}
