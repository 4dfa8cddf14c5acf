package jdbcsink

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/connect/avroconv"
)

// ClassName is the connector.class the Debezium JDBC sink is known by.
const ClassName = "io.debezium.connector.jdbc.JdbcSinkConnector"

// Configuration keys, as Debezium's JDBC sink names them.
const (
	keyURL             = "connection.url"
	keyUser            = "connection.username"
	keyPassword        = "connection.password"
	keyTopics          = "topics"
	keyTopicsRegex     = "topics.regex"
	keyInsertMode      = "insert.mode"
	keyPKMode          = "primary.key.mode"
	keyPKFields        = "primary.key.fields"
	keyDeleteEnabled   = "delete.enabled"
	keySchemaEvolution = "schema.evolution"
	keyTableNameFormat = "table.name.format"
	// keyCollectionNameFormat is Debezium 3's name for table.name.format.
	keyCollectionNameFormat = "collection.name.format"
	keyBatchSize            = "batch.size"
	keyAutoCreate           = "auto.create"
	keyQuoteIDs             = "quote.identifiers"
	keyTimeZone             = "database.time_zone"
)

// Bounds on batch.size: a batch is held in memory whole (records and
// the rows decoded from them) until its transaction commits.
const (
	defaultBatchSize = 500
	maxBatchSize     = 100_000
)

// InsertMode is insert.mode.
type InsertMode string

const (
	ModeInsert InsertMode = "insert"
	ModeUpsert InsertMode = "upsert"
	ModeUpdate InsertMode = "update"
)

// PKMode is primary.key.mode.
type PKMode string

const (
	PKNone        PKMode = "none"
	PKRecordKey   PKMode = "record_key"
	PKRecordValue PKMode = "record_value"
)

// Config is a sink's parsed configuration.
type Config struct {
	// Dialect is the target database: "postgresql" or "mysql"
	// (MariaDB included).
	Dialect  string
	Host     string
	Port     int
	Database string
	// Params are the JDBC URL's query parameters; PostgreSQL's sslmode
	// and currentSchema are used.
	Params   url.Values
	User     string
	Password string

	Topics      []string
	TopicsRegex *regexp.Regexp

	InsertMode     InsertMode
	PKMode         PKMode
	PKFields       []string
	DeleteEnabled  bool
	CreateTables   bool // schema.evolution=basic or auto.create=true
	AddColumns     bool // schema.evolution=basic
	TableFormat    string
	BatchSize      int
	QuoteIdentiers bool
	// KeyAvro and ValueAvro: the side's converter is the AvroConverter
	// (nil: the bytes are read as JSON, as before converters were
	// configurable).
	KeyAvro, ValueAvro *avroconv.Config
}

// Secret reports the keys whose values are secrets.
func Secret(key string) bool { return key == keyPassword || avroconv.Secret(key) }

// Validate checks a configuration without connecting anywhere. Unknown
// keys are ignored, as Kafka Connect does.
func Validate(config map[string]string) error {
	_, err := Parse(config)
	return err
}

// Parse reads a configuration, with Debezium's defaults for what it
// leaves out.
func Parse(config map[string]string) (*Config, error) {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	c := &Config{
		User:        config[keyUser],
		Password:    config[keyPassword],
		TableFormat: "${topic}",
		BatchSize:   defaultBatchSize,
		InsertMode:  ModeInsert,
		PKMode:      PKNone,
	}
	if u, ok := config[keyURL]; !ok || u == "" {
		bad(keyURL, "required")
	} else if err := c.parseURL(u); err != nil {
		bad(keyURL, "%v", err)
	}

	topics, regex := strings.TrimSpace(config[keyTopics]), config[keyTopicsRegex]
	switch {
	case topics != "" && regex != "":
		errs = append(errs, fmt.Errorf("%s and %s: set one, not both", keyTopics, keyTopicsRegex))
	case topics != "":
		for t := range strings.SplitSeq(topics, ",") {
			if t = strings.TrimSpace(t); t != "" {
				c.Topics = append(c.Topics, t)
			}
		}
	case regex != "":
		// Connect matches the whole topic name (Java's Matcher.matches).
		re, err := regexp.Compile("^(?:" + regex + ")$")
		if err != nil {
			bad(keyTopicsRegex, "%v", err)
		}
		c.TopicsRegex = re
	default:
		errs = append(errs, fmt.Errorf("%s or %s: one is required", keyTopics, keyTopicsRegex))
	}

	if v, ok := config[keyInsertMode]; ok {
		switch m := InsertMode(strings.ToLower(strings.TrimSpace(v))); m {
		case ModeInsert, ModeUpsert, ModeUpdate:
			c.InsertMode = m
		default:
			bad(keyInsertMode, "%q is not one of insert, upsert, update", v)
		}
	}
	if v, ok := config[keyPKMode]; ok {
		switch m := PKMode(strings.ToLower(strings.TrimSpace(v))); m {
		case PKNone, PKRecordKey, PKRecordValue:
			c.PKMode = m
		case "kafka":
			bad(keyPKMode, "kafka (the record's coordinates as the key) is not supported; use record_key or record_value")
		default:
			bad(keyPKMode, "%q is not one of none, record_key, record_value", v)
		}
	}
	for f := range strings.SplitSeq(config[keyPKFields], ",") {
		if f = strings.TrimSpace(f); f != "" {
			c.PKFields = append(c.PKFields, f)
		}
	}
	var err error
	if c.DeleteEnabled, err = parseBool(config, keyDeleteEnabled, false); err != nil {
		errs = append(errs, err)
	}
	autoCreate, err := parseBool(config, keyAutoCreate, false)
	if err != nil {
		errs = append(errs, err)
	}
	if c.QuoteIdentiers, err = parseBool(config, keyQuoteIDs, false); err != nil {
		errs = append(errs, err)
	}
	switch v := strings.ToLower(strings.TrimSpace(config[keySchemaEvolution])); v {
	case "", "none":
	case "basic":
		c.CreateTables, c.AddColumns = true, true
	default:
		bad(keySchemaEvolution, "%q is not one of none, basic", config[keySchemaEvolution])
	}
	c.CreateTables = c.CreateTables || autoCreate
	if v, ok := config[keyTimeZone]; ok && !strings.EqualFold(strings.TrimSpace(v), "UTC") {
		bad(keyTimeZone, "%q: only UTC (the default) is supported", v)
	}
	// Debezium 3 renamed table.name.format collection.name.format;
	// either is taken, the older winning when both are set.
	for _, key := range []string{keyCollectionNameFormat, keyTableNameFormat} {
		v, ok := config[key]
		if !ok {
			continue
		}
		switch {
		case strings.TrimSpace(v) == "":
			bad(key, "empty")
		case strings.Contains(strings.ReplaceAll(v, "${topic}", ""), "${"):
			bad(key, "%q: only the ${topic} placeholder is supported", v)
		}
		c.TableFormat = v
	}
	if v, ok := config[keyBatchSize]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > maxBatchSize {
			bad(keyBatchSize, "%q is not a whole number from 1 to %d", v, maxBatchSize)
		}
		c.BatchSize = n
	}

	for _, side := range []string{"key", "value"} {
		switch strings.TrimSpace(config[side+".converter"]) {
		case "org.apache.kafka.connect.storage.StringConverter", "org.apache.kafka.connect.converters.ByteArrayConverter":
			// Read as JSON, as the sink always read its records'
			// bytes: a string key of digits is a number.
			continue
		}
		ac, err := avroconv.Parse(config, side)
		if err != nil {
			errs = append(errs, err)
		}
		if side == "key" {
			c.KeyAvro = ac
		} else {
			c.ValueAvro = ac
		}
	}

	// What Debezium refuses too: a key is needed to upsert, update or
	// delete, and deletes find the key in the record's key.
	if c.PKMode == PKNone && c.InsertMode != ModeInsert {
		bad(keyInsertMode, "%s needs a primary key: set %s to record_key or record_value", c.InsertMode, keyPKMode)
	}
	if c.DeleteEnabled && c.PKMode != PKRecordKey {
		bad(keyDeleteEnabled, "true needs %s=record_key", keyPKMode)
	}
	if c.PKMode == PKRecordValue && len(c.PKFields) == 0 {
		bad(keyPKFields, "required with %s=record_value", keyPKMode)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

func parseBool(config map[string]string, key string, def bool) (bool, error) {
	v, ok := config[key]
	if !ok {
		return def, nil
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%s: %q is not true or false", key, v)
}

// parseURL reads a JDBC URL: jdbc:postgresql://host[:port]/db[?k=v],
// jdbc:mysql://... or jdbc:mariadb://....
func (c *Config) parseURL(s string) error {
	rest, ok := strings.CutPrefix(s, "jdbc:")
	if !ok {
		return fmt.Errorf("%q is not a JDBC URL (jdbc:postgresql://host:port/db, jdbc:mysql:// or jdbc:mariadb://)", s)
	}
	u, err := url.Parse(rest)
	if err != nil {
		return fmt.Errorf("%q: %v", s, err)
	}
	switch u.Scheme {
	case "postgresql":
		c.Dialect, c.Port = "postgresql", 5432
	case "mysql", "mariadb":
		c.Dialect, c.Port = "mysql", 3306
	default:
		return fmt.Errorf("%q: database %q is not supported (postgresql, mysql, mariadb)", s, u.Scheme)
	}
	c.Host = u.Hostname()
	if c.Host == "" {
		c.Host = "localhost"
	}
	if p := u.Port(); p != "" {
		if c.Port, err = strconv.Atoi(p); err != nil || c.Port < 1 || c.Port > 65535 {
			return fmt.Errorf("%q: bad port %q", s, p)
		}
	}
	c.Database = strings.TrimPrefix(u.Path, "/")
	if c.Database == "" {
		return fmt.Errorf("%q: no database named", s)
	}
	c.Params = u.Query()
	// JDBC URLs may carry the account as parameters; the connection.*
	// keys win.
	if c.User == "" {
		c.User = c.Params.Get("user")
	}
	if c.Password == "" {
		c.Password = c.Params.Get("password")
	}
	return nil
}

// TableName is the table a topic's records go to: table.name.format
// with ${topic} replaced by the topic, then every dot replaced by an
// underscore, as Debezium's default table naming strategy does
// (topic "srv.public.orders" goes to table "srv_public_orders").
// Without quote.identifiers, PostgreSQL folds the name to lower case,
// as it does an unquoted name.
func (c *Config) TableName(topic string) string {
	name := strings.ReplaceAll(strings.ReplaceAll(c.TableFormat, "${topic}", topic), ".", "_")
	return c.foldIdent(name)
}

func (c *Config) foldIdent(name string) string {
	if c.Dialect == "postgresql" && !c.QuoteIdentiers {
		return strings.ToLower(name)
	}
	return name
}

// Class is the connector class, its task's metrics counted in m (nil:
// none).
func Class(m *Metrics) connect.Class {
	return connect.Class{
		Name:     ClassName,
		Kind:     connect.KindSink,
		Validate: Validate,
		Secret:   Secret,
		New: func(config map[string]string) (connect.Task, error) {
			c, err := Parse(config)
			if err != nil {
				return nil, err
			}
			return &Task{cfg: c, metrics: m}, nil
		},
		Forget: m.Forget,
	}
}
