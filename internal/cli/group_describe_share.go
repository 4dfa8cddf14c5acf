// `group describe` of share groups (KIP-932): members with their
// assignments from ShareGroupDescribe (77), and per partition the
// share-partition start offset and lag from DescribeShareGroupOffsets
// (90). A share group has no committed offsets for Lag to read, so it
// takes this path instead of the classic one.
//
// In-flight (acquired), available and archived record counts per
// partition are in no Kafka API: with --http they come from the agent's
// GET /v1/share-groups/{group}/state (agent.PathShareGroupState), read
// from its copy of the metadata; without it, or when that fails, the
// columns show "-" and a note on stderr says why, and the describe still
// succeeds.

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/agent"
)

// groupTypeShare is how ListGroups (v5+) and DescribeGroups name a share
// group's type.
const groupTypeShare = "share"

// JSONShareGroup is one share group of `group describe --format json|yaml`.
type JSONShareGroup struct {
	Group       string `json:"group" yaml:"group"`
	GroupType   string `json:"group_type" yaml:"group_type"` // always "share"
	Coordinator int32  `json:"coordinator" yaml:"coordinator"`
	State       string `json:"state" yaml:"state"`
	Assignor    string `json:"assignor" yaml:"assignor"`
	GroupEpoch  int32  `json:"group_epoch" yaml:"group_epoch"`
	// Members are sorted by member id.
	Members    []JSONShareGroupMember    `json:"members" yaml:"members"`
	Partitions []JSONShareGroupPartition `json:"partitions" yaml:"partitions"`
	// TotalLag sums the lag of the partitions whose lag is known.
	TotalLag int64 `json:"total_lag" yaml:"total_lag"`
	// InFlightError says why the partitions have no in-window counts:
	// no --http, or the agent's answer failed.
	InFlightError string `json:"in_flight_error,omitempty" yaml:"in_flight_error,omitempty"`
}

// JSONShareGroupMember is one member of a share group. Share groups
// have no static membership, so there is no instance id.
type JSONShareGroupMember struct {
	MemberID string                `json:"member_id" yaml:"member_id"`
	ClientID string                `json:"client_id" yaml:"client_id"`
	Host     string                `json:"host" yaml:"host"`
	Assigned []JSONTopicPartitions `json:"assigned" yaml:"assigned"`
}

// JSONShareGroupPartition is a share partition of the group: where its
// unacknowledged records begin and how many records lie after that.
type JSONShareGroupPartition struct {
	Topic     string `json:"topic" yaml:"topic"`
	Partition int32  `json:"partition" yaml:"partition"`
	// StartOffset is the share-partition start offset: every record
	// before it is acknowledged or archived. Null if unknown.
	StartOffset *int64 `json:"start_offset" yaml:"start_offset"`
	// Lag is null when the broker does not know it (Kafka answers -1
	// until the share partition is initialized); Error then may say why.
	Lag *int64 `json:"lag" yaml:"lag"`
	// From the agent (--http), null without it: the share-partition end
	// offset (the first offset never acquired) and the records of
	// [start, end) by state, acquired records whose lock expired by the
	// agent's log clock counted as available.
	EndOffset    *int64 `json:"end_offset" yaml:"end_offset"`
	Available    *int64 `json:"available" yaml:"available"`
	InFlight     *int64 `json:"in_flight" yaml:"in_flight"` // acquired, lock held
	Acknowledged *int64 `json:"acknowledged" yaml:"acknowledged"`
	Archived     *int64 `json:"archived" yaml:"archived"`
	Error        string `json:"error,omitempty" yaml:"error,omitempty"`
}

// shareGroupsAmong returns which of groups are share groups, as
// ListGroups names their type. A broker without group types (ListGroups
// before v5) has no share groups either, so its groups all stay classic.
func shareGroupsAmong(ctx context.Context, adm *kadm.Client, groups []string) (map[string]bool, error) {
	listed, err := adm.ListGroupsByType(ctx, []string{groupTypeShare})
	if err != nil {
		return nil, fmt.Errorf("list share groups: %w", err)
	}
	share := map[string]bool{}
	for _, g := range groups {
		if l, ok := listed[g]; ok && l.GroupType == groupTypeShare {
			share[g] = true
		}
	}
	return share, nil
}

// describeShareGroups describes share groups and their offsets; errs
// holds the groups that could not be described.
func describeShareGroups(ctx context.Context, adm *kadm.Client, groups []string) (map[string]JSONShareGroup, []error) {
	out := map[string]JSONShareGroup{}
	if len(groups) == 0 {
		return out, nil
	}
	described, err := adm.DescribeShareGroups(ctx, groups...)
	if err != nil && len(described) == 0 {
		return nil, []error{fmt.Errorf("describe share groups: %w", err)}
	}
	offsets, offErr := adm.DescribeShareGroupOffsets(ctx, groups...)
	var errs []error
	for _, g := range groups {
		d, ok := described[g]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("describe %s: missing from the broker's response", g))
			continue
		case errors.Is(d.Err, kerr.GroupIDNotFound):
			errs = append(errs, fmt.Errorf("%w: %s", ErrUnknownGroup, g))
			continue
		case d.Err != nil:
			errs = append(errs, fmt.Errorf("describe %s: %w", g, d.Err))
			continue
		}
		j := jsonShareGroup(d)
		o, ok := offsets[g]
		switch {
		case !ok && offErr != nil:
			errs = append(errs, fmt.Errorf("describe offsets of %s: %w", g, offErr))
		case ok && o.Err != nil:
			errs = append(errs, fmt.Errorf("describe offsets of %s: %w", g, o.Err))
		case ok:
			j.Partitions, j.TotalLag = shareGroupPartitions(o.Offsets)
		}
		out[g] = j
	}
	return out, errs
}

func jsonShareGroup(d kadm.DescribedShareGroup) JSONShareGroup {
	j := JSONShareGroup{
		Group:       d.GroupID,
		GroupType:   groupTypeShare,
		Coordinator: d.Coordinator.NodeID,
		State:       d.GroupState,
		Assignor:    d.Assignor,
		GroupEpoch:  d.GroupEpoch,
		Members:     []JSONShareGroupMember{},
		Partitions:  []JSONShareGroupPartition{},
	}
	for _, m := range d.Members {
		assigned := []JSONTopicPartitions{}
		for _, tp := range m.Assignment.Sorted() {
			if len(tp.Partitions) == 0 {
				continue
			}
			ps := slices.Clone(tp.Partitions)
			slices.Sort(ps)
			assigned = append(assigned, JSONTopicPartitions{Topic: tp.Topic, Partitions: ps})
		}
		j.Members = append(j.Members, JSONShareGroupMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: assigned})
	}
	slices.SortFunc(j.Members, func(a, b JSONShareGroupMember) int { return strings.Compare(a.MemberID, b.MemberID) })
	return j
}

// shareGroupPartitions is the one place that decides which of a share
// partition's numbers are known, for every output format.
func shareGroupPartitions(os kadm.ShareOffsets) ([]JSONShareGroupPartition, int64) {
	out := []JSONShareGroupPartition{}
	var total int64
	for _, o := range os.Sorted() {
		p := JSONShareGroupPartition{Topic: o.Topic, Partition: o.Partition}
		if o.Err != nil {
			p.Error = o.Err.Error()
		} else {
			if o.StartOffset >= 0 {
				p.StartOffset = &o.StartOffset
			}
			if o.Lag >= 0 {
				p.Lag = &o.Lag
				total += o.Lag
			}
		}
		out = append(out, p)
	}
	return out, total
}

func printShareGroup(w io.Writer, j JSONShareGroup) error {
	summary := newTable(w)
	summary.row("GROUP", j.Group)
	summary.row("COORDINATOR", j.Coordinator)
	summary.row("TYPE", j.GroupType)
	summary.row("STATE", dash(j.State))
	summary.row("ASSIGNOR", dash(j.Assignor))
	summary.row("MEMBERS", len(j.Members))
	summary.row("TOTAL-LAG", j.TotalLag)
	if err := summary.flush(); err != nil {
		return err
	}
	if len(j.Members) > 0 {
		fmt.Fprintln(w)
		members := newTable(w, "MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNED")
		for _, m := range j.Members {
			members.row(m.MemberID, dash(m.ClientID), dash(m.Host), topicPartitionsCell(m.Assigned))
		}
		if err := members.flush(); err != nil {
			return err
		}
	}
	if len(j.Partitions) == 0 {
		return nil
	}
	headers := []string{"TOPIC", "PARTITION", "START-OFFSET", "LAG", "AVAILABLE", "IN-FLIGHT", "ARCHIVED"}
	anyErr := slices.ContainsFunc(j.Partitions, func(p JSONShareGroupPartition) bool { return p.Error != "" })
	if anyErr {
		headers = append(headers, "ERROR")
	}
	fmt.Fprintln(w)
	parts := newTable(w, headers...)
	for _, p := range j.Partitions {
		cells := []any{p.Topic, p.Partition, int64Cell(p.StartOffset), int64Cell(p.Lag),
			int64Cell(p.Available), int64Cell(p.InFlight), int64Cell(p.Archived)}
		if anyErr {
			cells = append(cells, dash(p.Error))
		}
		parts.row(cells...)
	}
	return parts.flush()
}

// topicPartitionsCell renders an assignment as "t:0,1;u:2", as the
// classic members table does.
func topicPartitionsCell(tps []JSONTopicPartitions) string {
	var parts []string
	for _, tp := range tps {
		ps := make([]string, len(tp.Partitions))
		for i, p := range tp.Partitions {
			ps[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, tp.Topic+":"+strings.Join(ps, ","))
	}
	return dash(strings.Join(parts, ";"))
}

// addInFlight fills j's partitions' in-window counts from the agent at
// o.HTTP, and returns the note for stderr when it cannot: the counts are
// an extra the describe never fails for.
func (j *JSONShareGroup) addInFlight(ctx context.Context, o *adminOptions) (note string) {
	defer func() { j.InFlightError = note }()
	if strings.TrimSpace(o.HTTP) == "" {
		return "no in-flight counts: Kafka's APIs carry none; pass --http with an agent's HTTP address to read them from it"
	}
	var st agent.ShareGroupState
	path := strings.Replace(agent.PathShareGroupState, "{group}", url.PathEscape(j.Group), 1)
	if err := o.do(ctx, "GET", path, nil, &st); err != nil {
		return fmt.Sprintf("no in-flight counts of %s from the agent at %s: %v", j.Group, o.HTTP, err)
	}
	type tp struct {
		topic     string
		partition int32
	}
	byTP := make(map[tp]agent.SharePartitionState, len(st.Partitions))
	for _, p := range st.Partitions {
		byTP[tp{p.Topic, p.Partition}] = p
	}
	for i := range j.Partitions {
		p := &j.Partitions[i]
		s, ok := byTP[tp{p.Topic, p.Partition}]
		if !ok {
			// Not initialized yet (no member fetched it): no window.
			continue
		}
		p.EndOffset, p.Available, p.InFlight, p.Acknowledged, p.Archived = &s.EndOffset, &s.Available, &s.Acquired, &s.Acknowledged, &s.Archived
	}
	if st.Truncated {
		return fmt.Sprintf("in-flight counts of %s cover its first %d share partitions only: the agent caps its answer", j.Group, len(st.Partitions))
	}
	return ""
}
