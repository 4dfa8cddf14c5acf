package sinks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/sql/source"
)

// progress is what a sink's transaction records of the epoch it
// commits: per input (in the graph's order), per partition, where the
// next epoch reads from. It is the views' checkpoint, and the same
// bytes go into the sink's Pebble commit.
type progress struct {
	Sink   uint64                      `json:"sink"`
	Inputs []map[int32]source.Position `json:"inputs"`
}

// ProgressTopic is the topic of the sink with relation id id's
// progress records: one partition, compacted, one key.
func ProgressTopic(id uint64) string {
	return progressTopicPrefix + strconv.FormatUint(id, 10)
}

const progressTopicPrefix = "__strand_sink_progress_"

// TransactionalID is the transactional id the sink with relation id
// id produces with: one per sink, so a new owner's InitProducerID
// fences the previous owner's producer.
func TransactionalID(id uint64) string {
	return "strand-sink-" + strconv.FormatUint(id, 10)
}

var progressKey = []byte("progress")

// idleRead is how long a read of the progress topic waits for its
// next records before it fails.
const idleRead = 10 * time.Second

// ensureProgressTopic creates the progress topic if it is missing.
func ensureProgressTopic(ctx context.Context, adm *kadm.Client, topic string) error {
	res, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("progress topic %s: %w", topic, err)
	}
	return nil
}

// progressWindow is how many offsets before the progress topic's end
// the first read of the last progress starts; it grows eightfold while
// the window holds no committed progress (aborted transactions' records
// and markers), up to the log's start.
const progressWindow = 64

// readProgress returns the last committed progress record of topic
// (read_committed), ok false if there is none. The caller has
// initialized its transactional producer first: that completes any
// transaction of an earlier owner, so the end read is stable.
func readProgress(ctx context.Context, opts []kgo.Opt, topic string) (p progress, ok bool, err error) {
	admCl, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...), kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		return p, false, err
	}
	adm := kadm.NewClient(admCl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	var ends kadm.ListedOffsets
	if err == nil {
		ends, err = adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
	}
	admCl.Close()
	if err != nil {
		return p, false, fmt.Errorf("progress topic %s: %w", topic, err)
	}
	s, _ := starts.Lookup(topic, 0)
	e, _ := ends.Lookup(topic, 0)
	start, end := s.Offset, e.Offset
	for window := int64(progressWindow); ; window *= 8 {
		from := max(start, end-window)
		val, found, err := lastValue(ctx, opts, topic, from, end)
		if err != nil {
			return p, false, err
		}
		if found {
			if err := json.Unmarshal(val, &p); err != nil {
				return p, false, fmt.Errorf("progress topic %s: %w", topic, err)
			}
			return p, true, nil
		}
		if from == start {
			return p, false, nil
		}
	}
}

// lastValue reads partition 0 of topic from from up to end
// (read_committed) and returns the last progress record's value.
func lastValue(ctx context.Context, opts []kgo.Opt, topic string, from, end int64) ([]byte, bool, error) {
	if from >= end {
		return nil, false, nil
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// The last offsets are transaction markers: kept, they tell
		// the read it reached the end.
		kgo.KeepControlRecords())...)
	if err != nil {
		return nil, false, err
	}
	defer cl.Close()
	var last []byte
	found := false
	for next := from; next < end; {
		// The record at end-1 is a transaction marker, which the
		// compactor keeps. A read that stalls before it fails rather
		// than answer an older progress (which would write epochs
		// again); the task starts again.
		pctx, cancel := context.WithTimeout(ctx, idleRead)
		fs := cl.PollRecords(pctx, 1000)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		if pctx.Err() != nil && fs.NumRecords() == 0 {
			return nil, false, fmt.Errorf("progress topic %s: no record past offset %d in %v, its end is %d", topic, next, idleRead, end)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = err
			}
		})
		if ferr != nil {
			return nil, false, fmt.Errorf("progress topic %s: %w", topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < next || r.Offset >= end {
				return
			}
			next = r.Offset + 1
			if !r.Attrs.IsControl() && string(r.Key) == string(progressKey) && r.Value != nil {
				last, found = r.Value, true
			}
		})
	}
	return last, found, nil
}

// compare says how a local checkpoint stands against the committed
// progress: behind (or equal: every partition at or before it) or
// ahead (some partition past it, or one the progress lacks read).
func behindOrEqual(local, committed []map[int32]source.Position) bool {
	if len(local) != len(committed) {
		return false
	}
	for i := range local {
		for p, pos := range local[i] {
			c, ok := committed[i][p]
			if pos.Offset == 0 && !ok {
				continue
			}
			if !ok || pos.Offset > c.Offset {
				return false
			}
		}
	}
	return true
}

// equalOffsets reports whether a and b stand at the same offsets.
func equalOffsets(a, b []map[int32]source.Position) bool {
	return behindOrEqual(a, b) && behindOrEqual(b, a)
}
