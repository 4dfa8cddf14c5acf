package cleaner

// Dynamic broker configs (KIP-226) of the cleaner: log.cleaner.backoff.ms
// and log.cleaner.dedupe.buffer.size may be changed at runtime, for one
// agent or cluster-wide, through the log (meta.AlterBrokerConfigs). The
// cleaner reads them at use time, the wait before each pass and the map
// of each round, over Config's Interval and MapBytes, so a change
// applies without a restart. A stored value out of range (written by
// another build) counts as unset; the Kafka layer refuses such values.

import (
	"math"
	"time"

	"github.com/strandkafka/strand/internal/meta"
)

// Names of the cleaner's dynamic broker configs.
const (
	BackoffConfig      = "log.cleaner.backoff.ms"
	DedupeBufferConfig = "log.cleaner.dedupe.buffer.size"
)

// MaxMapBytes bounds log.cleaner.dedupe.buffer.size: the offset map is
// one allocation.
const MaxMapBytes = 1 << 40

// interval is the wait before the next pass.
func (c *Cleaner) interval() time.Duration {
	v := c.cfg.Meta.View()
	defer v.Close()
	dyn, err := v.DynamicBrokerConfigs(c.cfg.Placement.Self)
	if err != nil {
		return c.cfg.Interval
	}
	if ms := dyn.Int64In(BackoffConfig, 1, math.MaxInt64/int64(time.Millisecond), -1); ms != -1 {
		return time.Duration(ms) * time.Millisecond
	}
	return c.cfg.Interval
}

// mapBytes is the offset map size of a round that reads v.
func (c *Cleaner) mapBytes(v *meta.View) int64 {
	dyn, err := v.DynamicBrokerConfigs(c.cfg.Placement.Self)
	if err != nil {
		return c.cfg.MapBytes
	}
	return dyn.Int64In(DedupeBufferConfig, EntryBytes, MaxMapBytes, c.cfg.MapBytes)
}
