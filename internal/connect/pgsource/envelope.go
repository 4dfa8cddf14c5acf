package pgsource

import (
	"context"
	"strconv"

	"github.com/strandkafka/strand/internal/connect/avroconv"
)

// SourceVersion is source.version in every event: Debezium puts its
// own release there; Strand says it wrote the event.
const SourceVersion = "strand"

// table is one captured table as the stream (or the snapshot) last
// described it, with its key and value schemas rendered once.
type table struct {
	schema, name string
	topic        string
	cols         []column
	// key are the primary key's columns (indexes into cols); none: the
	// records have a null key, as Debezium's for a table without one.
	key []int
	// fullIdentity: REPLICA IDENTITY FULL, so an update's and a
	// delete's old tuple is the whole row.
	fullIdentity bool
	keySchema    []byte // {"type":"struct",...,"name":"<topic>.Key"}
	envSchema    []byte // the envelope's schema
}

// newTable renders t's schemas from its columns and key.
func newTable(schema, name, topic string, cols []column, key []int, full bool) *table {
	t := &table{schema: schema, name: name, topic: topic, cols: cols, key: key, fullIdentity: full}
	if len(key) > 0 {
		b := []byte(`{"type":"struct","fields":[`)
		for i, k := range key {
			if i > 0 {
				b = append(b, ',')
			}
			kc := cols[k]
			kc.optional = false
			b = appendFieldSchema(b, &kc)
		}
		b = append(b, `],"optional":false,"name":`...)
		b = appendString(b, topic+".Key")
		t.keySchema = append(b, '}')
	}
	value := func(b []byte, field string) []byte {
		b = append(b, `{"type":"struct","fields":[`...)
		for i := range cols {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendFieldSchema(b, &cols[i])
		}
		b = append(b, `],"optional":true,"name":`...)
		b = appendString(b, topic+".Value")
		b = append(b, `,"field":"`...)
		b = append(b, field...)
		return append(b, `"}`...)
	}
	b := []byte(`{"type":"struct","fields":[`)
	b = value(b, "before")
	b = append(b, ',')
	b = value(b, "after")
	b = append(b, `,{"type":"struct","fields":[`+
		`{"type":"string","optional":false,"field":"version"},`+
		`{"type":"string","optional":false,"field":"connector"},`+
		`{"type":"string","optional":false,"field":"name"},`+
		`{"type":"int64","optional":false,"field":"ts_ms"},`+
		`{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,last,false,incremental"},"default":"false","field":"snapshot"},`+
		`{"type":"string","optional":false,"field":"db"},`+
		`{"type":"string","optional":true,"field":"sequence"},`+
		`{"type":"int64","optional":true,"field":"ts_us"},`+
		`{"type":"int64","optional":true,"field":"ts_ns"},`+
		`{"type":"string","optional":false,"field":"schema"},`+
		`{"type":"string","optional":false,"field":"table"},`+
		`{"type":"int64","optional":true,"field":"txId"},`+
		`{"type":"int64","optional":true,"field":"lsn"},`+
		`{"type":"int64","optional":true,"field":"xmin"}],`+
		`"optional":false,"name":"io.debezium.connector.postgresql.Source","field":"source"},`+
		`{"type":"struct","fields":[`+
		`{"type":"string","optional":false,"field":"id"},`+
		`{"type":"int64","optional":false,"field":"total_order"},`+
		`{"type":"int64","optional":false,"field":"data_collection_order"}],`+
		`"optional":true,"name":"event.block","version":1,"field":"transaction"},`+
		`{"type":"string","optional":false,"field":"op"},`+
		`{"type":"int64","optional":true,"field":"ts_ms"},`+
		`{"type":"int64","optional":true,"field":"ts_us"},`+
		`{"type":"int64","optional":true,"field":"ts_ns"}],`+
		`"optional":false,"name":`...)
	b = appendString(b, topic+".Envelope")
	t.envSchema = append(b, `,"version":2}`...)
	return t
}

// tuple is one row image: per column its text value, nil for NULL;
// toast marks unchanged TOASTed values pgoutput did not send.
type tuple struct {
	vals  [][]byte
	toast []bool
}

// event is one change to encode.
type event struct {
	op            byte // 'c', 'u', 'd', 'r'
	before, after *tuple
	// source fields
	snapshot   string // "true", "last", "false"
	tsMicros   int64  // commit time (the snapshot's start for "r")
	txID       uint32
	lsn        uint64
	lastCommit uint64 // the previous transaction's commit LSN, for sequence
}

// encoder renders events as Kafka records' keys and values.
type encoder struct {
	prefix, db               string
	keySchemas, valueSchemas bool
	// keyAvro, valueAvro: the AvroConverters (nil: JSON as rendered).
	keyAvro, valueAvro *avroconv.Converter
}

// key renders the record key of tp in the configured converter's form.
func (e *encoder) key(ctx context.Context, t *table, tp *tuple) ([]byte, error) {
	if e.keyAvro == nil {
		return e.keyJSON(t, tp)
	}
	// The payload alone, and the schema as rendered once for the table.
	payload, err := e.bare().keyJSON(t, tp)
	if err != nil || payload == nil {
		return nil, err
	}
	return e.keyAvro.FromConnectParts(ctx, t.topic, t.keySchema, payload)
}

// bare is e writing payloads without their schema.
func (e *encoder) bare() *encoder {
	c := *e
	c.keySchemas, c.valueSchemas = false, false
	return &c
}

// value renders ev's envelope in the configured converter's form.
func (e *encoder) value(ctx context.Context, t *table, ev *event, nowMicros int64) ([]byte, error) {
	if e.valueAvro == nil {
		return e.valueJSON(t, ev, nowMicros)
	}
	payload, err := e.bare().valueJSON(t, ev, nowMicros)
	if err != nil {
		return nil, err
	}
	return e.valueAvro.FromConnectParts(ctx, t.topic, t.envSchema, payload)
}

// appendRow appends tp as a JSON object of t's columns.
func (t *table) appendRow(b []byte, tp *tuple) ([]byte, error) {
	b = append(b, '{')
	for i := range t.cols {
		c := &t.cols[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, c.name)
		b = append(b, ':')
		switch {
		case i >= len(tp.vals):
			// A column added after this tuple was written.
			b = append(b, "null"...)
		case tp.toast != nil && tp.toast[i]:
			b = appendUnavailable(b, c)
		case tp.vals[i] == nil:
			b = append(b, "null"...)
		default:
			var err error
			if b, err = appendValue(b, c, tp.vals[i]); err != nil {
				return b, err
			}
		}
	}
	return append(b, '}'), nil
}

// keyJSON renders the record key of tp (the after image, or the before
// image of a delete), nil for a table without a primary key.
func (e *encoder) keyJSON(t *table, tp *tuple) ([]byte, error) {
	if len(t.key) == 0 {
		return nil, nil
	}
	var b []byte
	if e.keySchemas {
		b = append(b, `{"schema":`...)
		b = append(b, t.keySchema...)
		b = append(b, `,"payload":`...)
	}
	b = append(b, '{')
	for i, k := range t.key {
		if i > 0 {
			b = append(b, ',')
		}
		c := &t.cols[k]
		b = appendString(b, c.name)
		b = append(b, ':')
		if k >= len(tp.vals) || tp.vals[k] == nil {
			b = append(b, "null"...)
			continue
		}
		var err error
		if b, err = appendValue(b, c, tp.vals[k]); err != nil {
			return nil, err
		}
	}
	b = append(b, '}')
	if e.keySchemas {
		b = append(b, '}')
	}
	return b, nil
}

// valueJSON renders ev's envelope as JSON; nowMicros is the envelope's ts_ms (when
// Strand processed it).
func (e *encoder) valueJSON(t *table, ev *event, nowMicros int64) ([]byte, error) {
	b := make([]byte, 0, 256+len(t.envSchema))
	if e.valueSchemas {
		b = append(b, `{"schema":`...)
		b = append(b, t.envSchema...)
		b = append(b, `,"payload":`...)
	}
	b = append(b, `{"before":`...)
	var err error
	if ev.before != nil {
		if b, err = t.appendRow(b, ev.before); err != nil {
			return nil, err
		}
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"after":`...)
	if ev.after != nil {
		if b, err = t.appendRow(b, ev.after); err != nil {
			return nil, err
		}
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"source":{"version":"`+SourceVersion+`","connector":"postgresql","name":`...)
	b = appendString(b, e.prefix)
	b = append(b, `,"ts_ms":`...)
	b = strconv.AppendInt(b, floorDiv(ev.tsMicros, 1000), 10)
	b = append(b, `,"snapshot":"`...)
	b = append(b, ev.snapshot...)
	b = append(b, `","db":`...)
	b = appendString(b, e.db)
	b = append(b, `,"sequence":`...)
	seq := `[null,"` + strconv.FormatUint(ev.lsn, 10) + `"]`
	if ev.lastCommit != 0 {
		seq = `["` + strconv.FormatUint(ev.lastCommit, 10) + `","` + strconv.FormatUint(ev.lsn, 10) + `"]`
	}
	b = appendString(b, seq)
	b = append(b, `,"ts_us":`...)
	b = strconv.AppendInt(b, ev.tsMicros, 10)
	b = append(b, `,"ts_ns":`...)
	b = strconv.AppendInt(b, ev.tsMicros*1000, 10)
	b = append(b, `,"schema":`...)
	b = appendString(b, t.schema)
	b = append(b, `,"table":`...)
	b = appendString(b, t.name)
	b = append(b, `,"txId":`...)
	if ev.txID != 0 {
		b = strconv.AppendUint(b, uint64(ev.txID), 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"lsn":`...)
	b = strconv.AppendUint(b, ev.lsn, 10)
	b = append(b, `,"xmin":null},"transaction":null,"op":"`...)
	b = append(b, ev.op)
	b = append(b, `","ts_ms":`...)
	b = strconv.AppendInt(b, floorDiv(nowMicros, 1000), 10)
	b = append(b, `,"ts_us":`...)
	b = strconv.AppendInt(b, nowMicros, 10)
	b = append(b, `,"ts_ns":`...)
	b = strconv.AppendInt(b, nowMicros*1000, 10)
	b = append(b, '}')
	if e.valueSchemas {
		b = append(b, '}')
	}
	return b, nil
}
