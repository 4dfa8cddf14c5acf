package cli

// The topic subcommands that change an existing topic: alter-config
// (IncrementalAlterConfigs), add-partitions (CreatePartitions) and
// trim-prefix (DeleteRecords).

import (
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newTopicAlterConfigCmd(opts *ClientOptions) *cobra.Command {
	var sets, deletes []string
	cmd := &cobra.Command{
		Use:   "alter-config NAME... --set key=value --delete key",
		Short: "Set or delete topic configs (IncrementalAlterConfigs)",
		Long: "Set topic configs, or delete them so the topic falls back to the broker's default.\n" +
			"Only the configs named change; the others keep their values. Each topic's result is\n" +
			"printed; the command fails if any topic failed (e.g. INVALID_CONFIG).",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, topics []string) error {
			alters, err := configAlters(sets, deletes)
			if err != nil {
				return err
			}
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resps, err := adm.AlterTopicConfigs(ctx, alters, topics...)
			if err != nil {
				return fmt.Errorf("alter topic configs: %w", err)
			}
			return printTopicResults(cmd, "alter-config", topics, func(topic string) topicResult {
				r, err := resps.On(topic, nil)
				return topicResult{found: err == nil, err: r.Err, msg: r.ErrMessage}
			})
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&sets, "set", "s", nil, "config key=value to set (repeatable)")
	f.StringArrayVarP(&deletes, "delete", "d", nil, "config key to delete, back to the default (repeatable)")
	return cmd
}

// configAlters turns --set and --delete into one incremental alter per
// key; naming a key twice is a usage error, as the broker would refuse
// the request (INVALID_REQUEST).
func configAlters(sets, deletes []string) ([]kadm.AlterConfig, error) {
	if len(sets)+len(deletes) == 0 {
		return nil, fmt.Errorf("%w: nothing to change: give --set key=value or --delete key", ErrUsage)
	}
	var alters []kadm.AlterConfig
	seen := make(map[string]bool)
	add := func(a kadm.AlterConfig) error {
		if seen[a.Name] {
			return fmt.Errorf("%w: config %s named twice", ErrUsage, a.Name)
		}
		seen[a.Name] = true
		alters = append(alters, a)
		return nil
	}
	for _, kv := range sets {
		k, v, err := splitKeyValue("--set", kv)
		if err != nil {
			return nil, err
		}
		if err := add(kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)}); err != nil {
			return nil, err
		}
	}
	for _, k := range deletes {
		if k == "" {
			return nil, fmt.Errorf("%w: --delete needs a config key", ErrUsage)
		}
		if err := add(kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k}); err != nil {
			return nil, err
		}
	}
	return alters, nil
}

func newTopicAddPartitionsCmd(opts *ClientOptions) *cobra.Command {
	var add, total int
	cmd := &cobra.Command{
		Use:   "add-partitions NAME... (-n ADD | --total TOTAL)",
		Short: "Add partitions to topics (CreatePartitions)",
		Long: "Add partitions to topics. -n/--num is the number of partitions to add to each\n" +
			"topic, as rpk topic add-partitions takes it; --total is the new total instead, as\n" +
			"kafka-topics --alter --partitions takes it. Give one of the two. A topic cannot\n" +
			"shrink: a total at or below the current count is INVALID_PARTITIONS. Existing\n" +
			"records stay where they are; keys hash to other partitions afterwards, so keyed\n" +
			"data changes partition from then on.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, topics []string) error {
			byAdd, byTotal := cmd.Flags().Changed("num"), cmd.Flags().Changed("total")
			switch {
			case byAdd == byTotal:
				return fmt.Errorf("%w: give -n ADD (partitions to add, as rpk) or --total TOTAL (the new count, as kafka-topics)", ErrUsage)
			case byAdd && add < 1:
				return fmt.Errorf("%w: -n %d: the number of partitions to add, at least 1", ErrUsage, add)
			case byTotal && total < 1:
				return fmt.Errorf("%w: --total %d: the new partition count, at least 1", ErrUsage, total)
			}
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			var resps kadm.CreatePartitionsResponses
			if byAdd {
				// kadm lists the current counts and asks for count+add.
				resps, err = adm.CreatePartitions(ctx, add, topics...)
			} else {
				resps, err = adm.UpdatePartitions(ctx, total, topics...)
			}
			if err != nil {
				return fmt.Errorf("add partitions: %w", err)
			}
			return printTopicResults(cmd, "add-partitions", topics, func(topic string) topicResult {
				r, err := resps.On(topic, nil)
				return topicResult{found: err == nil, err: r.Err, msg: r.ErrMessage}
			})
		},
	}
	cmd.Flags().IntVarP(&add, "num", "n", 0, "number of partitions to add to each topic (as rpk)")
	cmd.Flags().IntVar(&total, "total", 0, "the new total number of partitions instead (as kafka-topics --partitions)")
	return cmd
}

func newTopicTrimPrefixCmd(opts *ClientOptions) *cobra.Command {
	var (
		partitions []int32
		offset     int64
	)
	cmd := &cobra.Command{
		Use:   "trim-prefix NAME -o OFFSET [-p PARTITION,...]",
		Short: "Delete the records below an offset (DeleteRecords)",
		Long: "Delete the records below OFFSET in the partitions given with -p, or in every\n" +
			"partition of the topic without -p. The partition's start offset moves up to\n" +
			"OFFSET and never down: an offset below the current start changes nothing. -o -1\n" +
			"means the high watermark, deleting every record. An offset past the high\n" +
			"watermark is OFFSET_OUT_OF_RANGE. One row is printed per partition; the command\n" +
			"fails if any partition failed.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			if !cmd.Flags().Changed("offset") {
				return fmt.Errorf("%w: -o OFFSET is required", ErrUsage)
			}
			if offset < -1 {
				return fmt.Errorf("%w: -o %d: an offset, or -1 for the high watermark", ErrUsage, offset)
			}
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if len(partitions) == 0 {
				details, err := adm.ListTopics(ctx, topic)
				if err != nil {
					return fmt.Errorf("trim-prefix: %w", err)
				}
				d, ok := details[topic]
				if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
					return fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
				}
				if d.Err != nil {
					return fmt.Errorf("trim-prefix %s: %w", topic, d.Err)
				}
				partitions = d.Partitions.Numbers()
			}
			slices.Sort(partitions)
			partitions = slices.Compact(partitions)
			var offsets kadm.Offsets
			for _, p := range partitions {
				offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: offset})
			}
			resps, err := adm.DeleteRecords(ctx, offsets)
			// A partition the client could not route (an unknown topic
			// or partition) fails alone, as a shard of the request.
			unrouted, err := shardPartitionErrors(err)
			if err != nil {
				return fmt.Errorf("trim-prefix: %w", err)
			}
			t := newTable(cmd.OutOrStdout(), "TOPIC", "PARTITION", "NEW-START-OFFSET", "STATUS")
			failed := 0
			for _, p := range partitions {
				r, err := resps.On(topic, p, nil)
				start, status := "-", "OK"
				switch {
				case unrouted[p] != nil:
					status = unrouted[p].Error()
				case err != nil:
					status = "missing from the broker's response"
				case r.Err != nil:
					status = r.Err.Error()
				default:
					start = fmt.Sprint(r.LowWatermark)
				}
				if status != "OK" {
					failed++
				}
				t.row(topic, p, start, status)
			}
			if err := t.flush(); err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%w: trim-prefix: %d of %d partitions failed", ErrPartialFailure, failed, len(partitions))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Int32SliceVarP(&partitions, "partitions", "p", nil, "partitions to trim, comma separated or repeated (default: all)")
	f.Int64VarP(&offset, "offset", "o", 0, "delete the records below this offset (-1: the high watermark)")
	return cmd
}

// shardPartitionErrors splits a DeleteRecords error into the partitions
// whose shard failed, with why, and an error that concerns the whole
// request (nil if every failure is a shard's).
func shardPartitionErrors(err error) (map[int32]error, error) {
	var se *kadm.ShardErrors
	if !errors.As(err, &se) {
		return nil, err
	}
	failed := make(map[int32]error)
	for _, e := range se.Errs {
		req, ok := e.Req.(*kmsg.DeleteRecordsRequest)
		if !ok {
			return nil, err
		}
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				failed[rp.Partition] = e.Err
			}
		}
	}
	return failed, nil
}
