// The group page of a share group (KIP-932): its members and their
// assignments (ShareGroupDescribe), per partition the share-partition
// start offset and lag (DescribeShareGroupOffsets), and the agent's share
// metrics (strand_share_*). Kafka's APIs have no per-partition in-flight
// or archived counts: Config.ShareCounts reads them from the agent's copy
// of the metadata, as GET /v1/share-groups/{group}/state does.

package console

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// shareMetricPrefix names the series the share group page shows.
const shareMetricPrefix = "strand_share_"

// maxShareMetricRows bounds the metrics table (series of every label
// value of every strand_share_ family).
const maxShareMetricRows = 200

type sharePartitionRow struct {
	Topic            string
	Partition        int32
	StartOffset, Lag int64
	HasStart, HasLag bool
	// The in-window counts, when HasCounts.
	EndOffset, Available, Acquired, Archived int64
	HasCounts                                bool
	Err                                      string
}

// ShareCounts is a share group's partitions as the agent holds them.
type ShareCounts struct {
	Partitions []SharePartitionCounts
	// Truncated: the group has more share partitions than these.
	Truncated bool
}

// SharePartitionCounts is one share partition: its end offset and the
// records of [start offset, end offset) by state.
type SharePartitionCounts struct {
	Topic                                       string
	Partition                                   int32
	EndOffset                                   int64
	Available, Acquired, Acknowledged, Archived int64
}

type shareMetricRow struct {
	Name, Labels string
	Value        float64
}

type shareGroupData struct {
	Name, State, Assignor string
	Coordinator           int32
	Epoch                 int32
	Members               []memberRow
	Partitions            []sharePartitionRow
	TotalLag              int64
	Cut                   bool
	Metrics               []shareMetricRow
	// CountsNote says why the partitions have no in-window counts, or
	// that the agent cut its answer.
	CountsNote string
	// MetricsOff: the console has no metrics source (Config.Metrics).
	MetricsOff bool
	Err        string
}

// isShareGroup says whether ListGroups (v5+) names name a share group.
func (c *Console) isShareGroup(r *http.Request, name string) bool {
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	listed, err := c.adm.ListGroupsByType(ctx, []string{"share"})
	if err != nil {
		return false
	}
	g, ok := listed[name]
	return ok && g.GroupType == "share"
}

func (c *Console) handleShareGroup(w http.ResponseWriter, r *http.Request, name string) {
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	described, err := c.adm.DescribeShareGroups(ctx, name)
	g, ok := described[name]
	if !ok {
		c.fail(w, r, http.StatusBadGateway, fmt.Errorf("share group %s: not described: %v", name, err))
		return
	}
	d := shareGroupData{Name: name, State: g.GroupState, Assignor: g.Assignor, Coordinator: g.Coordinator.NodeID, Epoch: g.GroupEpoch}
	if g.Err != nil {
		d.Err = g.Err.Error()
	}
	for _, m := range g.Members {
		row := memberRow{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost}
		for _, tp := range m.Assignment.Sorted() {
			ps := slices.Clone(tp.Partitions)
			slices.Sort(ps)
			cells := make([]string, len(ps))
			for i, p := range ps {
				cells[i] = fmt.Sprint(p)
			}
			row.Assigned = append(row.Assigned, tp.Topic+": "+strings.Join(cells, ", "))
		}
		d.Members = append(d.Members, row)
	}
	offsets, err := c.adm.DescribeShareGroupOffsets(ctx, name)
	if o, ok := offsets[name]; ok && o.Err == nil {
		for _, so := range o.Offsets.Sorted() {
			if len(d.Partitions) == maxLagRows {
				d.Cut = true
				break
			}
			row := sharePartitionRow{Topic: so.Topic, Partition: so.Partition, StartOffset: so.StartOffset, Lag: so.Lag,
				HasStart: so.Err == nil && so.StartOffset >= 0, HasLag: so.Err == nil && so.Lag >= 0}
			if so.Err != nil {
				row.Err = so.Err.Error()
			}
			if row.HasLag {
				d.TotalLag += so.Lag
			}
			d.Partitions = append(d.Partitions, row)
		}
	} else if ok && o.Err != nil {
		d.Err = strings.TrimSpace(d.Err + " offsets: " + o.Err.Error())
	} else if err != nil {
		d.Err = strings.TrimSpace(d.Err + " offsets: " + err.Error())
	}
	d.CountsNote = c.addShareCounts(name, d.Partitions)
	d.Metrics, d.MetricsOff = c.shareMetrics(name)
	c.render(w, r, http.StatusOK, "sharegroup", page{Title: "Share group " + name, Nav: "groups", Data: d})
}

// addShareCounts fills rows' in-window counts from Config.ShareCounts,
// and returns a note for the page when it cannot, or cut its answer.
func (c *Console) addShareCounts(group string, rows []sharePartitionRow) string {
	if c.cfg.ShareCounts == nil {
		return "This console has no source of in-flight counts."
	}
	counts, err := c.cfg.ShareCounts(group)
	if err != nil {
		return "In-flight counts: " + err.Error()
	}
	type tp struct {
		topic     string
		partition int32
	}
	byTP := make(map[tp]SharePartitionCounts, len(counts.Partitions))
	for _, p := range counts.Partitions {
		byTP[tp{p.Topic, p.Partition}] = p
	}
	for i := range rows {
		p, ok := byTP[tp{rows[i].Topic, rows[i].Partition}]
		if !ok {
			continue // no member fetched it yet: no window
		}
		rows[i].EndOffset, rows[i].Available, rows[i].Acquired, rows[i].Archived, rows[i].HasCounts =
			p.EndOffset, p.Available, p.Acquired, p.Archived, true
	}
	if counts.Truncated {
		return "The agent counted the first share partitions only."
	}
	return ""
}

// shareMetrics reads the strand_share_ series of Config.Metrics, sorted
// by name and labels: the agent-wide ones, and of the per-group ones
// (label group) those of group; off is true without a metrics source.
func (c *Console) shareMetrics(group string) (rows []shareMetricRow, off bool) {
	if c.cfg.Metrics == nil {
		return nil, true
	}
	families, err := c.cfg.Metrics.Gather()
	if err != nil && len(families) == 0 {
		return nil, false
	}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), shareMetricPrefix) {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			if len(rows) == maxShareMetricRows {
				return rows, false
			}
			var labels []string
			for _, l := range m.GetLabel() {
				if l.GetName() == "group" && l.GetValue() != group {
					continue series
				}
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			rows = append(rows, shareMetricRow{Name: f.GetName(), Labels: strings.Join(labels, ","), Value: metricValue(m)})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Name != rows[j].Name {
			return rows[i].Name < rows[j].Name
		}
		return rows[i].Labels < rows[j].Labels
	})
	return rows, false
}

// metricValue is a counter's or gauge's value (the share metrics are
// those), a histogram's or summary's count.
func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Summary != nil:
		return float64(m.Summary.GetSampleCount())
	}
	return 0
}
