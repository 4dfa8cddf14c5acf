// Package topicconfig owns the schema of the topic configs Strand accepts:
// their names, types, defaults and validation, following Kafka's topic-level
// configs (LogConfig), and the typed view (Config) that the produce, fetch
// and retention paths read.
//
// A topic's configs are stored in the metadata database as the strings the
// user gave, only the ones set on the topic, as Kafka stores them. Admin
// requests validate every value before proposing it (Validate, ValidateAll);
// readers turn the stored map into typed values with Effective, which falls
// back to the default for anything missing.
//
// Unknown names are rejected (ErrUnknown), as Kafka rejects them. A few
// Kafka configs are accepted and stored though Strand does not act on them
// (for example segment.bytes, flush.ms, preallocate, min.insync.replicas):
// tools set them routinely and failing those requests would help no one.
// Configs Kafka removed in 4.0 (message.format.version,
// message.downconversion.enable, message.timestamp.difference.max.ms) are
// unknown here.
//
// Four configs are Confluent Server's, not Apache Kafka's: schema
// validation on produce (confluent.key.schema.validation,
// confluent.value.schema.validation) and the subject each record's
// schema id must be registered under
// (confluent.key.subject.name.strategy,
// confluent.value.subject.name.strategy), taking Confluent's strategy
// class names.
package topicconfig

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Sentinel errors; Validate wraps them with the name and the reason.
var (
	// ErrUnknown: no topic config has this name.
	ErrUnknown = errors.New("topicconfig: unknown topic config")
	// ErrInvalid: the value does not parse as the config's type or is out
	// of its range or set of allowed values.
	ErrInvalid = errors.New("topicconfig: invalid value")
)

// Type is a config's data type. The values are Kafka's DescribeConfigs
// ConfigType codes, so a handler can send them as they are.
type Type int8

// Types used by topic configs.
const (
	TypeBoolean Type = 1
	TypeString  Type = 2
	TypeInt     Type = 3
	TypeLong    Type = 5
	TypeDouble  Type = 6
	TypeList    Type = 7
)

// TimestampType is message.timestamp.type. The values are the timestamp
// type bit of a record batch's attributes.
type TimestampType int8

const (
	CreateTime    TimestampType = 0
	LogAppendTime TimestampType = 1
)

func (t TimestampType) String() string {
	if t == LogAppendTime {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// CleanupPolicy is cleanup.policy: delete (retention by time and size),
// compact (keep the newest value per key), or both. At least one is set.
type CleanupPolicy struct {
	Delete  bool
	Compact bool
}

// Config is a topic's effective configuration: the topic's own values over
// the defaults. Fields are the configs some part of Strand acts on
// (produce, fetch, retention, and key compaction in package cleaner); the
// others are only stored.
type Config struct {
	CleanupPolicy CleanupPolicy
	// CompressionType is compression.type: "producer" keeps the
	// producer's codec; anything else asks for recompression.
	CompressionType string
	// DeleteRetentionMs is delete.retention.ms: how long compaction keeps
	// tombstones.
	DeleteRetentionMs int64
	// MaxCompactionLagMs and MinCompactionLagMs bound how long a record
	// stays uncompacted.
	MaxCompactionLagMs int64
	MinCompactionLagMs int64
	// MaxMessageBytes is max.message.bytes: the largest record batch a
	// producer may send to the topic.
	MaxMessageBytes int32
	// MessageTimestampType is message.timestamp.type.
	MessageTimestampType TimestampType
	// MessageTimestampBeforeMaxMs and MessageTimestampAfterMaxMs bound how
	// far a CreateTime timestamp may be behind or ahead of the broker's
	// clock.
	MessageTimestampBeforeMaxMs int64
	MessageTimestampAfterMaxMs  int64
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio.
	MinCleanableDirtyRatio float64
	// MinInsyncReplicas is min.insync.replicas. Storage is shared, so it
	// constrains nothing; it is reported back as stored.
	MinInsyncReplicas int32
	// RetentionBytes is retention.bytes per partition; -1 is no limit.
	RetentionBytes int64
	// RetentionMs is retention.ms; -1 is no limit.
	RetentionMs int64
	// SegmentBytes and SegmentMs are segment.bytes and segment.ms: the
	// granularity of retention and cleaning in Kafka. Strand has no
	// segments to roll: retention goes by index entry, and the cleaner's
	// "active segment" is a partition's newest flush.
	SegmentBytes int32
	SegmentMs    int64
	// KeySchemaValidation and ValueSchemaValidation are Confluent's
	// confluent.key.schema.validation and
	// confluent.value.schema.validation: produce refuses a batch whose
	// keys (values) are not in the schema registry's wire format with a
	// schema id registered under the subject the strategy names.
	KeySchemaValidation   bool
	ValueSchemaValidation bool
	// KeySubjectNameStrategy and ValueSubjectNameStrategy are
	// confluent.key.subject.name.strategy and
	// confluent.value.subject.name.strategy.
	KeySubjectNameStrategy   SubjectNameStrategy
	ValueSubjectNameStrategy SubjectNameStrategy
}

// SubjectNameStrategy is how a record's subject in the schema registry
// is named (Confluent's SubjectNameStrategy classes).
type SubjectNameStrategy int8

const (
	// TopicNameStrategy: <topic>-key or <topic>-value.
	TopicNameStrategy SubjectNameStrategy = iota
	// RecordNameStrategy: the record's fully-qualified name.
	RecordNameStrategy
	// TopicRecordNameStrategy: <topic>-<fully-qualified name>.
	TopicRecordNameStrategy
)

// subjectStrategyPackage is where Confluent's strategy classes live;
// the configs take their full class names.
const subjectStrategyPackage = "io.confluent.kafka.serializers.subject."

var strategyNames = [...]string{
	TopicNameStrategy:       "TopicNameStrategy",
	RecordNameStrategy:      "RecordNameStrategy",
	TopicRecordNameStrategy: "TopicRecordNameStrategy",
}

// String is the strategy's class name without its package.
func (s SubjectNameStrategy) String() string {
	if int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return fmt.Sprintf("SubjectNameStrategy(%d)", s)
}

// ClassName is the strategy's Confluent class name, the config's value.
func (s SubjectNameStrategy) ClassName() string { return subjectStrategyPackage + s.String() }

func parseStrategy(v string) SubjectNameStrategy {
	for s, name := range strategyNames {
		if v == subjectStrategyPackage+name {
			return SubjectNameStrategy(s)
		}
	}
	return TopicNameStrategy
}

// checkStrategy accepts Confluent's three strategy class names. A class
// of one's own, which Confluent Server would load, cannot be run here.
func checkStrategy(v string) error {
	for _, name := range strategyNames {
		if v == subjectStrategyPackage+name {
			return nil
		}
	}
	return fmt.Errorf("not a subject name strategy Strand knows: one of %s%s, %s%s or %s%s",
		subjectStrategyPackage, strategyNames[0], subjectStrategyPackage, strategyNames[1], subjectStrategyPackage, strategyNames[2])
}

func parseBool(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }

// Key describes one topic config.
type Key struct {
	Name string
	Type Type
	// Default is the value when the topic does not set it, as Kafka
	// prints it.
	Default string
	// BrokerSynonym is the broker config that supplies the default in
	// Kafka (log.retention.ms for retention.ms), reported as the
	// default's synonym; empty if there is none.
	BrokerSynonym string
	// Doc is a one-line description.
	Doc string

	// check validates a value of the right type beyond parsing: ranges
	// and allowed values. Nil means any value of the type.
	check func(v string) error
	// set stores a valid value into c; nil for configs Config does not
	// carry.
	set func(c *Config, v string)
}

// Validate reports whether v is a valid value for k, wrapping ErrInvalid.
func (k Key) Validate(v string) error {
	if err := parseCheck(k.Type, v); err != nil {
		return fmt.Errorf("%w: %s=%q: %v", ErrInvalid, k.Name, v, err)
	}
	if k.check != nil {
		if err := k.check(v); err != nil {
			return fmt.Errorf("%w: %s=%q: %v", ErrInvalid, k.Name, v, err)
		}
	}
	return nil
}

// Lookup returns the config named name.
func Lookup(name string) (Key, bool) {
	i, ok := slices.BinarySearchFunc(keys, name, func(k Key, n string) int { return strings.Compare(k.Name, n) })
	if !ok {
		return Key{}, false
	}
	return keys[i], true
}

// Keys returns every topic config sorted by name. The caller owns the
// slice.
func Keys() []Key { return slices.Clone(keys) }

// Validate checks one config, wrapping ErrUnknown or ErrInvalid.
func Validate(name, value string) error {
	k, ok := Lookup(name)
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknown, name)
	}
	return k.Validate(value)
}

// ValidateAll checks every config of m and returns the first error in name
// order, so the same map always gets the same answer.
func ValidateAll(m map[string]string) error {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := Validate(n, m[n]); err != nil {
			return err
		}
	}
	return nil
}

// ValidateCombination checks what no single value shows, as Kafka's
// LogConfig.validateValues does over a topic's configs with the defaults
// filled in: min.compaction.lag.ms may not exceed max.compaction.lag.ms.
// m holds the topic's configs after the change, each already valid; the
// error wraps ErrInvalid with Kafka's message.
func ValidateCombination(m map[string]string) error {
	c := Effective(m)
	if c.MinCompactionLagMs > c.MaxCompactionLagMs {
		return fmt.Errorf("%w: conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)",
			ErrInvalid, c.MinCompactionLagMs, c.MaxCompactionLagMs)
	}
	return nil
}

// Value returns the value of name in m, or its default and false when m
// does not set it. Unknown names return "", false.
func Value(m map[string]string, name string) (string, bool) {
	if v, ok := m[name]; ok {
		return v, true
	}
	k, _ := Lookup(name)
	return k.Default, false
}

// Defaults is the Config of a topic that sets nothing.
func Defaults() Config { return defaults }

// Effective returns the configuration of a topic whose configs are m: m's
// values over the defaults. A stored value that does not validate (written
// by some other build, or straight into the metadata database) is ignored
// in favour of the default, so readers never fail on configs.
func Effective(m map[string]string) Config {
	c := defaults
	for name, v := range m {
		k, ok := Lookup(name)
		if !ok || k.set == nil || k.Validate(v) != nil {
			continue
		}
		// Each key sets its own field, so map order does not matter.
		k.set(&c, v)
	}
	return c
}

// SplitList splits a list value the way Kafka does: items are separated by
// commas, surrounding spaces dropped; an empty or blank value is an empty
// list.
func SplitList(v string) []string {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	items := strings.Split(v, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return items
}

// AppendList is IncrementalAlterConfigs' APPEND: the items of add that cur
// does not hold yet, appended to cur.
func AppendList(cur, add string) string {
	items := SplitList(cur)
	for _, it := range SplitList(add) {
		if !slices.Contains(items, it) {
			items = append(items, it)
		}
	}
	return strings.Join(items, ",")
}

// SubtractList is IncrementalAlterConfigs' SUBTRACT: cur without the items
// of remove.
func SubtractList(cur, remove string) string {
	drop := SplitList(remove)
	items := slices.DeleteFunc(SplitList(cur), func(it string) bool { return slices.Contains(drop, it) })
	return strings.Join(items, ",")
}

// parseCheck checks that v parses as t, as Java's ConfigDef parses it
// (numbers and booleans are trimmed first).
func parseCheck(t Type, v string) error {
	s := strings.TrimSpace(v)
	var err error
	switch t {
	case TypeBoolean:
		if !strings.EqualFold(s, "true") && !strings.EqualFold(s, "false") {
			err = errors.New("not a boolean")
		}
	case TypeInt:
		_, err = strconv.ParseInt(s, 10, 32)
	case TypeLong:
		_, err = strconv.ParseInt(s, 10, 64)
	case TypeDouble:
		var f float64
		f, err = strconv.ParseFloat(s, 64)
		if err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
			err = errors.New("not a finite number")
		}
	}
	if ne, ok := errors.AsType[*strconv.NumError](err); ok {
		err = ne.Err
	}
	return err
}

// Parsers for values that passed parseCheck.

func parseInt(v string) int32 {
	n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	return int32(n)
}

func parseLong(v string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return n
}

func parseDouble(v string) float64 {
	f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
	return f
}

// Checks.

func atLeast(lo int64) func(string) error {
	return func(v string) error {
		if n := parseLong(v); n < lo {
			return fmt.Errorf("below the minimum %d", lo)
		}
		return nil
	}
}

func between(lo, hi int64) func(string) error {
	return func(v string) error {
		if n := parseLong(v); n < lo || n > hi {
			return fmt.Errorf("not in [%d, %d]", lo, hi)
		}
		return nil
	}
}

func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		if !slices.Contains(allowed, v) {
			return fmt.Errorf("not one of %s", strings.Join(allowed, ", "))
		}
		return nil
	}
}

func checkCleanupPolicy(v string) error {
	items := SplitList(v)
	if len(items) == 0 {
		return errors.New("needs delete, compact or both")
	}
	for _, it := range items {
		if it != "delete" && it != "compact" {
			return fmt.Errorf("%q is not delete or compact", it)
		}
	}
	return nil
}

func checkGzipLevel(v string) error {
	if n := parseLong(v); n != -1 && (n < 1 || n > 9) {
		return errors.New("not -1 or in [1, 9]")
	}
	return nil
}

// checkThrottledReplicas accepts "*" or a list of partition:broker pairs.
func checkThrottledReplicas(v string) error {
	items := SplitList(v)
	if len(items) == 1 && items[0] == "*" {
		return nil
	}
	for _, it := range items {
		p, b, ok := strings.Cut(it, ":")
		if !ok {
			return fmt.Errorf("%q is not partition:broker", it)
		}
		if _, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32); err != nil {
			return fmt.Errorf("%q is not partition:broker", it)
		}
		if _, err := strconv.ParseInt(strings.TrimSpace(b), 10, 32); err != nil {
			return fmt.Errorf("%q is not partition:broker", it)
		}
	}
	return nil
}

func checkRatio(v string) error {
	if f := parseDouble(v); f < 0 || f > 1 {
		return errors.New("not in [0, 1]")
	}
	return nil
}

const maxLong = "9223372036854775807"

// keys is the schema, sorted by name (Lookup searches it). Defaults and
// ranges are Kafka 3.9's.
var keys = []Key{
	{
		Name: "cleanup.policy", Type: TypeList, Default: "delete", BrokerSynonym: "log.cleanup.policy",
		Doc:   "delete (retention by time and size), compact (newest value per key), or both.",
		check: checkCleanupPolicy,
		set: func(c *Config, v string) {
			c.CleanupPolicy = CleanupPolicy{}
			for _, it := range SplitList(v) {
				c.CleanupPolicy.Delete = c.CleanupPolicy.Delete || it == "delete"
				c.CleanupPolicy.Compact = c.CleanupPolicy.Compact || it == "compact"
			}
		},
	},
	{
		Name: "compression.gzip.level", Type: TypeInt, Default: "-1", BrokerSynonym: "compression.gzip.level",
		Doc:   "Level used when compression.type is gzip.",
		check: checkGzipLevel,
	},
	{
		Name: "compression.lz4.level", Type: TypeInt, Default: "9", BrokerSynonym: "compression.lz4.level",
		Doc:   "Level used when compression.type is lz4.",
		check: between(1, 17),
	},
	{
		Name: "compression.type", Type: TypeString, Default: "producer", BrokerSynonym: "compression.type",
		Doc:   "Codec of stored batches; producer keeps the producer's.",
		check: oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
		set:   func(c *Config, v string) { c.CompressionType = v },
	},
	{
		Name: "compression.zstd.level", Type: TypeInt, Default: "3", BrokerSynonym: "compression.zstd.level",
		Doc:   "Level used when compression.type is zstd.",
		check: between(-131072, 22),
	},
	{
		Name: "confluent.key.schema.validation", Type: TypeBoolean, Default: "false",
		Doc: "Refuse produced records whose key does not carry a schema id registered under the key's subject, or does not decode with it.",
		set: func(c *Config, v string) { c.KeySchemaValidation = parseBool(v) },
	},
	{
		Name: "confluent.key.subject.name.strategy", Type: TypeString, Default: TopicNameStrategy.ClassName(),
		Doc:   "How the subject of a key's schema is named when confluent.key.schema.validation is on.",
		check: checkStrategy,
		set:   func(c *Config, v string) { c.KeySubjectNameStrategy = parseStrategy(v) },
	},
	{
		Name: "confluent.value.schema.validation", Type: TypeBoolean, Default: "false",
		Doc: "Refuse produced records whose value does not carry a schema id registered under the value's subject, or does not decode with it.",
		set: func(c *Config, v string) { c.ValueSchemaValidation = parseBool(v) },
	},
	{
		Name: "confluent.value.subject.name.strategy", Type: TypeString, Default: TopicNameStrategy.ClassName(),
		Doc:   "How the subject of a value's schema is named when confluent.value.schema.validation is on.",
		check: checkStrategy,
		set:   func(c *Config, v string) { c.ValueSubjectNameStrategy = parseStrategy(v) },
	},
	{
		Name: "delete.retention.ms", Type: TypeLong, Default: "86400000", BrokerSynonym: "log.cleaner.delete.retention.ms",
		Doc:   "How long compaction keeps tombstones.",
		check: atLeast(0),
		set:   func(c *Config, v string) { c.DeleteRetentionMs = parseLong(v) },
	},
	{
		Name: "file.delete.delay.ms", Type: TypeLong, Default: "60000", BrokerSynonym: "log.segment.delete.delay.ms",
		Doc:   "Stored only: unreferenced objects are deleted after the store's own grace period.",
		check: atLeast(0),
	},
	{
		Name: "flush.messages", Type: TypeLong, Default: maxLong, BrokerSynonym: "log.flush.interval.messages",
		Doc:   "Stored only: data is durable in the object store before it is acknowledged.",
		check: atLeast(1),
	},
	{
		Name: "flush.ms", Type: TypeLong, Default: maxLong, BrokerSynonym: "log.flush.interval.ms",
		Doc:   "Stored only: data is durable in the object store before it is acknowledged.",
		check: atLeast(0),
	},
	{
		Name: "follower.replication.throttled.replicas", Type: TypeList, Default: "",
		Doc:   "Stored only: there is no follower replication.",
		check: checkThrottledReplicas,
	},
	{
		Name: "index.interval.bytes", Type: TypeInt, Default: "4096", BrokerSynonym: "log.index.interval.bytes",
		Doc:   "Stored only: the offset index has one entry per committed batch.",
		check: atLeast(0),
	},
	{
		Name: "leader.replication.throttled.replicas", Type: TypeList, Default: "",
		Doc:   "Stored only: there is no follower replication.",
		check: checkThrottledReplicas,
	},
	{
		Name: "local.retention.bytes", Type: TypeLong, Default: "-2", BrokerSynonym: "log.local.retention.bytes",
		Doc:   "Stored only: all data is in the object store.",
		check: atLeast(-2),
	},
	{
		Name: "local.retention.ms", Type: TypeLong, Default: "-2", BrokerSynonym: "log.local.retention.ms",
		Doc:   "Stored only: all data is in the object store.",
		check: atLeast(-2),
	},
	{
		Name: "max.compaction.lag.ms", Type: TypeLong, Default: maxLong, BrokerSynonym: "log.cleaner.max.compaction.lag.ms",
		Doc:   "Longest time a record stays uncompacted.",
		check: atLeast(1),
		set:   func(c *Config, v string) { c.MaxCompactionLagMs = parseLong(v) },
	},
	{
		Name: "max.message.bytes", Type: TypeInt, Default: "1048588", BrokerSynonym: "message.max.bytes",
		Doc:   "Largest record batch a producer may send.",
		check: atLeast(0),
		set:   func(c *Config, v string) { c.MaxMessageBytes = parseInt(v) },
	},
	{
		Name: "message.timestamp.after.max.ms", Type: TypeLong, Default: maxLong, BrokerSynonym: "log.message.timestamp.after.max.ms",
		Doc:   "How far a CreateTime timestamp may be ahead of the broker's clock.",
		check: atLeast(0),
		set:   func(c *Config, v string) { c.MessageTimestampAfterMaxMs = parseLong(v) },
	},
	{
		Name: "message.timestamp.before.max.ms", Type: TypeLong, Default: maxLong, BrokerSynonym: "log.message.timestamp.before.max.ms",
		Doc:   "How far a CreateTime timestamp may be behind the broker's clock.",
		check: atLeast(0),
		set:   func(c *Config, v string) { c.MessageTimestampBeforeMaxMs = parseLong(v) },
	},
	{
		Name: "message.timestamp.type", Type: TypeString, Default: "CreateTime", BrokerSynonym: "log.message.timestamp.type",
		Doc:   "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's.",
		check: oneOf("CreateTime", "LogAppendTime"),
		set: func(c *Config, v string) {
			c.MessageTimestampType = CreateTime
			if v == "LogAppendTime" {
				c.MessageTimestampType = LogAppendTime
			}
		},
	},
	{
		Name: "min.cleanable.dirty.ratio", Type: TypeDouble, Default: "0.5", BrokerSynonym: "log.cleaner.min.cleanable.ratio",
		Doc:   "Share of uncompacted data that makes a partition worth compacting.",
		check: checkRatio,
		set:   func(c *Config, v string) { c.MinCleanableDirtyRatio = parseDouble(v) },
	},
	{
		Name: "min.compaction.lag.ms", Type: TypeLong, Default: "0", BrokerSynonym: "log.cleaner.min.compaction.lag.ms",
		Doc:   "Shortest time a record stays uncompacted.",
		check: atLeast(0),
		set:   func(c *Config, v string) { c.MinCompactionLagMs = parseLong(v) },
	},
	{
		Name: "min.insync.replicas", Type: TypeInt, Default: "1", BrokerSynonym: "min.insync.replicas",
		Doc:   "Stored only: storage is shared, acknowledged data is durable in the object store.",
		check: atLeast(1),
		set:   func(c *Config, v string) { c.MinInsyncReplicas = parseInt(v) },
	},
	{
		Name: "preallocate", Type: TypeBoolean, Default: "false", BrokerSynonym: "log.preallocate",
		Doc: "Stored only: there are no local segment files.",
	},
	{
		Name: "remote.storage.enable", Type: TypeBoolean, Default: "false",
		Doc: "Stored only: all data is in the object store.",
	},
	{
		Name: "retention.bytes", Type: TypeLong, Default: "-1", BrokerSynonym: "log.retention.bytes",
		Doc: "Size a partition may keep before old data is deleted; -1 is no limit.",
		set: func(c *Config, v string) { c.RetentionBytes = parseLong(v) },
	},
	{
		Name: "retention.ms", Type: TypeLong, Default: "604800000", BrokerSynonym: "log.retention.ms",
		Doc:   "How long data is kept; -1 is no limit.",
		check: atLeast(-1),
		set:   func(c *Config, v string) { c.RetentionMs = parseLong(v) },
	},
	{
		Name: "segment.bytes", Type: TypeInt, Default: "1073741824", BrokerSynonym: "log.segment.bytes",
		Doc:   "Granularity of retention and compaction, in bytes.",
		check: atLeast(14),
		set:   func(c *Config, v string) { c.SegmentBytes = parseInt(v) },
	},
	{
		Name: "segment.index.bytes", Type: TypeInt, Default: "10485760", BrokerSynonym: "log.index.size.max.bytes",
		Doc:   "Stored only: there are no local index files.",
		check: atLeast(4),
	},
	{
		Name: "segment.jitter.ms", Type: TypeLong, Default: "0", BrokerSynonym: "log.roll.jitter.ms",
		Doc:   "Stored only.",
		check: atLeast(0),
	},
	{
		Name: "segment.ms", Type: TypeLong, Default: "604800000", BrokerSynonym: "log.roll.ms",
		Doc:   "Granularity of retention and compaction, in time.",
		check: atLeast(1),
		set:   func(c *Config, v string) { c.SegmentMs = parseLong(v) },
	},
	{
		Name: "unclean.leader.election.enable", Type: TypeBoolean, Default: "false", BrokerSynonym: "unclean.leader.election.enable",
		Doc: "Stored only: there are no partition leaders to elect.",
	},
}

// defaults is Effective(nil), built from the schema's defaults.
var defaults = func() Config {
	var c Config
	for _, k := range keys {
		if k.set != nil {
			k.set(&c, k.Default)
		}
	}
	return c
}()
