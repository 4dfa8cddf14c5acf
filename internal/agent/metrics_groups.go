package agent

import (
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strandkafka/strand/internal/meta"
)

// DefaultMetricsMaxGroupPartitions is Config.MetricsMaxGroupPartitions'
// default: two series of about 150 bytes each per partition keep a
// scrape under 3 MB however many partitions groups commit.
const DefaultMetricsMaxGroupPartitions = 10000

// groupCollector reports consumer group lag as kafka-lag-exporter and
// Burrow do, computed at scrape time from the local metadata copy: per
// partition a group committed, the committed offset and the lag (the
// partition's high watermark minus it, never below 0), and per group
// its members. Only the agent that coordinates a group reports it, so a
// sum over agents counts each group once. Per-partition series stop at
// max: a group whose partitions do not fit is left out whole (a partial
// group's summed lag would mislead), and counted in the omitted gauge.
type groupCollector struct {
	view   func() *meta.View
	owns   func(group string) bool
	max    int // per-partition series; negative: none
	logger *slog.Logger
	// omitting is set while scrapes leave groups out, so the warning
	// is logged when that starts, not at every scrape.
	omitting atomic.Bool

	lag, committed, members, omitted *prometheus.Desc
	// Share groups (KIP-932) are counted apart: they commit no offsets
	// and their members share partitions.
	shareGroups, shareMembers *prometheus.Desc
}

func newGroupCollector(view func() *meta.View, owns func(string) bool, max int, logger *slog.Logger) *groupCollector {
	part := []string{"group", "topic", "partition"}
	return &groupCollector{view: view, owns: owns, max: max, logger: logger,
		lag: prometheus.NewDesc("strand_consumer_group_lag",
			"Records the group has yet to consume in the partition: its high watermark minus the group's committed offset (as kafka-lag-exporter and Burrow report it). Reported by the group's coordinator only.", part, nil),
		committed: prometheus.NewDesc("strand_consumer_group_committed_offset",
			"The group's committed offset in the partition. Reported by the group's coordinator only.", part, nil),
		members: prometheus.NewDesc("strand_consumer_group_members",
			"Members of the group as last stored. Reported by the group's coordinator only.", []string{"group"}, nil),
		omitted: prometheus.NewDesc("strand_consumer_group_partitions_omitted",
			"Committed partitions of groups this agent coordinates whose lag and committed offset series this scrape left out, past --metrics-max-group-partitions.", nil, nil),
		shareGroups: prometheus.NewDesc("strand_share_groups",
			"Share groups this agent coordinates, by state (Empty, Stable) as last stored.", []string{"state"}, nil),
		shareMembers: prometheus.NewDesc("strand_share_group_members",
			"Members of the share group as last stored. Reported by the group's coordinator only.", []string{"group"}, nil),
	}
}

func (c *groupCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lag
	ch <- c.committed
	ch <- c.members
	ch <- c.omitted
	ch <- c.shareGroups
	ch <- c.shareMembers
}

func (c *groupCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.view()
	defer v.Close()
	groups, err := v.Groups()
	if err != nil {
		c.logger.Warn("metrics: reading the groups failed", "err", err)
		return
	}
	emitted, omitted, omittedGroups := 0, 0, 0
	shareStates := map[string]int{"Empty": 0, "Stable": 0}
	for _, g := range groups {
		if !c.owns(g.Name) {
			continue
		}
		if g.Kind == meta.GroupShare {
			state := "Empty"
			if len(g.Members) > 0 {
				state = "Stable"
			}
			shareStates[state]++
			ch <- prometheus.MustNewConstMetric(c.shareMembers, prometheus.GaugeValue, float64(len(g.Members)), g.Name)
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(len(g.Members)), g.Name)
		offsets, err := v.CommittedOffsets(g.Name)
		if err != nil {
			c.logger.Warn("metrics: reading a group's offsets failed", "group", g.Name, "err", err)
			continue
		}
		if c.max < 0 || emitted+len(offsets) > c.max {
			omitted += len(offsets)
			omittedGroups++
			continue
		}
		emitted += len(offsets)
		for _, o := range offsets {
			st, ok, err := v.Partition(o.TopicID, o.Partition)
			if err != nil || !ok || o.Offset < 0 {
				continue
			}
			p := strconv.Itoa(int(o.Partition))
			ch <- prometheus.MustNewConstMetric(c.committed, prometheus.GaugeValue, float64(o.Offset), g.Name, o.Topic, p)
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(max(st.HighWatermark()-o.Offset, 0)), g.Name, o.Topic, p)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.omitted, prometheus.GaugeValue, float64(omitted))
	for state, n := range shareStates {
		ch <- prometheus.MustNewConstMetric(c.shareGroups, prometheus.GaugeValue, float64(n), state)
	}
	if omitted > 0 && !c.omitting.Swap(true) {
		c.logger.Warn("metrics: consumer group lag series left out past --metrics-max-group-partitions",
			"limit", c.max, "partitions_omitted", omitted, "groups_omitted", omittedGroups)
	} else if omitted == 0 {
		c.omitting.Store(false)
	}
}
