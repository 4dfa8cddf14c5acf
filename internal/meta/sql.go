package meta

// The SQL catalog (metadata level 7): the relations the SQL endpoint
// serves (sources over topics, materialized views, sinks into topics),
// kept like all metadata so every agent knows every definition and
// plans from its own copy. Relations share one namespace, as
// PostgreSQL's do: a name is a source, a view or a sink, never two.
//
// What a definition means is the SQL layer's business (package
// sql/catalog, and the planner), as a schema's is the registry's: the
// proposer parses the statement, checks it against its copy (the topic
// exists, the types are known, the SELECT names relations that exist)
// and proposes the normalized definition with the statement's text.
// Apply parses no SQL. It checks what the records can tell: names,
// sizes, sorted options, the kind's fields, the topic, and that every
// relation the definition reads still exists (by id, so one dropped and
// created again since the proposer looked is not taken for the one it
// planned against) and is readable (a source or a view, never a sink).
// Ids are assigned here, the next unused one; a dependent's id is always
// above its dependencies', since they existed before it.
//
// Refusals carry PostgreSQL's SQLSTATE in Result.SQLState, which the
// endpoint answers with; a skip under IF [NOT] EXISTS succeeds with the
// notice's SQLSTATE and the names skipped.

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Record prefixes of the SQL catalog.
const (
	// prefixRelationName keys a relation's id (8 bytes, big-endian) by
	// its name.
	prefixRelationName byte = 0x2C
	// prefixRelation keys a relation by id (8 bytes, big-endian).
	prefixRelation byte = 0x2D
	// prefixRelationDep marks a dependency: the id read, then the id of
	// the relation reading it (8 bytes each), so a relation's dependents
	// are one range.
	prefixRelationDep byte = 0x2E
	// prefixRelationCounter is the one record of the next id and the
	// count of relations.
	prefixRelationCounter byte = 0x2F
)

var keyRelationCounter = []byte{prefixRelationCounter}

// Command types of the SQL catalog, written from level 7.
const (
	TypeCreateRelation CommandType = 35
	TypeDropRelation   CommandType = 36
)

// Limits of apply, part of what apply means.
const (
	// MaxRelationNameBytes is PostgreSQL's NAMEDATALEN-1: the longest
	// identifier it keeps.
	MaxRelationNameBytes = 63
	// MaxRelationSQLBytes bounds a definition's text and its query: a
	// log entry carries them, every copy keeps them.
	MaxRelationSQLBytes = 256 << 10
	// MaxRelationColumns is PostgreSQL's MaxHeapAttributeNumber.
	MaxRelationColumns = 1600
	// maxRelationOptions bounds a definition's WITH options.
	maxRelationOptions = 64
	// maxRelationOptionBytes bounds one option's value.
	maxRelationOptionBytes = 4096
	// maxRelationDeps bounds the relations one definition reads.
	maxRelationDeps = 256
	// maxOwnerBytes bounds the owner principal.
	maxOwnerBytes = 1024
	// MaxRelations bounds the catalog: every agent plans from all of it.
	MaxRelations = 10_000
	// maxDropNames bounds the names of one DROP.
	maxDropNames = 1000
)

// PostgreSQL's SQLSTATEs the catalog's apply answers with.
const (
	SQLStateDuplicateTable          = "42P07"
	SQLStateUndefinedTable          = "42P01"
	SQLStateUndefinedObject         = "42704"
	SQLStateWrongObjectType         = "42809"
	SQLStateDependentObjectsExist   = "2BP01"
	SQLStateInvalidName             = "42602"
	SQLStateNameTooLong             = "42622"
	SQLStateDuplicateColumn         = "42701"
	SQLStateTooManyColumns          = "54011"
	SQLStateProgramLimitExceeded    = "54000"
	SQLStateInvalidParameterValue   = "22023"
	SQLStateInvalidObjectDefinition = "42P17"
)

// RelationKind is what a relation is.
type RelationKind uint8

const (
	// RelationSource reads a topic: CREATE SOURCE.
	RelationSource RelationKind = 1
	// RelationView is a materialized view: CREATE MATERIALIZED VIEW.
	RelationView RelationKind = 2
	// RelationSink writes a query's changes to a topic: CREATE SINK.
	// Nothing reads a sink.
	RelationSink RelationKind = 3
)

// String is the kind as statements name it.
func (k RelationKind) String() string {
	switch k {
	case RelationSource:
		return "source"
	case RelationView:
		return "materialized view"
	case RelationSink:
		return "sink"
	}
	return "relation"
}

// RelationColumn is one column of a relation: its name and PostgreSQL
// type (the pg_type OID and type modifier, -1 for none).
type RelationColumn struct {
	Name    string
	Type    uint32
	TypeMod int32
}

// RelationOption is one WITH option of a definition, as the proposer
// normalized it (lower-case key).
type RelationOption struct {
	Key   string
	Value string
}

// CreateRelation defines a relation. SQL is the statement as the user
// wrote it; the rest is its normalized definition, what the planner
// needs without parsing SQL again: Columns (a source's as declared, a
// view's or sink's as the planner typed its query: none until it does),
// for a source or sink its Topic, Format and other Options (sorted by
// key, each once), for a view or sink its Query (the SELECT's text) and
// DependsOn (the ids of the relations it reads, ascending, each once).
// Owner is the principal that created it. IfNotExists makes an existing
// name a success that changes nothing.
// Result: RelationID; or SQLState 42P07 (the name is taken; with
// IfNotExists a success naming it in RelationSkipped), 42P01 (a
// dependency no longer exists), 42809 (a dependency is a sink), 42704
// (the topic does not exist), 42602/42622 (a bad name), 42701/54011
// (columns), 22023 (a field the kind does not take or lacks, options),
// 54000 (the catalog is full, or the text too long).
type CreateRelation struct {
	Kind        RelationKind
	Name        string
	IfNotExists bool
	SQL         string
	Columns     []RelationColumn
	Options     []RelationOption
	Topic       string
	Format      string
	Query       string
	DependsOn   []uint64
	Owner       string
}

// DropRelation drops relations of one kind by name, all or none. A
// relation others depend on is refused unless they are dropped with it:
// named in the same command, or with Cascade, which drops every
// relation that reads one dropped, transitively, whatever its kind and
// owner (as PostgreSQL's CASCADE does). IfExists skips a name that is
// not there.
// Result: RelationIDs, every relation dropped, dependents first (ids
// descending); RelationSkipped, the names IfExists skipped (SQLState
// 42P01 as a notice); or SQLState 42P01 (no such name), 42809 (the name
// is another kind), 2BP01 (others depend on it), 22023 (no names or too
// many), changing nothing.
type DropRelation struct {
	Kind     RelationKind
	Names    []string
	IfExists bool
	Cascade  bool
}

func (CreateRelation) Type() CommandType { return TypeCreateRelation }
func (CreateRelation) version() uint16   { return 1 }
func (DropRelation) Type() CommandType   { return TypeDropRelation }
func (DropRelation) version() uint16     { return 1 }

func (c CreateRelation) appendPayload(b []byte) []byte {
	b = append(b, byte(c.Kind))
	b = appendString(b, c.Name)
	b = appendBool(b, c.IfNotExists)
	return appendRelationDef(b, c.SQL, c.Columns, c.Options, c.Topic, c.Format, c.Query, c.DependsOn, c.Owner)
}

func decodeCreateRelationV1(p []byte) (CreateRelation, error) {
	r := &reader{b: p}
	var c CreateRelation
	c.Kind = RelationKind(r.byte())
	c.Name = r.string()
	c.IfNotExists = r.bool()
	c.SQL, c.Columns, c.Options, c.Topic, c.Format, c.Query, c.DependsOn, c.Owner = r.relationDef()
	return c, r.done()
}

func (c DropRelation) appendPayload(b []byte) []byte {
	b = append(b, byte(c.Kind))
	b = appendStringList(b, c.Names)
	b = appendBool(b, c.IfExists)
	return appendBool(b, c.Cascade)
}

func decodeDropRelationV1(p []byte) (DropRelation, error) {
	r := &reader{b: p}
	var c DropRelation
	c.Kind = RelationKind(r.byte())
	c.Names = r.stringList()
	c.IfExists = r.bool()
	c.Cascade = r.bool()
	return c, r.done()
}

// appendRelationDef encodes a definition, in the command and in the
// stored record alike.
func appendRelationDef(b []byte, sql string, cols []RelationColumn, opts []RelationOption, topic, format, query string, deps []uint64, owner string) []byte {
	b = appendString(b, sql)
	b = appendUvarint(b, uint64(len(cols)))
	for _, c := range cols {
		b = appendString(b, c.Name)
		b = appendUvarint(b, uint64(c.Type))
		b = appendVarint(b, int64(c.TypeMod))
	}
	b = appendUvarint(b, uint64(len(opts)))
	for _, o := range opts {
		b = appendString(b, o.Key)
		b = appendString(b, o.Value)
	}
	b = appendString(b, topic)
	b = appendString(b, format)
	b = appendString(b, query)
	b = appendUvarint(b, uint64(len(deps)))
	for _, d := range deps {
		b = appendUvarint(b, d)
	}
	return appendString(b, owner)
}

func (r *reader) relationDef() (sql string, cols []RelationColumn, opts []RelationOption, topic, format, query string, deps []uint64, owner string) {
	sql = r.string()
	if n := r.count(3); n > 0 {
		cols = make([]RelationColumn, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			c := RelationColumn{Name: r.string()}
			typ := r.uvarint()
			if typ > math.MaxUint32 {
				r.fail(errRange)
			}
			c.Type, c.TypeMod = uint32(typ), r.int32()
			cols = append(cols, c)
		}
	}
	if n := r.count(2); n > 0 {
		opts = make([]RelationOption, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			opts = append(opts, RelationOption{Key: r.string(), Value: r.string()})
		}
	}
	topic, format, query = r.string(), r.string(), r.string()
	if n := r.count(1); n > 0 {
		deps = make([]uint64, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			deps = append(deps, r.uvarint())
		}
	}
	owner = r.string()
	return
}

// byte reads one byte.
func (r *reader) byte() byte {
	var b [1]byte
	r.fixed(b[:])
	return b[0]
}

// Relation is a relation of the catalog: its id and definition.
type Relation struct {
	ID        uint64
	Kind      RelationKind
	Name      string
	SQL       string
	Columns   []RelationColumn
	Options   []RelationOption
	Topic     string
	Format    string
	Query     string
	DependsOn []uint64
	Owner     string
}

// Option returns the value of the option key, "" and false if unset.
func (r Relation) Option(key string) (string, bool) {
	i, ok := slices.BinarySearchFunc(r.Options, key, func(o RelationOption, k string) int { return strings.Compare(o.Key, k) })
	if !ok {
		return "", false
	}
	return r.Options[i].Value, true
}

func relationKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixRelation}, id)
}

func relationNameKey(name string) []byte {
	return append([]byte{prefixRelationName}, name...)
}

func relationDepKey(dep, dependent uint64) []byte {
	return binary.BigEndian.AppendUint64(relationDepPrefix(dep), dependent)
}

func relationDepPrefix(dep uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixRelationDep}, dep)
}

func encodeRelation(rel Relation) []byte {
	b := []byte{recordV1, byte(rel.Kind)}
	b = appendString(b, rel.Name)
	return appendRelationDef(b, rel.SQL, rel.Columns, rel.Options, rel.Topic, rel.Format, rel.Query, rel.DependsOn, rel.Owner)
}

func decodeRelation(id uint64, v []byte) (Relation, error) {
	r := recordReader(v)
	rel := Relation{ID: id, Kind: RelationKind(r.byte()), Name: r.string()}
	rel.SQL, rel.Columns, rel.Options, rel.Topic, rel.Format, rel.Query, rel.DependsOn, rel.Owner = r.relationDef()
	if err := r.done(); err != nil {
		return Relation{}, corrupt("relation", err)
	}
	return rel, nil
}

// relationCounter is the 0x2F record: the next id to assign (from 1)
// and how many relations exist.
type relationCounter struct {
	Next  uint64
	Count uint64
}

func (c relationCounter) encode() []byte {
	b := appendUvarint([]byte{recordV1}, c.Next)
	return appendUvarint(b, c.Count)
}

func decodeRelationCounter(v []byte) (relationCounter, error) {
	r := recordReader(v)
	c := relationCounter{Next: r.uvarint(), Count: r.uvarint()}
	if err := r.done(); err != nil {
		return relationCounter{}, corrupt("relation counter", err)
	}
	return c, nil
}

func readRelationCounter(get func([]byte) ([]byte, bool, error)) (relationCounter, error) {
	v, ok, err := get(keyRelationCounter)
	if err != nil || !ok {
		return relationCounter{Next: 1}, err
	}
	return decodeRelationCounter(v)
}

// sqlFailed is a refusal with PostgreSQL's SQLSTATE.
func sqlFailed(state string, format string, args ...any) Result {
	r := failed(kerr.InvalidRequest, format, args...)
	r.SQLState = state
	return r
}

// validRelationName reports why name cannot be one: its SQLSTATE and
// message, "" if it can.
func validRelationName(name string) (string, string) {
	switch {
	case name == "":
		return SQLStateInvalidName, "zero-length delimited identifier"
	case len(name) > MaxRelationNameBytes:
		return SQLStateNameTooLong, "identifier longer than 63 bytes"
	case strings.IndexByte(name, 0) >= 0:
		return SQLStateInvalidName, "identifier holds a NUL byte"
	}
	return "", ""
}

// relationByName reads a relation through the batch.
func relationByName(get func([]byte) ([]byte, bool, error), name string) (Relation, bool, error) {
	v, ok, err := get(relationNameKey(name))
	if err != nil || !ok {
		return Relation{}, false, err
	}
	if len(v) != 8 {
		return Relation{}, false, corrupt("relation name index", errShort)
	}
	return relationByID(get, binary.BigEndian.Uint64(v))
}

func relationByID(get func([]byte) ([]byte, bool, error), id uint64) (Relation, bool, error) {
	v, ok, err := get(relationKey(id))
	if err != nil || !ok {
		return Relation{}, false, err
	}
	rel, err := decodeRelation(id, v)
	return rel, err == nil, err
}

// checkDefinition checks c's fields against its kind, without reading
// the state: a SQLSTATE and message, "" when it holds.
func checkDefinition(c *CreateRelation) (string, string) {
	if state, msg := validRelationName(c.Name); state != "" {
		return state, msg
	}
	switch {
	case c.Kind != RelationSource && c.Kind != RelationView && c.Kind != RelationSink:
		return SQLStateInvalidParameterValue, "unknown relation kind"
	case c.SQL == "":
		return SQLStateInvalidParameterValue, "a definition carries its statement's text"
	case len(c.SQL) > MaxRelationSQLBytes || len(c.Query) > MaxRelationSQLBytes:
		return SQLStateProgramLimitExceeded, "a definition's text is longer than 256 KiB"
	case len(c.Columns) > MaxRelationColumns:
		return SQLStateTooManyColumns, "tables can have at most 1600 columns"
	case len(c.Options) > maxRelationOptions:
		return SQLStateInvalidParameterValue, "more than 64 options"
	case len(c.DependsOn) > maxRelationDeps:
		return SQLStateProgramLimitExceeded, "a definition reads more than 256 relations"
	case len(c.Owner) > maxOwnerBytes:
		return SQLStateInvalidParameterValue, "owner principal longer than 1024 bytes"
	}
	for i, col := range c.Columns {
		if state, msg := validRelationName(col.Name); state != "" {
			return state, "column: " + msg
		}
		if col.Type == 0 {
			return SQLStateInvalidParameterValue, "column \"" + col.Name + "\" has no type"
		}
		if slices.ContainsFunc(c.Columns[:i], func(o RelationColumn) bool { return o.Name == col.Name }) {
			return SQLStateDuplicateColumn, "column \"" + col.Name + "\" specified more than once"
		}
	}
	for i, o := range c.Options {
		switch {
		case o.Key == "" || len(o.Key) > MaxRelationNameBytes:
			return SQLStateInvalidParameterValue, "an option name has 1 to 63 bytes"
		case len(o.Value) > maxRelationOptionBytes:
			return SQLStateInvalidParameterValue, "option \"" + o.Key + "\" is longer than 4096 bytes"
		case i > 0 && o.Key <= c.Options[i-1].Key:
			return SQLStateInvalidParameterValue, "options are sorted by name, each once"
		}
	}
	for i, d := range c.DependsOn {
		if d == 0 || (i > 0 && d <= c.DependsOn[i-1]) {
			return SQLStateInvalidParameterValue, "dependencies are ids, ascending, each once"
		}
	}
	reads, writes := c.Kind != RelationSource, c.Kind != RelationView
	switch {
	case writes != (c.Topic != "") || writes != (c.Format != ""):
		return SQLStateInvalidParameterValue, "a " + c.Kind.String() + " names a topic and a format only if it reads or writes one"
	case reads != (c.Query != ""):
		return SQLStateInvalidParameterValue, "a " + c.Kind.String() + " has a query only if it is defined by one"
	case !reads && len(c.DependsOn) > 0:
		return SQLStateInvalidParameterValue, "a source reads no relation"
	case c.Kind == RelationSource && len(c.Columns) == 0:
		return SQLStateInvalidObjectDefinition, "a source declares its columns"
	}
	return "", ""
}

func (a *Applier) createRelation(c CreateRelation) (Result, error) {
	if state, msg := checkDefinition(&c); state != "" {
		return sqlFailed(state, "%s", msg), nil
	}
	if existing, ok, err := relationByName(a.get, c.Name); err != nil {
		return Result{}, err
	} else if ok {
		if c.IfNotExists {
			return Result{RelationID: existing.ID, RelationSkipped: []string{c.Name}, SQLState: SQLStateDuplicateTable,
				Message: "relation \"" + c.Name + "\" already exists, skipping"}, nil
		}
		return sqlFailed(SQLStateDuplicateTable, "relation %q already exists", c.Name), nil
	}
	if c.Topic != "" {
		if _, ok, err := a.topic(c.Topic); err != nil {
			return Result{}, err
		} else if !ok {
			return sqlFailed(SQLStateUndefinedObject, "topic %q does not exist", c.Topic), nil
		}
	}
	for _, d := range c.DependsOn {
		dep, ok, err := relationByID(a.get, d)
		if err != nil {
			return Result{}, err
		}
		switch {
		case !ok:
			return sqlFailed(SQLStateUndefinedTable, "a relation the definition reads (id %d) was dropped since it was planned", d), nil
		case dep.Kind == RelationSink:
			return sqlFailed(SQLStateWrongObjectType, "%q is a sink: nothing reads a sink", dep.Name), nil
		}
	}
	cnt, err := readRelationCounter(a.get)
	if err != nil {
		return Result{}, err
	}
	if cnt.Count >= MaxRelations {
		return sqlFailed(SQLStateProgramLimitExceeded, "the catalog holds %d relations, as many as it may", cnt.Count), nil
	}
	id := cnt.Next
	rel := Relation{ID: id, Kind: c.Kind, Name: c.Name, SQL: c.SQL, Columns: c.Columns, Options: c.Options,
		Topic: c.Topic, Format: c.Format, Query: c.Query, DependsOn: c.DependsOn, Owner: c.Owner}
	if err := a.b.Set(relationKey(id), encodeRelation(rel)); err != nil {
		return Result{}, err
	}
	if err := a.b.Set(relationNameKey(c.Name), binary.BigEndian.AppendUint64(nil, id)); err != nil {
		return Result{}, err
	}
	for _, d := range c.DependsOn {
		if err := a.b.Set(relationDepKey(d, id), nil); err != nil {
			return Result{}, err
		}
	}
	cnt.Next, cnt.Count = id+1, cnt.Count+1
	return Result{RelationID: id}, a.b.Set(keyRelationCounter, cnt.encode())
}

// relationDependents returns the ids of the relations reading id,
// ascending.
func relationDependents(newIter func(lo, hi []byte) (Iterator, error), id uint64) ([]uint64, error) {
	lo, hi := spanOf(relationDepPrefix(id))
	it, err := newIter(lo, hi)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []uint64
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 17 {
			return nil, corrupt("relation dependency key", errShort)
		}
		out = append(out, binary.BigEndian.Uint64(k[9:]))
	}
	return out, it.Error()
}

func (a *Applier) dropRelation(c DropRelation) (Result, error) {
	switch {
	case c.Kind != RelationSource && c.Kind != RelationView && c.Kind != RelationSink:
		return sqlFailed(SQLStateInvalidParameterValue, "unknown relation kind"), nil
	case len(c.Names) == 0 || len(c.Names) > maxDropNames:
		return sqlFailed(SQLStateInvalidParameterValue, "a DROP names 1 to %d relations", maxDropNames), nil
	}
	var res Result
	var named []Relation
	for _, name := range c.Names {
		if state, msg := validRelationName(name); state != "" {
			return sqlFailed(state, "%s", msg), nil
		}
		rel, ok, err := relationByName(a.get, name)
		if err != nil {
			return Result{}, err
		}
		switch {
		case !ok && c.IfExists:
			res.RelationSkipped = append(res.RelationSkipped, name)
			continue
		case !ok:
			return sqlFailed(SQLStateUndefinedTable, "%s %q does not exist", c.Kind, name), nil
		case rel.Kind != c.Kind:
			return sqlFailed(SQLStateWrongObjectType, "%q is not a %s: use DROP %s to remove a %s", name, c.Kind,
				strings.ToUpper(rel.Kind.String()), rel.Kind), nil
		}
		if !slices.ContainsFunc(named, func(r Relation) bool { return r.ID == rel.ID }) {
			named = append(named, rel)
		}
	}
	if len(res.RelationSkipped) > 0 {
		res.SQLState = SQLStateUndefinedTable
		res.Message = c.Kind.String() + " \"" + strings.Join(res.RelationSkipped, "\", \"") + "\" does not exist, skipping"
	}
	// The drop set: what was named, then (breadth first, ids ascending
	// per relation) whatever reads it.
	drop := named
	for i := 0; i < len(drop); i++ {
		deps, err := relationDependents(a.b.NewIter, drop[i].ID)
		if err != nil {
			return Result{}, err
		}
		for _, d := range deps {
			if slices.ContainsFunc(drop, func(r Relation) bool { return r.ID == d }) {
				continue
			}
			dep, ok, err := relationByID(a.get, d)
			if err != nil {
				return Result{}, err
			}
			if !ok {
				return Result{}, corrupt("relation dependency", errRange)
			}
			if !c.Cascade {
				return sqlFailed(SQLStateDependentObjectsExist, "cannot drop %s %q because other objects depend on it (%s %q depends on %s %q): use DROP ... CASCADE to drop the dependent objects too",
					drop[i].Kind, drop[i].Name, dep.Kind, dep.Name, drop[i].Kind, drop[i].Name), nil
			}
			drop = append(drop, dep)
		}
	}
	slices.SortFunc(drop, func(x, y Relation) int { return -cmpUint64(x.ID, y.ID) })
	for _, rel := range drop {
		if err := a.deleteRelation(rel); err != nil {
			return Result{}, err
		}
		res.RelationIDs = append(res.RelationIDs, rel.ID)
	}
	if len(drop) > 0 {
		cnt, err := readRelationCounter(a.get)
		if err != nil {
			return Result{}, err
		}
		if cnt.Count < uint64(len(drop)) {
			return Result{}, corrupt("relation counter", errRange)
		}
		cnt.Count -= uint64(len(drop))
		if err := a.b.Set(keyRelationCounter, cnt.encode()); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

func cmpUint64(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// deleteRelation removes rel's records: its name, its definition and
// its dependency marks (those naming it as the dependency belong to
// relations dropped with it, which remove them).
//
// A relation's data outside the catalog is not the collector's: each
// agent deletes its own local state of a dropped relation (the views'
// and sinks' runners, on Result.RelationIDs and at start), and the
// view snapshots in object storage are deleted by package viewsnap's
// sweep, which decides from the log (the id is below NextRelationID
// and gone), never from a clock. A sink's progress topic is a topic.
func (a *Applier) deleteRelation(rel Relation) error {
	if err := a.b.Delete(relationNameKey(rel.Name)); err != nil {
		return err
	}
	if err := a.b.Delete(relationKey(rel.ID)); err != nil {
		return err
	}
	for _, d := range rel.DependsOn {
		if err := a.b.Delete(relationDepKey(d, rel.ID)); err != nil {
			return err
		}
	}
	return nil
}

// Relation returns the relation named name.
func (v *View) Relation(name string) (Relation, bool, error) { return relationByName(v.get, name) }

// RelationByID returns the relation with id.
func (v *View) RelationByID(id uint64) (Relation, bool, error) { return relationByID(v.get, id) }

// Relations returns every relation, sorted by name. The catalog holds at
// most MaxRelations.
func (v *View) Relations() ([]Relation, error) {
	it, err := v.r.NewIter([]byte{prefixRelationName}, []byte{prefixRelationName + 1})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []Relation
	for ok := it.First(); ok; ok = it.Next() {
		val := it.Value()
		if len(val) != 8 {
			return nil, corrupt("relation name index", errShort)
		}
		rel, ok, err := relationByID(v.get, binary.BigEndian.Uint64(val))
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, corrupt("relation name index", errRange)
		}
		out = append(out, rel)
	}
	return out, it.Error()
}

// NextRelationID is the id the next relation created will get: every
// relation ever created, dropped ones included, has a lower one (ids
// are never reused), so an id below it that Relations does not list was
// dropped.
func (v *View) NextRelationID() (uint64, error) {
	c, err := readRelationCounter(v.get)
	return c.Next, err
}

// RelationDependents returns the ids of the relations that read id,
// ascending.
func (v *View) RelationDependents(id uint64) ([]uint64, error) {
	return relationDependents(v.r.NewIter, id)
}
