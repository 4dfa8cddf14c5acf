// `group seek` (rpk's: move an inactive group's offsets to the start,
// the end, an offset or a time, on reset-offsets' plan) and `group
// offset-delete` (OffsetDelete, KIP-496: drop a group's committed offsets
// of some partitions).

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// parseSeekTarget reads seek's --to: start, end, an offset, or a time as
// @<Unix ms> (the '@' of rpk's and kcat's timestamp offsets) or RFC 3339.
// A bare number is an offset, never a time, so the two cannot be
// confused.
func parseSeekTarget(to string) (resetTarget, error) {
	switch {
	case to == "start":
		return resetTarget{kind: resetEarliest}, nil
	case to == "end":
		return resetTarget{kind: resetLatest}, nil
	case strings.HasPrefix(to, "@"):
		ms, err := parseTimestamp(to[1:])
		return resetTarget{kind: resetTimestamp, n: ms}, err
	}
	if n, err := strconv.ParseInt(to, 10, 64); err == nil {
		if n < 0 {
			return resetTarget{}, fmt.Errorf("%w: --to %d is negative", ErrUsage, n)
		}
		return resetTarget{kind: resetOffset, n: n}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, to)
	if err != nil || t.UnixMilli() < 0 {
		return resetTarget{}, fmt.Errorf("%w: --to %q: want start, end, an offset, @<Unix ms> or an RFC 3339 time", ErrUsage, to)
	}
	return resetTarget{kind: resetTimestamp, n: t.UnixMilli()}, nil
}

func newGroupSeekCmd(opts *ClientOptions) *cobra.Command {
	var (
		to       string
		topics   []string
		dryRun   bool
		allowNew bool
	)
	cmd := &cobra.Command{
		Use:   "seek GROUP --to start|end|OFFSET|@MS|RFC3339 [--topics T...]",
		Short: "Commit new offsets for an inactive group: the start, the end, an offset or a time",
		Long: "Move an inactive group's committed offsets, as rpk group seek does, and commit them\n" +
			"at once (--dry-run prints what would be committed and commits nothing). A group with\n" +
			"active members is refused: they would overwrite the offsets with their next commit.\n\n" +
			"--to is start, end, an offset, or a time: @<Unix milliseconds> or RFC 3339\n" +
			"(2006-01-02T15:04:05Z), meaning the first offset at or after it. Offsets are clamped\n" +
			"into [log start, log end]. Without --topics, every partition of every topic the group\n" +
			"has committed to moves, as rpk's seek moves them, including partitions of those topics\n" +
			"it never committed to; --topics T (repeatable, or comma-separated) moves every\n" +
			"partition of T instead; a topic the group never committed to is refused unless\n" +
			"--allow-new-topics, as rpk's. --dry-run lists each partition it would set, one row each.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return fmt.Errorf("%w: --to is required: start, end, an offset, @<Unix ms> or an RFC 3339 time", ErrUsage)
			}
			target, err := parseSeekTarget(to)
			if err != nil {
				return err
			}
			var specs []topicSpec
			for _, t := range uniq(topics) {
				if t == "" {
					return fmt.Errorf("%w: --topics: empty topic name", ErrUsage)
				}
				specs = append(specs, topicSpec{topic: t})
			}
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			scope := scopeNamed
			if len(specs) == 0 {
				scope = scopeCommittedTopic
			} else if !allowNew {
				if err := refuseNewTopics(ctx, adm, args[0], specs); err != nil {
					return err
				}
			}
			plan, err := inactivePlan(ctx, adm, args[0], target, specs, scope)
			if err != nil {
				return err
			}
			if dryRun {
				if err := printPlan(cmd.OutOrStdout(), plan); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "dry run: %d partitions listed, nothing was committed\n", len(plan))
				return nil
			}
			return commitPlan(ctx, adm, args[0], plan, cmd.OutOrStdout(), "seek")
		},
	}
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "where to seek: start, end, an offset, @<Unix ms> or an RFC 3339 time")
	f.StringSliceVar(&topics, "topics", nil, "only these topics, all their partitions (default: every partition the group committed to)")
	f.BoolVar(&dryRun, "dry-run", false, "print the offsets that would be committed and commit nothing")
	f.BoolVar(&allowNew, "allow-new-topics", false, "allow --topics to name topics the group has no commit for (as rpk's)")
	return cmd
}

// refuseNewTopics fails, naming --allow-new-topics, when a topic of specs
// has no committed offset in group: rpk's seek commits no new topic
// unless told to, since a group that never read a topic rarely means to
// start reading it at a seek.
func refuseNewTopics(ctx context.Context, adm *kadm.Client, group string, specs []topicSpec) error {
	commits, err := adm.FetchOffsets(ctx, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return fmt.Errorf("fetch committed offsets of %s: %w", group, err)
	}
	var fresh []string
	for _, s := range specs {
		if len(commits[s.topic]) == 0 {
			fresh = append(fresh, s.topic)
		}
	}
	if len(fresh) > 0 {
		return fmt.Errorf("%w: group %s has no committed offset in %s; pass --allow-new-topics to commit there too",
			ErrUsage, group, strings.Join(fresh, ", "))
	}
	return nil
}

// offsetDeleteRow is one partition's result, in --format json and yaml
// as in the table.
type offsetDeleteRow struct {
	Topic     string `json:"topic" yaml:"topic"`
	Partition int32  `json:"partition" yaml:"partition"`
	// Status is OK or the Kafka error name, e.g. GROUP_SUBSCRIBED_TO_TOPIC.
	Status string `json:"status" yaml:"status"`
}

func newGroupOffsetDeleteCmd(opts *ClientOptions) *cobra.Command {
	var (
		topics     []string
		partitions []int32
		format     *string
	)
	cmd := &cobra.Command{
		Use:   "offset-delete GROUP --topic T [-p 0,1]",
		Short: "Delete a group's committed offsets of some partitions (OffsetDelete, KIP-496)",
		Long: "Delete a group's committed offsets of some partitions, so the group starts them from\n" +
			"its reset policy next time. --topic T is repeatable; T:0,1 names partitions of one\n" +
			"topic, -p those of every --topic named without them; neither means every partition.\n" +
			"Kafka allows this for an empty group, or for topics no member subscribes to: a\n" +
			"subscribed topic's partitions fail with GROUP_SUBSCRIBED_TO_TOPIC, and a group that\n" +
			"is not empty and does not use the consumer protocol fails with NON_EMPTY_GROUP.\n" +
			"Each partition's result is printed; the command fails if any failed.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			if len(topics) == 0 {
				return fmt.Errorf("%w: give --topic (repeatable)", ErrUsage)
			}
			specs, err := parseTopicSpecs(topics)
			if err != nil {
				return err
			}
			if err := CheckOutputFormat(*format); err != nil {
				return err
			}
			for _, p := range partitions {
				if p < 0 {
					return fmt.Errorf("%w: -p: bad partition %d", ErrUsage, p)
				}
			}
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			set, err := offsetDeleteSet(ctx, adm, specs, partitions)
			if err != nil {
				return err
			}
			resps, err := adm.DeleteOffsets(ctx, group, set)
			if err != nil {
				// A group-level error: NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND...
				return fmt.Errorf("offset-delete %s: %w", group, err)
			}
			var out []offsetDeleteRow
			failed := 0
			for _, tp := range set.Sorted() {
				topic := tp.Topic
				for _, p := range tp.Partitions {
					status := "OK"
					if perr, ok := resps.Lookup(topic, p); !ok {
						status = "missing from the broker's response"
					} else if perr != nil {
						status = perr.Error()
					}
					if status != "OK" {
						failed++
					}
					out = append(out, offsetDeleteRow{Topic: topic, Partition: p, Status: status})
				}
			}
			err = WriteOutput(cmd.OutOrStdout(), *format, out, func(w io.Writer) error {
				t := newTable(w, "TOPIC", "PARTITION", "STATUS")
				for _, r := range out {
					t.row(r.Topic, r.Partition, r.Status)
				}
				return t.flush()
			})
			if err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%w: offset-delete: %d of %d partitions failed", ErrPartialFailure, failed, len(out))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&topics, "topic", "t", nil, "TOPIC or TOPIC:P1,P2 (repeatable)")
	f.Int32SliceVarP(&partitions, "partitions", "p", nil, "partitions of each --topic named without its own list (default: all)")
	format = addOutputFlag(cmd)
	return cmd
}

// offsetDeleteSet resolves specs to partitions: a spec's own list, else
// -p, else every partition the topic has.
func offsetDeleteSet(ctx context.Context, adm *kadm.Client, specs []topicSpec, partitions []int32) (kadm.TopicsSet, error) {
	set := make(kadm.TopicsSet)
	var all []string
	for _, s := range specs {
		switch {
		case s.partitions != nil:
			set.Add(s.topic, s.partitions...)
		case len(partitions) > 0:
			set.Add(s.topic, partitions...)
		default:
			all = append(all, s.topic)
		}
	}
	if len(all) == 0 {
		return set, nil
	}
	details, err := adm.ListTopics(ctx, all...)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	for _, topic := range all {
		d, ok := details[topic]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
		case d.Err != nil:
			return nil, fmt.Errorf("describe topic %s: %w", topic, d.Err)
		}
		set.Add(topic, d.Partitions.Numbers()...)
	}
	return set, nil
}
