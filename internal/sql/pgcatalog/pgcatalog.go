// Package pgcatalog owns the SQL endpoint's system catalog: PostgreSQL's
// pg_catalog and information_schema relations, built for one statement
// from a Snapshot of Strand's catalog (the replicated metadata's
// relations, as far as the session may see them, and the SCRAM users),
// and the functions clients' catalog queries call (pg_get_userbyid,
// format_type, pg_table_is_visible, pg_get_expr, obj_description, ...).
// They are relations and functions like any other, planned and run by
// package exec, so psql's \d queries, a driver's or a BI tool's
// introspection run as they are, with no query text recognized.
//
// What Strand's relations are in PostgreSQL's terms: a source is a
// table (relkind 'r': psql's \dt lists it, and its rows are read like a
// table's), a materialized view is 'm', a sink 'v' (it is defined by a
// query, like a view, though nothing reads it). Everything lives in the
// schema public. OIDs: a relation's is 16384 (PostgreSQL's first user
// OID) plus its catalog id; the types' are PostgreSQL's.
//
// Divergences, until package types has them: oid columns are bigint,
// name and "char" columns text, and the array columns (relacl,
// datacl, polroles, stxkind, ...) text and always NULL. The OID alias
// types are casts between an OID and a name (regcast.go), and arrays
// their text form, which = ANY, array_to_string, array_upper and
// subscripts read (arrays.go): enough for psql's \d NAME, \l and \du. Catalogs of what
// Strand has none of (indexes, constraints, inheritance, defaults,
// access methods, tablespaces, collations, policies, statistics,
// publications, triggers, rules) are present and empty, since psql's
// queries join them.
package pgcatalog

import (
	"context"
	"slices"
	"strings"

	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// OIDs of the namespaces and of the one database.
const (
	OIDPgCatalog         = 11
	OIDPublic            = 2200
	OIDInformationSchema = 13000
	OIDDatabase          = 5
	// FirstRelationOID is a relation's OID less its catalog id.
	FirstRelationOID = 16384
	// firstRoleOID numbers the roles, by name, above any relation's
	// OID a catalog of meta.MaxRelations holds.
	firstRoleOID = 1 << 40
	// encodingUTF8 is pg_database.encoding for UTF8.
	encodingUTF8 = 6
)

// Kind is a relation's pg_class.relkind.
type Kind byte

const (
	KindTable            Kind = 'r'
	KindMaterializedView Kind = 'm'
	KindView             Kind = 'v'
)

// Relation is one of Strand's relations as the system catalog shows it.
type Relation struct {
	ID      uint64
	Name    string
	Kind    Kind
	Owner   string // a role name
	Columns []exec.Column
	// Readable says the session may read it (has_table_privilege's
	// SELECT).
	Readable bool
	// Query is a view's or sink's SELECT (pg_get_viewdef).
	Query string
	// Bytes is what pg_table_size answers: a materialized view's state
	// on this agent's disk, 0 for a source (its rows are its topic's,
	// in the object store) and a sink; -1 when not known (NULL).
	Bytes int64
}

// Snapshot is what the system catalog shows one statement.
type Snapshot struct {
	// Relations are those the session may see, in any order.
	Relations []Relation
	// Roles are the role names: the SCRAM users, owners, the session's
	// user.
	Roles []string
	// User is the session's user; Database the one database's name.
	User, Database string
}

// Catalog is the system catalog of one snapshot.
type Catalog struct {
	snap  Snapshot
	roles map[string]int64
	rels  map[int64]*Relation
}

// New builds the catalog of snap.
func New(snap Snapshot) *Catalog {
	c := &Catalog{snap: snap, roles: map[string]int64{}, rels: map[int64]*Relation{}}
	names := append([]string{snap.User}, snap.Roles...)
	for _, r := range snap.Relations {
		names = append(names, r.Owner)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) > 0 && names[0] == "" {
		names = names[1:]
	}
	c.snap.Roles = names
	for i, n := range names {
		c.roles[n] = firstRoleOID + int64(i)
	}
	slices.SortFunc(c.snap.Relations, func(a, b Relation) int { return strings.Compare(a.Name, b.Name) })
	for i := range c.snap.Relations {
		r := &c.snap.Relations[i]
		c.rels[relOID(r)] = r
	}
	if c.snap.Database == "" {
		c.snap.Database = "strand"
	}
	return c
}

func relOID(r *Relation) int64 { return FirstRelationOID + int64(r.ID) }

// Relation is the system relation schema.name: schema is pg_catalog or
// information_schema, or "" for a pg_catalog relation named without a
// schema (pg_catalog comes first on PostgreSQL's search path).
func (c *Catalog) Relation(schema, name string) (exec.Relation, bool, error) {
	var t *table
	switch schema {
	case "pg_catalog", "":
		t = pgTables[name]
	case "information_schema":
		t = infoTables[name]
	}
	if t == nil {
		return nil, false, nil
	}
	return &relation{c: c, t: t}, true, nil
}

// Has reports whether schema.name is a system relation (schema "" as
// in Relation).
func Has(schema, name string) bool {
	switch schema {
	case "pg_catalog", "":
		return pgTables[name] != nil
	case "information_schema":
		return infoTables[name] != nil
	}
	return false
}

// table is a system relation: its columns and how its rows are made.
type table struct {
	cols []exec.Column
	rows func(c *Catalog) []types.Row
}

type relation struct {
	c *Catalog
	t *table
}

func (r *relation) Columns() []exec.Column { return r.t.cols }

func (r *relation) Scan(ctx context.Context) (exec.RowIter, error) {
	var rows []types.Row
	if r.t.rows != nil {
		rows = r.t.rows(r.c)
	}
	for _, row := range rows {
		if len(row) != len(r.t.cols) {
			return nil, sqlerr.Errorf(sqlerr.InternalError, "system relation row of %d columns, want %d", len(row), len(r.t.cols))
		}
	}
	return (&exec.MemRelation{Cols: r.t.cols, Rows: rows}).Scan(ctx)
}

// cols makes a column list from name, type pairs.
func cols(spec ...any) []exec.Column {
	out := make([]exec.Column, 0, len(spec)/2)
	for i := 0; i < len(spec); i += 2 {
		out = append(out, exec.Column{Name: spec[i].(string), Type: spec[i+1].(types.Type)})
	}
	return out
}

// Column types standing in for PostgreSQL's catalog types.
var (
	oid    = types.Int8
	name   = types.Text
	char   = types.Text
	array  = types.Text // always NULL
	bool_  = types.Bool
	int2   = types.Int2
	int4   = types.Int4
	float4 = types.Float4
	text   = types.Text
)

// typeNames are pg_type.typname of the types Strand computes.
var typeNames = map[uint32]string{
	types.OIDBool: "bool", types.OIDBytea: "bytea", types.OIDInt8: "int8", types.OIDInt2: "int2", types.OIDInt4: "int4",
	types.OIDText: "text", types.OIDFloat4: "float4", types.OIDFloat8: "float8", types.OIDUnknown: "unknown",
	types.OIDVarchar: "varchar", types.OIDDate: "date", types.OIDTimestamp: "timestamp", types.OIDTimestampTZ: "timestamptz",
	types.OIDInterval: "interval", types.OIDNumeric: "numeric", types.OIDVoid: "void", types.OIDJSONB: "jsonb",
}

// collatable types have pg_type.typcollation 100 (default).
func typCollation(t types.Type) int64 {
	if t.Category() == types.CatString {
		return 100
	}
	return 0
}

func (c *Catalog) namespaces() []types.Row {
	return []types.Row{
		{int64(OIDPgCatalog), "pg_catalog", int64(firstRoleOID), nil},
		{int64(OIDPublic), "public", int64(firstRoleOID), nil},
		{int64(OIDInformationSchema), "information_schema", int64(firstRoleOID), nil},
	}
}

func (c *Catalog) classes() []types.Row {
	var out []types.Row
	for i := range c.snap.Relations {
		r := &c.snap.Relations[i]
		out = append(out, types.Row{
			relOID(r), r.Name, int64(OIDPublic), int64(0), int64(0), c.roles[r.Owner], int64(0), int64(0), int64(0),
			int32(0), float32(-1), int32(0), int64(0), false, false, "p", string(r.Kind), int16(len(r.Columns)), int16(0),
			false, false, false, false, false, true, "d", false, int64(0), nil, nil, nil,
		})
	}
	return out
}

func (c *Catalog) attributes() []types.Row {
	var out []types.Row
	for i := range c.snap.Relations {
		r := &c.snap.Relations[i]
		for j, col := range r.Columns {
			out = append(out, types.Row{
				relOID(r), col.Name, int64(col.Type.OID), int16(col.Type.Size()), int16(j + 1), int32(0), col.Type.Mod,
				false, false, false, "", "", false, true, int32(0), typCollation(col.Type), nil,
				typStorage(col.Type), "", int32(-1),
			})
		}
	}
	return out
}

// typStorage is pg_type.typstorage of t, which a column takes:
// fixed-size types are plain, numeric main, other varlena extended
// (what psql's \d+ shows as Storage).
func typStorage(t types.Type) string {
	switch {
	case t.Size() > 0:
		return "p"
	case t.OID == types.OIDNumeric:
		return "m"
	}
	return "x"
}

func (c *Catalog) typeRows() []types.Row {
	oids := make([]uint32, 0, len(typeNames))
	for o := range typeNames {
		oids = append(oids, o)
	}
	slices.Sort(oids)
	var out []types.Row
	for _, o := range oids {
		t := types.Type{OID: o, Mod: -1}
		typtype := "b"
		if t.Category() == types.CatPseudo || o == types.OIDUnknown {
			typtype = "p"
		}
		out = append(out, types.Row{
			int64(o), typeNames[o], int64(OIDPgCatalog), int64(firstRoleOID), t.Size(), t.Size() > 0 && t.Size() <= 8,
			typtype, string(rune(t.Category())), t.Preferred(), true, ",", int64(0), int64(0), int64(0), int64(0), int32(-1), int32(0),
			typCollation(t), false,
		})
	}
	return out
}

func (c *Catalog) roleRows() []types.Row {
	var out []types.Row
	for _, n := range c.snap.Roles {
		// Strand's users are alike to PostgreSQL: what each may do is
		// in the ACLs, not in role attributes.
		out = append(out, types.Row{c.roles[n], n, false, true, false, false, true, false, int32(-1), "********", nil, false, nil})
	}
	return out
}

func (c *Catalog) userRows() []types.Row {
	var out []types.Row
	for _, n := range c.snap.Roles {
		out = append(out, types.Row{n, c.roles[n], false, false, false, false, "********", nil, nil})
	}
	return out
}

func (c *Catalog) databases() []types.Row {
	return []types.Row{{int64(OIDDatabase), c.snap.Database, int64(firstRoleOID), int32(encodingUTF8), "c", false, true, int32(-1), "C", "C", nil, nil}}
}

// tableType is information_schema.tables.table_type.
func tableType(k Kind) string {
	switch k {
	case KindTable:
		return "BASE TABLE"
	case KindView:
		return "VIEW"
	}
	// PostgreSQL leaves materialized views out of information_schema;
	// Strand's are its main objects, so they are shown, as views.
	return "VIEW"
}

func (c *Catalog) infoTables() []types.Row {
	var out []types.Row
	for _, r := range c.snap.Relations {
		out = append(out, types.Row{c.snap.Database, "public", r.Name, tableType(r.Kind), nil, nil, nil, nil, nil, "NO", "NO", nil})
	}
	return out
}

func (c *Catalog) infoColumns() []types.Row {
	var out []types.Row
	for _, r := range c.snap.Relations {
		for j, col := range r.Columns {
			var charLen, numPrec, numRadix, numScale, dtPrec any
			t := col.Type
			switch t.OID {
			case types.OIDVarchar:
				if n, ok := t.Length(); ok {
					charLen = int32(n)
				}
			case types.OIDInt2:
				numPrec, numRadix, numScale = int32(16), int32(2), int32(0)
			case types.OIDInt4:
				numPrec, numRadix, numScale = int32(32), int32(2), int32(0)
			case types.OIDInt8:
				numPrec, numRadix, numScale = int32(64), int32(2), int32(0)
			case types.OIDFloat4:
				numPrec, numRadix = int32(24), int32(2)
			case types.OIDFloat8:
				numPrec, numRadix = int32(53), int32(2)
			case types.OIDNumeric:
				numRadix = int32(10)
				if p, s, ok := t.PrecisionScale(); ok {
					numPrec, numScale = int32(p), int32(s)
				}
			case types.OIDDate:
				dtPrec = int32(0)
			case types.OIDTimestamp, types.OIDTimestampTZ, types.OIDInterval:
				dtPrec = int32(6)
			}
			out = append(out, types.Row{c.snap.Database, "public", r.Name, col.Name, int32(j + 1), nil, "YES",
				t.Base().Name(), charLen, numPrec, numRadix, numScale, dtPrec, c.snap.Database, "pg_catalog", typeNames[t.OID], "NO", "NEVER", nil, "YES"})
		}
	}
	return out
}

func (c *Catalog) schemata() []types.Row {
	var out []types.Row
	for _, n := range []string{"information_schema", "pg_catalog", "public"} {
		out = append(out, types.Row{c.snap.Database, n, "pg_database_owner", nil, nil, nil, nil})
	}
	return out
}

var pgTables = map[string]*table{
	"pg_namespace": {cols: cols("oid", oid, "nspname", name, "nspowner", oid, "nspacl", array), rows: (*Catalog).namespaces},
	"pg_class": {cols: cols("oid", oid, "relname", name, "relnamespace", oid, "reltype", oid, "reloftype", oid, "relowner", oid,
		"relam", oid, "relfilenode", oid, "reltablespace", oid, "relpages", int4, "reltuples", float4, "relallvisible", int4,
		"reltoastrelid", oid, "relhasindex", bool_, "relisshared", bool_, "relpersistence", char, "relkind", char, "relnatts", int2,
		"relchecks", int2, "relhasrules", bool_, "relhastriggers", bool_, "relhassubclass", bool_, "relrowsecurity", bool_,
		"relforcerowsecurity", bool_, "relispopulated", bool_, "relreplident", char, "relispartition", bool_, "relrewrite", oid,
		"relacl", array, "reloptions", array, "relpartbound", text), rows: (*Catalog).classes},
	"pg_attribute": {cols: cols("attrelid", oid, "attname", name, "atttypid", oid, "attlen", int2, "attnum", int2, "attndims", int4,
		"atttypmod", int4, "attnotnull", bool_, "atthasdef", bool_, "atthasmissing", bool_, "attidentity", char, "attgenerated", char,
		"attisdropped", bool_, "attislocal", bool_, "attinhcount", int4, "attcollation", oid, "attacl", array,
		"attstorage", char, "attcompression", char, "attstattarget", int4), rows: (*Catalog).attributes},
	"pg_type": {cols: cols("oid", oid, "typname", name, "typnamespace", oid, "typowner", oid, "typlen", int2, "typbyval", bool_,
		"typtype", char, "typcategory", char, "typispreferred", bool_, "typisdefined", bool_, "typdelim", char, "typrelid", oid,
		"typelem", oid, "typarray", oid, "typbasetype", oid, "typtypmod", int4, "typndims", int4, "typcollation", oid, "typnotnull", bool_),
		rows: (*Catalog).typeRows},
	"pg_database": {cols: cols("oid", oid, "datname", name, "datdba", oid, "encoding", int4, "datlocprovider", char, "datistemplate", bool_,
		"datallowconn", bool_, "datconnlimit", int4, "datcollate", text, "datctype", text, "daticulocale", text, "datacl", array),
		rows: (*Catalog).databases},
	"pg_roles": {cols: cols("oid", oid, "rolname", name, "rolsuper", bool_, "rolinherit", bool_, "rolcreaterole", bool_, "rolcreatedb", bool_,
		"rolcanlogin", bool_, "rolreplication", bool_, "rolconnlimit", int4, "rolpassword", text, "rolvaliduntil", types.TimestampTZ,
		"rolbypassrls", bool_, "rolconfig", array), rows: (*Catalog).roleRows},
	"pg_user": {cols: cols("usename", name, "usesysid", oid, "usecreatedb", bool_, "usesuper", bool_, "userepl", bool_, "usebypassrls", bool_,
		"passwd", text, "valuntil", types.TimestampTZ, "useconfig", array), rows: (*Catalog).userRows},
	// Empty: Strand has none of these, but clients' queries join them.
	"pg_description":           {cols: cols("objoid", oid, "classoid", oid, "objsubid", int4, "description", text)},
	"pg_shdescription":         {cols: cols("objoid", oid, "classoid", oid, "description", text)},
	"pg_am":                    {cols: cols("oid", oid, "amname", name, "amhandler", text, "amtype", char)},
	"pg_index":                 {cols: cols("indexrelid", oid, "indrelid", oid, "indnatts", int2, "indisunique", bool_, "indisprimary", bool_, "indisclustered", bool_, "indisvalid", bool_, "indkey", array)},
	"pg_constraint":            {cols: cols("oid", oid, "conname", name, "connamespace", oid, "contype", char, "conrelid", oid, "conindid", oid, "confrelid", oid, "conkey", array, "confkey", array)},
	"pg_inherits":              {cols: cols("inhrelid", oid, "inhparent", oid, "inhseqno", int4, "inhdetachpending", bool_)},
	"pg_attrdef":               {cols: cols("oid", oid, "adrelid", oid, "adnum", int2, "adbin", text)},
	"pg_tablespace":            {cols: cols("oid", oid, "spcname", name, "spcowner", oid, "spcacl", array, "spcoptions", array)},
	"pg_collation":             {cols: cols("oid", oid, "collname", name, "collnamespace", oid, "collowner", oid, "collprovider", char, "collencoding", int4, "collcollate", text, "collctype", text)},
	"pg_policy":                {cols: cols("oid", oid, "polname", name, "polrelid", oid, "polcmd", char, "polpermissive", bool_, "polroles", array, "polqual", text, "polwithcheck", text)},
	"pg_statistic_ext":         {cols: cols("oid", oid, "stxrelid", oid, "stxname", name, "stxnamespace", oid, "stxowner", oid, "stxstattarget", int4, "stxkeys", array, "stxkind", array)},
	"pg_publication":           {cols: cols("oid", oid, "pubname", name, "pubowner", oid, "puballtables", bool_, "pubinsert", bool_, "pubupdate", bool_, "pubdelete", bool_, "pubtruncate", bool_, "pubviaroot", bool_)},
	"pg_publication_rel":       {cols: cols("oid", oid, "prpubid", oid, "prrelid", oid, "prqual", text, "prattrs", array)},
	"pg_publication_namespace": {cols: cols("oid", oid, "pnpubid", oid, "pnnspid", oid)},
	"pg_auth_members":          {cols: cols("oid", oid, "roleid", oid, "member", oid, "grantor", oid, "admin_option", bool_)},
	"pg_trigger":               {cols: cols("oid", oid, "tgrelid", oid, "tgparentid", oid, "tgname", name, "tgfoid", oid, "tgtype", int2, "tgenabled", char, "tgisinternal", bool_)},
	"pg_rewrite":               {cols: cols("oid", oid, "rulename", name, "ev_class", oid, "ev_type", char, "ev_enabled", char, "is_instead", bool_, "ev_qual", text, "ev_action", text)},
	"pg_foreign_table":         {cols: cols("ftrelid", oid, "ftserver", oid, "ftoptions", array)},
	"pg_partitioned_table":     {cols: cols("partrelid", oid, "partstrat", char, "partnatts", int2, "partdefid", oid)},
	"pg_extension":             {cols: cols("oid", oid, "extname", name, "extowner", oid, "extnamespace", oid, "extrelocatable", bool_, "extversion", text)},
	"pg_proc":                  {cols: cols("oid", oid, "proname", name, "pronamespace", oid, "proowner", oid, "prokind", char, "prorettype", oid, "pronargs", int2)},
	"pg_sequence":              {cols: cols("seqrelid", oid, "seqtypid", oid, "seqstart", types.Int8, "seqincrement", types.Int8, "seqmax", types.Int8, "seqmin", types.Int8, "seqcache", types.Int8, "seqcycle", bool_)},
}

var infoTables = map[string]*table{
	"schemata": {cols: cols("catalog_name", name, "schema_name", name, "schema_owner", name, "default_character_set_catalog", name,
		"default_character_set_schema", name, "default_character_set_name", name, "sql_path", text), rows: (*Catalog).schemata},
	"tables": {cols: cols("table_catalog", name, "table_schema", name, "table_name", name, "table_type", text,
		"self_referencing_column_name", name, "reference_generation", text, "user_defined_type_catalog", name,
		"user_defined_type_schema", name, "user_defined_type_name", name, "is_insertable_into", text, "is_typed", text,
		"commit_action", text), rows: (*Catalog).infoTables},
	"columns": {cols: cols("table_catalog", name, "table_schema", name, "table_name", name, "column_name", name,
		"ordinal_position", int4, "column_default", text, "is_nullable", text, "data_type", text,
		"character_maximum_length", int4, "numeric_precision", int4, "numeric_precision_radix", int4, "numeric_scale", int4,
		"datetime_precision", int4, "udt_catalog", name, "udt_schema", name, "udt_name", name, "is_identity", text,
		"is_generated", text, "generation_expression", text, "is_updatable", text), rows: (*Catalog).infoColumns},
}
