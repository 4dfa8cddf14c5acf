package pgcatalog

import (
	"fmt"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// function is one system function: its argument types (the count is
// the arity) and its body, called with non-NULL arguments unless
// callsOnNull (a strict function's result is NULL otherwise).
type function struct {
	args        []types.Type
	ret         types.Type
	callsOnNull bool
	body        func(c *Catalog, a []any) (any, error)
}

// functions by name; overloads differ in arity.
var functions = map[string][]function{
	"pg_get_userbyid": {{args: []types.Type{oid}, ret: name, body: func(c *Catalog, a []any) (any, error) {
		if i := a[0].(int64) - firstRoleOID; i >= 0 && i < int64(len(c.snap.Roles)) {
			return c.snap.Roles[i], nil
		}
		// PostgreSQL's answer for an OID no role has.
		return fmt.Sprintf("unknown (OID=%d)", a[0].(int64)), nil
	}}},
	"pg_table_is_visible": {{args: []types.Type{oid}, ret: bool_, body: func(c *Catalog, a []any) (any, error) {
		// Everything is in public, on the search path; NULL for an OID
		// no relation has, as PostgreSQL answers.
		if _, ok := c.rels[a[0].(int64)]; ok {
			return true, nil
		}
		return nil, nil
	}}},
	"format_type": {{args: []types.Type{oid, int4}, ret: text, callsOnNull: true, body: func(_ *Catalog, a []any) (any, error) {
		if a[0] == nil {
			return nil, nil
		}
		mod := int32(-1)
		if a[1] != nil {
			mod = a[1].(int32)
		}
		o := a[0].(int64)
		if _, ok := typeNames[uint32(o)]; !ok || o < 0 || o > 1<<32-1 {
			return "???", nil
		}
		return types.Type{OID: uint32(o), Mod: mod}.Name(), nil
	}}},
	// Nothing in Strand's catalog holds an expression tree (defaults,
	// partition bounds, policies), so there is nothing to decompile.
	"pg_get_expr": {
		{args: []types.Type{text, oid}, ret: text, body: func(*Catalog, []any) (any, error) { return nil, nil }},
		{args: []types.Type{text, oid, bool_}, ret: text, body: func(*Catalog, []any) (any, error) { return nil, nil }},
	},
	// pg_description is empty: no relation or column has a comment.
	"obj_description": {
		{args: []types.Type{oid}, ret: text, body: func(*Catalog, []any) (any, error) { return nil, nil }},
		{args: []types.Type{oid, name}, ret: text, body: func(*Catalog, []any) (any, error) { return nil, nil }},
	},
	"col_description":   {{args: []types.Type{oid, int4}, ret: text, body: func(*Catalog, []any) (any, error) { return nil, nil }}},
	"shobj_description": {{args: []types.Type{oid, name}, ret: text, body: func(*Catalog, []any) (any, error) { return nil, nil }}},
	"pg_encoding_to_char": {{args: []types.Type{int4}, ret: name, body: func(_ *Catalog, a []any) (any, error) {
		if a[0].(int32) == encodingUTF8 {
			return "UTF8", nil
		}
		return "", nil
	}}},
	// The size of a relation's local storage (Relation.Bytes), as
	// psql's \dt+ and \dm+ show it; NULL for an OID no relation has.
	"pg_table_size": {{args: []types.Type{oid}, ret: types.Int8, body: func(c *Catalog, a []any) (any, error) {
		if r, ok := c.rels[a[0].(int64)]; ok && r.Bytes >= 0 {
			return r.Bytes, nil
		}
		return nil, nil
	}}},
	"pg_size_pretty": {{args: []types.Type{types.Int8}, ret: text, body: func(_ *Catalog, a []any) (any, error) { return sizePretty(a[0].(int64)), nil }}},
	// A view's definition is its SELECT as the catalog keeps it
	// (pg_query's deparser, one line), not PostgreSQL's pretty print.
	"pg_get_viewdef": {
		{args: []types.Type{oid}, ret: text, body: func(c *Catalog, a []any) (any, error) { return c.viewDef(a[0].(int64)), nil }},
		{args: []types.Type{oid, bool_}, ret: text, body: func(c *Catalog, a []any) (any, error) { return c.viewDef(a[0].(int64)), nil }},
	},
	// No extended statistics exist.
	"pg_get_statisticsobjdef_columns": {{args: []types.Type{oid}, ret: text, body: func(*Catalog, []any) (any, error) { return nil, nil }}},
	"pg_relation_is_publishable":      {{args: []types.Type{oid}, ret: bool_, body: func(*Catalog, []any) (any, error) { return false, nil }}},
	"current_schema":                  {{ret: name, body: func(*Catalog, []any) (any, error) { return "public", nil }}},
	"current_database":                {{ret: name, body: func(c *Catalog, _ []any) (any, error) { return c.snap.Database, nil }}},
	"has_table_privilege": {
		{args: []types.Type{text, text}, ret: bool_, body: func(c *Catalog, a []any) (any, error) { return c.hasTablePrivilege(a[0], a[1].(string)) }},
		{args: []types.Type{text, text, text}, ret: bool_, body: func(c *Catalog, a []any) (any, error) {
			if a[0].(string) != c.snap.User {
				return nil, sqlerr.NotSupported("has_table_privilege for another user than the session's is not supported")
			}
			return c.hasTablePrivilege(a[1], a[2].(string))
		}},
	},
}

// hasTablePrivilege answers for the session's user: SELECT on a
// relation it may read (READ; Strand's relations take no writes).
func (c *Catalog) hasTablePrivilege(rel any, privs string) (any, error) {
	var r *Relation
	switch x := rel.(type) {
	case int64:
		r = c.rels[x]
	case string:
		name := strings.TrimPrefix(x, "public.")
		for i := range c.snap.Relations {
			if c.snap.Relations[i].Name == name {
				r = &c.snap.Relations[i]
			}
		}
		if r == nil {
			return nil, sqlerr.Errorf(sqlerr.UndefinedTable, "relation %q does not exist", x)
		}
	}
	if r == nil {
		return nil, nil
	}
	for _, p := range strings.Split(privs, ",") {
		p = strings.ToUpper(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(p), "WITH GRANT OPTION")))
		switch p {
		case "SELECT":
			if r.Readable {
				return true, nil
			}
		case "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER":
		default:
			return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "unrecognized privilege type: %q", p)
		}
	}
	return false, nil
}

// Handles reports whether Hook compiles n, without building a catalog.
func Handles(n *pg.Node) bool {
	if isArrayAny(n) || isSubscript(n) {
		return true
	}
	if tc := n.GetTypeCast(); tc != nil {
		names := tc.GetTypeName().GetNames()
		return len(tc.GetTypeName().GetArrayBounds()) > 0 || len(names) > 0 && regKinds[names[len(names)-1].GetString_().GetSval()]
	}
	if v := n.GetSqlvalueFunction(); v != nil {
		switch v.Op {
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_USER, pg.SQLValueFunctionOp_SVFOP_SESSION_USER,
			pg.SQLValueFunctionOp_SVFOP_USER, pg.SQLValueFunctionOp_SVFOP_CURRENT_ROLE,
			pg.SQLValueFunctionOp_SVFOP_CURRENT_CATALOG, pg.SQLValueFunctionOp_SVFOP_CURRENT_SCHEMA:
			return true
		}
		return false
	}
	f := n.GetFuncCall()
	if f == nil || len(f.Funcname) == 0 {
		return false
	}
	fname := f.Funcname[len(f.Funcname)-1].GetString_().GetSval()
	_, ok := functions[fname]
	_, isArray := arrayFunctions[fname]
	return ok || isArray
}

// Hook compiles calls of the system functions (named bare or with
// pg_catalog.) and the SQL value functions that name the session
// (current_user, session_user, current_catalog, current_schema): an
// expr.Hook, for the planner to try before its own functions.
func (c *Catalog) Hook(comp *expr.Compiler, n *pg.Node) (*expr.Expr, bool, error) {
	if v := n.GetSqlvalueFunction(); v != nil {
		switch v.Op {
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_USER, pg.SQLValueFunctionOp_SVFOP_SESSION_USER,
			pg.SQLValueFunctionOp_SVFOP_USER, pg.SQLValueFunctionOp_SVFOP_CURRENT_ROLE:
			return expr.Constant(name, c.snap.User), true, nil
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_CATALOG:
			return expr.Constant(name, c.snap.Database), true, nil
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_SCHEMA:
			return expr.Constant(name, "public"), true, nil
		}
		return nil, false, nil
	}
	if e, ok, err := c.arrayHook(comp, n); ok || err != nil {
		return e, ok, err
	}
	if tc := n.GetTypeCast(); tc != nil {
		return c.regCast(comp, tc)
	}
	f := n.GetFuncCall()
	if f == nil || len(f.Funcname) > 2 || f.AggStar || f.AggDistinct || f.Over != nil || len(f.AggOrder) > 0 {
		return nil, false, nil
	}
	if len(f.Funcname) == 2 && f.Funcname[0].GetString_().GetSval() != "pg_catalog" {
		return nil, false, nil
	}
	fname := f.Funcname[len(f.Funcname)-1].GetString_().GetSval()
	overloads, ok := functions[fname]
	if !ok {
		overloads, ok = arrayFunctions[fname]
	}
	if !ok {
		return nil, false, nil
	}
	var fn *function
	for i := range overloads {
		if len(overloads[i].args) == len(f.Args) {
			fn = &overloads[i]
		}
	}
	if fn == nil {
		e := sqlerr.Errorf(sqlerr.UndefinedFunction, "function %s with %d arguments does not exist", fname, len(f.Args))
		e.Hint = "No function matches the given name and argument types. You might need to add explicit type casts."
		return nil, true, e.At(f.Location)
	}
	args := make([]*expr.Expr, len(f.Args))
	for i, a := range f.Args {
		e, err := comp.Compile(a)
		if err != nil {
			return nil, true, err
		}
		want := fn.args[i]
		// has_table_privilege takes a relation by name or by OID.
		if fname == "has_table_privilege" && i == len(f.Args)-2 && e.Type.Category() == types.CatNumeric {
			want = oid
		}
		if e, err = comp.Coerce(e, want, false); err != nil {
			return nil, true, err
		}
		args[i] = e
	}
	body, strict := fn.body, !fn.callsOnNull
	return expr.New(fn.ret, func(env *expr.Env, row types.Row) (any, error) {
		vals := make([]any, len(args))
		for i, a := range args {
			v, err := a.Eval(env, row)
			if err != nil {
				return nil, err
			}
			if v == nil && strict {
				return nil, nil
			}
			vals[i] = v
		}
		return body(c, vals)
	}), true, nil
}

// sizePretty is PostgreSQL's pg_size_pretty(bigint): bytes below 10
// kB, then kB, MB, GB, TB, PB, each rounded half away from zero and
// switched to the next unit below 10 of it.
func sizePretty(size int64) string {
	const limit = 10 * 1024
	const limit2 = limit*2 - 1
	abs := func(x int64) int64 {
		if x < 0 {
			return -x
		}
		return x
	}
	half := func(x int64) int64 {
		if x < 0 {
			return (x - 1) / 2
		}
		return (x + 1) / 2
	}
	if abs(size) < limit {
		return fmt.Sprintf("%d bytes", size)
	}
	size >>= 9 // one extra bit for rounding
	for _, unit := range []string{"kB", "MB", "GB", "TB"} {
		if abs(size) < limit2 {
			return fmt.Sprintf("%d %s", half(size), unit)
		}
		size >>= 10
	}
	return fmt.Sprintf("%d PB", half(size))
}

// viewDef is pg_get_viewdef: NULL for an OID no view or sink has.
func (c *Catalog) viewDef(o int64) any {
	r, ok := c.rels[o]
	if !ok || r.Query == "" {
		return nil
	}
	return " " + r.Query + ";"
}
