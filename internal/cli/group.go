package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Sentinel errors of the group commands.
var (
	// ErrUnknownGroup reports a group the cluster does not have.
	ErrUnknownGroup = errors.New("unknown group")
	// ErrGroupActive reports a group that still has members, so its
	// offsets cannot be reset: the members would overwrite them with
	// their next commit.
	ErrGroupActive = errors.New("group has active members")
	// ErrNoCommit reports that a reset needs a committed offset the group
	// does not have (--shift-by from nothing, --all-topics of a group that
	// never committed).
	ErrNoCommit = errors.New("no committed offset")
)

// Group states as brokers name them: the classic protocol's, then those
// KIP-848 groups add. --state matches them case-insensitively.
var groupStates = []string{
	"Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Dead",
	"Assigning", "Reconciling", "NotReady",
}

const (
	stateEmpty = "Empty"
	stateDead  = "Dead" // what brokers call a group they do not have

	// formatText is the default --format of `group describe`.
	formatText = "text"
)

// NewGroupCommand returns `group` with its list, describe, delete and
// reset-offsets subcommands.
func NewGroupCommand() *cobra.Command {
	var opts ClientOptions
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe (with lag), delete consumer groups and reset their offsets",
		Args:  cobra.NoArgs,
	}
	opts.Register(cmd.PersistentFlags())
	cmd.AddCommand(
		newGroupListCmd(&opts),
		newGroupDescribeCmd(&opts),
		newGroupDeleteCmd(&opts),
		newGroupResetCmd(&opts),
	)
	return cmd
}

// dash renders an absent value as a visible cell, so columns stay
// whitespace-separable for scripts.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// canonicalStates maps --state values to the brokers' spelling.
func canonicalStates(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, s := range in {
		i := slices.IndexFunc(groupStates, func(g string) bool { return strings.EqualFold(g, strings.TrimSpace(s)) })
		if i < 0 {
			return nil, fmt.Errorf("%w: --state %q: want one of %s", ErrUsage, s, strings.Join(groupStates, ", "))
		}
		if !slices.Contains(out, groupStates[i]) {
			out = append(out, groupStates[i])
		}
	}
	return out, nil
}

func newGroupListCmd(opts *ClientOptions) *cobra.Command {
	var states []string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List groups with their state and protocol type",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			filter, err := canonicalStates(states)
			if err != nil {
				return err
			}
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			// Brokers filter by state (ListGroups v4+); a partial answer
			// (one broker failed) is still printed before the error.
			listed, listErr := adm.ListGroups(ctx, filter...)
			t := newTable(cmd.OutOrStdout(), "GROUP", "STATE", "PROTOCOL-TYPE")
			for _, g := range listed.Sorted() {
				t.row(g.Group, dash(g.State), dash(g.ProtocolType))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if listErr != nil {
				return fmt.Errorf("list groups: %w", listErr)
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only groups in these states, comma-separated or repeated ("+strings.Join(groupStates, ", ")+")")
	return cmd
}

func newGroupDeleteCmd(opts *ClientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP...",
		Short: "Delete groups and their committed offsets",
		Long: "Delete groups and their committed offsets. A group with active members cannot be\n" +
			"deleted (NON_EMPTY_GROUP). Each group's result is printed; the command fails if any failed.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			groups := uniq(args)
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			// A shard error leaves the groups of the failed coordinator
			// out of resps; they are reported per group below.
			resps, delErr := adm.DeleteGroups(ctx, groups...)
			t := newTable(cmd.OutOrStdout(), "GROUP", "STATUS")
			failed := 0
			for _, g := range groups {
				status := "OK"
				r, ok := resps[g]
				switch {
				case !ok && delErr != nil:
					status = "error: " + delErr.Error()
				case !ok:
					status = "missing from the broker's response"
				case r.Err != nil:
					status = errText(r.Err, r.ErrMessage)
				}
				if status != "OK" {
					failed++
				}
				t.row(g, status)
			}
			if err := t.flush(); err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%w: delete: %d of %d groups failed", ErrPartialFailure, failed, len(groups))
			}
			return nil
		},
	}
}

// uniq drops repeated arguments, keeping the first occurrence's order.
func uniq(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// JSONGroup is the shape of one line of `group describe --format json`.
type JSONGroup struct {
	Group        string               `json:"group"`
	Coordinator  int32                `json:"coordinator"`
	State        string               `json:"state"`
	ProtocolType string               `json:"protocol_type"`
	Protocol     string               `json:"protocol"`
	Members      []JSONGroupMember    `json:"members"`
	Partitions   []JSONGroupPartition `json:"partitions"`
	// TotalLag sums the lag of the partitions whose lag is known.
	TotalLag int64 `json:"total_lag"`
}

// JSONGroupMember is one member of a described group.
type JSONGroupMember struct {
	MemberID   string                `json:"member_id"`
	InstanceID *string               `json:"instance_id"` // null without static membership
	ClientID   string                `json:"client_id"`
	Host       string                `json:"host"`
	Assigned   []JSONTopicPartitions `json:"assigned"`
}

// JSONTopicPartitions is a topic and some of its partitions.
type JSONTopicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// JSONGroupPartition is a partition the group consumes or committed to.
type JSONGroupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// CurrentOffset is the committed offset, null if the group has none.
	CurrentOffset  *int64 `json:"current_offset"`
	LogStartOffset *int64 `json:"log_start_offset"` // null if it could not be listed
	LogEndOffset   *int64 `json:"log_end_offset"`   // null if it could not be listed
	// Lag is null when it is unknown; Error then says why.
	Lag      *int64 `json:"lag"`
	MemberID string `json:"member_id,omitempty"` // empty if no member is assigned
	Error    string `json:"error,omitempty"`
}

func newGroupDescribeCmd(opts *ClientOptions) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "describe GROUP...",
		Short: "Show a group's members, committed offsets and lag per partition",
		Long: "Show a group's state, members and, per partition, the committed offset, the log\n" +
			"start and end offsets and the lag. A partition without a committed offset lags by\n" +
			"everything between its log start and end. --format json prints one object per group\n" +
			"per line.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != formatText && format != FormatJSON {
				return fmt.Errorf("%w: --format %q: want text or json", ErrUsage, format)
			}
			groups := uniq(args)
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			// Lag describes the groups, fetches their commits and lists
			// start and end offsets of every partition they are assigned,
			// want or committed to.
			lags, err := adm.Lag(ctx, groups...)
			if err != nil {
				return fmt.Errorf("describe groups: %w", err)
			}
			w := cmd.OutOrStdout()
			var errs []error
			printed := 0
			for _, g := range groups {
				l, ok := lags[g]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("describe %s: missing from the broker's response", g))
					continue
				case errors.Is(l.DescribeErr, kerr.GroupIDNotFound) || (l.DescribeErr == nil && l.State == stateDead):
					errs = append(errs, fmt.Errorf("%w: %s", ErrUnknownGroup, g))
					continue
				case l.Error() != nil:
					errs = append(errs, fmt.Errorf("describe %s: %w", g, l.Error()))
					continue
				}
				if format == FormatJSON {
					b, err := json.Marshal(jsonGroup(l))
					if err != nil {
						return err
					}
					if _, err := w.Write(append(b, '\n')); err != nil {
						return err
					}
					continue
				}
				if printed > 0 {
					fmt.Fprintln(w)
				}
				printed++
				if err := printGroup(w, l); err != nil {
					return err
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringVarP(&format, "format", "f", formatText, "output: text or json (one object per group per line)")
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
	summary.row("TOTAL-LAG", l.Lag.Total())
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
		TotalLag:     l.Lag.Total(),
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
	if p.Member != nil {
		j.MemberID = p.Member.MemberID
	}
	if p.Err != nil {
		j.Error = p.Err.Error()
	}
	return j
}

// resetKind says where reset-offsets moves each partition.
type resetKind int

const (
	resetEarliest  resetKind = iota // the log start offset
	resetLatest                     // the log end offset (high watermark)
	resetTimestamp                  // the first offset at or after a time
	resetOffset                     // an absolute offset
	resetShift                      // the committed offset plus n
)

type resetTarget struct {
	kind resetKind
	n    int64 // the timestamp in Unix ms, the offset, or the shift
}

type resetOptions struct {
	topics                  []string
	allTopics               bool
	toEarliest, toLatest    bool
	toTimestamp             string
	toOffset, shiftBy       int64
	dryRun, execute         bool
	toOffsetSet, shiftBySet bool // whether the int flags were given at all
}

// topicSpec is one --topic: a topic and some partitions, or all of them
// (nil).
type topicSpec struct {
	topic      string
	partitions []int32
}

// parseTopicSpecs merges --topic T[:p1,p2] flags per topic, in the order
// first named; a topic named once without partitions means all of them.
func parseTopicSpecs(flags []string) ([]topicSpec, error) {
	var specs []topicSpec
	for _, f := range flags {
		topic, list, hasList := strings.Cut(f, ":")
		if topic == "" || (hasList && list == "") {
			return nil, fmt.Errorf("%w: --topic %q: want TOPIC or TOPIC:P1,P2", ErrUsage, f)
		}
		var ps []int32
		if hasList {
			for s := range strings.SplitSeq(list, ",") {
				p, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
				if err != nil || p < 0 {
					return nil, fmt.Errorf("%w: --topic %q: bad partition %q", ErrUsage, f, s)
				}
				ps = append(ps, int32(p))
			}
		}
		i := slices.IndexFunc(specs, func(s topicSpec) bool { return s.topic == topic })
		switch {
		case i < 0:
			specs = append(specs, topicSpec{topic: topic, partitions: ps})
		case specs[i].partitions == nil || ps == nil:
			specs[i].partitions = nil
		default:
			specs[i].partitions = append(specs[i].partitions, ps...)
		}
	}
	for i := range specs {
		slices.Sort(specs[i].partitions)
		specs[i].partitions = slices.Compact(specs[i].partitions)
	}
	return specs, nil
}

// parseTimestamp reads --to-timestamp: Unix milliseconds or RFC 3339.
func parseTimestamp(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 {
			return 0, fmt.Errorf("%w: --to-timestamp %d is negative", ErrUsage, ms)
		}
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%w: --to-timestamp %q: want Unix milliseconds or RFC 3339 (2006-01-02T15:04:05Z)", ErrUsage, s)
	}
	if t.UnixMilli() < 0 {
		return 0, fmt.Errorf("%w: --to-timestamp %q is before 1970", ErrUsage, s)
	}
	return t.UnixMilli(), nil
}

// validate checks flag combinations before anything connects.
func (o *resetOptions) validate() (resetTarget, []topicSpec, error) {
	var targets []resetTarget
	if o.toEarliest {
		targets = append(targets, resetTarget{kind: resetEarliest})
	}
	if o.toLatest {
		targets = append(targets, resetTarget{kind: resetLatest})
	}
	if o.toTimestamp != "" {
		ms, err := parseTimestamp(o.toTimestamp)
		if err != nil {
			return resetTarget{}, nil, err
		}
		targets = append(targets, resetTarget{kind: resetTimestamp, n: ms})
	}
	if o.toOffsetSet {
		if o.toOffset < 0 {
			return resetTarget{}, nil, fmt.Errorf("%w: --to-offset %d is negative", ErrUsage, o.toOffset)
		}
		targets = append(targets, resetTarget{kind: resetOffset, n: o.toOffset})
	}
	if o.shiftBySet {
		targets = append(targets, resetTarget{kind: resetShift, n: o.shiftBy})
	}
	if len(targets) != 1 {
		return resetTarget{}, nil, fmt.Errorf("%w: give exactly one of --to-earliest, --to-latest, --to-timestamp, --to-offset, --shift-by", ErrUsage)
	}
	if (len(o.topics) > 0) == o.allTopics {
		return resetTarget{}, nil, fmt.Errorf("%w: give --topic (repeatable) or --all-topics", ErrUsage)
	}
	if o.dryRun && o.execute {
		return resetTarget{}, nil, fmt.Errorf("%w: --dry-run and --execute exclude each other", ErrUsage)
	}
	specs, err := parseTopicSpecs(o.topics)
	if err != nil {
		return resetTarget{}, nil, err
	}
	return targets[0], specs, nil
}

func newGroupResetCmd(opts *ClientOptions) *cobra.Command {
	var o resetOptions
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP",
		Short: "Move a group's committed offsets (a dry run unless --execute)",
		Long: "Move an inactive group's committed offsets. Like Kafka's kafka-consumer-groups, this only\n" +
			"prints the plan unless --execute is given, and refuses a group with active members: they\n" +
			"would overwrite the new offsets with their next commit.\n\n" +
			"Partitions: --topic T (all partitions) or --topic T:0,2, repeatable, or --all-topics (every\n" +
			"partition the group has committed to). New offsets are clamped into [log start, log end].\n" +
			"--to-timestamp takes Unix milliseconds or RFC 3339 and picks the first offset at or after\n" +
			"it (the log end if there is none).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.toOffsetSet = cmd.Flags().Changed("to-offset")
			o.shiftBySet = cmd.Flags().Changed("shift-by")
			return o.run(cmd, opts, args[0])
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.topics, "topic", "t", nil, "TOPIC or TOPIC:P1,P2 to reset (repeatable)")
	f.BoolVar(&o.allTopics, "all-topics", false, "reset every partition the group has a committed offset for")
	f.BoolVar(&o.toEarliest, "to-earliest", false, "reset to the log start offset")
	f.BoolVar(&o.toLatest, "to-latest", false, "reset to the log end offset")
	f.StringVar(&o.toTimestamp, "to-timestamp", "", "reset to the first offset at or after this time (Unix ms or RFC 3339)")
	f.Int64Var(&o.toOffset, "to-offset", 0, "reset to this offset")
	f.Int64Var(&o.shiftBy, "shift-by", 0, "move the committed offset by N (negative: back)")
	f.BoolVar(&o.dryRun, "dry-run", false, "only print the plan (the default without --execute)")
	f.BoolVar(&o.execute, "execute", false, "commit the new offsets")
	return cmd
}

// resetRow is one partition of a reset plan.
type resetRow struct {
	topic     string
	partition int32
	old       int64 // -1: no committed offset
	new       int64
}

func (o *resetOptions) run(cmd *cobra.Command, opts *ClientOptions, group string) error {
	target, specs, err := o.validate()
	if err != nil {
		return err
	}
	adm, ctx, done, err := opts.admin(cmd.Context())
	if err != nil {
		return err
	}
	defer done()

	if err := checkInactive(ctx, adm, group); err != nil {
		return err
	}
	commits, err := adm.FetchOffsets(ctx, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return fmt.Errorf("fetch committed offsets of %s: %w", group, err)
	}
	if err := commits.Error(); err != nil {
		return fmt.Errorf("fetch committed offsets of %s: %w", group, err)
	}
	if o.allTopics {
		specs = nil
		for _, c := range commits.Sorted() {
			if len(specs) == 0 || specs[len(specs)-1].topic != c.Topic {
				specs = append(specs, topicSpec{topic: c.Topic})
			}
			last := &specs[len(specs)-1]
			last.partitions = append(last.partitions, c.Partition)
		}
		if len(specs) == 0 {
			return fmt.Errorf("%w: group %s has no committed offsets for --all-topics; name topics with --topic", ErrNoCommit, group)
		}
	}

	plan, err := planReset(ctx, adm, target, specs, commits)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if !o.execute {
		t := newTable(w, "TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET")
		for _, r := range plan {
			t.row(r.topic, r.partition, oldCell(r.old), r.new)
		}
		if err := t.flush(); err != nil {
			return err
		}
		if !o.dryRun {
			fmt.Fprintln(cmd.ErrOrStderr(), "dry run: nothing was committed; pass --execute to commit these offsets")
		}
		return nil
	}

	offsets := make(kadm.Offsets)
	for _, r := range plan {
		// No leader epoch: the new offset need not lie in the epoch of
		// the old one, and -1 tells consumers not to validate it.
		offsets.Add(kadm.Offset{Topic: r.topic, Partition: r.partition, At: r.new, LeaderEpoch: -1})
	}
	// The broker is the final judge of "inactive": a member that joined
	// since checkInactive makes it reject the commit (UNKNOWN_MEMBER_ID),
	// which shows per partition below.
	resps, err := adm.CommitOffsets(ctx, group, offsets)
	if err != nil {
		return fmt.Errorf("commit offsets of %s: %w", group, err)
	}
	t := newTable(w, "TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET", "STATUS")
	failed := 0
	for _, r := range plan {
		status := "OK"
		if resp, ok := resps.Lookup(r.topic, r.partition); !ok {
			status = "missing from the broker's response"
		} else if resp.Err != nil {
			status = resp.Err.Error()
		}
		if status != "OK" {
			failed++
		}
		t.row(r.topic, r.partition, oldCell(r.old), r.new, status)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%w: reset-offsets: %d of %d partitions failed", ErrPartialFailure, failed, len(plan))
	}
	return nil
}

func oldCell(old int64) string {
	if old < 0 {
		return "-"
	}
	return strconv.FormatInt(old, 10)
}

// checkInactive fails unless the group is Empty or does not exist yet
// (Kafka's rule): a live member would overwrite a reset with its next
// commit.
func checkInactive(ctx context.Context, adm *kadm.Client, group string) error {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("describe group %s: %w", group, err)
	}
	g, ok := described[group]
	switch {
	case !ok:
		return fmt.Errorf("describe group %s: missing from the broker's response", group)
	case errors.Is(g.Err, kerr.GroupIDNotFound):
		return nil // a new group: resetting creates its offsets
	case g.Err != nil:
		return fmt.Errorf("describe group %s: %s", group, errText(g.Err, g.ErrMessage))
	case len(g.Members) > 0 || (g.State != stateEmpty && g.State != stateDead):
		return fmt.Errorf("%w: %s (state %s, members: %d); offsets can only be reset while the group is inactive: stop its consumers first",
			ErrGroupActive, group, g.State, len(g.Members))
	}
	return nil
}

// planReset resolves target for every partition of specs into a new
// offset within [log start, log end], sorted by topic and partition.
func planReset(ctx context.Context, adm *kadm.Client, target resetTarget, specs []topicSpec, commits kadm.OffsetResponses) ([]resetRow, error) {
	topics := make([]string, len(specs))
	for i, s := range specs {
		topics[i] = s.topic
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	var atTime kadm.ListedOffsets
	if target.kind == resetTimestamp {
		if atTime, err = adm.ListOffsetsAfterMilli(ctx, target.n, topics...); err != nil {
			return nil, fmt.Errorf("list offsets at %d ms: %w", target.n, err)
		}
	}

	var plan []resetRow
	for _, s := range specs {
		ps := ends[s.topic]
		if unknown, ok := ps[-1]; len(ps) == 0 || ok {
			if ok && !errors.Is(unknown.Err, kerr.UnknownTopicOrPartition) {
				return nil, fmt.Errorf("list offsets of %s: %w", s.topic, unknown.Err)
			}
			return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, s.topic)
		}
		partitions := s.partitions
		if partitions == nil {
			for p := range ps {
				partitions = append(partitions, p)
			}
		}
		for _, p := range partitions {
			end, ok := ps[p]
			if !ok {
				return nil, fmt.Errorf("%w: %s has no partition %d", ErrUsage, s.topic, p)
			}
			start, ok := starts.Lookup(s.topic, p)
			if !ok || start.Err != nil || end.Err != nil {
				return nil, fmt.Errorf("list offsets of %s/%d: %v", s.topic, p,
					cmp.Or(end.Err, start.Err, errors.New("start offset missing")))
			}
			old := int64(-1)
			if c, ok := commits.Lookup(s.topic, p); ok && c.At >= 0 {
				old = c.At
			}
			var at int64
			switch target.kind {
			case resetEarliest:
				at = start.Offset
			case resetLatest:
				at = end.Offset
			case resetOffset:
				at = target.n
			case resetShift:
				if old < 0 {
					return nil, fmt.Errorf("%w: cannot shift %s/%d", ErrNoCommit, s.topic, p)
				}
				// old >= 0, so only a positive shift can overflow.
				if target.n > 0 && old > math.MaxInt64-target.n {
					at = math.MaxInt64
				} else {
					at = old + target.n
				}
			case resetTimestamp:
				// kadm answers "no record at or after" with the log
				// end, as Kafka's tool does; -1 is a last resort.
				at = end.Offset
				if o, ok := atTime.Lookup(s.topic, p); ok && o.Err == nil && o.Offset >= 0 {
					at = o.Offset
				} else if ok && o.Err != nil {
					return nil, fmt.Errorf("list offsets of %s/%d at %d ms: %w", s.topic, p, target.n, o.Err)
				}
			}
			plan = append(plan, resetRow{
				topic:     s.topic,
				partition: p,
				old:       old,
				new:       max(start.Offset, min(at, end.Offset)),
			})
		}
	}
	slices.SortFunc(plan, func(a, b resetRow) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	return plan, nil
}
