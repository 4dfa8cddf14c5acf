package cli

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/strandkafka/strand/internal/clock"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// outBufBytes bounds the formatted output held before a write to stdout.
const outBufBytes = 64 << 10

type consumeOptions struct {
	client        ClientOptions
	group         string
	count         int
	format        string
	partitions    []int32
	offset        string
	fromBeginning bool
	exitAtEnd     bool
}

// NewConsumeCommand returns `consume TOPIC...`.
func NewConsumeCommand() *cobra.Command {
	var o consumeOptions
	cmd := &cobra.Command{
		Use:   "consume TOPIC...",
		Short: "Print records from topics",
		Long: "Print records from topics until interrupted, until -n records were printed, until\n" +
			"the stop of an --offset range, or with -e until every partition's end offset as of\n" +
			"the start is reached.\n\n" +
			"Without --group, partitions are read directly from --offset, by default from the\n" +
			"start of each partition, as rpk topic consume reads (kafka-console-consumer starts at\n" +
			"the end unless --from-beginning: give -o end for that). With --group, the group's\n" +
			"committed offsets are used, --offset start|end applies to partitions without one,\n" +
			"and the offsets of printed records are committed.\n\n" + offsetHelp,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, topics []string) error {
			if slices.Contains(topics, "") {
				// Else the client library refuses it in its own words
				// ("missing topic name and zero topic ID").
				return fmt.Errorf("%w: a topic name is empty", ErrUsage)
			}
			return o.run(cmd.Context(), topics, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.client.Register(cmd.Flags())
	f := cmd.Flags()
	f.StringVarP(&o.group, "group", "g", "", "consumer group to join and commit to")
	f.IntVarP(&o.count, "num", "n", 0, "stop after this many records (0: no limit)")
	f.StringVarP(&o.format, "format", "f", DefaultFormat, formatHelp)
	f.Int32SliceVarP(&o.partitions, "partition", "p", nil, "partitions to read, comma-separated (default all; not with --group)")
	f.StringVarP(&o.offset, "offset", "o", "start", "where to start and stop, as rpk's: start, end, N, +N, -N, :end, :N, N1:N2, @TIME, @T1:T2 (see above)")
	f.BoolVar(&o.fromBeginning, "from-beginning", false, "same as --offset start")
	f.BoolVarP(&o.exitAtEnd, "exit-at-end", "e", false, "exit once every partition's end offset, as of the start, is reached")
	return cmd
}

// offsetKind says what an --offset is relative to.
type offsetKind int

const (
	offsetStart      offsetKind = iota // the log start offset
	offsetEnd                          // the high watermark
	offsetExact                        // an absolute offset
	offsetAfterStart                   // n after the log start
	offsetBeforeEnd                    // n before the high watermark
	offsetTime                         // the first offset at or after n Unix ms
)

type offsetSpec struct {
	kind offsetKind
	n    int64
}

func parseOffset(s string) (offsetSpec, error) {
	switch s {
	case "start", "oldest", "beginning":
		return offsetSpec{kind: offsetStart}, nil
	case "end", "newest", "latest":
		return offsetSpec{kind: offsetEnd}, nil
	}
	kind := offsetExact
	digits := s
	if strings.HasPrefix(s, "+") {
		kind, digits = offsetAfterStart, s[1:]
	} else if strings.HasPrefix(s, "-") {
		kind, digits = offsetBeforeEnd, s[1:]
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 || digits == "" || digits[0] == '+' || digits[0] == '-' {
		return offsetSpec{}, fmt.Errorf("%w: --offset %q: want start, end, N, +N or -N", ErrUsage, s)
	}
	return offsetSpec{kind: kind, n: n}, nil
}

// resolve turns the spec into an absolute offset within [start, end], so
// the consumer never starts out of range. byTime is the offset listed for
// an offsetTime spec.
func (s offsetSpec) resolve(start, end, byTime int64) int64 {
	var at int64
	switch s.kind {
	case offsetTime:
		at = byTime
	case offsetStart:
		at = start
	case offsetEnd:
		at = end
	case offsetExact:
		at = s.n
	case offsetAfterStart:
		at = start + min(s.n, end-start)
	case offsetBeforeEnd:
		at = end - min(s.n, end-start)
	}
	return max(start, min(at, end))
}

type topicPartition struct {
	topic     string
	partition int32
}

// validate checks flag combinations before anything connects.
func (o *consumeOptions) validate(now time.Time) (offsetRange, recordFormatter, error) {
	if o.count < 0 {
		return offsetRange{}, nil, fmt.Errorf("%w: -n must not be negative", ErrUsage)
	}
	format, err := parseFormat(o.format)
	if err != nil {
		return offsetRange{}, nil, err
	}
	rng, err := parseOffsetRange(o.offset, now)
	if err != nil {
		return offsetRange{}, nil, err
	}
	if o.fromBeginning {
		rng.from = offsetSpec{kind: offsetStart}
	}
	if o.group != "" {
		if len(o.partitions) > 0 {
			return offsetRange{}, nil, fmt.Errorf("%w: --partition cannot be used with --group", ErrUsage)
		}
		if (rng.from.kind != offsetStart && rng.from.kind != offsetEnd) || (rng.until != nil && rng.until.kind != offsetEnd) {
			return offsetRange{}, nil, fmt.Errorf("%w: --offset %s needs direct consumption (no --group)", ErrUsage, o.offset)
		}
	}
	for _, p := range o.partitions {
		if p < 0 {
			return offsetRange{}, nil, fmt.Errorf("%w: --partition %d", ErrUsage, p)
		}
	}
	return rng, format, nil
}

// partitionBounds are a partition's start and end offsets, listed once
// before consuming: they resolve --offset and define "the end" for -e.
type partitionBounds map[topicPartition][2]int64

// listBounds lists the start and end offsets of every partition of topics,
// failing with ErrUnknownTopic for a topic the cluster lacks.
func (o *consumeOptions) listBounds(ctx context.Context, topics []string) (partitionBounds, error) {
	cl, err := o.client.NewClient()
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	defer adm.Close()
	ctx, cancel := o.client.requestContext(ctx)
	defer cancel()
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	bounds := make(partitionBounds)
	for _, topic := range topics {
		ps, ok := ends[topic]
		if !ok || len(ps) == 0 {
			return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
		}
		for p, end := range ps {
			if end.Err != nil {
				if errors.Is(end.Err, kerr.UnknownTopicOrPartition) {
					return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
				}
				return nil, fmt.Errorf("list end offset of %s/%d: %w", topic, p, end.Err)
			}
			start, ok := starts.Lookup(topic, p)
			if !ok || start.Err != nil {
				return nil, fmt.Errorf("list start offset of %s/%d: %v", topic, p, cmp.Or(start.Err, errors.New("missing")))
			}
			bounds[topicPartition{topic, p}] = [2]int64{start.Offset, end.Offset}
		}
	}
	return bounds, nil
}

// endTracker decides when -e is done: when every partition this consumer
// reads has reached the end offset it had when the command started.
// Assignments arrive on kgo's group goroutine while records arrive on the
// poll loop, hence the lock.
type endTracker struct {
	bounds partitionBounds
	done   func() // called once, when nothing is pending
	mu     struct {
		sync.Mutex
		pending map[topicPartition]int64 // partition -> end offset still to reach
		// owned is what this consumer reads now. Done needs it non-empty:
		// a group member between an eager revoke-all and its next
		// assignment has nothing pending but is not done.
		owned    map[topicPartition]struct{}
		finished bool
	}
}

func newEndTracker(bounds partitionBounds, done func()) *endTracker {
	t := &endTracker{bounds: bounds, done: done}
	t.mu.pending = make(map[topicPartition]int64)
	t.mu.owned = make(map[topicPartition]struct{})
	return t
}

// end returns the end offset of tp as of the start; a partition created
// later has nothing "as of the start".
func (t *endTracker) end(tp topicPartition) int64 {
	if b, ok := t.bounds[tp]; ok {
		return b[1]
	}
	return 0
}

// assign records that this consumer reads the given partitions from the
// given absolute positions.
func (t *endTracker) assign(positions map[topicPartition]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for tp, at := range positions {
		t.mu.owned[tp] = struct{}{}
		if end := t.end(tp); at < end {
			t.mu.pending[tp] = end
		} else {
			delete(t.mu.pending, tp)
		}
	}
	t.checkLocked()
}

// drop forgets partitions this consumer no longer reads (revoked or lost
// in a rebalance), so -e does not wait for another member's progress.
func (t *endTracker) drop(tps map[string][]int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for topic, ps := range tps {
		for _, p := range ps {
			delete(t.mu.pending, topicPartition{topic, p})
			delete(t.mu.owned, topicPartition{topic, p})
		}
	}
	t.checkLocked()
}

// observe advances a partition past r and reports whether r lies before
// the partition's end as of the start, i.e. whether -e should print it.
func (t *endTracker) observe(r *kgo.Record) bool {
	tp := topicPartition{r.Topic, r.Partition}
	t.mu.Lock()
	defer t.mu.Unlock()
	end, pending := t.mu.pending[tp]
	if !pending {
		return r.Offset < t.end(tp)
	}
	if r.Offset+1 >= end {
		delete(t.mu.pending, tp)
		t.checkLocked()
	}
	return r.Offset < end
}

func (t *endTracker) checkLocked() {
	if len(t.mu.owned) > 0 && len(t.mu.pending) == 0 && !t.mu.finished {
		t.mu.finished = true
		t.done()
	}
}

func (t *endTracker) finished() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.finished
}

// run consumes until -n, -e or ctx cancellation. Cancellation is the normal
// way to stop an unbounded consume, so it is not an error.
func (o *consumeOptions) run(ctx context.Context, topics []string, stdout, stderr io.Writer) error {
	rng, format, err := o.validate(clock.Real.Now())
	if err != nil {
		return err
	}
	bounds, err := o.listBounds(ctx, topics)
	if err != nil {
		return err
	}
	var fromTime, untilTime kadm.ListedOffsets
	if rng.hasTime() {
		if fromTime, untilTime, err = o.timeOffsets(ctx, rng, topics); err != nil {
			return err
		}
	}
	stops := o.stops(rng, bounds, untilTime)

	// pollCtx is cancelled by the -e tracker, which may finish on the group
	// goroutine while the poll loop is parked waiting for records.
	pollCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	var tracker *endTracker
	if o.exitAtEnd || rng.until != nil {
		tracker = newEndTracker(stops, stopPolling)
	}

	var opts []kgo.Opt
	if tracker != nil {
		// Control records (transaction markers) occupy offsets; seeing
		// them is how -e knows a partition ending in a marker is done.
		opts = append(opts, kgo.KeepControlRecords())
	}
	if o.group == "" {
		direct, err := o.directPositions(rng.from, bounds, fromTime, topics)
		if err != nil {
			return err
		}
		offsets := make(map[string]map[int32]kgo.Offset)
		for tp, at := range direct {
			if offsets[tp.topic] == nil {
				offsets[tp.topic] = make(map[int32]kgo.Offset)
			}
			offsets[tp.topic][tp.partition] = kgo.NewOffset().At(at)
		}
		opts = append(opts, kgo.ConsumePartitions(offsets))
		if tracker != nil {
			tracker.assign(direct)
		}
	} else {
		opts = append(opts, o.groupOpts(topics, rng.from, stops, tracker)...)
	}
	cl, err := o.client.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	out := bufio.NewWriterSize(stdout, outBufBytes)
	prog := newProgress(stderr, stdout)
	printed, loopErr := o.poll(pollCtx, cl, tracker, format, out, prog)
	prog.clear()
	if err := out.Flush(); err != nil && loopErr == nil {
		loopErr = fmt.Errorf("write output: %w", err)
	}
	if o.group != "" {
		// Commit what was printed before leaving; the parent ctx may be
		// cancelled (SIGINT), which must not lose the commit.
		commitCtx, cancel := o.client.requestContext(context.WithoutCancel(ctx))
		defer cancel()
		if err := cl.CommitMarkedOffsets(commitCtx); err != nil && loopErr == nil {
			loopErr = fmt.Errorf("commit offsets of group %s: %w", o.group, err)
		}
	}
	fmt.Fprintf(stderr, "consumed %d records\n", printed)
	return loopErr
}

// directPositions resolves --offset for every partition read without a
// group, honouring --partition.
func (o *consumeOptions) directPositions(spec offsetSpec, bounds partitionBounds, byTime kadm.ListedOffsets, topics []string) (map[topicPartition]int64, error) {
	positions := make(map[topicPartition]int64)
	for tp, b := range bounds {
		if len(o.partitions) == 0 || slices.Contains(o.partitions, tp.partition) {
			positions[tp] = spec.resolve(b[0], b[1], atTime(byTime, tp, b[1]))
		}
	}
	for _, topic := range topics {
		for _, p := range o.partitions {
			if _, ok := bounds[topicPartition{topic, p}]; !ok {
				return nil, fmt.Errorf("%w: %s has no partition %d", ErrUsage, topic, p)
			}
		}
	}
	return positions, nil
}

// stops are the bounds the end tracker stops at: each partition's end as
// of the start (-e), or the stop of an --offset range, the nearer of the
// two when both are given. A stop past the end waits for records to reach
// it, as rpk's :N does.
func (o *consumeOptions) stops(rng offsetRange, bounds partitionBounds, untilTime kadm.ListedOffsets) partitionBounds {
	if rng.until == nil {
		return bounds
	}
	stops := make(partitionBounds, len(bounds))
	for tp, b := range bounds {
		stop := b[1]
		switch rng.until.kind {
		case offsetExact:
			stop = max(b[0], rng.until.n)
		case offsetTime:
			stop = atTime(untilTime, tp, b[1])
		}
		if o.exitAtEnd {
			stop = min(stop, b[1])
		}
		stops[tp] = [2]int64{b[0], stop}
	}
	return stops
}

// groupOpts joins o.group, committing only the offsets of printed records
// (AutoCommitMarks), so -n never commits records it did not print.
func (o *consumeOptions) groupOpts(topics []string, spec offsetSpec, bounds partitionBounds, tracker *endTracker) []kgo.Opt {
	reset := kgo.NewOffset().AtEnd()
	if spec.kind == offsetStart {
		reset = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(o.group),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(reset),
		kgo.AutoCommitMarks(),
		// A custom revoke replaces kgo's default one, which commits; so
		// this one commits too, after forgetting the revoked partitions.
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
			if tracker != nil {
				tracker.drop(revoked)
			}
			_ = cl.CommitMarkedOffsets(ctx) // retried at the end of run, where errors are reported
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			if tracker != nil {
				tracker.drop(lost)
			}
		}),
	}
	if tracker != nil {
		// The offsets kgo is about to fetch from are the group's commits
		// or, without one, the reset offset: exactly where each newly
		// assigned partition starts.
		opts = append(opts, kgo.AdjustFetchOffsetsFn(func(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
			positions := make(map[topicPartition]int64)
			for topic, ps := range offsets {
				for p, off := range ps {
					tp := topicPartition{topic, p}
					b := bounds[tp]
					switch at := off.EpochOffset().Offset; {
					case at >= 0:
						positions[tp] = at
					case at == -1: // AtEnd: nothing before the end to read
						positions[tp] = b[1]
					default: // AtStart
						positions[tp] = b[0]
					}
				}
			}
			tracker.assign(positions)
			return offsets, nil
		}))
	}
	return opts
}

// poll prints records until -n is reached, the tracker finishes, or ctx
// is cancelled. It returns how many records it printed.
func (o *consumeOptions) poll(ctx context.Context, cl *kgo.Client, tracker *endTracker, format recordFormatter, out *bufio.Writer, prog *progress) (int, error) {
	var (
		printed int
		buf     []byte
	)
	grouped := o.group != ""
	for {
		if (o.count > 0 && printed >= o.count) || (tracker != nil && tracker.finished()) {
			return printed, nil
		}
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			// Interrupted, or the tracker finished while parked. Records
			// in this last fetch were never printed, so none is marked.
			return printed, nil
		}
		var fetchErr error
		fetches.EachError(func(topic string, p int32, err error) {
			if fetchErr == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
				fetchErr = consumeError(topic, p, o.group, err)
			}
		})
		if fetchErr != nil {
			return printed, fetchErr
		}
		// By partition rather than fetches.RecordIter, so a layout can
		// print the partition's watermarks (%[ %| %]).
	records:
		for fp := range eachPartition(fetches) {
			for _, r := range fp.Records {
				if o.count > 0 && printed >= o.count {
					break records
				}
				if tracker != nil && !tracker.observe(r) {
					// Past the end as of the start: -e leaves it for the
					// next run, so it is neither printed nor committed.
					continue
				}
				if !r.Attrs.IsControl() {
					var err error
					buf, err = format.appendRecord(buf[:0], fp, r)
					if err != nil {
						return printed, fmt.Errorf("format %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
					}
					if _, err := out.Write(buf); err != nil {
						return printed, fmt.Errorf("write output: %w", err)
					}
					printed++
				}
				if grouped {
					cl.MarkCommitRecords(r)
				}
			}
		}
		// Flush per fetch, so an interactive consumer sees records as
		// they arrive rather than when the buffer fills.
		if err := out.Flush(); err != nil {
			return printed, fmt.Errorf("write output: %w", err)
		}
		prog.update(countLine("consumed", printed, o.count))
	}
}

// eachPartition yields every fetched partition in fetch order.
func eachPartition(fetches kgo.Fetches) iter.Seq[*kgo.FetchPartition] {
	return func(yield func(*kgo.FetchPartition) bool) {
		for i := range fetches {
			for j := range fetches[i].Topics {
				t := &fetches[i].Topics[j]
				for k := range t.Partitions {
					if !yield(&t.Partitions[k]) {
						return
					}
				}
			}
		}
	}
}

// consumeError words a fetch error: the partition it came from, or,
// for an error of the client as a whole (the client library reports
// those under topic "" and partition -1, which printed as "fetch /-1"),
// what was being consumed.
func consumeError(topic string, partition int32, group string, err error) error {
	switch {
	case topic != "" && partition >= 0:
		return fmt.Errorf("reading %s partition %d: %w", topic, partition, err)
	case topic != "":
		return fmt.Errorf("reading %s: %w", topic, err)
	case group != "":
		return fmt.Errorf("consuming as group %s: %w", group, err)
	}
	return fmt.Errorf("consuming: %w", err)
}
