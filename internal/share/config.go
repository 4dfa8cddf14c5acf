package share

import (
	"fmt"
	"time"

	"github.com/strandkafka/strand/internal/meta"
)

// Config is a share group's configuration, with Kafka's names in the
// comments. The zero value is not valid: start from DefaultConfig.
type Config struct {
	// AutoOffsetReset is share.auto.offset.reset: where a share
	// partition starts when the group first fetches it: "latest" (the
	// high watermark), "earliest" (the log start offset) or
	// "by_duration:<ISO-8601 duration>" (the first record no older).
	AutoOffsetReset string
	// IsolationLevel is share.isolation.level: "read_uncommitted" or
	// "read_committed" (acquire only below the last stable offset,
	// never deliver aborted records).
	IsolationLevel string
	// RecordLock is share.record.lock.duration.ms
	// (group.share.record.lock.duration.ms).
	RecordLock time.Duration
	// DeliveryLimit is share.delivery.count.limit
	// (group.share.delivery.count.limit): a record delivered that many
	// times is archived when its lock ends without an accept.
	DeliveryLimit int
	// MaxRecordLocks is group.share.partition.max.record.locks: the
	// in-flight window of one share partition.
	MaxRecordLocks int
}

// Kafka's defaults.
const (
	DefaultRecordLock     = 30 * time.Second
	DefaultDeliveryLimit  = 5
	DefaultMaxRecordLocks = 2000
)

// DefaultConfig is Kafka's default share group configuration.
func DefaultConfig() Config {
	return Config{AutoOffsetReset: "latest", IsolationLevel: "read_uncommitted", RecordLock: DefaultRecordLock,
		DeliveryLimit: DefaultDeliveryLimit, MaxRecordLocks: DefaultMaxRecordLocks}
}

// Configs gives a group's share configuration. The agent plugs in the
// GROUP config resources held in the metadata; DefaultConfigs serves
// Kafka's defaults to every group.
type Configs interface {
	ShareConfig(group string) (Config, error)
}

// DefaultConfigs serves DefaultConfig to every group.
type DefaultConfigs struct{}

func (DefaultConfigs) ShareConfig(string) (Config, error) { return DefaultConfig(), nil }

// Validate says what is wrong with c, with Kafka's bounds.
func (c Config) Validate() error {
	switch {
	case c.IsolationLevel != "read_uncommitted" && c.IsolationLevel != "read_committed":
		return fmt.Errorf("share.isolation.level %q is neither read_uncommitted nor read_committed", c.IsolationLevel)
	case c.RecordLock < time.Second || c.RecordLock > time.Hour:
		return fmt.Errorf("share.record.lock.duration.ms %d is not in [1000, 3600000]", c.RecordLock.Milliseconds())
	case c.DeliveryLimit < 2 || c.DeliveryLimit > 10:
		return fmt.Errorf("share.delivery.count.limit %d is not in [2, 10]", c.DeliveryLimit)
	case c.MaxRecordLocks < 100 || c.MaxRecordLocks > 10000:
		return fmt.Errorf("group.share.partition.max.record.locks %d is not in [100, 10000]", c.MaxRecordLocks)
	}
	_, _, err := c.reset()
	return err
}

// resetKind is where a share partition starts.
type resetKind int

const (
	resetLatest resetKind = iota
	resetEarliest
	resetByDuration
)

// reset parses AutoOffsetReset (meta.ParseShareAutoOffsetReset).
func (c Config) reset() (resetKind, time.Duration, error) {
	if c.AutoOffsetReset == "" {
		return resetLatest, 0, nil
	}
	kind, ms, err := meta.ParseShareAutoOffsetReset(c.AutoOffsetReset)
	switch {
	case err != nil:
		return 0, 0, err
	case kind == "earliest":
		return resetEarliest, 0, nil
	case kind == "by_duration":
		return resetByDuration, time.Duration(ms) * time.Millisecond, nil
	}
	return resetLatest, 0, nil
}

// MetaConfigs reads each group's share configuration from the GROUP
// config resources in the metadata (IncrementalAlterConfigs), Kafka's
// defaults where unset.
func MetaConfigs(m meta.Viewer) Configs { return metaConfigs{m} }

type metaConfigs struct{ m meta.Viewer }

func (c metaConfigs) ShareConfig(group string) (Config, error) {
	v := c.m.View()
	defer v.Close()
	cfg, err := v.GroupConfigs(group)
	if err != nil {
		return Config{}, err
	}
	return Config{
		AutoOffsetReset: meta.GroupConfigString(cfg, meta.GroupShareAutoOffsetReset),
		IsolationLevel:  meta.GroupConfigString(cfg, meta.GroupShareIsolationLevel),
		RecordLock:      time.Duration(meta.GroupConfigInt(cfg, meta.GroupShareRecordLockDurationMs)) * time.Millisecond,
		DeliveryLimit:   int(meta.GroupConfigInt(cfg, meta.GroupShareDeliveryCountLimit)),
		MaxRecordLocks:  int(meta.GroupConfigInt(cfg, meta.GroupSharePartitionMaxRecordLock)),
	}, nil
}
