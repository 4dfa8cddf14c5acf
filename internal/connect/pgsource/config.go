package pgsource

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/strandkafka/strand/internal/connect"
	"github.com/strandkafka/strand/internal/connect/avroconv"
)

// ClassName is the connector.class this package serves.
const ClassName = "io.debezium.connector.postgresql.PostgresConnector"

// Debezium's configuration names, as Debezium spells them.
const (
	cfgHost              = "database.hostname"
	cfgPort              = "database.port"
	cfgUser              = "database.user"
	cfgPassword          = "database.password"
	cfgDBName            = "database.dbname"
	cfgSSLMode           = "database.sslmode"
	cfgTopicPrefix       = "topic.prefix"
	cfgTableInclude      = "table.include.list"
	cfgTableExclude      = "table.exclude.list"
	cfgSlotName          = "slot.name"
	cfgPublicationName   = "publication.name"
	cfgPublicationMode   = "publication.autocreate.mode"
	cfgPluginName        = "plugin.name"
	cfgSnapshotMode      = "snapshot.mode"
	cfgTombstones        = "tombstones.on.delete"
	cfgDecimalMode       = "decimal.handling.mode"
	cfgKeySchemas        = "key.converter.schemas.enable"
	cfgValueSchemas      = "value.converter.schemas.enable"
	cfgMaxBatchSize      = "max.batch.size"
	cfgPollInterval      = "poll.interval.ms"
	cfgMaxQueueSize      = "max.queue.size"
	cfgStatusInterval    = "status.update.interval.ms"
	cfgTopicPartitions   = "topic.creation.default.partitions"
	defaultSlotName      = "debezium"
	defaultPublication   = "dbz_publication"
	defaultMaxBatchSize  = 2048
	defaultPollInterval  = 500 * time.Millisecond
	defaultMaxQueueSize  = 8192
	defaultStatusUpdates = 10 * time.Second
)

// Snapshot modes served. Debezium's others (always, initial_only,
// when_needed, custom, configuration_based, recovery) are refused by
// Validate rather than run as something they are not.
const (
	SnapshotInitial = "initial"
	SnapshotNever   = "never"
	SnapshotNoData  = "no_data"
)

// Config is a validated connector configuration.
type Config struct {
	Host, User, Password, DBName, SSLMode string
	Port                                  int
	TopicPrefix                           string
	Include, Exclude                      []*regexp.Regexp
	Slot, Publication, PublicationMode    string
	SnapshotMode                          string
	Tombstones                            bool
	DecimalMode                           string // precise | string | double
	KeySchemas, ValueSchemas              bool
	// KeyAvro and ValueAvro: the side's converter is the AvroConverter
	// (nil: the JsonConverter).
	KeyAvro, ValueAvro *avroconv.Config
	// MaxBatchRecords and PollInterval bound a Kafka transaction: it
	// commits at the first PostgreSQL commit once it holds this many
	// records or has been open this long.
	MaxBatchRecords int
	PollInterval    time.Duration
	// MaxQueue bounds the decoded changes read ahead of the producer.
	MaxQueue int
	// StatusInterval is how often the confirmed LSN is sent to the
	// server even when nothing changed (the server's keepalives are
	// answered at once anyway).
	StatusInterval  time.Duration
	TopicPartitions int32
}

// identRe is what Debezium accepts in a slot name: PostgreSQL's
// replication slot names are lower-case letters, digits and
// underscores. The same check keeps the publication name safe to
// quote.
var (
	slotRe = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)
	pubRe  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)
)

// ParseConfig validates a connector configuration without connecting
// anywhere.
func ParseConfig(m map[string]string) (*Config, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	get := func(k, def string) string {
		if v, ok := m[k]; ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
		return def
	}
	c := &Config{
		Host: get(cfgHost, ""), User: get(cfgUser, ""), Password: m[cfgPassword], DBName: get(cfgDBName, ""),
		SSLMode: get(cfgSSLMode, "prefer"), TopicPrefix: get(cfgTopicPrefix, ""),
		Slot: get(cfgSlotName, defaultSlotName), Publication: get(cfgPublicationName, defaultPublication),
		PublicationMode: get(cfgPublicationMode, "all_tables"), SnapshotMode: get(cfgSnapshotMode, SnapshotInitial),
		DecimalMode: get(cfgDecimalMode, "precise"),
	}
	for _, k := range []string{cfgHost, cfgUser, cfgDBName, cfgTopicPrefix} {
		if get(k, "") == "" {
			bad("Missing required configuration %q", k)
		}
	}
	port, err := strconv.Atoi(get(cfgPort, "5432"))
	if err != nil || port <= 0 || port > 65535 {
		bad("Invalid value %q for configuration %s: a TCP port", m[cfgPort], cfgPort)
	}
	c.Port = port
	switch c.SSLMode {
	case "disable", "allow", "prefer", "require", "verify-ca", "verify-full":
	default:
		bad("Invalid value %q for configuration %s: one of disable, allow, prefer, require, verify-ca, verify-full", c.SSLMode, cfgSSLMode)
	}
	if c.TopicPrefix != "" && !regexp.MustCompile(`^[A-Za-z0-9._-]+$`).MatchString(c.TopicPrefix) {
		bad("Invalid value %q for configuration %s: letters, digits, '.', '_' and '-' only", c.TopicPrefix, cfgTopicPrefix)
	}
	if p := get(cfgPluginName, "pgoutput"); p != "pgoutput" {
		bad("Invalid value %q for configuration %s: only pgoutput is served (decoderbufs and wal2json are not)", p, cfgPluginName)
	}
	if !slotRe.MatchString(c.Slot) {
		bad("Invalid value %q for configuration %s: lower-case letters, digits and underscores, at most 63", c.Slot, cfgSlotName)
	}
	if !pubRe.MatchString(c.Publication) {
		bad("Invalid value %q for configuration %s: a plain identifier", c.Publication, cfgPublicationName)
	}
	switch c.PublicationMode {
	case "all_tables", "filtered", "disabled":
	default:
		bad("Invalid value %q for configuration %s: one of all_tables, filtered, disabled", c.PublicationMode, cfgPublicationMode)
	}
	switch c.SnapshotMode {
	case SnapshotInitial, SnapshotNever, SnapshotNoData:
	case "schema_only": // Debezium's earlier name for no_data
		c.SnapshotMode = SnapshotNoData
	default:
		bad("Invalid value %q for configuration %s: Strand serves initial, never and no_data", c.SnapshotMode, cfgSnapshotMode)
	}
	switch c.DecimalMode {
	case "precise", "string", "double":
	default:
		bad("Invalid value %q for configuration %s: one of precise, string, double", c.DecimalMode, cfgDecimalMode)
	}
	boolOf := func(k string, def bool) bool {
		v := get(k, strconv.FormatBool(def))
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad("Invalid value %q for configuration %s: true or false", v, k)
		}
		return b
	}
	c.Tombstones = boolOf(cfgTombstones, true)
	c.KeySchemas = boolOf(cfgKeySchemas, true)
	c.ValueSchemas = boolOf(cfgValueSchemas, true)
	var err1 error
	if c.KeyAvro, err1 = avroconv.Parse(m, "key"); err1 != nil {
		errs = append(errs, err1)
	}
	if c.ValueAvro, err1 = avroconv.Parse(m, "value"); err1 != nil {
		errs = append(errs, err1)
	}
	// The AvroConverter is fed the JsonConverter's output with its
	// schema: that schema is what becomes the Avro schema.
	if c.KeyAvro != nil {
		c.KeySchemas = true
	}
	if c.ValueAvro != nil {
		c.ValueSchemas = true
	}
	intOf := func(k string, def, lo, hi int) int {
		v := get(k, strconv.Itoa(def))
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			bad("Invalid value %q for configuration %s: an integer in [%d, %d]", v, k, lo, hi)
		}
		return n
	}
	c.MaxBatchRecords = intOf(cfgMaxBatchSize, defaultMaxBatchSize, 1, 1_000_000)
	c.PollInterval = time.Duration(intOf(cfgPollInterval, int(defaultPollInterval/time.Millisecond), 1, 600_000)) * time.Millisecond
	c.MaxQueue = intOf(cfgMaxQueueSize, defaultMaxQueueSize, 1, 1_000_000)
	c.StatusInterval = time.Duration(intOf(cfgStatusInterval, int(defaultStatusUpdates/time.Millisecond), 100, 600_000)) * time.Millisecond
	c.TopicPartitions = int32(intOf(cfgTopicPartitions, 1, 1, 10_000))
	if _, ok := m[cfgTableInclude]; ok {
		if _, ok := m[cfgTableExclude]; ok {
			bad("Configurations %s and %s cannot both be set", cfgTableInclude, cfgTableExclude)
		}
	}
	var err2 error
	if c.Include, err2 = regexList(get(cfgTableInclude, "")); err2 != nil {
		bad("Invalid value for configuration %s: %v", cfgTableInclude, err2)
	}
	if c.Exclude, err2 = regexList(get(cfgTableExclude, "")); err2 != nil {
		bad("Invalid value for configuration %s: %v", cfgTableExclude, err2)
	}
	if c.PublicationMode == "filtered" && len(c.Include) == 0 {
		// Filtered publications list tables; Strand builds that list
		// from table.include.list only.
		bad("Configuration %s=filtered needs %s", cfgPublicationMode, cfgTableInclude)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// regexList parses Debezium's comma-separated regular expressions,
// each matched against the whole "schema.table" name.
func regexList(s string) ([]*regexp.Regexp, error) {
	if s == "" {
		return nil, nil
	}
	var out []*regexp.Regexp
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		re, err := regexp.Compile("^(?:" + p + ")$")
		if err != nil {
			return nil, err
		}
		out = append(out, re)
	}
	return out, nil
}

// Captured reports whether the table schema.table is captured: it
// matches table.include.list (when set) and not table.exclude.list.
func (c *Config) Captured(schema, table string) bool {
	name := schema + "." + table
	if len(c.Include) > 0 {
		for _, re := range c.Include {
			if re.MatchString(name) {
				return true
			}
		}
		return false
	}
	for _, re := range c.Exclude {
		if re.MatchString(name) {
			return false
		}
	}
	return true
}

// Topic is the topic of table schema.table.
func (c *Config) Topic(schema, table string) string {
	return c.TopicPrefix + "." + schema + "." + table
}

// Secret reports whether key holds a secret.
func Secret(key string) bool { return key == cfgPassword || avroconv.Secret(key) }

// Class is the connector class, reporting to m (nil: metrics kept but
// not registered anywhere).
func Class(m *Metrics) connect.Class {
	if m == nil {
		m = NewMetrics()
	}
	return connect.Class{
		Name:   ClassName,
		Kind:   connect.KindSource,
		Secret: Secret,
		Validate: func(config map[string]string) error {
			_, err := ParseConfig(config)
			return err
		},
		New: func(config map[string]string) (connect.Task, error) {
			c, err := ParseConfig(config)
			if err != nil {
				return nil, err
			}
			return &Task{cfg: c, metrics: m}, nil
		},
		Forget: m.Forget,
	}
}
