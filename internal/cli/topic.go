package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/kafka"
)

// NewTopicCommand returns `topic` with its create, list, describe,
// delete, alter-config, add-partitions and trim-prefix subcommands.
func NewTopicCommand() *cobra.Command {
	var opts ClientOptions
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe, alter and delete topics",
		Args:  cobra.NoArgs,
	}
	opts.Register(cmd.PersistentFlags())
	cmd.AddCommand(
		newTopicCreateCmd(&opts),
		newTopicListCmd(&opts),
		newTopicDescribeCmd(&opts),
		newTopicDeleteCmd(&opts),
		newTopicAlterConfigCmd(&opts),
		newTopicAddPartitionsCmd(&opts),
		newTopicTrimPrefixCmd(&opts),
	)
	return cmd
}

// admin returns an admin client and the context its requests run in,
// bounded by --timeout; done releases the context and closes the client
// (and so the kgo client under it).
func (o *ClientOptions) admin(ctx context.Context) (_ *kadm.Client, _ context.Context, done func(), _ error) {
	cl, err := o.NewClient()
	if err != nil {
		return nil, nil, nil, err
	}
	adm := kadm.NewClient(cl)
	ctx, cancel := o.requestContext(ctx)
	return adm, ctx, func() { cancel(); adm.Close() }, nil
}

// adminWithFormat is admin for a command that writes --format output: an
// unknown format is refused before anything is sent.
func (o *ClientOptions) adminWithFormat(ctx context.Context, format string) (_ *kadm.Client, _ context.Context, done func(), _ error) {
	if err := CheckOutputFormat(format); err != nil {
		return nil, nil, nil, err
	}
	return o.admin(ctx)
}

func newTopicCreateCmd(opts *ClientOptions) *cobra.Command {
	var (
		partitions int32
		replicas   int16
		configs    []string
	)
	cmd := &cobra.Command{
		Use:   "create NAME...",
		Short: "Create topics",
		Long: "Create topics. Each topic's result is printed; the command fails if any topic failed.\n" +
			"Strand keeps data in object storage and ignores the replication factor, but the Kafka\n" +
			"protocol requires one, so -r only matters against other Kafka clusters.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, topics []string) error {
			if partitions == 0 || partitions < -1 {
				return fmt.Errorf("%w: -p/--partitions %d: a topic needs at least 1 partition (-1 takes the agent's default)", ErrUsage, partitions)
			}
			cfg := make(map[string]*string, len(configs))
			for _, kv := range configs {
				k, v, err := splitKeyValue("-c", kv)
				if err != nil {
					return err
				}
				cfg[k] = kadm.StringPtr(v)
			}
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resps, err := adm.CreateTopics(ctx, partitions, replicas, cfg, topics...)
			if err != nil {
				return fmt.Errorf("create topics: %w", err)
			}
			return printTopicResults(cmd, "create", topics, func(topic string) topicResult {
				r, ok := resps[topic]
				return topicResult{found: ok, err: r.Err, msg: r.ErrMessage}
			})
		},
	}
	f := cmd.Flags()
	f.Int32VarP(&partitions, "partitions", "p", -1, "partitions per topic (-1: the broker's default)")
	f.Int16VarP(&replicas, "replicas", "r", 1, "replication factor (-1: the broker's default; Strand ignores it)")
	f.StringArrayVarP(&configs, "config", "c", nil, "topic config key=value (repeatable)")
	return cmd
}

func newTopicDeleteCmd(opts *ClientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete topics",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, topics []string) error {
			adm, ctx, done, err := opts.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resps, err := adm.DeleteTopics(ctx, topics...)
			if err != nil {
				return fmt.Errorf("delete topics: %w", err)
			}
			return printTopicResults(cmd, "delete", topics, func(topic string) topicResult {
				r, ok := resps[topic]
				return topicResult{found: ok, err: r.Err, msg: r.ErrMessage}
			})
		},
	}
}

// topicResult is one topic's outcome in a create or delete response.
type topicResult struct {
	found bool   // whether the broker answered for the topic at all
	err   error  // the topic's error code, as a kerr error
	msg   string // the broker's optional error message
}

// printTopicResults prints one TOPIC/STATUS row per requested topic, in the
// order given, and fails with ErrPartialFailure if any topic failed.
func printTopicResults(cmd *cobra.Command, verb string, topics []string, result func(string) topicResult) error {
	t := newTable(cmd.OutOrStdout(), "TOPIC", "STATUS")
	failed := 0
	for _, topic := range topics {
		r := result(topic)
		if !r.found {
			r.err = errors.New("missing from the broker's response")
		}
		status := "OK"
		if r.err != nil {
			failed++
			status = errText(r.err, r.msg)
		}
		t.row(topic, status)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%w: %s: %d of %d topics failed", ErrPartialFailure, verb, failed, len(topics))
	}
	return nil
}

// TopicListing is one topic of `topic list --format json|yaml`.
type TopicListing struct {
	Name       string `json:"name" yaml:"name"`
	Internal   bool   `json:"internal" yaml:"internal"`
	Partitions int    `json:"partitions" yaml:"partitions"`
	// SizeBytes is null when the stored bytes could not be listed.
	SizeBytes *int64 `json:"size_bytes" yaml:"size_bytes"`
	// DeadBytes are the bytes of the topic's data that left the index
	// but are still in the object store, waiting for deletion (Strand's
	// DescribeLogDirs dir strand-objects-dead); absent from a cluster
	// that reports none (Kafka) or when they could not be listed.
	DeadBytes *int64 `json:"dead_bytes,omitempty" yaml:"dead_bytes,omitempty"`
	Error     string `json:"error,omitempty" yaml:"error,omitempty"`
}

func newTopicListCmd(opts *ClientOptions) *cobra.Command {
	var internal bool
	var format *string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List topics, their partition counts and the bytes they store",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, ctx, done, err := opts.adminWithFormat(cmd.Context(), *format)
			if err != nil {
				return err
			}
			defer done()
			list := adm.ListTopics
			if internal {
				list = adm.ListTopicsWithInternal
			}
			details, err := list(ctx)
			if err != nil {
				return fmt.Errorf("list topics: %w", err)
			}
			sizes, dead, sizeErr, deadErr := describeSizes(ctx, adm, nil)
			listing := []TopicListing{}
			for _, d := range details.Sorted() {
				l := TopicListing{Name: d.Topic, Internal: d.IsInternal, Partitions: len(d.Partitions)}
				if d.Err != nil {
					l.Error = d.Err.Error()
				} else {
					l.SizeBytes = sizes.topicBytes(d.Topic, sizeErr)
					if dead != nil {
						l.DeadBytes = dead.topicBytes(d.Topic, deadErr)
					}
				}
				listing = append(listing, l)
			}
			return WriteOutput(cmd.OutOrStdout(), *format, listing, func(w io.Writer) error {
				header := []string{"NAME", "PARTITIONS", "SIZE"}
				if dead != nil {
					header = append(header, "DEAD")
				}
				t := newTable(w, header...)
				for _, d := range details.Sorted() {
					if d.Err != nil {
						t.row(d.Topic, d.Err)
						continue
					}
					if dead != nil {
						t.row(d.Topic, len(d.Partitions), sizes.topicCell(d.Topic, sizeErr), dead.topicCell(d.Topic, deadErr))
						continue
					}
					t.row(d.Topic, len(d.Partitions), sizes.topicCell(d.Topic, sizeErr))
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().BoolVar(&internal, "internal", false, "include internal topics")
	format = addOutputFlag(cmd)
	return cmd
}

// TopicDescription is one topic of `topic describe --format json|yaml`.
type TopicDescription struct {
	Name      string `json:"name" yaml:"name"`
	ID        string `json:"id" yaml:"id"`
	Internal  bool   `json:"internal" yaml:"internal"`
	SizeBytes *int64 `json:"size_bytes" yaml:"size_bytes"` // null if unknown
	// DeadBytes: as TopicListing's.
	DeadBytes  *int64                 `json:"dead_bytes,omitempty" yaml:"dead_bytes,omitempty"`
	Partitions []PartitionDescription `json:"partitions" yaml:"partitions"`
	Configs    []TopicConfig          `json:"configs" yaml:"configs"`
	// ConfigsError says why Configs is empty, if it is for an error.
	ConfigsError string `json:"configs_error,omitempty" yaml:"configs_error,omitempty"`
	// With --http: the agent's answers as they are (agent.TopicStorage,
	// and agent.TopicCompaction for a compacted topic), or why not.
	Storage         any    `json:"storage,omitempty" yaml:"storage,omitempty"`
	StorageError    string `json:"storage_error,omitempty" yaml:"storage_error,omitempty"`
	Compaction      any    `json:"compaction,omitempty" yaml:"compaction,omitempty"`
	CompactionError string `json:"compaction_error,omitempty" yaml:"compaction_error,omitempty"`
}

// addStorage adds what --http shows: a failed request shows in the
// output, as the other listings' do.
func (d *TopicDescription) addStorage(ctx context.Context, o *adminOptions, configs kadm.ResourceConfigs) {
	if st, err := fetchStorageLevels(ctx, o, d.Name); err != nil {
		d.StorageError = err.Error()
	} else {
		d.Storage = jsonShaped{st}
	}
	if tc, err := fetchCompaction(ctx, o, configs, d.Name); err != nil {
		d.CompactionError = err.Error()
	} else if tc != nil {
		d.Compaction = jsonShaped{tc}
	}
}

// PartitionDescription is one partition of a described topic. Offsets
// and size are null when they could not be listed.
type PartitionDescription struct {
	Partition   int32   `json:"partition" yaml:"partition"`
	Leader      int32   `json:"leader" yaml:"leader"`
	LeaderEpoch int32   `json:"leader_epoch" yaml:"leader_epoch"`
	Replicas    []int32 `json:"replicas" yaml:"replicas"`
	StartOffset *int64  `json:"start_offset" yaml:"start_offset"`
	EndOffset   *int64  `json:"end_offset" yaml:"end_offset"`
	SizeBytes   *int64  `json:"size_bytes" yaml:"size_bytes"`
	DeadBytes   *int64  `json:"dead_bytes,omitempty" yaml:"dead_bytes,omitempty"`
}

// TopicConfig is one config of a described topic; Value is null for a
// config with no value and for a sensitive one.
type TopicConfig struct {
	Name      string  `json:"name" yaml:"name"`
	Value     *string `json:"value" yaml:"value"`
	Source    string  `json:"source" yaml:"source"`
	Sensitive bool    `json:"sensitive" yaml:"sensitive"`
}

func newTopicDescribeCmd(opts *ClientOptions) *cobra.Command {
	var storage adminOptions
	var format *string
	cmd := &cobra.Command{
		Use:   "describe NAME...",
		Short: "Show a topic's partitions (with start and end offsets and stored bytes) and configs",
		Long: `Show a topic's partitions (with start and end offsets and stored bytes)
and configs. With --http (an agent's HTTP address), also each partition's
offset index entries and the data objects they point into, level 0
(multi-partition flushes) and compacted (per-partition objects).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, topics []string) error {
			adm, ctx, done, err := opts.adminWithFormat(cmd.Context(), *format)
			if err != nil {
				return err
			}
			defer done()
			details, err := adm.ListTopics(ctx, topics...)
			if err != nil {
				return fmt.Errorf("describe topics: %w", err)
			}
			for _, topic := range topics {
				d, ok := details[topic]
				if !ok || d.Err != nil {
					if errors.Is(d.Err, kerr.UnknownTopicOrPartition) || !ok {
						return fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
					}
					return fmt.Errorf("describe %s: %w", topic, d.Err)
				}
			}
			// Offsets and configs are listed for all topics at once; a
			// failure of one listing still leaves the metadata worth
			// printing, so those errors show in the output instead.
			starts, startErr := adm.ListStartOffsets(ctx, topics...)
			ends, endErr := adm.ListEndOffsets(ctx, topics...)
			configs, cfgErr := adm.DescribeTopicConfigs(ctx, topics...)
			sizes, dead, sizeErr, deadErr := describeSizes(ctx, adm, details.TopicsSet())

			if *format != OutputText {
				descs := make([]TopicDescription, 0, len(topics))
				for _, topic := range topics {
					d := describeTopic(details[topic], starts, startErr, ends, endErr, configs, cfgErr, sizes, sizeErr)
					d.addDead(dead, deadErr)
					if storage.HTTP != "" {
						d.addStorage(cmd.Context(), &storage, configs)
					}
					descs = append(descs, d)
				}
				return WriteOutput(cmd.OutOrStdout(), *format, descs, nil)
			}
			w := cmd.OutOrStdout()
			for i, topic := range topics {
				if i > 0 {
					fmt.Fprintln(w)
				}
				d := details[topic]
				summary := newTable(w)
				summary.row("NAME", topic)
				summary.row("ID", topicIDString(d.ID))
				summary.row("INTERNAL", d.IsInternal)
				summary.row("PARTITIONS", len(d.Partitions))
				summary.row("SIZE", sizes.topicCell(topic, sizeErr))
				if dead != nil {
					summary.row("DEAD", dead.topicCell(topic, deadErr))
				}
				if err := summary.flush(); err != nil {
					return err
				}

				fmt.Fprintln(w)
				header := []string{"PARTITION", "LEADER", "EPOCH", "REPLICAS", "START", "END", "SIZE"}
				if dead != nil {
					header = append(header, "DEAD")
				}
				parts := newTable(w, header...)
				for _, p := range d.Partitions.Sorted() {
					cells := []any{p.Partition, p.Leader, p.LeaderEpoch, joinInt32s(p.Replicas),
						offsetCell(starts, startErr, topic, p.Partition),
						offsetCell(ends, endErr, topic, p.Partition),
						sizes.partitionCell(topic, p.Partition, sizeErr)}
					if dead != nil {
						cells = append(cells, dead.deadPartitionCell(topic, p.Partition, deadErr))
					}
					parts.row(cells...)
				}
				if err := parts.flush(); err != nil {
					return err
				}

				if storage.HTTP != "" {
					fmt.Fprintln(w)
					if err := printStorageLevels(cmd.Context(), w, &storage, topic); err != nil {
						return err
					}
					if err := printCompaction(cmd.Context(), w, &storage, configs, topic); err != nil {
						return err
					}
				}
				fmt.Fprintln(w)
				if err := printConfigs(w, configs, cfgErr, topic); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&storage.HTTP, "http", "", "an agent's HTTP address, host:port: also show index entries and objects by compaction level, and a compacted topic's dirty ratio per partition")
	cmd.Flags().DurationVar(&storage.Timeout, "http-timeout", 30*time.Second, "bound on the --http request")
	format = addOutputFlag(cmd)
	return cmd
}

// describeTopic gathers what `topic describe` lists of one topic for
// json and yaml; the text tables show the same listings cell by cell.
func describeTopic(d kadm.TopicDetail, starts kadm.ListedOffsets, startErr error, ends kadm.ListedOffsets, endErr error,
	configs kadm.ResourceConfigs, cfgErr error, sizes topicSizes, sizeErr error,
) TopicDescription {
	desc := TopicDescription{
		Name:       d.Topic,
		ID:         topicIDString(d.ID),
		Internal:   d.IsInternal,
		SizeBytes:  sizes.topicBytes(d.Topic, sizeErr),
		Partitions: []PartitionDescription{},
		Configs:    []TopicConfig{},
	}
	listed := func(l kadm.ListedOffsets, p int32) *int64 {
		if o, ok := l.Lookup(d.Topic, p); ok && o.Err == nil {
			return &o.Offset
		}
		return nil
	}
	for _, p := range d.Partitions.Sorted() {
		pd := PartitionDescription{
			Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas:    append([]int32{}, p.Replicas...),
			StartOffset: listed(starts, p.Partition),
			EndOffset:   listed(ends, p.Partition),
		}
		if n, ok := sizes[d.Topic][p.Partition]; ok && sizeErr == nil {
			pd.SizeBytes = &n
		}
		desc.Partitions = append(desc.Partitions, pd)
	}
	cfgs, err := topicConfigs(configs, cfgErr, d.Topic)
	if err != nil {
		desc.ConfigsError = err.Error()
	}
	for _, c := range cfgs {
		tc := TopicConfig{Name: c.Key, Value: c.Value, Source: c.Source.String(), Sensitive: c.Sensitive}
		if c.Sensitive {
			tc.Value = nil
		}
		desc.Configs = append(desc.Configs, tc)
	}
	return desc
}

// printStorageLevels prints a topic's index entries and objects per
// partition, by compaction level, as the agent at o.HTTP holds them; a
// failed request shows in the output, as the other listings' do.
func printStorageLevels(ctx context.Context, w io.Writer, o *adminOptions, topic string) error {
	st, err := fetchStorageLevels(ctx, o, topic)
	if err != nil {
		_, werr := fmt.Fprintf(w, "STORAGE  error: %v\n", err)
		return werr
	}
	t := newTable(w, "PARTITION", "ENTRIES", "OBJECTS", "LEVEL0", "COMPACTED")
	for _, p := range st.Partitions {
		t.row(p.Partition, p.Entries, p.Objects,
			fmt.Sprintf("%d entries in %d objects", p.Level0Entries, p.Level0Objects),
			fmt.Sprintf("%d entries in %d objects", p.CompactedEntries, p.CompactedObjects))
	}
	return t.flush()
}

// fetchStorageLevels asks the agent at o.HTTP for a topic's index
// entries and objects per partition.
func fetchStorageLevels(ctx context.Context, o *adminOptions, topic string) (*agent.TopicStorage, error) {
	var st agent.TopicStorage
	path := strings.Replace(agent.PathTopicStorage, "{name}", url.PathEscape(topic), 1)
	if err := o.do(ctx, http.MethodGet, path, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// topicSizes holds the stored bytes of each partition, by topic, summed
// over the log dirs of every broker (DescribeLogDirs): on Strand each
// partition is in one agent's logical dir; on Kafka this counts every
// replica, as kafka-log-dirs does.
type topicSizes map[string]map[int32]int64

// describeSizes asks every broker for the sizes of the partitions in set
// (nil: all). Strand's dir of dead objects' bytes (kafka.DeadLogDirName)
// is summed apart into dead, nil when no broker reports that dir (Kafka);
// its failures are deadErr's, so SIZE still shows.
func describeSizes(ctx context.Context, adm *kadm.Client, set kadm.TopicsSet) (sizes, dead topicSizes, err, deadErr error) {
	dirs, err := adm.DescribeAllLogDirs(ctx, set)
	if err != nil {
		return nil, nil, err, nil
	}
	sizes = topicSizes{}
	var errs, deadErrs []error
	dirs.Each(func(d kadm.DescribedLogDir) {
		into, errsOf := sizes, &errs
		if d.Dir == kafka.DeadLogDirName {
			if dead == nil {
				dead = topicSizes{}
			}
			into, errsOf = dead, &deadErrs
		}
		if d.Err != nil {
			*errsOf = append(*errsOf, fmt.Errorf("broker %d dir %s: %w", d.Broker, d.Dir, d.Err))
			return
		}
		for topic, ps := range d.Topics {
			if into[topic] == nil {
				into[topic] = map[int32]int64{}
			}
			for p, dp := range ps {
				into[topic][p] += dp.Size
			}
		}
	})
	return sizes, dead, errors.Join(errs...), errors.Join(deadErrs...)
}

// addDead adds the dead bytes, if the cluster reports them.
func (d *TopicDescription) addDead(dead topicSizes, err error) {
	if dead == nil {
		return
	}
	d.DeadBytes = dead.topicBytes(d.Name, err)
	if err != nil {
		return
	}
	for i := range d.Partitions {
		n := dead[d.Name][d.Partitions[i].Partition]
		d.Partitions[i].DeadBytes = &n
	}
}

// deadPartitionCell renders a partition's dead bytes: the dead dir lists
// only partitions that have some.
func (s topicSizes) deadPartitionCell(topic string, p int32, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return strconv.FormatInt(s[topic][p], 10)
}

// topicCell renders a topic's stored bytes, or why they are missing.
func (s topicSizes) topicCell(topic string, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return strconv.FormatInt(*s.topicBytes(topic, nil), 10)
}

// topicBytes is a topic's stored bytes, nil if they could not be listed.
func (s topicSizes) topicBytes(topic string, err error) *int64 {
	if err != nil {
		return nil
	}
	var n int64
	for _, b := range s[topic] {
		n += b
	}
	return &n
}

// partitionCell renders a partition's stored bytes; "-" when no broker
// listed it.
func (s topicSizes) partitionCell(topic string, p int32, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	if n, ok := s[topic][p]; ok {
		return strconv.FormatInt(n, 10)
	}
	return "-"
}

// joinInt32s renders broker ids as one table cell: "0,1,2".
func joinInt32s(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}

// offsetCell renders one listed offset, or why it is missing.
func offsetCell(l kadm.ListedOffsets, listErr error, topic string, partition int32) string {
	o, ok := l.Lookup(topic, partition)
	switch {
	case ok && o.Err == nil:
		return fmt.Sprint(o.Offset)
	case ok:
		return o.Err.Error()
	case listErr != nil:
		return "error: " + listErr.Error()
	default:
		return "-"
	}
}

// topicConfigs returns a topic's described configs sorted by name, or
// why they are unavailable.
func topicConfigs(rcs kadm.ResourceConfigs, listErr error, topic string) ([]kadm.Config, error) {
	rc, err := rcs.On(topic, nil)
	if err == nil && rc.Err != nil {
		err = errors.New(errText(rc.Err, rc.ErrMessage))
	}
	if err != nil {
		if listErr != nil {
			err = listErr
		}
		return nil, err
	}
	cfgs := slices.Clone(rc.Configs)
	slices.SortFunc(cfgs, func(a, b kadm.Config) int { return strings.Compare(a.Key, b.Key) })
	return cfgs, nil
}

func printConfigs(w io.Writer, rcs kadm.ResourceConfigs, listErr error, topic string) error {
	cfgs, err := topicConfigs(rcs, listErr, topic)
	if err != nil {
		_, werr := fmt.Fprintf(w, "CONFIGS unavailable: %v\n", err)
		return werr
	}
	t := newTable(w, "CONFIG", "VALUE", "SOURCE")
	for _, c := range cfgs {
		v := c.MaybeValue()
		if c.Sensitive {
			v = "(sensitive)"
		}
		t.row(c.Key, v, c.Source)
	}
	return t.flush()
}

// topicIDString prints a topic id as Kafka's tools print a Uuid
// (Uuid.toString): URL-safe base64 without padding, so an id copied from
// kafka-topics --describe matches. kadm's String is standard base64 with
// padding, which no Kafka tool prints.
func topicIDString(id kadm.TopicID) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}
