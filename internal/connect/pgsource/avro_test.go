package pgsource_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/connect/avroconv"
	"github.com/strandkafka/strand/internal/connect/jdbcsink"
	"github.com/strandkafka/strand/internal/connect/pgsource"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/schemareg"
	"github.com/strandkafka/strand/internal/schemareg/avroschema"
	"github.com/strandkafka/strand/internal/sql/sinks/sinktest"
)

// registry serves Strand's schema registry over an in-process metadata
// store, behind basic auth as user:pass; it returns the URL and a
// client of it.
func registry(t *testing.T) (string, *sr.Client) {
	t.Helper()
	db := metatest.New(nil)
	db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel6}}})
	reg := schemareg.New(db, avroschema.Format{})
	h := schemareg.Handler(reg, func(*http.Request, schemareg.Op, string) error { return nil })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "pass" {
			http.Error(w, `{"error_code":401,"message":"Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cl, err := sr.NewClient(sr.URLs(srv.URL), sr.BasicAuth("user", "pass"))
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL, cl
}

// TestAvro: with Confluent's AvroConverter on both sides, the source
// registers the key's and the envelope's schemas under the topic's
// subjects, as AvroData maps Debezium's Connect schemas, and writes
// records in Confluent's wire format that decode with the registered
// schema to the row's values; a column added registers a second
// version of the value's subject, and the records after it use it. A
// delete's required columns the old tuple lacks carry their fallback
// (name=""), as Debezium writes them.
func TestAvro(t *testing.T) {
	regURL, cl := registry(t)
	f := newFixture(t, "avro")
	f.config["key.converter"] = avroconv.AvroClass
	f.config["value.converter"] = avroconv.AvroClass
	f.config["schema.registry.url"] = regURL // the converter-less form, for the key
	f.config["value.converter.schema.registry.url"] = regURL
	for _, side := range []string{"key", "value"} {
		f.config[side+".converter.basic.auth.credentials.source"] = "USER_INFO"
		f.config[side+".converter.basic.auth.user.info"] = "user:pass"
	}
	f.exec(`CREATE TABLE t (id int PRIMARY KEY, name text NOT NULL, small int2, price numeric(10,2), at timestamp, blob bytea)`,
		`INSERT INTO t VALUES (1, 'one', -3, 12.30, '2024-05-01 10:00:00.123456', '\xdeadbeef')`)
	r := f.start()
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	f.sync(r)
	f.exec(`INSERT INTO t VALUES (2, 'two', NULL, -0.01, NULL, NULL)`,
		`ALTER TABLE t ADD COLUMN extra text`,
		`INSERT INTO t VALUES (3, 'three', 7, 99999999.99, NULL, NULL, 'x')`,
		`DELETE FROM t WHERE id = 3`)
	f.waitConfirmed(r, f.currentLSN())

	ctx := context.Background()
	topic := f.prefix + ".public.t"
	subjects, err := cl.Subjects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(subjects, topic+"-key") || !slices.Contains(subjects, topic+"-value") {
		t.Fatalf("subjects %v: want %s-key and %s-value", subjects, topic, topic)
	}
	if vs, err := cl.SubjectVersions(ctx, topic+"-value"); err != nil || !slices.Equal(vs, []int{1, 2}) {
		t.Fatalf("value versions %v, %v: want [1 2] (a second after the column was added)", vs, err)
	}
	if vs, err := cl.SubjectVersions(ctx, topic+"-key"); err != nil || !slices.Equal(vs, []int{1}) {
		t.Fatalf("key versions %v, %v: want [1]", vs, err)
	}

	// The first value schema, as AvroData writes Debezium's envelope.
	v1, err := cl.SchemaByVersion(ctx, topic+"-value", 1)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal([]byte(v1.Schema.Schema), &env); err != nil {
		t.Fatal(err)
	}
	if env["type"] != "record" || env["name"] != "Envelope" || env["namespace"] != topic || env["connect.name"] != topic+".Envelope" {
		t.Errorf("envelope: %v %v %v %v", env["type"], env["name"], env["namespace"], env["connect.name"])
	}
	fields := map[string]map[string]any{}
	for _, fd := range env["fields"].([]any) {
		m := fd.(map[string]any)
		fields[m["name"].(string)] = m
	}
	before := fields["before"]
	if u, ok := before["type"].([]any); !ok || len(u) != 2 || u[0] != "null" || !has(before, "default") || before["default"] != nil {
		t.Fatalf("before: %v, want a union with null first, default null", before)
	}
	value := before["type"].([]any)[1].(map[string]any)
	if value["name"] != "Value" || value["connect.name"] != topic+".Value" {
		t.Errorf("before's record: %v", value)
	}
	if after := fields["after"]["type"].([]any); after[0] != "null" || after[1] != topic+".Value" {
		t.Errorf("after: %v, want a union of null and a reference to %s.Value", after, topic)
	}
	if fields["op"]["type"] != "string" {
		t.Errorf("op: %v", fields["op"])
	}
	if src := fields["source"]["type"].(map[string]any); src["name"] != "Source" || src["namespace"] != "io.debezium.connector.postgresql" {
		t.Errorf("source: %v", src)
	}
	cols := map[string]string{}
	for _, fd := range value["fields"].([]any) {
		m := fd.(map[string]any)
		b, _ := json.Marshal(m["type"])
		cols[m["name"].(string)] = string(b)
	}
	for col, want := range map[string]string{
		"id":    `"int"`,
		"name":  `"string"`,
		"small": `["null",{"connect.type":"int16","type":"int"}]`,
		"price": `["null",{"connect.name":"org.apache.kafka.connect.data.Decimal","connect.parameters":{"connect.decimal.precision":"10","scale":"2"},"connect.version":1,"logicalType":"decimal","precision":10,"scale":2,"type":"bytes"}]`,
		"at":    `["null",{"connect.name":"io.debezium.time.MicroTimestamp","connect.version":1,"type":"long"}]`,
		"blob":  `["null","bytes"]`,
	} {
		if cols[col] != want {
			t.Errorf("column %s: %s\nwant %s", col, cols[col], want)
		}
	}

	// The records: each in the wire format, decoded with the schema its
	// id names.
	recs, err := sinktest.ReadCommitted(ctx, f.kafka(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rec := range recs {
		key := decodeWire(t, cl, rec.Key)
		if rec.Value == nil {
			got = append(got, fmt.Sprintf("tombstone %v", key))
			continue
		}
		val := decodeWire(t, cl, rec.Value).(map[string]any)
		row := val["after"]
		if row == nil {
			row = val["before"]
		}
		// A union's record branch decodes keyed by its name.
		row = row.(map[string]any)[topic+".Value"]
		got = append(got, fmt.Sprintf("%s %v %s", val["op"], key, fmtRow(row.(map[string]any))))
	}
	want := []string{
		"r map[id:1] at=1714557600123456 blob=deadbeef id=1 name=one price=12.30 small=-3",
		"c map[id:2] at=<nil> blob=<nil> id=2 name=two price=-0.01 small=<nil>",
		"c map[id:3] at=<nil> blob=<nil> extra=x id=3 name=three price=99999999.99 small=7",
		"d map[id:3] at=<nil> blob=<nil> extra=<nil> id=3 name= price=<nil> small=<nil>",
		"tombstone map[id:3]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// decodeWire decodes a record key or value in Confluent's wire format
// with the registered schema it names.
func decodeWire(t *testing.T, cl *sr.Client, b []byte) any {
	t.Helper()
	var h sr.ConfluentHeader
	id, body, err := h.DecodeID(b)
	if err != nil {
		t.Fatalf("%x: %v", b, err)
	}
	s, err := cl.SchemaByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	as, err := avro.ParseWithCache(s.Schema, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := avro.Unmarshal(as, body, &v); err != nil {
		t.Fatalf("schema %d: %v\n%s\n%x", id, err, s.Schema, body)
	}
	return v
}

func fmtRow(row map[string]any) string {
	var parts []string
	for k, v := range row {
		switch x := v.(type) {
		case *big.Rat:
			v = x.FloatString(2)
		case []byte:
			v = fmt.Sprintf("%x", x)
		}
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

func has(m map[string]any, k string) bool { _, ok := m[k]; return ok }

// TestAvroConfig: what the AvroConverter's configuration refuses, and
// that the registry's credentials are a secret.
func TestAvroConfig(t *testing.T) {
	base := func() map[string]string {
		return map[string]string{"database.hostname": "h", "database.user": "u", "database.dbname": "d", "topic.prefix": "p"}
	}
	for _, tc := range []struct {
		name string
		set  map[string]string
		want string // "" valid
	}{
		{"avro", map[string]string{"value.converter": avroconv.AvroClass, "value.converter.schema.registry.url": "http://r:8081"}, ""},
		{"bare url", map[string]string{"value.converter": avroconv.AvroClass, "schema.registry.url": "http://r:8081"}, ""},
		{"no url", map[string]string{"value.converter": avroconv.AvroClass}, "schema.registry.url"},
		{"protobuf", map[string]string{"value.converter": "io.confluent.connect.protobuf.ProtobufConverter"}, "Protobuf is not served"},
		{"json schema", map[string]string{"key.converter": "io.confluent.connect.json.JsonSchemaConverter"}, "JSON Schema is not served"},
		{"strategy", map[string]string{"value.converter": avroconv.AvroClass, "schema.registry.url": "http://r:8081",
			"value.converter.value.subject.name.strategy": "io.confluent.kafka.serializers.subject.RecordNameStrategy"}, "only io.confluent.kafka.serializers.subject.TopicNameStrategy"},
		{"user info without source", map[string]string{"value.converter": avroconv.AvroClass, "schema.registry.url": "http://r:8081",
			"value.converter.basic.auth.user.info": "a:b"}, "credentials.source=USER_INFO"},
		{"sasl inherit", map[string]string{"value.converter": avroconv.AvroClass, "schema.registry.url": "http://r:8081",
			"value.converter.basic.auth.credentials.source": "SASL_INHERIT"}, "SASL_INHERIT is not served"},
		{"password in url", map[string]string{"value.converter": avroconv.AvroClass, "schema.registry.url": "http://u:p@r:8081"}, "credentials in the URL"},
		{"url source", map[string]string{"value.converter": avroconv.AvroClass, "schema.registry.url": "http://r:8081",
			"value.converter.basic.auth.credentials.source": "URL"}, "USER_INFO only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			for k, v := range tc.set {
				m[k] = v
			}
			_, err := pgsource.ParseConfig(m)
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
	for _, k := range []string{"key.converter.basic.auth.user.info", "value.converter.basic.auth.user.info", "basic.auth.user.info"} {
		if !pgsource.Secret(k) {
			t.Errorf("%s is not a secret", k)
		}
	}
}

// TestAvroRoundTrip: a table captured with the AvroConverter and sunk
// by the JDBC sink, reading Avro, into another database of the same
// server: the target table equals the source's after inserts, updates,
// deletes and a column added half-way. The registry is the agent's,
// both connectors calling it as a SCRAM user (basic auth).
func TestAvroRoundTrip(t *testing.T) {
	f := newFixture(t, "avrort")
	adm, err := kgo.NewClient(f.kafka()...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := kadm.NewClient(adm).AlterUserSCRAMs(context.Background(), nil, []kadm.UpsertSCRAM{
		{User: "avro-rt", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "avro-pw"}})
	adm.Close()
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	regURL := "http://" + shared.agent.RegistryAddr()
	// Wrong credentials are refused: the registry does check them.
	bad, _ := sr.NewClient(sr.URLs(regURL), sr.BasicAuth("avro-rt", "wrong"))
	if _, err := bad.Subjects(context.Background()); err == nil {
		t.Fatal("the agent's registry took a wrong password")
	}
	avroCfg := map[string]string{
		"key.converter": avroconv.AvroClass, "value.converter": avroconv.AvroClass, "schema.registry.url": regURL,
		"basic.auth.credentials.source": "USER_INFO", "basic.auth.user.info": "avro-rt:avro-pw",
	}
	for k, v := range avroCfg {
		f.config[k] = v
	}
	f.exec(`CREATE TABLE t (id int PRIMARY KEY, name text NOT NULL, small int2, price numeric(10,2), at timestamp, blob bytea)`,
		`INSERT INTO t VALUES (1, 'one', -3, 12.30, '2024-05-01 10:00:00.123456', '\xdeadbeef'), (2, 'two', 2, -0.01, NULL, NULL)`)
	r := f.start()
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	f.sync(r)
	f.exec(`INSERT INTO t VALUES (3, 'three', NULL, 99999999.99, '1999-12-31 23:59:59', '\x00')`,
		`UPDATE t SET name = 'uno', price = -1000.01 WHERE id = 1`,
		`DELETE FROM t WHERE id = 2`,
		`ALTER TABLE t ADD COLUMN extra text`,
		`INSERT INTO t VALUES (4, 'four', 4, 0, NULL, NULL, 'x')`,
		`UPDATE t SET extra = 'y' WHERE id = 3`)
	f.waitConfirmed(r, f.currentLSN())
	topic := f.prefix + ".public.t"
	// The sink's offset is after the last record (the end offset is
	// past the transaction's commit marker).
	recs, err := sinktest.ReadCommitted(context.Background(), f.kafka(), topic)
	if err != nil || len(recs) == 0 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	end := recs[len(recs)-1].Offset + 1

	// The target: a database of its own on the same server.
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	f.exec("CREATE DATABASE db_avrort_target")
	u, _ := url.Parse(f.dbURL)
	u.Path = "/db_avrort_target"
	target, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close(context.Background())
	sinkCfg := map[string]string{
		"connector.class": jdbcsink.ClassName, "connection.url": "jdbc:postgresql://" + u.Host + "/db_avrort_target?sslmode=disable",
		"connection.username": u.User.Username(), "topics": topic, "insert.mode": "upsert", "primary.key.mode": "record_key",
		"delete.enabled": "true", "schema.evolution": "basic",
	}
	for k, v := range avroCfg {
		sinkCfg[k] = v
	}
	cls := jdbcsink.Class(nil)
	if err := cls.Validate(sinkCfg); err != nil {
		t.Fatal(err)
	}
	task, err := cls.New(sinkCfg)
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- task.Run(sctx, connect.Env{Name: "avrort-sink", Kafka: f.kafka, Dir: t.TempDir(), Clock: clock.OrReal(nil),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Running: func() {}})
	}()
	defer func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}()
	// Caught up: the sink's offset (kept with its rows) is the topic's end.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var next int64
		err := target.QueryRow(ctx, `SELECT next_offset FROM strand_connect_offsets WHERE connector = 'avrort-sink' AND topic = $1`, topic).Scan(&next)
		if err == nil && next == end {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the sink ended: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sink is at %d (%v), not %d, after 60s", next, err, end)
		}
	}
	rows := func(c *pgx.Conn, table string) []string {
		rs, err := c.Query(ctx, `SELECT concat_ws('|', id, name, small, price, at, encode(blob, 'hex'), extra) FROM `+table+` ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rs, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	src, dst := rows(f.conn, "t"), rows(target, strings.ReplaceAll(topic, ".", "_"))
	if !slices.Equal(src, dst) || len(src) != 3 {
		t.Errorf("target\n%s\nsource\n%s", strings.Join(dst, "\n"), strings.Join(src, "\n"))
	}
}
