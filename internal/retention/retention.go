// Package retention owns when an agent proposes retention: every check
// interval (Kafka's log.retention.check.interval.ms) it looks at the
// partitions it owns by placement, asks its local copy which ones
// retention.ms or retention.bytes would trim (meta.View.RetentionDue),
// and proposes meta.ApplyRetention for those, in batches of at most
// BatchPartitions, one after another. What goes is apply's decision, by
// the log clock and the topic's configs, so two agents that both think
// they own a partition (while they disagree on who is live) trim it
// once, and a proposal that races a config change does what the config
// says when it applies.
//
// A topic that sets no retention.ms or retention.bytes is ruled by the
// agent's log.retention.ms and log.retention.bytes, read at every check:
// its dynamic value (meta.AlterBrokerConfigs) if set, else the
// cluster-wide dynamic one, else the flag. The proposal carries them.
//
// Retention needs strand.metadata.version 3 (ApplyRetention and the
// storage numbers retention.bytes reads); below it the checker logs once
// and proposes nothing until an operator raises the level.
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/placement"
)

// BatchPartitions bounds the partitions of one proposal: a check of
// many due partitions is several entries of moderate size instead of
// one that holds the log's apply loop for long.
const BatchPartitions = 256

// Meta is what the checker needs of the metadata database
// (*replica.Replica).
type Meta interface {
	meta.Viewer
	ProposeBatch(ctx context.Context, cmds []meta.Command) ([]meta.Result, error)
}

// Config configures a Checker.
type Config struct {
	Meta Meta
	// Placement says which partitions this agent owns.
	Placement placement.Ring
	// Interval is log.retention.check.interval.ms.
	Interval time.Duration
	// DefaultMs and DefaultBytes are log.retention.ms and
	// log.retention.bytes from the flags: what a topic that sets no
	// retention.ms or retention.bytes keeps while no dynamic value
	// overrides them (Placement.Self's, or the cluster's); negative is
	// no limit.
	DefaultMs, DefaultBytes int64
	// Clock paces the checks and judges due partitions with the log
	// clock; nil is the wall clock.
	Clock  clock.Clock
	Logger *slog.Logger
}

// Checker proposes retention for the partitions its agent owns.
type Checker struct {
	cfg  Config
	log  *slog.Logger
	loop *clock.Loop
	// waitLogged: the "waits for level 3" line was logged.
	waitLogged bool
}

// Start starts checking every cfg.Interval until Close.
func Start(cfg Config) (*Checker, error) {
	if cfg.Meta == nil || cfg.Interval <= 0 {
		return nil, errors.New("retention: Meta and a positive Interval are required")
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	c := &Checker{cfg: cfg, log: cfg.Logger}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.loop = clock.Every(cfg.Clock, cfg.Interval, func(ctx context.Context) {
		if _, err := c.Check(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("retention check failed", "err", err)
		}
	})
	return c, nil
}

// Close stops the checks and waits for one under way.
func (c *Checker) Close() { c.loop.Stop() }

// Check proposes ApplyRetention for every partition this agent owns that
// retention would trim now, and returns how many log starts moved.
func (c *Checker) Check(ctx context.Context) (int, error) {
	due, def, err := c.due()
	if err != nil || len(due) == 0 {
		return 0, err
	}
	moved := 0
	for len(due) > 0 {
		n := min(len(due), BatchPartitions)
		cmd := meta.ApplyRetention{DefaultRetentionMs: def.Ms, DefaultRetentionBytes: def.Bytes,
			Partitions: make([]meta.RetentionPartition, n)}
		for i := range n {
			cmd.Partitions[i] = due[i].RetentionPartition
		}
		res, err := c.cfg.Meta.ProposeBatch(ctx, []meta.Command{cmd})
		if err != nil {
			return moved, err
		}
		if err := res[0].Err(); err != nil {
			return moved, err
		}
		for i, br := range res[0].Batches {
			if br.Code == 0 && br.LogStartOffset > due[i].start {
				moved++
				c.log.Debug("retention moved the log start", "topic", due[i].TopicID, "partition", due[i].Partition, "log_start", br.LogStartOffset)
			}
		}
		due = due[n:]
	}
	if moved > 0 {
		c.log.Info("retention trimmed partitions", "partitions", moved)
	}
	return moved, nil
}

// duePartition is a partition to propose and its log start before.
type duePartition struct {
	meta.RetentionPartition
	start int64
}

// defaults are the broker defaults a check applies.
type defaults struct{ Ms, Bytes int64 }

// due lists the owned partitions retention would trim, by the later of
// the log clock and this agent's clock (the log clock moves only when
// entries apply, and the proposal's own entry carries this agent's
// clock, which apply takes before it decides), and the broker defaults
// it judged them by.
func (c *Checker) due() ([]duePartition, defaults, error) {
	v := c.cfg.Meta.View()
	defer v.Close()
	var def defaults
	f, err := v.Features()
	if err != nil {
		return nil, def, err
	}
	if f.MetadataLevel() < meta.MetadataLevel3 {
		if !c.waitLogged {
			c.waitLogged = true
			c.log.Info("retention waits for strand.metadata.version 3 (strand features upgrade)", "level", f.MetadataLevel())
		}
		return nil, def, nil
	}
	now, err := v.LogClock()
	if err != nil {
		return nil, def, err
	}
	now = max(now, c.cfg.Clock.Now().UnixMilli())
	dyn, err := v.DynamicBrokerConfigs(c.cfg.Placement.Self)
	if err != nil {
		return nil, def, err
	}
	def.Ms = dyn.Int64("log.retention.ms", c.cfg.DefaultMs)
	def.Bytes = dyn.Int64("log.retention.bytes", c.cfg.DefaultBytes)
	topics, err := v.Topics()
	if err != nil {
		return nil, def, err
	}
	var due []duePartition
	for _, t := range topics {
		p := meta.RetentionPolicyOf(t.Configs, def.Ms, def.Bytes)
		if !p.Limited() {
			continue
		}
		for part := range t.Partitions {
			if !c.cfg.Placement.Owns(OwnerKey(t.ID, part)) {
				continue
			}
			st, ok, err := v.Partition(t.ID, part)
			if err != nil {
				return nil, def, err
			}
			if !ok {
				continue
			}
			if _, yes, err := v.RetentionDue(t.ID, part, p, now); err != nil {
				return nil, def, err
			} else if yes {
				due = append(due, duePartition{meta.RetentionPartition{TopicID: t.ID, Partition: part}, st.LogStartOffset})
			}
		}
	}
	return due, def, nil
}

// OwnerKey is the placement key of a partition's retention.
func OwnerKey(id meta.TopicID, partition int32) string {
	return fmt.Sprintf("partition/%s/%d", id, partition)
}
