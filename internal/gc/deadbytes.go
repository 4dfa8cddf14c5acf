package gc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/segment"
)

// Bounds of DeadBytes.
const (
	// MaxDeadObjectsCounted bounds the dead objects one ByPartition
	// call accounts for (the oldest first), and so the footers it reads
	// and keeps. At the default delete delay the queue holds about a
	// minute of expired objects: thousands only when that minute expired
	// gigabytes.
	MaxDeadObjectsCounted = 4096
	// deadFooterConcurrency bounds the footer GETs in flight.
	deadFooterConcurrency = 8
)

// DeadBytes tells, per partition, how many bytes of the store are held by
// dead objects: objects no index entry points into any more (retention,
// DeleteRecords, topic deletion or compaction let them go), which wait in
// the dead-object queue for the delete delay and the janitor. The index
// no longer knows what such an object held, so the object's own footer
// says it (package segment): its chunks name topic, partition and
// length. A footer is read once per object (objects never change) and
// kept while the object is queued. Safe for concurrent use.
type DeadBytes struct {
	store objstore.Store

	mu struct {
		sync.Mutex
		// chunks of the queued objects read so far, by key.
		chunks map[string][]partitionBytes
	}
}

type partitionBytes struct {
	topic     meta.TopicID
	partition int32
	bytes     int64
}

// DeadPartitions is what DeadBytes.ByPartition found.
type DeadPartitions struct {
	// Bytes are the chunk bytes of dead objects, by topic and partition.
	Bytes map[meta.TopicID]map[int32]int64
	// Uncounted are queued objects left out: past MaxDeadObjectsCounted,
	// or whose footer could not be read (not of package segment's
	// format, or damaged).
	Uncounted int
}

// NewDeadBytes returns a DeadBytes reading footers from store.
func NewDeadBytes(store objstore.Store) *DeadBytes {
	d := &DeadBytes{store: store}
	d.mu.chunks = map[string][]partitionBytes{}
	return d
}

// ByPartition returns the dead bytes of every partition as of v's
// dead-object queue. An object deleted from the store since v counts as
// gone.
func (d *DeadBytes) ByPartition(ctx context.Context, v *meta.View) (DeadPartitions, error) {
	queued, err := v.DeadObjects(math.MaxInt64, MaxDeadObjectsCounted+1)
	if err != nil {
		return DeadPartitions{}, err
	}
	out := DeadPartitions{Bytes: map[meta.TopicID]map[int32]int64{}}
	if len(queued) > MaxDeadObjectsCounted {
		queued = queued[:MaxDeadObjectsCounted]
		g, _, err := v.GC()
		if err != nil {
			return DeadPartitions{}, err
		}
		out.Uncounted = int(g.DeadObjects) - MaxDeadObjectsCounted
	}

	d.mu.Lock()
	known := make(map[string][]partitionBytes, len(queued))
	var missing []meta.DeadObject
	for _, o := range queued {
		if c, ok := d.mu.chunks[o.Key]; ok {
			known[o.Key] = c
		} else {
			missing = append(missing, o)
		}
	}
	d.mu.Unlock()

	read := make([][]partitionBytes, len(missing))
	errs := make([]error, len(missing))
	sem := make(chan struct{}, deadFooterConcurrency)
	var wg sync.WaitGroup
	for i := range missing {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			read[i], errs[i] = d.readFooter(ctx, missing[i])
		}()
	}
	wg.Wait()
	var failed []error
	for i, o := range missing {
		switch {
		case errs[i] == nil:
			known[o.Key] = read[i]
		case errors.Is(errs[i], objstore.ErrNotFound):
			// Deleted since v: none of its bytes are held.
		case ctx.Err() != nil:
			return DeadPartitions{}, ctx.Err()
		case errors.Is(errs[i], segment.ErrCorrupt) || errors.Is(errs[i], segment.ErrShortTail):
			out.Uncounted++
		default:
			failed = append(failed, errs[i])
		}
	}
	if len(failed) > 0 {
		return DeadPartitions{}, errors.Join(failed...)
	}

	// Keep what is still queued: the cache holds at most the bounded
	// queue prefix just listed.
	d.mu.Lock()
	d.mu.chunks = known
	d.mu.Unlock()

	for _, cs := range known {
		for _, c := range cs {
			if out.Bytes[c.topic] == nil {
				out.Bytes[c.topic] = map[int32]int64{}
			}
			out.Bytes[c.topic][c.partition] += c.bytes
		}
	}
	return out, nil
}

// readFooter reads a dead object's footer from its tail: one GET, two
// when the footer is longer than segment.DefaultTailBytes.
func (d *DeadBytes) readFooter(ctx context.Context, o meta.DeadObject) ([]partitionBytes, error) {
	if o.Size < segment.HeaderSize+segment.TrailerSize {
		return nil, fmt.Errorf("%w: %s is %d bytes", segment.ErrCorrupt, o.Key, o.Size)
	}
	tail := min(o.Size, segment.DefaultTailBytes)
	for range 2 {
		b, err := d.store.Get(ctx, o.Key, o.Size-tail, tail)
		if err != nil {
			return nil, err
		}
		chunks, err := segment.ReadFooterFromTail(b, o.Size)
		var short *segment.ShortTailError
		if errors.As(err, &short) && short.Need <= o.Size && tail < short.Need {
			tail = short.Need
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Key, err)
		}
		out := make([]partitionBytes, 0, len(chunks))
		for _, c := range chunks {
			out = append(out, partitionBytes{topic: meta.TopicID(c.TopicID), partition: c.Partition, bytes: c.Length})
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: %w", o.Key, segment.ErrShortTail)
}
