package jdbcsink

import (
	"math/big"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestValidate(t *testing.T) {
	base := func(kv ...string) map[string]string {
		c := map[string]string{"connection.url": "jdbc:postgresql://db:5433/shop", "topics": "a,b"}
		for i := 0; i+1 < len(kv); i += 2 {
			c[kv[i]] = kv[i+1]
		}
		return c
	}
	tests := []struct {
		name   string
		config map[string]string
		want   string // in the error; "" valid
	}{
		{"minimal", base(), ""},
		{"issue's config", base("insert.mode", "upsert", "primary.key.mode", "record_key", "delete.enabled", "true",
			"schema.evolution", "basic", "connection.username", "u", "connection.password", "p", "tasks.max", "1"), ""},
		{"unknown keys ignored", base("whatever.this.is", "x", "value.converter", "org.apache.kafka.connect.json.JsonConverter"), ""},
		{"mariadb", base("connection.url", "jdbc:mariadb://h/db"), ""},
		{"mysql", base("connection.url", "jdbc:mysql://h:3307/db?useSSL=false"), ""},
		{"regex", map[string]string{"connection.url": "jdbc:mysql://h/db", "topics.regex": `srv\.public\..*`}, ""},
		{"no url", map[string]string{"topics": "a"}, "connection.url: required"},
		{"not jdbc", base("connection.url", "postgres://h/db"), "not a JDBC URL"},
		{"oracle", base("connection.url", "jdbc:oracle:thin:@h:1521/db"), "not supported"},
		{"no database", base("connection.url", "jdbc:postgresql://h:5432/"), "no database"},
		{"bad port", base("connection.url", "jdbc:postgresql://h:99999/db"), "bad port"},
		{"no topics", map[string]string{"connection.url": "jdbc:mysql://h/db"}, "topics or topics.regex"},
		{"both topics", base("topics.regex", "a.*"), "not both"},
		{"bad regex", map[string]string{"connection.url": "jdbc:mysql://h/db", "topics.regex": "("}, "topics.regex"},
		{"insert mode", base("insert.mode", "merge"), `insert.mode: "merge"`},
		{"pk mode", base("primary.key.mode", "kafka"), "not supported"},
		{"pk mode typo", base("primary.key.mode", "recordkey"), `primary.key.mode: "recordkey"`},
		{"upsert without key", base("insert.mode", "upsert"), "needs a primary key"},
		{"delete without record_key", base("delete.enabled", "true"), "delete.enabled"},
		{"record_value without fields", base("primary.key.mode", "record_value"), "primary.key.fields"},
		{"bool", base("delete.enabled", "yes"), `"yes" is not true or false`},
		{"evolution", base("schema.evolution", "advanced"), "schema.evolution"},
		{"batch zero", base("batch.size", "0"), "batch.size"},
		{"batch huge", base("batch.size", "1000000000"), "batch.size"},
		{"table format empty", base("table.name.format", " "), "table.name.format"},
		{"table format placeholder", base("table.name.format", "${source.table}"), "only the ${topic} placeholder"},
		{"time zone", base("database.time_zone", "Europe/Paris"), "only UTC"},
		{"time zone utc", base("database.time_zone", "UTC"), ""},
		{"collection format", base("collection.name.format", "kafka_${topic}"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.config)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("valid, want an error with %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error %q does not say %q", err, tt.want)
			}
		})
	}
	if !Secret("connection.password") || Secret("connection.username") {
		t.Error("Secret: only connection.password is one")
	}
}

// TestTableName: Debezium's default naming: ${topic} substituted, dots
// to underscores; PostgreSQL folds unquoted names to lower case.
func TestTableName(t *testing.T) {
	tests := []struct {
		url, format, quote, topic, want string
	}{
		{"jdbc:postgresql://h/db", "", "", "srv.public.Orders", "srv_public_orders"},
		{"jdbc:postgresql://h/db", "", "true", "srv.public.Orders", "srv_public_Orders"},
		{"jdbc:mariadb://h/db", "", "", "srv.public.Orders", "srv_public_Orders"},
		{"jdbc:mariadb://h/db", "kafka_${topic}", "", "orders", "kafka_orders"},
		{"jdbc:mariadb://h/db", "archive.${topic}_v2", "", "a.b", "archive_a_b_v2"},
		{"jdbc:mariadb://h/db", "${topic}${topic}", "", "a", "aa"},
	}
	for _, tt := range tests {
		c := map[string]string{"connection.url": tt.url, "topics": tt.topic}
		if tt.format != "" {
			c["table.name.format"] = tt.format
		}
		if tt.quote != "" {
			c["quote.identifiers"] = tt.quote
		}
		cfg, err := Parse(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.TableName(tt.topic); got != tt.want {
			t.Errorf("%s %q %q: %q, want %q", tt.url, tt.format, tt.topic, got, tt.want)
		}
	}
}

// TestDecimal: Connect's Decimal bytes (two's complement, big endian)
// read back as the decimal they encode, over many values and scales.
func TestDecimal(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 127, 128, -128, -129, 255, 256, 1234, -100001, 1 << 40, -(1 << 40), 9223372036854775807, -9223372036854775808} {
		for _, scale := range []int{0, 1, 2, 5, 20} {
			got, err := convert(column{name: "d", kind: kDecimal, scale: scale}, decimalB64(v))
			if err != nil {
				t.Fatal(err)
			}
			want := new(big.Rat).SetFrac(big.NewInt(v), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
			gotRat, ok := new(big.Rat).SetString(got.(string))
			if !ok || gotRat.Cmp(want) != 0 {
				t.Errorf("%d scale %d: %q, want %s", v, scale, got, want.FloatString(scale))
			}
		}
	}
	// Variable scale, and decimal.handling.mode string and double.
	for in, want := range map[string]string{
		`{"scale": 3, "value": "` + decimalB64(-12345) + `"}`: "-12.345",
		`"12.5"`: "12.5",
		`12.5`:   "12.5",
	} {
		v, err := parseJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		got, err := convert(column{name: "d", kind: kDecimal, scale: 2}, v)
		if err != nil || got != want {
			t.Errorf("%s: %v %v, want %s", in, got, err, want)
		}
	}
}

// TestDecodeKeys: record keys as objects with and without schema,
// primitives named by primary.key.fields, and what is refused.
func TestDecodeKeys(t *testing.T) {
	dec := func(kv ...string) decoder {
		c := map[string]string{"connection.url": "jdbc:postgresql://h/db", "topics": "t", "primary.key.mode": "record_key", "delete.enabled": "true"}
		for i := 0; i+1 < len(kv); i += 2 {
			c[kv[i]] = kv[i+1]
		}
		cfg, err := Parse(c)
		if err != nil {
			t.Fatal(err)
		}
		return decoder{cfg: cfg}
	}
	tests := []struct {
		d        decoder
		key, val string
		want     string // key columns=values, or an error's text
	}{
		{dec(), `{"id": 7}`, `{"id": 7, "x": 1}`, "[id]=[7]"},
		{dec(), `{"b": "x", "a": 1}`, "", "[a b]=[1 x]"},
		{dec(), intKey(9), "", "[id]=[9]"},
		{dec("primary.key.fields", "a"), `{"b": "x", "a": 1}`, "", "[a]=[1]"},
		{dec("primary.key.fields", "ID"), `42`, "", "[id]=[42]"},
		{dec(), `42`, "", "name its column"},
		{dec(), ``, `{"a": 1}`, "no record key"},
		{dec(), `{"id": null}`, "", "is null"},
		{dec("primary.key.fields", "zz"), `{"id": 1}`, "", `no "zz"`},
	}
	for _, tt := range tests {
		r := &kgo.Record{Topic: "t"}
		if tt.key != "" {
			r.Key = []byte(tt.key)
		}
		if tt.val != "" {
			r.Value = []byte(tt.val)
		}
		ch, err := tt.d.decode(r)
		var got string
		if err != nil {
			got = err.Error()
		} else {
			var names []string
			for _, c := range ch.keyCols {
				names = append(names, c.name)
			}
			got = "[" + strings.Join(names, " ") + "]=" + strings.ReplaceAll(strings.Trim(strings.ReplaceAll(ch.keyString(), `"`, ""), "[]"), ",", " ")
			got = got[:strings.Index(got, "=")+1] + "[" + got[strings.Index(got, "=")+1:] + "]"
		}
		if !strings.Contains(got, tt.want) {
			t.Errorf("key %s value %s: %s, want %s", tt.key, tt.val, got, tt.want)
		}
	}
}

// FuzzDecode: any key and value decode to a change or an error, never
// a panic, under each key mode.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(intKey(1)), []byte(envelope(itemFields, "c", nil, map[string]any{"id": 1, "price": decimalB64(5), "born": 3})))
	f.Add([]byte(`{"id": 1}`), []byte(`{"id": 1, "a": [1, {"b": null}], "c": 1.5e300}`))
	f.Add([]byte(`7`), []byte(nil))
	f.Add([]byte(`{"schema":{"type":"int64"},"payload":7}`), []byte(`{"schema":{"type":"struct","fields":[{"field":"d","type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"99999999"}}]},"payload":{"d":"AQ=="}}`))
	var decs []decoder
	for _, kv := range [][]string{
		{"primary.key.mode", "record_key", "delete.enabled", "true", "primary.key.fields", "id"},
		{"primary.key.mode", "record_key", "delete.enabled", "true"},
		{"primary.key.mode", "record_value", "primary.key.fields", "id"},
		{},
	} {
		c := map[string]string{"connection.url": "jdbc:mariadb://h/db", "topics": "t"}
		for i := 0; i+1 < len(kv); i += 2 {
			c[kv[i]] = kv[i+1]
		}
		cfg, err := Parse(c)
		if err != nil {
			f.Fatal(err)
		}
		decs = append(decs, decoder{cfg: cfg})
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		for _, d := range decs {
			ch, err := d.decode(&kgo.Record{Topic: "t", Key: key, Value: value})
			if err != nil {
				continue
			}
			// What decodes is consistent: a row's values match its
			// columns, a key's its key columns.
			if len(ch.cols) != len(ch.vals) || len(ch.keyCols) != len(ch.key) || (ch.delete && ch.cols != nil) {
				t.Fatalf("inconsistent change %+v", ch)
			}
		}
	})
}
