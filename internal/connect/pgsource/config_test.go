package pgsource

import (
	"strings"
	"testing"
)

func baseConfig() map[string]string {
	return map[string]string{
		"connector.class":   ClassName,
		"database.hostname": "db", "database.user": "u", "database.password": "secret",
		"database.dbname": "inventory", "topic.prefix": "dbserver1",
	}
}

// TestParseConfigDefaults: Debezium's defaults where a key is absent.
func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig(baseConfig())
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != 5432 || c.Slot != "debezium" || c.Publication != "dbz_publication" || c.PublicationMode != "all_tables" ||
		c.SnapshotMode != "initial" || !c.Tombstones || c.DecimalMode != "precise" || !c.KeySchemas || !c.ValueSchemas ||
		c.SSLMode != "prefer" || c.MaxBatchRecords != 2048 {
		t.Errorf("defaults: %+v", c)
	}
	if c.Topic("public", "customers") != "dbserver1.public.customers" {
		t.Errorf("topic %s", c.Topic("public", "customers"))
	}
	if !Secret("database.password") || Secret("database.user") {
		t.Error("Secret")
	}
}

// TestParseConfigRefuses: each bad value is refused, naming its key.
func TestParseConfigRefuses(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{"database.hostname", "", "database.hostname"},
		{"topic.prefix", "", "topic.prefix"},
		{"database.port", "x", "database.port"},
		{"plugin.name", "decoderbufs", "only pgoutput"},
		{"plugin.name", "wal2json", "only pgoutput"},
		{"snapshot.mode", "always", "snapshot.mode"},
		{"snapshot.mode", "when_needed", "snapshot.mode"},
		{"decimal.handling.mode", "float", "decimal.handling.mode"},
		{"publication.autocreate.mode", "sometimes", "publication.autocreate.mode"},
		{"publication.autocreate.mode", "filtered", "table.include.list"},
		{"slot.name", "Bad-Slot", "slot.name"},
		{"tombstones.on.delete", "maybe", "tombstones.on.delete"},
		{"value.converter", "io.confluent.connect.avro.AvroConverter", "value.converter"},
		{"table.include.list", "public.(", "table.include.list"},
		{"database.sslmode", "sometimes", "database.sslmode"},
	} {
		m := baseConfig()
		m[tc.key] = tc.value
		_, err := ParseConfig(m)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%q: %v, want an error naming %q", tc.key, tc.value, err, tc.want)
		}
	}
	m := baseConfig()
	m["table.include.list"], m["table.exclude.list"] = "public.a", "public.b"
	if _, err := ParseConfig(m); err == nil {
		t.Error("include and exclude lists together accepted")
	}
	// Debezium's earlier name for no_data.
	m = baseConfig()
	m["snapshot.mode"] = "schema_only"
	if c, err := ParseConfig(m); err != nil || c.SnapshotMode != SnapshotNoData {
		t.Errorf("schema_only: %v %v", c, err)
	}
}

// TestCaptured: the lists are regular expressions over the whole
// "schema.table", as Debezium's.
func TestCaptured(t *testing.T) {
	m := baseConfig()
	m["table.include.list"] = "public.cust.*, inv\\.orders"
	c, err := ParseConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"public.customers": true, "public.cust": true, "inv.orders": true,
		"inv.orders2": false, "xpublic.customers": false, "public.orders": false} {
		s, tb, _ := strings.Cut(name, ".")
		if got := c.Captured(s, tb); got != want {
			t.Errorf("%s: %v", name, got)
		}
	}
	m = baseConfig()
	m["table.exclude.list"] = "public\\.audit_.*"
	c, _ = ParseConfig(m)
	if c.Captured("public", "audit_log") || !c.Captured("public", "orders") {
		t.Error("exclude list")
	}
}
