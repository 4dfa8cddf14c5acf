package pgcatalog

import (
	"strconv"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/sql/expr"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// The OID alias types (regclass, regtype, regnamespace, regrole) as
// clients' catalog queries use them: psql's \d writes
// c.oid::pg_catalog.regclass to print a relation's name, and
// 'name'::regclass to find its OID. package types has no such types,
// so a cast to one is compiled here, by its direction:
//
//   - an OID (a number) casts to the object's name, as text: what the
//     alias type's output function prints (the number itself when no
//     object has it, as PostgreSQL prints it);
//   - a name (text or an untyped literal) casts to the object's OID, as
//     the oid columns are (bigint), 42P01/42704 if none has that name.
//
// So `x::regclass::text` and `ORDER BY x::regclass` work as in
// PostgreSQL; a comparison of two regclass values compares names.

// regKinds are the alias types served, by name; and oid itself, which
// is bigint here: a cast to oid is one to bigint ('16385'::oid, as
// psql's \d+ writes it).
var regKinds = map[string]bool{"regclass": true, "regtype": true, "regnamespace": true, "regrole": true, "oid": true}

// namespaceNames are the schemas, by OID.
var namespaceNames = map[int64]string{OIDPgCatalog: "pg_catalog", OIDPublic: "public", OIDInformationSchema: "information_schema"}

// regCast compiles a cast to an alias type; ok false for other casts.
func (c *Catalog) regCast(comp *expr.Compiler, tc *pg.TypeCast) (*expr.Expr, bool, error) {
	names := tc.GetTypeName().GetNames()
	if len(names) == 0 || len(names) > 2 || len(tc.GetTypeName().GetArrayBounds()) > 0 {
		return nil, false, nil
	}
	kind := names[len(names)-1].GetString_().GetSval()
	if !regKinds[kind] || (len(names) == 2 && names[0].GetString_().GetSval() != "pg_catalog") {
		return nil, false, nil
	}
	arg, err := comp.Compile(tc.Arg)
	if err != nil {
		return nil, true, err
	}
	if kind == "oid" {
		e, err := comp.Coerce(arg, oid, true)
		return e, true, err
	}
	if arg.Type.Category() == types.CatNumeric {
		if arg, err = comp.Coerce(arg, oid, false); err != nil {
			return nil, true, err
		}
		return expr.New(text, func(env *expr.Env, row types.Row) (any, error) {
			v, err := arg.Eval(env, row)
			if v == nil || err != nil {
				return nil, err
			}
			return c.regName(kind, v.(int64)), nil
		}), true, nil
	}
	if arg, err = comp.Coerce(arg, text, true); err != nil {
		return nil, true, err
	}
	return expr.New(oid, func(env *expr.Env, row types.Row) (any, error) {
		v, err := arg.Eval(env, row)
		if v == nil || err != nil {
			return nil, err
		}
		return c.regOID(kind, v.(string))
	}), true, nil
}

// regName is the name the alias type prints for an OID.
func (c *Catalog) regName(kind string, o int64) string {
	switch kind {
	case "regclass":
		if r, ok := c.rels[o]; ok {
			return r.Name
		}
	case "regtype":
		if _, ok := typeNames[uint32(o)]; ok && o >= 0 && o < 1<<32 {
			return types.Type{OID: uint32(o), Mod: -1}.Name()
		}
	case "regnamespace":
		if n, ok := namespaceNames[o]; ok {
			return n
		}
	case "regrole":
		if i := o - firstRoleOID; i >= 0 && i < int64(len(c.snap.Roles)) {
			return c.snap.Roles[i]
		}
	}
	return strconv.FormatInt(o, 10)
}

// regOID is the OID of the object named s (a number is taken as the
// OID itself, as PostgreSQL's input functions take it).
func (c *Catalog) regOID(kind, s string) (any, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	name := strings.TrimPrefix(strings.TrimPrefix(s, "pg_catalog."), "public.")
	switch kind {
	case "regclass":
		for o, r := range c.rels {
			if r.Name == name {
				return o, nil
			}
		}
		return nil, sqlerr.Errorf(sqlerr.UndefinedTable, "relation %q does not exist", s)
	case "regtype":
		if t, ok := types.ByName(name); ok {
			return int64(t.OID), nil
		}
		return nil, sqlerr.Errorf(sqlerr.UndefinedObject, "type %q does not exist", s)
	case "regnamespace":
		for o, n := range namespaceNames {
			if n == name {
				return o, nil
			}
		}
		return nil, sqlerr.Errorf("3F000", "schema %q does not exist", s)
	}
	for i, r := range c.snap.Roles {
		if r == s {
			return firstRoleOID + int64(i), nil
		}
	}
	return nil, sqlerr.Errorf(sqlerr.UndefinedObject, "role %q does not exist", s)
}
