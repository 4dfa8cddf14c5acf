package source

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Format is how a record's value is decoded.
type Format string

// The formats. Avro and Protobuf values are in the schema registry's
// wire format (a magic byte, the schema id, Protobuf's message indexes).
const (
	FormatJSON     Format = "json"
	FormatText     Format = "text"
	FormatBytes    Format = "bytes"
	FormatAvro     Format = "avro"
	FormatProtobuf Format = "protobuf"
)

// Envelope is how records make rows.
type Envelope string

const (
	// Append: every record is a row, inserted once.
	Append Envelope = "append"
	// Upsert: a record is the newest row of its key, replacing the
	// previous one; a null value (a tombstone) deletes the key's row.
	Upsert Envelope = "upsert"
)

// BadRecordPolicy is what happens to a record that does not decode.
type BadRecordPolicy string

const (
	// Drop counts the record and skips it.
	Drop BadRecordPolicy = "drop"
	// DeadLetter counts it and produces it to the dead-letter topic,
	// with headers saying why.
	DeadLetter BadRecordPolicy = "dead-letter"
)

// Startup is where a Reader without committed offsets starts.
type Startup string

const (
	Earliest Startup = "earliest"
	Latest   Startup = "latest"
)

// Options are the WITH options a source takes, as CREATE SOURCE accepts
// them (catalog), sorted. Each has at most one dot, which PostgreSQL's
// grammar reads unquoted in a WITH list (as toast.fillfactor); the
// dead-letter topic's name echoes Kafka Connect's deadletterqueue.
var Options = []string{
	"bad.records", "deadletter.topic", "envelope", "format",
	"scan.startup", "topic", "watermark.column", "watermark.delay",
}

// Metadata columns: the reserved names that hold a record's metadata.
const (
	ColKey       = "_key"
	ColPartition = "_partition"
	ColOffset    = "_offset"
	ColTimestamp = "_timestamp"
	ColHeaders   = "_headers"
)

// colKind is where a column's value comes from.
type colKind uint8

const (
	colPayload colKind = iota
	colKey
	colPartition
	colOffset
	colTimestamp
	colHeaders
)

var metaKinds = map[string]colKind{
	ColKey: colKey, ColPartition: colPartition, ColOffset: colOffset,
	ColTimestamp: colTimestamp, ColHeaders: colHeaders,
}

// Column is one column of a source.
type Column struct {
	Name string
	Type types.Type
	kind colKind
}

// Def is a source's definition as the engine reads it.
type Def struct {
	// ID and Name are the relation's.
	ID    uint64
	Name  string
	Topic string
	Format
	Envelope
	Columns    []Column
	BadRecords BadRecordPolicy
	// DeadLetterTopic is where DeadLetter produces bad records.
	DeadLetterTopic string
	// WatermarkColumn is the index of the event-time column, -1 for
	// none; WatermarkDelay the allowed lateness: a partition's watermark
	// is the greatest event time it has read minus the delay.
	WatermarkColumn int
	WatermarkDelay  time.Duration
	Startup
}

// maxWatermarkDelay bounds the allowed lateness: a window held open a
// year is state nobody meant to keep.
const maxWatermarkDelay = 366 * 24 * time.Hour

// DefOf reads a source's definition from its catalog relation, checking
// what the catalog checked when it was created and what only this
// package knows: the option values, the column types the engine
// computes with. Errors carry PostgreSQL's SQLSTATEs.
func DefOf(rel meta.Relation) (*Def, error) { return defOf(rel, true) }

// defOf is DefOf; without strictTypes a column of a type the engine
// does not compute with yet is read as text, for Check.
func defOf(rel meta.Relation, strictTypes bool) (*Def, error) {
	if rel.Kind != meta.RelationSource {
		return nil, sqlerr.Errorf(sqlerr.WrongObjectType, "%q is a %s, not a source", rel.Name, rel.Kind)
	}
	d := &Def{ID: rel.ID, Name: rel.Name, Topic: rel.Topic, Format: Format(strings.ToLower(rel.Format)),
		Envelope: Append, BadRecords: Drop, WatermarkColumn: -1, Startup: Earliest}
	if d.Topic == "" {
		return nil, sqlerr.Errorf(sqlerr.InvalidObjectDefinition, "source %q names no topic", rel.Name)
	}
	switch d.Format {
	case FormatJSON, FormatText, FormatBytes, FormatAvro, FormatProtobuf:
	default:
		return nil, sqlerr.Errorf(sqlerr.InvalidParameterValue, "unknown format %q", rel.Format)
	}
	for _, c := range rel.Columns {
		t, err := columnType(c)
		if err != nil && !strictTypes {
			t, err = types.Text, nil
		}
		if err != nil {
			return nil, err
		}
		d.Columns = append(d.Columns, Column{Name: c.Name, Type: t, kind: metaKinds[c.Name]})
	}
	for _, o := range rel.Options {
		if !slices.Contains(Options, o.Key) {
			return nil, &sqlerr.Error{Code: sqlerr.InvalidParameterValue, Message: fmt.Sprintf("unrecognized parameter %q", o.Key),
				Hint: "the options are " + strings.Join(Options, ", ")}
		}
	}
	if err := d.options(rel); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Def) options(rel meta.Relation) error {
	closed := func(key string, dst *string, values ...string) error {
		v, ok := rel.Option(key)
		if !ok {
			return nil
		}
		v = strings.ToLower(v)
		if !slices.Contains(values, v) {
			return &sqlerr.Error{Code: sqlerr.InvalidParameterValue, Message: fmt.Sprintf("invalid value for parameter %q: %q", key, v),
				Hint: "the values are " + strings.Join(values, ", ")}
		}
		*dst = v
		return nil
	}
	var env, bad, startup string
	if err := closed("envelope", &env, string(Append), string(Upsert)); err != nil {
		return err
	}
	if err := closed("bad.records", &bad, string(Drop), string(DeadLetter)); err != nil {
		return err
	}
	if err := closed("scan.startup", &startup, string(Earliest), string(Latest)); err != nil {
		return err
	}
	if env != "" {
		d.Envelope = Envelope(env)
	}
	if bad != "" {
		d.BadRecords = BadRecordPolicy(bad)
	}
	if startup != "" {
		d.Startup = Startup(startup)
	}
	dlt, hasDLT := rel.Option("deadletter.topic")
	switch {
	case d.BadRecords == DeadLetter && dlt == "":
		return sqlerr.Errorf(sqlerr.InvalidObjectDefinition, "bad.records = 'dead-letter' needs deadletter.topic")
	case hasDLT && d.BadRecords != DeadLetter:
		return sqlerr.Errorf(sqlerr.InvalidObjectDefinition, "deadletter.topic is used only with bad.records = 'dead-letter'")
	case dlt != "" && dlt == d.Topic:
		return sqlerr.Errorf(sqlerr.InvalidObjectDefinition, "the dead-letter topic cannot be the source's own topic")
	}
	d.DeadLetterTopic = dlt

	col, hasCol := rel.Option("watermark.column")
	delay, hasDelay := rel.Option("watermark.delay")
	if hasDelay && !hasCol {
		return sqlerr.Errorf(sqlerr.InvalidObjectDefinition, "watermark.delay needs watermark.column")
	}
	if hasCol {
		i := slices.IndexFunc(d.Columns, func(c Column) bool { return c.Name == col })
		switch {
		case i < 0:
			return sqlerr.Errorf(sqlerr.UndefinedColumn, "watermark.column %q is not a column of the source", col)
		case d.Columns[i].Type.OID != types.OIDTimestamp && d.Columns[i].Type.OID != types.OIDTimestampTZ:
			return sqlerr.Errorf(sqlerr.DatatypeMismatch, "watermark.column %q is %s: an event time is a timestamp or timestamptz", col, d.Columns[i].Type.Name())
		}
		d.WatermarkColumn = i
	}
	if hasDelay {
		iv, err := types.ParseInterval(delay)
		if err != nil {
			return err
		}
		if iv.Months != 0 {
			return sqlerr.Errorf(sqlerr.InvalidParameterValue, "watermark.delay %q: months and years have no fixed length; give days, hours, minutes or seconds", delay)
		}
		dur := time.Duration(iv.Days)*24*time.Hour + time.Duration(iv.Micros)*time.Microsecond
		if dur < 0 || dur > maxWatermarkDelay || iv.Days < 0 || iv.Micros < 0 {
			return sqlerr.Errorf(sqlerr.InvalidParameterValue, "watermark.delay %q must be between 0 and 366 days", delay)
		}
		d.WatermarkDelay = dur
	}
	return nil
}

// columnType is the engine's type of a catalog column. json is held as
// jsonb, as package types serves it.
func columnType(c meta.RelationColumn) (types.Type, error) {
	oid := c.Type
	if oid == 114 { // json
		oid = types.OIDJSONB
	}
	t, ok := types.ByOID(oid)
	if !ok || t.Category() == types.CatPseudo || oid == types.OIDUnknown {
		return types.Type{}, sqlerr.NotSupported("column %q: the SQL engine does not compute with type %d yet", c.Name, c.Type)
	}
	switch oid {
	case types.OIDVarchar, types.OIDNumeric:
		t.Mod = c.TypeMod
	}
	return t, nil
}

// Check checks a CREATE SOURCE's options as DefOf will read them, for
// the catalog to refuse at creation what a reader could not run. Column
// types the catalog accepts and the engine does not compute with yet
// (char, time, uuid) are DefOf's to refuse, when a reader starts.
func Check(name, topic, format string, cols []meta.RelationColumn, opts []meta.RelationOption) error {
	_, err := defOf(meta.Relation{Kind: meta.RelationSource, Name: name, Topic: topic, Format: format, Columns: cols, Options: opts}, false)
	return err
}

// payloadColumns are the indexes of the columns filled from the value.
func (d *Def) payloadColumns() []int {
	var out []int
	for i, c := range d.Columns {
		if c.kind == colPayload {
			out = append(out, i)
		}
	}
	return out
}

// Types are the columns' types, in order.
func (d *Def) Types() []types.Type {
	out := make([]types.Type, len(d.Columns))
	for i, c := range d.Columns {
		out[i] = c.Type
	}
	return out
}
