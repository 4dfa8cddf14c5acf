package meta

// The GROUP config resources Kafka 4.2 serves (GroupConfig.java, KIP-848
// and KIP-932): their names, their defaults (the broker's group.*
// configs of the same name), and the values Kafka accepts. Apply stores
// only names this table knows; the Kafka layer validates values with
// ValidateGroupConfig before it proposes them.

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Group config names.
const (
	GroupConsumerSessionTimeoutMs    = "consumer.session.timeout.ms"
	GroupConsumerHeartbeatIntervalMs = "consumer.heartbeat.interval.ms"
	GroupShareSessionTimeoutMs       = "share.session.timeout.ms"
	GroupShareHeartbeatIntervalMs    = "share.heartbeat.interval.ms"
	GroupShareRecordLockDurationMs   = "share.record.lock.duration.ms"
	GroupShareAutoOffsetReset        = "share.auto.offset.reset"
	GroupShareIsolationLevel         = "share.isolation.level"
	GroupShareDeliveryCountLimit     = "share.delivery.count.limit"
	GroupSharePartitionMaxRecordLock = "share.partition.max.record.locks"
)

// groupConfigSpec is one group config: its default (as DescribeConfigs
// shows it) and its check.
type groupConfigSpec struct {
	def string
	// min and max bound an integer config; enum lists a string
	// config's values. check, if set, replaces both.
	min, max int64
	enum     []string
	check    func(string) error
	// doc is what DescribeConfigs v3+ documents.
	doc string
}

// groupConfigs is every group config, with Kafka 4.2's broker defaults
// and bounds (group.consumer.min/max.session.timeout.ms and the like).
var groupConfigs = map[string]groupConfigSpec{
	GroupConsumerSessionTimeoutMs: {def: "45000", min: 45000, max: 60000,
		doc: "The timeout to detect client failures when using the consumer group protocol."},
	GroupConsumerHeartbeatIntervalMs: {def: "5000", min: 5000, max: 15000,
		doc: "The heartbeat interval given to the members of a consumer group."},
	GroupShareSessionTimeoutMs: {def: "45000", min: 45000, max: 60000,
		doc: "The timeout to detect client failures when using the share group protocol."},
	GroupShareHeartbeatIntervalMs: {def: "5000", min: 5000, max: 15000,
		doc: "The heartbeat interval given to the members of a share group."},
	GroupShareRecordLockDurationMs: {def: "30000", min: 15000, max: 60000,
		doc: "The record acquisition lock duration in milliseconds for share groups."},
	GroupShareDeliveryCountLimit: {def: "5", min: 2, max: 10,
		doc: "The maximum number of delivery attempts for a record delivered to a share group."},
	GroupSharePartitionMaxRecordLock: {def: "2000", min: 100, max: 10000,
		doc: "Share-group record lock limit per share-partition."},
	GroupShareAutoOffsetReset: {def: "latest", check: checkShareAutoOffsetReset,
		doc: "The strategy to initialize the share-partition start offset: latest, earliest or by_duration:<ISO-8601 duration>."},
	GroupShareIsolationLevel: {def: "read_uncommitted", enum: []string{"read_committed", "read_uncommitted"},
		doc: "Controls how to read records written transactionally."},
}

// GroupConfigNames returns every group config name, sorted.
func GroupConfigNames() []string { return sortedKeys(groupConfigs) }

// IsGroupConfig reports whether name is a group config.
func IsGroupConfig(name string) bool {
	_, ok := groupConfigs[name]
	return ok
}

// GroupConfigDefault returns the default of group config name and its
// documentation; false for a name that is not one.
func GroupConfigDefault(name string) (def, doc string, ok bool) {
	s, ok := groupConfigs[name]
	return s.def, s.doc, ok
}

// GroupConfigIsInt reports whether name holds an integer (DescribeConfigs
// types it INT).
func GroupConfigIsInt(name string) bool {
	s, ok := groupConfigs[name]
	return ok && s.check == nil && s.enum == nil
}

// ValidateGroupConfig checks one value as Kafka's GroupConfig.validate
// does: a known name, an integer in its range, a string among its values.
func ValidateGroupConfig(name, value string) error {
	s, ok := groupConfigs[name]
	switch {
	case !ok:
		return fmt.Errorf("unknown group config name: %s", name)
	case s.check != nil:
		return s.check(value)
	case s.enum != nil:
		if !slices.Contains(s.enum, value) {
			return fmt.Errorf("invalid value %s for configuration %s: string must be one of: %s", value, name, strings.Join(s.enum, ", "))
		}
		return nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 32)
	if err != nil {
		return fmt.Errorf("invalid value %s for configuration %s: not a number of type INT", value, name)
	}
	if n < s.min || n > s.max {
		return fmt.Errorf("invalid value %s for configuration %s: value must be at least %d and at most %d", value, name, s.min, s.max)
	}
	return nil
}

// ValidateGroupConfigs checks the configs a group would have after an
// alter: each value, and that a heartbeat interval is below its session
// timeout (defaults fill what is not set), as Kafka's GroupConfig does.
func ValidateGroupConfigs(cfg map[string]string) error {
	for _, k := range sortedKeys(cfg) {
		if err := ValidateGroupConfig(k, cfg[k]); err != nil {
			return err
		}
	}
	for _, p := range [][2]string{
		{GroupConsumerHeartbeatIntervalMs, GroupConsumerSessionTimeoutMs},
		{GroupShareHeartbeatIntervalMs, GroupShareSessionTimeoutMs},
	} {
		hb, st := GroupConfigInt(cfg, p[0]), GroupConfigInt(cfg, p[1])
		if hb >= st {
			return fmt.Errorf("%s must be less than %s", p[0], p[1])
		}
	}
	return nil
}

// GroupConfigInt is integer config name of cfg (a group's configs), its
// default when unset or not a number. Zero for a name that is not an
// integer config.
func GroupConfigInt(cfg map[string]string, name string) int64 {
	s, ok := groupConfigs[name]
	if !ok || !GroupConfigIsInt(name) {
		return 0
	}
	if v, set := cfg[name]; set {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32); err == nil {
			return n
		}
	}
	n, _ := strconv.ParseInt(s.def, 10, 64)
	return n
}

// GroupConfigString is config name of cfg, its default when unset.
func GroupConfigString(cfg map[string]string, name string) string {
	if v, ok := cfg[name]; ok {
		return v
	}
	return groupConfigs[name].def
}

// isoDuration is what Java's Duration.parse reads, without sign or
// fractional days: PnDTnHnMn.nS with at least one part.
var isoDuration = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:\.(\d{1,9}))?S)?)?$`)

// ParseShareAutoOffsetReset reads share.auto.offset.reset: "latest",
// "earliest", or "by_duration:<ISO-8601 duration>" (the start offset is
// the first record at or after now minus the duration). ms, the
// duration in milliseconds, is set only for by_duration.
func ParseShareAutoOffsetReset(v string) (strategy string, ms int64, err error) {
	switch {
	case v == "latest" || v == "earliest":
		return v, 0, nil
	case strings.HasPrefix(v, "by_duration:"):
		iso := strings.TrimPrefix(v, "by_duration:")
		m := isoDuration.FindStringSubmatch(strings.ToUpper(iso))
		if m == nil || iso == "P" || strings.HasSuffix(strings.ToUpper(iso), "T") {
			return "", 0, fmt.Errorf("invalid value %s for configuration %s: %q is not an ISO-8601 duration (PnDTnHnMn.nS)", v, GroupShareAutoOffsetReset, iso)
		}
		units := []int64{24 * 3600 * 1000, 3600 * 1000, 60 * 1000, 1000}
		for i, u := range units {
			if m[i+1] == "" {
				continue
			}
			n, perr := strconv.ParseInt(m[i+1], 10, 64)
			if perr != nil || n > (1<<52)/u {
				return "", 0, fmt.Errorf("invalid value %s for configuration %s: duration too long", v, GroupShareAutoOffsetReset)
			}
			ms += n * u
		}
		if frac := m[5]; frac != "" {
			n, _ := strconv.ParseInt((frac + "000")[:3], 10, 64)
			ms += n
		}
		return "by_duration", ms, nil
	}
	return "", 0, fmt.Errorf("invalid value %s for configuration %s: must be latest, earliest or by_duration:<ISO-8601 duration>", v, GroupShareAutoOffsetReset)
}

func checkShareAutoOffsetReset(v string) error {
	_, _, err := ParseShareAutoOffsetReset(v)
	return err
}
