package share

import (
	"fmt"
	"strings"
	"time"
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

// reset parses AutoOffsetReset.
func (c Config) reset() (resetKind, time.Duration, error) {
	switch v := c.AutoOffsetReset; {
	case v == "latest" || v == "":
		return resetLatest, 0, nil
	case v == "earliest":
		return resetEarliest, 0, nil
	case strings.HasPrefix(v, "by_duration:"):
		d, err := ParseISODuration(strings.TrimPrefix(v, "by_duration:"))
		if err != nil {
			return 0, 0, fmt.Errorf("share.auto.offset.reset %q: %w", v, err)
		}
		return resetByDuration, d, nil
	}
	return 0, 0, fmt.Errorf("share.auto.offset.reset %q is not latest, earliest or by_duration:<ISO-8601 duration>", c.AutoOffsetReset)
}

// ParseISODuration parses the ISO-8601 durations Java's
// Duration.parse takes: PnDTnHnMn.nS (days are 24 hours), not negative.
func ParseISODuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not an ISO-8601 duration (PnDTnHnMnS)", s)
	if len(s) < 3 || (s[0] != 'P' && s[0] != 'p') {
		return 0, bad
	}
	s = s[1:]
	var total time.Duration
	inTime, any := false, false
	for len(s) > 0 {
		if s[0] == 'T' || s[0] == 't' {
			if inTime {
				return 0, bad
			}
			inTime = true
			s = s[1:]
			continue
		}
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		if i == 0 || i == len(s) {
			return 0, bad
		}
		var n float64
		if _, err := fmt.Sscanf(s[:i], "%g", &n); err != nil {
			return 0, bad
		}
		unit := s[i]
		s = s[i+1:]
		var u time.Duration
		switch {
		case !inTime && (unit == 'D' || unit == 'd'):
			u = 24 * time.Hour
		case inTime && (unit == 'H' || unit == 'h'):
			u = time.Hour
		case inTime && (unit == 'M' || unit == 'm'):
			u = time.Minute
		case inTime && (unit == 'S' || unit == 's'):
			u = time.Second
		default:
			return 0, bad
		}
		total += time.Duration(n * float64(u))
		any = true
	}
	if !any {
		return 0, bad
	}
	return total, nil
}
