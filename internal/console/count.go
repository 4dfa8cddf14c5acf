package console

import (
	"context"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A compacted topic keeps only the newest record of a key, so its offset
// span (high watermark minus log start) counts records compaction
// removed. The topic page counts a compacted topic's records by reading
// them, up to maxCountRecords and countTimeout; past either, the
// partition shows its offset span labelled as an upper bound.
const (
	maxCountRecords = 200_000
	countTimeout    = 5 * time.Second
)

// isCompacted reports whether configs give topic a cleanup.policy with
// compact (compact, or compact,delete).
func isCompacted(configs kadm.ResourceConfigs, topic string) bool {
	for _, rc := range configs {
		if rc.Name != topic {
			continue
		}
		for _, cf := range rc.Configs {
			if cf.Key == "cleanup.policy" && strings.Contains(cf.MaybeValue(), "compact") {
				return true
			}
		}
	}
	return false
}

// countRecords reads topic's partitions from spans' starts to their ends
// and counts the records (transaction markers, which occupy offsets, are
// not records). counted[p] is set for each partition read to its end
// within the bounds.
func (c *Console) countRecords(ctx context.Context, topic string, spans map[int32][2]int64) (counts map[int32]int64, counted map[int32]bool) {
	counts, counted = map[int32]int64{}, map[int32]bool{}
	from := map[int32]kgo.Offset{}
	pending := map[int32]int64{}
	for p, s := range spans {
		if s[0] >= s[1] {
			counted[p] = true
			continue
		}
		from[p] = kgo.NewOffset().At(s[0])
		pending[p] = s[1]
	}
	if len(pending) == 0 {
		return counts, counted
	}
	// A read like a records page: it takes a reader's token or, when
	// all are taken, does not count at all (the page labels the spans).
	select {
	case c.recordReaders <- struct{}{}:
		defer func() { <-c.recordReaders }()
	default:
		return counts, counted
	}
	ctx, cancel := context.WithTimeout(ctx, countTimeout)
	defer cancel()
	cl, err := kgo.NewClient(append(c.cfg.Kafka[:len(c.cfg.Kafka):len(c.cfg.Kafka)],
		kgo.ClientID("strand-console"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.KeepControlRecords(), // to see a partition that ends in a marker reach its end
		kgo.FetchMaxBytes(maxRecordFetchBytes), kgo.FetchMaxPartitionBytes(maxRecordFetchBytes),
		kgo.MaxConcurrentFetches(1), kgo.FetchMaxWait(time.Second))...)
	if err != nil {
		return counts, counted
	}
	defer cl.Close()
	read := 0
	for len(pending) > 0 && read < maxCountRecords {
		fs := cl.PollRecords(ctx, maxCountRecords-read)
		if ctx.Err() != nil || fs.Err0() != nil {
			break
		}
		for _, rec := range fs.Records() {
			end, ok := pending[rec.Partition]
			if !ok || rec.Offset >= end {
				continue
			}
			read++
			if !rec.Attrs.IsControl() {
				counts[rec.Partition]++
			}
			if rec.Offset+1 >= end {
				delete(pending, rec.Partition)
				counted[rec.Partition] = true
			}
		}
	}
	return counts, counted
}
