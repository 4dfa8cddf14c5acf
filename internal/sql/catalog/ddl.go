package catalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/parse"
	"github.com/strandkafka/strand/internal/sql/pgwire"
	"github.com/strandkafka/strand/internal/sql/source"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/viewplan"
	"github.com/strandkafka/strand/internal/sql/views"
)

// Formats a source reads and a sink writes. Avro and Protobuf take the
// schema of the topic's value subject in the registry (Confluent's
// TopicNameStrategy: <topic>-value).
var (
	sourceFormats = []string{"avro", "bytes", "json", "protobuf", "text"}
	sinkFormats   = []string{"json"}
)

// The WITH options each kind takes, and the values of the closed ones.
var (
	// A source's options are package source's, which reads them.
	sourceOptions = source.Options
	sinkOptions   = []string{"envelope", "format", "topic"}
	// A materialized view's: when its windows emit (viewplan.Emit).
	viewOptions = []string{viewplan.EmitOption}
	envelopes   = map[meta.RelationKind][]string{
		// append: every record is a row; upsert: the newest value per
		// key, a tombstone deletes.
		meta.RelationSource: {"append", "upsert"},
		// upsert: the newest row per key, compacted; changelog: every
		// change as a record.
		meta.RelationSink: {"changelog", "upsert"},
	}
)

// prepare makes the statement of one of the catalog's statements, or
// PostgreSQL's error for one it refuses outright.
func (s *session) prepare(st parse.Statement) (pgwire.Statement, error) {
	n := st.Node
	switch {
	case st.Kind == parse.KindOther && n.GetCreateStmt() != nil:
		return nil, &pgwire.Error{Code: pgwire.CodeFeatureNotSupported, Message: "Strand has no tables",
			Hint: "CREATE SOURCE name (columns) WITH (topic = '...', format = 'json') reads a topic"}
	case st.Kind == parse.KindOther && n.GetViewStmt() != nil:
		return nil, &pgwire.Error{Code: pgwire.CodeFeatureNotSupported, Message: "Strand has no plain views",
			Hint: "CREATE MATERIALIZED VIEW keeps a query's result up to date"}
	case st.Kind == parse.KindExplain:
		return s.prepareExplain(st)
	case st.Kind == parse.KindConnector:
		return s.prepareConnector(st)
	case st.Kind == parse.KindOther || st.Kind == parse.KindSubscribe:
		return s.prepareRead(st)
	case n.GetVariableShowStmt() != nil:
		return s.prepareShow(st.Kind)
	case n.GetDropStmt() != nil:
		return s.prepareDrop(st)
	case n.GetCreateStmt() != nil:
		return s.ddl("CREATE SOURCE", func(ctx context.Context) error { return s.createSource(ctx, st) }), nil
	case n.GetCreateTableAsStmt() != nil:
		return s.ddl("CREATE MATERIALIZED VIEW", func(ctx context.Context) error { return s.createView(ctx, st) }), nil
	case n.GetViewStmt() != nil:
		return s.ddl("CREATE SINK", func(ctx context.Context) error { return s.createSink(ctx, st) }), nil
	}
	return nil, pgwire.NotSupported("%s statements of this form are not supported", st.Kind)
}

// prepareRead checks READ on the relation SUBSCRIBE names, then
// prepares the subscription.
func (s *session) prepareRead(st parse.Statement) (pgwire.Statement, error) {
	if err := s.checkRead(st); err != nil {
		return nil, err
	}
	if parse.SubscribeTarget(st) == nil {
		return nil, pgwire.NotSupported("%s statements of this form are not supported", st.Kind)
	}
	return s.prepareSubscribe(st)
}

// checkRead checks READ on the relations a SELECT or SUBSCRIBE names,
// refusing sinks (nothing reads them) and materialized views (not
// maintained yet).
func (s *session) checkRead(st parse.Statement) error {
	var rels []meta.Relation
	if st.Kind == parse.KindSubscribe {
		rv := parse.SubscribeTarget(st)
		v := s.e.cfg.Store.View()
		name, _ := relationName(rv)
		rel, ok, err := v.Relation(name)
		v.Close()
		switch {
		case err != nil:
			return err
		case !ok:
			return &pgwire.Error{Code: pgwire.CodeUndefinedTable, Message: fmt.Sprintf("relation %q does not exist", rv.Relname), Position: rv.Location + 1}
		}
		rels = append(rels, rel)
	} else {
		rels = s.relationsRead(st)
	}
	for _, rel := range rels {
		if rel.Kind == meta.RelationSink {
			return pgwire.Errorf(pgwire.CodeWrongObjectType, "%q is a sink: a sink writes to a topic and cannot be read", rel.Name)
		}
		if err := s.require(kmsg.ACLOperationRead, acl.ResourceTypeRelation, rel.Name, fmt.Sprintf("%s %s", rel.Kind, rel.Name)); err != nil {
			return err
		}
	}
	if st.Kind == parse.KindSubscribe {
		return nil
	}
	for _, rel := range rels {
		if rel.Kind == meta.RelationView && s.e.cfg.Views == nil {
			return notMaintained(rel)
		}
	}
	return nil
}

// ddl is a statement that changes the catalog: no rows, its tag.
func (s *session) ddl(tag string, run func(ctx context.Context) error) pgwire.Statement {
	return &command{tag: tag, run: func(ctx context.Context) error {
		if err := s.outsideBlock(tag); err != nil {
			return err
		}
		return run(ctx)
	}}
}

// command is a statement returning no rows.
type command struct {
	tag string
	run func(ctx context.Context) error
}

func (c *command) Params() []uint32         { return nil }
func (c *command) Columns() []pgwire.Column { return nil }
func (c *command) Start(ctx context.Context, args []any) (pgwire.Rows, error) {
	if err := c.run(ctx); err != nil {
		return nil, err
	}
	return &rows{tag: c.tag}, nil
}

// options reads a WITH clause: lower-case names, each once, among
// known, with their values as text, sorted by name.
func options(defs []*pg.Node, known []string) ([]meta.RelationOption, error) {
	var out []meta.RelationOption
	for _, d := range defs {
		de := d.GetDefElem()
		if de == nil {
			return nil, pgwire.Errorf(pgwire.CodeSyntaxError, "a WITH option is name = value")
		}
		name := strings.ToLower(de.Defname)
		if de.Defnamespace != "" {
			// The grammar reads one dot unquoted: a.b is namespace a,
			// name b.
			name = strings.ToLower(de.Defnamespace) + "." + name
		}
		pos := de.Location + 1
		if !slices.Contains(known, name) {
			return nil, &pgwire.Error{Code: pgwire.CodeInvalidParameterValue, Message: fmt.Sprintf("unrecognized parameter %q", de.Defname), Position: pos,
				Hint: "the options are " + strings.Join(known, ", ")}
		}
		if slices.ContainsFunc(out, func(o meta.RelationOption) bool { return o.Key == name }) {
			return nil, &pgwire.Error{Code: pgwire.CodeSyntaxError, Message: fmt.Sprintf("parameter %q specified more than once", name), Position: pos}
		}
		val, ok := optionValue(de.Arg)
		if !ok {
			return nil, &pgwire.Error{Code: pgwire.CodeInvalidParameterValue, Message: fmt.Sprintf("parameter %q needs a value", name), Position: pos}
		}
		out = append(out, meta.RelationOption{Key: name, Value: val})
	}
	slices.SortFunc(out, func(a, b meta.RelationOption) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// optionValue is a WITH option's value as text: a string, a number, a
// boolean or a bare word.
func optionValue(n *pg.Node) (string, bool) {
	switch {
	case n == nil:
		return "", false
	case n.GetString_() != nil:
		return n.GetString_().Sval, true
	case n.GetInteger() != nil:
		return strconv.Itoa(int(n.GetInteger().Ival)), true
	case n.GetFloat() != nil:
		return n.GetFloat().Fval, true
	case n.GetBoolean() != nil:
		return strconv.FormatBool(n.GetBoolean().Boolval), true
	case n.GetTypeName() != nil:
		// A bare word: the grammar reads it as a type name, and
		// qualifies one that names a built-in type (json).
		names := n.GetTypeName().Names
		if len(names) == 2 && names[0].GetString_().GetSval() == "pg_catalog" {
			names = names[1:]
		}
		if len(names) == 1 {
			return names[0].GetString_().GetSval(), true
		}
	}
	return "", false
}

func optionOf(opts []meta.RelationOption, key string) string {
	for _, o := range opts {
		if o.Key == key {
			return o.Value
		}
	}
	return ""
}

// topicOptions checks the topic, format and envelope of a source or a
// sink: present, known, the topic existing.
func topicOptions(v *meta.View, kind meta.RelationKind, opts []meta.RelationOption, formats []string) (topic, format string, err error) {
	topic, format = optionOf(opts, "topic"), strings.ToLower(optionOf(opts, "format"))
	switch {
	case topic == "":
		return "", "", pgwire.Errorf(pgwire.CodeInvalidObjectDefinition, "a %s names its topic: WITH (topic = '...')", kind)
	case format == "":
		return "", "", &pgwire.Error{Code: pgwire.CodeInvalidObjectDefinition, Message: fmt.Sprintf("a %s names its format: WITH (format = '...')", kind),
			Hint: "formats: " + strings.Join(formats, ", ")}
	case !slices.Contains(formats, format):
		return "", "", &pgwire.Error{Code: pgwire.CodeInvalidParameterValue, Message: fmt.Sprintf("unknown format %q for a %s", format, kind),
			Hint: "formats: " + strings.Join(formats, ", ")}
	}
	if e := optionOf(opts, "envelope"); e != "" && !slices.Contains(envelopes[kind], strings.ToLower(e)) {
		return "", "", &pgwire.Error{Code: pgwire.CodeInvalidParameterValue, Message: fmt.Sprintf("unknown envelope %q for a %s", e, kind),
			Hint: "envelopes: " + strings.Join(envelopes[kind], ", ")}
	}
	if _, ok, err := v.Topic(topic); err != nil {
		return "", "", err
	} else if !ok {
		return "", "", pgwire.Errorf(pgwire.CodeUndefinedObject, "topic %q does not exist", topic)
	}
	return topic, format, nil
}

// lowerOptions stores the format and envelope as checked: lower case.
func lowerOptions(opts []meta.RelationOption) {
	for i := range opts {
		switch opts[i].Key {
		case "format", "envelope", "bad.records", "scan.startup":
			opts[i].Value = strings.ToLower(opts[i].Value)
		}
	}
}

func (s *session) createSource(ctx context.Context, st parse.Statement) error {
	cs := st.Node.GetCreateStmt()
	rv := cs.Relation
	name, ok := relationName(rv)
	switch {
	case !ok:
		return &pgwire.Error{Code: pgwire.CodeInvalidSchemaName, Message: fmt.Sprintf("schema %q does not exist", rv.Schemaname), Position: rv.Location + 1}
	case rv.Relpersistence != "p":
		return pgwire.NotSupported("a source is not temporary or unlogged")
	case len(cs.InhRelations) > 0 || cs.Partspec != nil || cs.Partbound != nil || cs.OfTypename != nil || cs.AccessMethod != "" || cs.Tablespacename != "" ||
		cs.Oncommit != pg.OnCommitAction_ONCOMMIT_NOOP && cs.Oncommit != pg.OnCommitAction_ON_COMMIT_ACTION_UNDEFINED:
		return pgwire.NotSupported("a source takes columns and WITH options only")
	}
	if err := s.sync(ctx); err != nil {
		return err
	}
	cols, err := sourceColumns(cs.TableElts)
	if err != nil {
		return err
	}
	if len(cols) == 0 {
		return pgwire.Errorf(pgwire.CodeInvalidObjectDefinition, "a source declares its columns")
	}
	opts, err := options(cs.Options, sourceOptions)
	if err != nil {
		return err
	}
	lowerOptions(opts)
	v := s.e.cfg.Store.View()
	defer v.Close()
	topic, format, err := topicOptions(v, meta.RelationSource, opts, sourceFormats)
	if err != nil {
		return err
	}
	if err := payloadColumns(v, format, topic, cols); err != nil {
		return err
	}
	// What the source's reader will refuse, refused now: option values,
	// the watermark column, types the engine does not compute with.
	if err := source.Check(name, topic, format, cols, opts); err != nil {
		var se *sqlerr.Error
		if errors.As(err, &se) {
			return &pgwire.Error{Code: se.Code, Message: se.Message, Detail: se.Detail, Hint: se.Hint}
		}
		return err
	}
	if dlt := optionOf(opts, "deadletter.topic"); dlt != "" {
		if _, ok, err := v.Topic(dlt); err != nil {
			return err
		} else if !ok {
			return pgwire.Errorf(pgwire.CodeUndefinedObject, "dead-letter topic %q does not exist", dlt)
		}
		// The source writes bad records there for its creator.
		if err := s.require(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, dlt, "topic "+dlt); err != nil {
			return err
		}
	}
	if err := s.mayCreate(meta.RelationSource, name); err != nil {
		return err
	}
	// Nobody reads a topic through SQL who could not consume it.
	if err := s.require(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, topic, "topic "+topic); err != nil {
		return err
	}
	_, err = s.propose(ctx, meta.CreateRelation{Kind: meta.RelationSource, Name: name, IfNotExists: cs.IfNotExists, SQL: st.Text,
		Columns: cols, Options: opts, Topic: topic, Format: format, Owner: s.who.Principal.String()})
	return err
}

// payloadColumns checks the columns a format decodes into: text one
// text column, bytes one bytea column (beside the metadata columns);
// Avro and Protobuf a live schema of their type under the topic's value
// subject.
func payloadColumns(v *meta.View, format, topic string, cols []meta.RelationColumn) error {
	var payload []meta.RelationColumn
	for _, c := range cols {
		if _, reserved := metadataColumns[c.Name]; !reserved {
			payload = append(payload, c)
		}
	}
	one := func(oids ...uint32) error {
		if len(payload) != 1 || !containsOID(oids, payload[0].Type) {
			return pgwire.Errorf(pgwire.CodeInvalidObjectDefinition, "format %s reads the value into one %s column (beside _key, _partition, _offset, _timestamp, _headers)",
				format, typeNames[oids[0]])
		}
		return nil
	}
	switch format {
	case "text":
		return one(columnTypes["text"], columnTypes["varchar"])
	case "bytes":
		return one(columnTypes["bytea"])
	case "avro", "protobuf":
		subject := topic + "-value"
		versions, err := v.SchemaVersions(subject)
		if err != nil {
			return err
		}
		for i := len(versions) - 1; i >= 0; i-- {
			if versions[i].Deleted {
				continue
			}
			sc, ok, err := v.SchemaByID(versions[i].ID)
			if err != nil {
				return err
			}
			if ok && strings.EqualFold(sc.SchemaType, format) {
				return nil
			}
			return pgwire.Errorf(pgwire.CodeInvalidObjectDefinition, "format %s: subject %q holds a %s schema", format, subject, sc.SchemaType)
		}
		return &pgwire.Error{Code: pgwire.CodeUndefinedObject, Message: fmt.Sprintf("format %s needs a schema registered under subject %q", format, subject),
			Hint: "register the topic's value schema in the schema registry first"}
	}
	return nil
}

// viewQuery checks a view's or sink's SELECT: the relations it reads
// exist and may be read (never a sink), and returns their ids and the
// SELECT's normalized text.
func (s *session) viewQuery(ctx context.Context, st parse.Statement, q *pg.Node) (deps []uint64, query string, err error) {
	if q.GetSelectStmt() == nil {
		return nil, "", pgwire.NotSupported("a view is defined by a SELECT")
	}
	if err := s.sync(ctx); err != nil {
		return nil, "", err
	}
	v := s.e.cfg.Store.View()
	defer v.Close()
	for _, rv := range rangeVars(q) {
		name, ok := relationName(rv)
		rel, found, err := v.Relation(name)
		switch {
		case err != nil:
			return nil, "", err
		case !ok || !found:
			return nil, "", &pgwire.Error{Code: pgwire.CodeUndefinedTable, Message: fmt.Sprintf("relation %q does not exist", qualified(rv)), Position: rv.Location + 1}
		case rel.Kind == meta.RelationSink:
			return nil, "", &pgwire.Error{Code: pgwire.CodeWrongObjectType, Message: fmt.Sprintf("%q is a sink: a sink writes to a topic and cannot be read", name), Position: rv.Location + 1}
		}
		if err := s.require(kmsg.ACLOperationRead, acl.ResourceTypeRelation, name, fmt.Sprintf("%s %s", rel.Kind, name)); err != nil {
			return nil, "", err
		}
		if !slices.Contains(deps, rel.ID) {
			deps = append(deps, rel.ID)
		}
	}
	slices.Sort(deps)
	query, err = parse.Deparse(q)
	return deps, query, err
}

func qualified(rv *pg.RangeVar) string {
	if rv.Schemaname != "" {
		return rv.Schemaname + "." + rv.Relname
	}
	return rv.Relname
}

func (s *session) createView(ctx context.Context, st parse.Statement) error {
	ct := st.Node.GetCreateTableAsStmt()
	into := ct.Into
	name, ok := relationName(into.Rel)
	switch {
	case !ok:
		return &pgwire.Error{Code: pgwire.CodeInvalidSchemaName, Message: fmt.Sprintf("schema %q does not exist", into.Rel.Schemaname), Position: into.Rel.Location + 1}
	case into.AccessMethod != "" || into.TableSpaceName != "":
		return pgwire.NotSupported("a materialized view takes no storage options")
	case into.SkipData:
		return pgwire.NotSupported("WITH NO DATA: a materialized view is kept up to date from its creation")
	case len(into.ColNames) > 0:
		return pgwire.NotSupported("column names after a materialized view's name: name the SELECT's columns with AS")
	}
	opts, err := options(into.Options, viewOptions)
	if err != nil {
		return err
	}
	for i, o := range opts {
		// Stored as checked: lower case (viewplan reads it so).
		e, err := viewplan.ParseEmit(o.Value)
		if err != nil {
			return err
		}
		opts[i].Value = e.String()
	}
	deps, query, err := s.viewQuery(ctx, st, ct.Query)
	if err != nil {
		return err
	}
	if err := s.mayCreate(meta.RelationView, name); err != nil {
		return err
	}
	if err := s.compiles(meta.Relation{Kind: meta.RelationView, Name: name, SQL: st.Text, Query: query, DependsOn: deps, Options: opts}); err != nil {
		return err
	}
	_, err = s.propose(ctx, meta.CreateRelation{Kind: meta.RelationView, Name: name, IfNotExists: ct.IfNotExists, SQL: st.Text,
		Query: query, DependsOn: deps, Options: opts, Owner: s.who.Principal.String()})
	return err
}

// compiles refuses a view the dataflow cannot keep (views.Check), at
// CREATE, where the user sees why, rather than from every agent's
// runner afterwards.
func (s *session) compiles(rel meta.Relation) error {
	v := s.e.cfg.Store.View()
	defer v.Close()
	rels, err := v.Relations()
	if err != nil {
		return err
	}
	return views.Check(rel, rels)
}

func (s *session) createSink(ctx context.Context, st parse.Statement) error {
	vs := st.Node.GetViewStmt()
	name, ok := relationName(vs.View)
	switch {
	case !ok:
		return &pgwire.Error{Code: pgwire.CodeInvalidSchemaName, Message: fmt.Sprintf("schema %q does not exist", vs.View.Schemaname), Position: vs.View.Location + 1}
	case vs.Replace || len(vs.Aliases) > 0 || vs.WithCheckOption != pg.ViewCheckOption_NO_CHECK_OPTION && vs.WithCheckOption != pg.ViewCheckOption_VIEW_CHECK_OPTION_UNDEFINED:
		return pgwire.NotSupported("a sink takes WITH options and AS SELECT only")
	case vs.View.Relpersistence != "p":
		return pgwire.NotSupported("a sink is not temporary")
	}
	opts, err := options(vs.Options, sinkOptions)
	if err != nil {
		return err
	}
	lowerOptions(opts)
	deps, query, err := s.viewQuery(ctx, st, vs.Query)
	if err != nil {
		return err
	}
	v := s.e.cfg.Store.View()
	defer v.Close()
	topic, format, err := topicOptions(v, meta.RelationSink, opts, sinkFormats)
	if err != nil {
		return err
	}
	if err := s.mayCreate(meta.RelationSink, name); err != nil {
		return err
	}
	if err := s.require(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, topic, "topic "+topic); err != nil {
		return err
	}
	if err := s.compiles(meta.Relation{Kind: meta.RelationSink, Name: name, SQL: st.Text, Query: query, DependsOn: deps}); err != nil {
		return err
	}
	_, err = s.propose(ctx, meta.CreateRelation{Kind: meta.RelationSink, Name: name, SQL: st.Text, Options: opts,
		Topic: topic, Format: format, Query: query, DependsOn: deps, Owner: s.who.Principal.String()})
	return err
}

// kindOf is the catalog's kind of a statement's kind.
func kindOf(k parse.Kind) meta.RelationKind {
	switch k {
	case parse.KindSource:
		return meta.RelationSource
	case parse.KindSink:
		return meta.RelationSink
	}
	return meta.RelationView
}

func (s *session) prepareDrop(st parse.Statement) (pgwire.Statement, error) {
	ds := st.Node.GetDropStmt()
	kind := kindOf(st.Kind)
	tag := "DROP " + strings.ToUpper(kind.String())
	var names []string
	for _, o := range ds.Objects {
		var parts []string
		for _, p := range o.GetList().GetItems() {
			parts = append(parts, p.GetString_().GetSval())
		}
		switch {
		case len(parts) == 2 && parts[0] == "public":
			parts = parts[1:]
		case len(parts) != 1:
			return nil, pgwire.Errorf(pgwire.CodeInvalidSchemaName, "schema %q does not exist", strings.Join(parts[:len(parts)-1], "."))
		}
		names = append(names, parts[0])
	}
	return s.ddl(tag, func(ctx context.Context) error {
		if err := s.sync(ctx); err != nil {
			return err
		}
		v := s.e.cfg.Store.View()
		for _, name := range names {
			// Names that are not there, or of another kind, apply
			// refuses or skips itself.
			if _, ok, err := v.Relation(name); err != nil || !ok {
				if err != nil {
					v.Close()
					return err
				}
				continue
			}
			if err := s.require(kmsg.ACLOperationDelete, acl.ResourceTypeRelation, name, fmt.Sprintf("dropping %s %s", kind, name)); err != nil {
				v.Close()
				return err
			}
		}
		v.Close()
		_, err := s.propose(ctx, meta.DropRelation{Kind: kind, Names: names, IfExists: ds.MissingOk, Cascade: ds.Behavior == pg.DropBehavior_DROP_CASCADE})
		return err
	}), nil
}

// sync brings the local copy up to the log's end, so a statement checks
// against what other agents created or dropped before it.
func (s *session) sync(ctx context.Context) error {
	return s.e.cfg.Store.Sync(ctx)
}
