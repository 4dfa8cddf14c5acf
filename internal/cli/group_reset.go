// `group reset-offsets`: move an inactive group's committed offsets: flag
// validation, the plan (clamped into each partition's log), and the
// commit when --execute is given.

package cli

import (
	"cmp"
	"context"
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

	scope := scopeNamed
	if o.allTopics {
		scope = scopeCommittedPartition
	}
	plan, err := inactivePlan(ctx, adm, group, target, specs, scope)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if !o.execute {
		if err := printPlan(w, plan); err != nil {
			return err
		}
		if !o.dryRun {
			fmt.Fprintln(cmd.ErrOrStderr(), "dry run: nothing was committed; pass --execute to commit these offsets")
		}
		return nil
	}
	return commitPlan(ctx, adm, group, plan, w, "reset-offsets")
}

// committedScope says which partitions a plan without named topics moves.
type committedScope int

const (
	scopeNamed              committedScope = iota // only the specs given
	scopeCommittedPartition                       // every partition the group committed to (Kafka's --all-topics)
	scopeCommittedTopic                           // every partition of every topic it committed to (rpk's seek)
)

// inactivePlan checks that group is inactive and plans moving its
// offsets of specs (or of what scope adds) to target; reset-offsets and
// seek share it.
func inactivePlan(ctx context.Context, adm *kadm.Client, group string, target resetTarget, specs []topicSpec, scope committedScope) ([]resetRow, error) {
	if err := checkInactive(ctx, adm, group); err != nil {
		return nil, err
	}
	commits, err := adm.FetchOffsets(ctx, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("fetch committed offsets of %s: %w", group, err)
	}
	if err := commits.Error(); err != nil {
		return nil, fmt.Errorf("fetch committed offsets of %s: %w", group, err)
	}
	if scope != scopeNamed {
		if specs = committedSpecs(commits); len(specs) == 0 {
			return nil, fmt.Errorf("%w: group %s has no committed offsets; name topics with --topic", ErrNoCommit, group)
		}
		if scope == scopeCommittedTopic {
			for i := range specs {
				specs[i].partitions = nil // all of them, committed or not
			}
		}
	}
	return planReset(ctx, adm, target, specs, commits)
}

// printPlan writes the offsets a plan would commit.
func printPlan(w io.Writer, plan []resetRow) error {
	t := newTable(w, "TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET")
	for _, r := range plan {
		t.row(r.topic, r.partition, oldCell(r.old), r.new)
	}
	return t.flush()
}

// committedSpecs lists every partition the group has a committed offset
// for, by topic.
func committedSpecs(commits kadm.OffsetResponses) []topicSpec {
	var specs []topicSpec
	for _, c := range commits.Sorted() {
		if len(specs) == 0 || specs[len(specs)-1].topic != c.Topic {
			specs = append(specs, topicSpec{topic: c.Topic})
		}
		last := &specs[len(specs)-1]
		last.partitions = append(last.partitions, c.Partition)
	}
	return specs
}

// commitPlan commits plan's new offsets for group and prints each
// partition's status; what names the command in the error.
func commitPlan(ctx context.Context, adm *kadm.Client, group string, plan []resetRow, w io.Writer, what string) error {
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
		return fmt.Errorf("%w: %s: %d of %d partitions failed", ErrPartialFailure, what, failed, len(plan))
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
