// The `share-group` command: what only share groups (KIP-932) have.
// seek moves share-partition start offsets (AlterShareGroupOffsets, 91),
// delete-offsets drops a topic's share-partition state
// (DeleteShareGroupOffsets, 92), delete deletes whole groups
// (DeleteGroups, which Kafka uses for share groups too). Listing and
// describing share groups is `group list` and `group describe`, as in
// Kafka's kafka-share-groups.sh and rpk.

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// NewShareGroupCommand returns `share-group` with its seek,
// delete-offsets and delete subcommands.
func NewShareGroupCommand() *cobra.Command {
	var opts ClientOptions
	cmd := &cobra.Command{
		Use:   "share-group",
		Short: "Seek and delete share groups' start offsets, delete share groups (list and describe: strand group)",
		Args:  cobra.NoArgs,
	}
	opts.Register(cmd.PersistentFlags())
	cmd.AddCommand(
		newShareGroupSeekCmd(&opts),
		newShareGroupDeleteOffsetsCmd(&opts),
		newGroupDeleteCmd(&opts),
	)
	return cmd
}

// shareSeekRow is one partition of a share-group seek, in --format json
// and yaml as in the table.
type shareSeekRow struct {
	Topic     string `json:"topic" yaml:"topic"`
	Partition int32  `json:"partition" yaml:"partition"`
	// OldStartOffset is null when the group had no state for the
	// partition.
	OldStartOffset *int64 `json:"old_start_offset" yaml:"old_start_offset"`
	NewStartOffset int64  `json:"new_start_offset" yaml:"new_start_offset"`
	// Status is OK or the Kafka error; empty in a --dry-run.
	Status string `json:"status,omitempty" yaml:"status,omitempty"`
}

func newShareGroupSeekCmd(opts *ClientOptions) *cobra.Command {
	var (
		to         string
		topics     []string
		partitions []int32
		dryRun     bool
		format     *string
	)
	cmd := &cobra.Command{
		Use:   "seek GROUP --to start|end|OFFSET|@MS|RFC3339 [--topic T] [-p 0,1] [--dry-run]",
		Short: "Move an empty share group's start offsets: the start, the end, an offset or a time",
		Long: "Set the share-partition start offsets of an empty share group (AlterShareGroupOffsets):\n" +
			"its consumers then receive the records from there on, and everything before counts\n" +
			"as done. Kafka allows this only while the group has no members; one with members is\n" +
			"refused. --dry-run prints every partition it would set and sets nothing.\n\n" +
			"--to is start, end, an offset, or a time: @<Unix milliseconds> or RFC 3339\n" +
			"(2006-01-02T15:04:05Z), meaning the first offset at or after it. Offsets are clamped\n" +
			"into [log start, log end]. Without --topic, every partition the group has state for\n" +
			"moves; --topic T (repeatable; T:0,1 names partitions, -p those of every --topic\n" +
			"named without them) moves the partitions named, including ones the group never read.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			if to == "" {
				return fmt.Errorf("%w: --to is required: start, end, an offset, @<Unix ms> or an RFC 3339 time", ErrUsage)
			}
			target, err := parseSeekTarget(to)
			if err != nil {
				return err
			}
			specs, err := parseTopicSpecs(topics)
			if err != nil {
				return err
			}
			if len(partitions) > 0 && len(specs) == 0 {
				return fmt.Errorf("%w: -p needs --topic", ErrUsage)
			}
			for _, p := range partitions {
				if p < 0 {
					return fmt.Errorf("%w: -p: bad partition %d", ErrUsage, p)
				}
			}
			for i := range specs {
				if specs[i].partitions == nil && len(partitions) > 0 {
					specs[i].partitions = slices.Clone(partitions)
				}
			}
			if err := CheckOutputFormat(*format); err != nil {
				return err
			}
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if err := checkShareGroupEmpty(ctx, adm, group); err != nil {
				return err
			}
			current, err := shareStartOffsets(ctx, adm, group)
			if err != nil {
				return err
			}
			if len(specs) == 0 {
				if specs = committedSpecs(current); len(specs) == 0 {
					return fmt.Errorf("%w: share group %s has no start offsets; name topics with --topic", ErrNoCommit, group)
				}
			}
			plan, err := planReset(ctx, adm, target, specs, current)
			if err != nil {
				return err
			}
			rows := make([]shareSeekRow, len(plan))
			for i, r := range plan {
				rows[i] = shareSeekRow{Topic: r.topic, Partition: r.partition, NewStartOffset: r.new}
				if r.old >= 0 {
					rows[i].OldStartOffset = &r.old
				}
			}
			if dryRun {
				return writeShareSeek(cmd.OutOrStdout(), *format, rows, false)
			}
			offsets := make(kadm.Offsets)
			for _, r := range plan {
				offsets.Add(kadm.Offset{Topic: r.topic, Partition: r.partition, At: r.new, LeaderEpoch: -1})
			}
			resps, err := adm.AlterShareGroupOffsets(ctx, group, offsets)
			if errors.Is(err, kerr.NonEmptyGroup) {
				return fmt.Errorf("%w: %s: a member joined; stop its consumers first (%v)", ErrGroupActive, group, err)
			} else if err != nil {
				return fmt.Errorf("seek %s: %w", group, err)
			}
			failed := 0
			for i := range rows {
				rows[i].Status = "OK"
				if perr, ok := resps.Lookup(rows[i].Topic, rows[i].Partition); !ok {
					rows[i].Status = "missing from the broker's response"
				} else if perr != nil {
					rows[i].Status = perr.Error()
				}
				if rows[i].Status != "OK" {
					failed++
				}
			}
			if err := writeShareSeek(cmd.OutOrStdout(), *format, rows, true); err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%w: seek: %d of %d partitions failed", ErrPartialFailure, failed, len(rows))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "where to seek: start, end, an offset, @<Unix ms> or an RFC 3339 time")
	f.StringArrayVarP(&topics, "topic", "t", nil, "TOPIC or TOPIC:P1,P2 (repeatable; default: every partition the group has state for)")
	f.Int32SliceVarP(&partitions, "partitions", "p", nil, "partitions of each --topic named without its own list (default: all)")
	f.BoolVar(&dryRun, "dry-run", false, "print the start offsets that would be set and set nothing")
	format = addOutputFlag(cmd)
	return cmd
}

func writeShareSeek(w io.Writer, format string, rows []shareSeekRow, withStatus bool) error {
	return WriteOutput(w, format, rows, func(w io.Writer) error {
		headers := []string{"TOPIC", "PARTITION", "OLD-START-OFFSET", "NEW-START-OFFSET"}
		if withStatus {
			headers = append(headers, "STATUS")
		}
		t := newTable(w, headers...)
		for _, r := range rows {
			cells := []any{r.Topic, r.Partition, int64Cell(r.OldStartOffset), r.NewStartOffset}
			if withStatus {
				cells = append(cells, r.Status)
			}
			t.row(cells...)
		}
		return t.flush()
	})
}

// checkShareGroupEmpty fails if the group has members (Kafka's rule for
// altering or deleting share offsets: the members hold records the
// change would pull from under them). A group that does not exist yet
// passes: seeking creates its state.
func checkShareGroupEmpty(ctx context.Context, adm *kadm.Client, group string) error {
	described, err := adm.DescribeShareGroups(ctx, group)
	if err != nil && len(described) == 0 {
		return fmt.Errorf("describe share group %s: %w", group, err)
	}
	g, ok := described[group]
	switch {
	case !ok:
		return fmt.Errorf("describe share group %s: missing from the broker's response", group)
	case errors.Is(g.Err, kerr.GroupIDNotFound):
		return nil
	case g.Err != nil:
		return fmt.Errorf("describe share group %s: %w", group, g.Err)
	case len(g.Members) > 0:
		return fmt.Errorf("%w: %s (state %s, members: %d); share offsets can only be changed while the group is empty: stop its consumers first",
			ErrGroupActive, group, g.GroupState, len(g.Members))
	}
	return nil
}

// shareStartOffsets returns the group's share-partition start offsets in
// the shape reset plans read committed offsets from; partitions without
// a start offset (never initialized, or failed) are left out.
func shareStartOffsets(ctx context.Context, adm *kadm.Client, group string) (kadm.OffsetResponses, error) {
	described, err := adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil && len(described) == 0 {
		return nil, fmt.Errorf("describe share offsets of %s: %w", group, err)
	}
	out := make(kadm.OffsetResponses)
	d, ok := described[group]
	switch {
	case !ok:
		return nil, fmt.Errorf("describe share offsets of %s: missing from the broker's response", group)
	case errors.Is(d.Err, kerr.GroupIDNotFound):
		return out, nil
	case d.Err != nil:
		return nil, fmt.Errorf("describe share offsets of %s: %w", group, d.Err)
	}
	d.Offsets.Each(func(o kadm.ShareOffset) {
		if o.Err == nil && o.StartOffset >= 0 {
			out.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.StartOffset}})
		}
	})
	return out, nil
}

// shareDeleteRow is one topic's result of delete-offsets.
type shareDeleteRow struct {
	Topic string `json:"topic" yaml:"topic"`
	// Status is OK or the Kafka error.
	Status string `json:"status" yaml:"status"`
}

func newShareGroupDeleteOffsetsCmd(opts *ClientOptions) *cobra.Command {
	var (
		topics []string
		format *string
	)
	cmd := &cobra.Command{
		Use:   "delete-offsets GROUP --topic T",
		Short: "Delete an empty share group's state of some topics (DeleteShareGroupOffsets)",
		Long: "Delete an empty share group's share-partition state of whole topics: its start\n" +
			"offsets and what it knew of in-flight and archived records. The group then starts\n" +
			"those topics again from share.auto.offset.reset. Kafka allows this only while the\n" +
			"group has no members. Each topic's result is printed; the command fails if any failed.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			topics = uniq(topics)
			if len(topics) == 0 {
				return fmt.Errorf("%w: give --topic (repeatable)", ErrUsage)
			}
			if slices.Contains(topics, "") {
				return fmt.Errorf("%w: --topic: empty topic name", ErrUsage)
			}
			if err := CheckOutputFormat(*format); err != nil {
				return err
			}
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if err := checkShareGroupEmpty(ctx, adm, group); err != nil {
				return err
			}
			resps, err := adm.DeleteShareGroupOffsets(ctx, group, topics...)
			switch {
			case errors.Is(err, kerr.NonEmptyGroup):
				return fmt.Errorf("%w: %s: a member joined; stop its consumers first (%v)", ErrGroupActive, group, err)
			case errors.Is(err, kerr.GroupIDNotFound):
				return fmt.Errorf("%w: %s", ErrUnknownGroup, group)
			case err != nil:
				return fmt.Errorf("delete-offsets %s: %w", group, err)
			}
			out := make([]shareDeleteRow, 0, len(topics))
			failed := 0
			for _, topic := range topics {
				status := "OK"
				if terr, ok := resps.Lookup(topic); !ok {
					status = "missing from the broker's response"
				} else if terr != nil {
					status = terr.Error()
				}
				if status != "OK" {
					failed++
				}
				out = append(out, shareDeleteRow{Topic: topic, Status: status})
			}
			if err := WriteOutput(cmd.OutOrStdout(), *format, out, func(w io.Writer) error {
				t := newTable(w, "TOPIC", "STATUS")
				for _, r := range out {
					t.row(r.Topic, r.Status)
				}
				return t.flush()
			}); err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%w: delete-offsets: %d of %d topics failed", ErrPartialFailure, failed, len(out))
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&topics, "topic", "t", nil, "a topic whose share state to delete (repeatable)")
	format = addOutputFlag(cmd)
	return cmd
}
