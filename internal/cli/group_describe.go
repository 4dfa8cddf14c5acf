// `group describe`: a group's state, members and per-partition lag, as a
// table, or as a JSON or YAML list of JSONGroup.

package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// JSONGroup is one group of `group describe --format json|yaml`.
type JSONGroup struct {
	Group        string               `json:"group" yaml:"group"`
	Coordinator  int32                `json:"coordinator" yaml:"coordinator"`
	State        string               `json:"state" yaml:"state"`
	ProtocolType string               `json:"protocol_type" yaml:"protocol_type"`
	Protocol     string               `json:"protocol" yaml:"protocol"`
	Members      []JSONGroupMember    `json:"members" yaml:"members"`
	Partitions   []JSONGroupPartition `json:"partitions" yaml:"partitions"`
	// TotalLag sums the lag of the partitions whose lag is known.
	TotalLag int64 `json:"total_lag" yaml:"total_lag"`
}

// JSONGroupMember is one member of a described group.
type JSONGroupMember struct {
	MemberID   string                `json:"member_id" yaml:"member_id"`
	InstanceID *string               `json:"instance_id" yaml:"instance_id"` // null without static membership
	ClientID   string                `json:"client_id" yaml:"client_id"`
	Host       string                `json:"host" yaml:"host"`
	Assigned   []JSONTopicPartitions `json:"assigned" yaml:"assigned"`
}

// JSONTopicPartitions is a topic and some of its partitions.
type JSONTopicPartitions struct {
	Topic      string  `json:"topic" yaml:"topic"`
	Partitions []int32 `json:"partitions" yaml:"partitions"`
}

// JSONGroupPartition is a partition the group consumes or committed to.
type JSONGroupPartition struct {
	Topic     string `json:"topic" yaml:"topic"`
	Partition int32  `json:"partition" yaml:"partition"`
	// CurrentOffset is the committed offset, null if the group has none.
	CurrentOffset  *int64 `json:"current_offset" yaml:"current_offset"`
	LogStartOffset *int64 `json:"log_start_offset" yaml:"log_start_offset"` // null if it could not be listed
	LogEndOffset   *int64 `json:"log_end_offset" yaml:"log_end_offset"`     // null if it could not be listed
	// Lag is null when it is unknown (Error then says why) and when the
	// group has no committed offset, where Kafka's tool prints "-": kadm
	// would count such a partition as lagging by its whole log.
	Lag      *int64 `json:"lag" yaml:"lag"`
	MemberID string `json:"member_id,omitempty" yaml:"member_id,omitempty"` // empty if no member is assigned
	Error    string `json:"error,omitempty" yaml:"error,omitempty"`
}

func newGroupDescribeCmd(opts *ClientOptions) *cobra.Command {
	var format string
	var inFlight adminOptions
	cmd := &cobra.Command{
		Use:   "describe GROUP...",
		Short: "Show a group's members, committed offsets and lag per partition",
		Long: "Show a group's state, members and, per partition, the committed offset, the log\n" +
			"start and end offsets and the lag. A partition without a committed offset lags by\n" +
			"everything between its log start and end. --format json or yaml prints a list with\n" +
			"one object per group.\n\n" +
			"A share group (KIP-932) shows its members and assignments and, per partition, the\n" +
			"share-partition start offset (every record before it is acknowledged or archived)\n" +
			"and the lag. Kafka's APIs carry no in-flight counts: with --http (an agent's HTTP\n" +
			"address) the agent adds, per partition, the records available, in flight (acquired)\n" +
			"and archived between the start and end offsets; without it those columns show \"-\".",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := CheckOutputFormat(format); err != nil {
				return err
			}
			groups := uniq(args)
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			// Share groups have no commits for Lag to read: they are
			// described by their own APIs (group_describe_share.go).
			share, err := shareGroupsAmong(ctx, adm, groups)
			if err != nil {
				return err
			}
			var classic, shared []string
			for _, g := range groups {
				if share[g] {
					shared = append(shared, g)
				} else {
					classic = append(classic, g)
				}
			}
			var errs []error
			lags := kadm.DescribedGroupLags{}
			if len(classic) > 0 {
				// Lag describes the groups, fetches their commits and
				// lists start and end offsets of every partition they are
				// assigned, want or committed to.
				if lags, err = adm.Lag(ctx, classic...); err != nil {
					return fmt.Errorf("describe groups: %w", err)
				}
			}
			shareDescribed, shareErrs := describeShareGroups(ctx, adm, shared)
			errs = append(errs, shareErrs...)
			for _, g := range shared {
				j, ok := shareDescribed[g]
				if !ok {
					continue
				}
				if note := j.addInFlight(ctx, &inFlight); note != "" {
					fmt.Fprintln(cmd.ErrOrStderr(), "note:", note)
				}
				shareDescribed[g] = j
			}
			// One entry per group described, in the order named: a
			// kadm.DescribedGroupLag or a JSONShareGroup.
			var described []any
			for _, g := range groups {
				if share[g] {
					if j, ok := shareDescribed[g]; ok {
						described = append(described, j)
					}
					continue
				}
				l, ok := lags[g]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("describe %s: missing from the broker's response", g))
				case errors.Is(l.DescribeErr, kerr.GroupIDNotFound) || (l.DescribeErr == nil && l.State == stateDead):
					errs = append(errs, fmt.Errorf("%w: %s", ErrUnknownGroup, g))
				case l.Error() != nil:
					errs = append(errs, fmt.Errorf("describe %s: %w", g, l.Error()))
				default:
					described = append(described, l)
				}
			}
			js := make([]any, 0, len(described))
			for _, d := range described {
				if l, ok := d.(kadm.DescribedGroupLag); ok {
					js = append(js, jsonGroup(l))
				} else {
					js = append(js, d)
				}
			}
			if err := WriteOutput(cmd.OutOrStdout(), format, js, func(w io.Writer) error {
				for i, d := range described {
					if i > 0 {
						fmt.Fprintln(w)
					}
					var err error
					switch d := d.(type) {
					case kadm.DescribedGroupLag:
						err = printGroup(w, d)
					case JSONShareGroup:
						err = printShareGroup(w, d)
					}
					if err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				return err
			}
			return errors.Join(errs...)
		},
	}
	// -f as well as --format: describe had it before the shared flag.
	cmd.Flags().StringVarP(&format, "format", "f", OutputText, "output format: text, json or yaml")
	cmd.Flags().StringVar(&inFlight.HTTP, "http", "", "an agent's HTTP address, host:port or https://host:port: also show a share group's available, in-flight and archived records per partition")
	cmd.Flags().DurationVar(&inFlight.Timeout, "http-timeout", 10*time.Second, "bound on the --http request")
	return cmd
}

// assignedCell renders a member's assignment as "t:0,1;u:2", the syntax
// --topic of reset-offsets takes.
func assignedCell(m kadm.DescribedGroupMember) string {
	var parts []string
	for _, tp := range assignedOf(m) {
		ps := make([]string, len(tp.Partitions))
		for i, p := range tp.Partitions {
			ps[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, tp.Topic+":"+strings.Join(ps, ","))
	}
	return dash(strings.Join(parts, ";"))
}

// assignedOf returns a consumer member's assignment sorted by topic and
// partition; members of other protocol types (connect) have none.
func assignedOf(m kadm.DescribedGroupMember) []JSONTopicPartitions {
	out := []JSONTopicPartitions{}
	a, ok := m.Assigned.AsConsumer()
	if !ok {
		return out
	}
	for _, t := range a.Topics {
		if len(t.Partitions) == 0 {
			continue
		}
		ps := slices.Clone(t.Partitions)
		slices.Sort(ps)
		out = append(out, JSONTopicPartitions{Topic: t.Topic, Partitions: ps})
	}
	slices.SortFunc(out, func(a, b JSONTopicPartitions) int { return strings.Compare(a.Topic, b.Topic) })
	return out
}

func printGroup(w io.Writer, l kadm.DescribedGroupLag) error {
	summary := newTable(w)
	summary.row("GROUP", l.Group)
	summary.row("COORDINATOR", l.Coordinator.NodeID)
	summary.row("STATE", dash(l.State))
	summary.row("PROTOCOL-TYPE", dash(l.ProtocolType))
	summary.row("PROTOCOL", dash(l.Protocol))
	summary.row("MEMBERS", len(l.Members))
	summary.row("TOTAL-LAG", knownLagTotal(l.Lag))
	if err := summary.flush(); err != nil {
		return err
	}

	if len(l.Members) > 0 {
		fmt.Fprintln(w)
		members := newTable(w, "MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNED")
		for _, m := range l.Members {
			instance := ""
			if m.InstanceID != nil {
				instance = *m.InstanceID
			}
			members.row(m.MemberID, dash(instance), dash(m.ClientID), dash(m.ClientHost), assignedCell(m))
		}
		if err := members.flush(); err != nil {
			return err
		}
	}

	sorted := l.Lag.Sorted()
	if len(sorted) == 0 {
		return nil
	}
	headers := []string{"TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-START-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID"}
	anyErr := slices.ContainsFunc(sorted, func(p kadm.GroupMemberLag) bool { return p.Err != nil })
	if anyErr {
		headers = append(headers, "ERROR")
	}
	fmt.Fprintln(w)
	parts := newTable(w, headers...)
	for _, p := range sorted {
		j := jsonPartition(p)
		cells := []any{p.Topic, p.Partition, int64Cell(j.CurrentOffset), int64Cell(j.LogStartOffset),
			int64Cell(j.LogEndOffset), int64Cell(j.Lag), dash(j.MemberID)}
		if anyErr {
			cells = append(cells, dash(j.Error))
		}
		parts.row(cells...)
	}
	return parts.flush()
}

func int64Cell(p *int64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10)
}

func jsonGroup(l kadm.DescribedGroupLag) JSONGroup {
	j := JSONGroup{
		Group:        l.Group,
		Coordinator:  l.Coordinator.NodeID,
		State:        l.State,
		ProtocolType: l.ProtocolType,
		Protocol:     l.Protocol,
		Members:      []JSONGroupMember{},
		Partitions:   []JSONGroupPartition{},
		TotalLag:     knownLagTotal(l.Lag),
	}
	for _, m := range l.Members {
		j.Members = append(j.Members, JSONGroupMember{
			MemberID:   m.MemberID,
			InstanceID: m.InstanceID,
			ClientID:   m.ClientID,
			Host:       m.ClientHost,
			Assigned:   assignedOf(m),
		})
	}
	for _, p := range l.Lag.Sorted() {
		j.Partitions = append(j.Partitions, jsonPartition(p))
	}
	return j
}

// jsonPartition is the one place that decides which of a partition's
// numbers are known, for both output formats.
func jsonPartition(p kadm.GroupMemberLag) JSONGroupPartition {
	known := func(v int64, err error) *int64 {
		if err != nil || v < 0 {
			return nil
		}
		return &v
	}
	j := JSONGroupPartition{
		Topic:          p.Topic,
		Partition:      p.Partition,
		CurrentOffset:  known(p.Commit.At, nil),
		LogStartOffset: known(p.Start.Offset, p.Start.Err),
		LogEndOffset:   known(p.End.Offset, p.End.Err),
		Lag:            known(p.Lag, p.Err),
	}
	if j.CurrentOffset == nil {
		j.Lag = nil
	}
	if p.Member != nil {
		j.MemberID = p.Member.MemberID
	}
	if p.Err != nil {
		j.Error = p.Err.Error()
	}
	return j
}

// knownLagTotal sums the lag of the partitions with a committed offset,
// the ones whose LAG cell is a number.
func knownLagTotal(l kadm.GroupLag) int64 {
	var total int64
	for _, p := range l.Sorted() {
		if lag := jsonPartition(p).Lag; lag != nil && *lag > 0 {
			total += *lag
		}
	}
	return total
}
