package source

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Position is where a partition's reading stands: the next offset to
// read and the greatest event time read before it (zero: none), which a
// view commits with its state and gives back to resume.
type Position struct {
	Offset       int64
	MaxEventTime time.Time
}

// ReaderConfig configures a Reader.
type ReaderConfig struct {
	Def     *Def
	Decoder *Decoder
	// Kafka are the client options that reach the agent (seed brokers,
	// and in the agent an in-process dialer with its principal); the
	// Reader adds its own consuming options.
	Kafka []kgo.Opt
	// Start are the partitions to read and where from; nil reads every
	// partition from where Def.Startup says.
	Start map[int32]Position
	// StateDir is the directory of an upsert source's key store, the
	// Reader's alone.
	StateDir string
	// Metrics count; nil counts nothing exported.
	Metrics *Metrics
	// MaxPollRecords bounds the records of one Poll; 0 is 10,000.
	MaxPollRecords int
	// Until, when set, stops each partition it names before that
	// offset: no record at or past it is read, so the partition's Next
	// ends exactly there. A sink catching up to the progress another
	// agent committed reads to those offsets and not one record more.
	Until map[int32]int64
}

const defaultMaxPollRecords = 10_000

// Batch is what one Poll read.
type Batch struct {
	// Partitions are the partitions that advanced, ascending.
	Partitions []PartitionBatch
	// Watermark is the source's: the least of its partitions'; zero
	// while a partition has none.
	Watermark time.Time
}

// PartitionBatch is one partition's part of a Batch.
type PartitionBatch struct {
	Partition int32
	// Changes are the partition's rows in offset order: +1 per record
	// of an append source; for an upsert source -1 of the key's
	// previous row and +1 of its new one, -1 for a tombstone.
	Changes []types.Change
	// Late are the indexes in Changes of rows whose event time is
	// earlier than the partition's watermark before them. What happens
	// to them is the view's business.
	Late []int
	// Next is where the partition's reading stands after this batch:
	// committed with what the changes made, it resumes the Reader.
	Next Position
	// Watermark is the partition's: its greatest event time minus the
	// allowed lateness; zero while it has none.
	Watermark time.Time
	// Bad counts the records that did not decode, dropped or
	// dead-lettered.
	Bad int
	// NewestTimestamp is the greatest Kafka timestamp of the batch's
	// records (bad ones included; zero if none had one): how old what
	// a reader consumes is, for a view's lag in time.
	NewestTimestamp time.Time
}

// Reader follows a source's topic: committed records only
// (read_committed), per partition in offset order. Not safe for
// concurrent use. An error from Poll leaves it unusable: close it and
// start again from the positions last committed.
type Reader struct {
	cfg     ReaderConfig
	cl      *kgo.Client
	dlq     *kgo.Client
	store   *upsertStore
	metrics *sourceMetrics
	parts   map[int32]*partState
	failed  error
}

// partState is one partition's reading.
type partState struct {
	next     int64
	maxEvent time.Time
	// emitFrom: records before it only rebuild the upsert store, their
	// changes having been emitted before.
	emitFrom int64
}

// NewReader starts reading.
func NewReader(ctx context.Context, cfg ReaderConfig) (*Reader, error) {
	if cfg.Def == nil || cfg.Decoder == nil {
		return nil, errors.New("source: a Reader needs Def and Decoder")
	}
	if cfg.MaxPollRecords <= 0 {
		cfg.MaxPollRecords = defaultMaxPollRecords
	}
	r := &Reader{cfg: cfg, metrics: cfg.Metrics.of(cfg.Def.Name), parts: map[int32]*partState{}}
	admin, err := kgo.NewClient(cfg.Kafka...)
	if err != nil {
		return nil, err
	}
	sp, err := spans(ctx, admin, cfg.Def.Topic)
	admin.Close()
	if err != nil {
		return nil, err
	}
	start := cfg.Start
	if start == nil {
		start = map[int32]Position{}
		for p, s := range sp {
			off := s.start
			if cfg.Def.Startup == Latest {
				off = s.end
			}
			start[p] = Position{Offset: off}
		}
	}
	if cfg.Def.Envelope == Upsert {
		if r.store, err = openUpsertStore(cfg.StateDir); err != nil {
			return nil, err
		}
	}
	offsets := map[int32]kgo.Offset{}
	for p, pos := range start {
		s, ok := sp[p]
		if !ok {
			r.Close()
			return nil, fmt.Errorf("source: topic %s has no partition %d", cfg.Def.Topic, p)
		}
		ps := &partState{next: pos.Offset, maxEvent: pos.MaxEventTime, emitFrom: pos.Offset}
		if r.store != nil {
			from, err := r.rebuildFrom(p, pos.Offset, s.start)
			if err != nil {
				r.Close()
				return nil, err
			}
			ps.next = from
		}
		r.parts[p] = ps
		offsets[p] = kgo.NewOffset().At(ps.next)
	}
	opts := append(append([]kgo.Opt(nil), cfg.Kafka...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Def.Topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Control records (transaction markers) advance a partition's
		// position too, so Next moves past a trailing marker.
		kgo.KeepControlRecords(),
	)
	if r.cl, err = kgo.NewClient(opts...); err != nil {
		r.Close()
		return nil, err
	}
	r.pauseDone()
	if cfg.Def.BadRecords == DeadLetter {
		if r.dlq, err = kgo.NewClient(cfg.Kafka...); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// rebuildFrom is where an upsert partition must be read from for its
// store to reflect every record before start: where the store stands if
// at or before start, else (the store is ahead of what the view
// committed, or holds nothing past the log's start) the log's start,
// the partition's keys forgotten first.
func (r *Reader) rebuildFrom(p int32, start, logStart int64) (int64, error) {
	stored, ok, err := r.store.offset(p)
	switch {
	case err != nil:
		return 0, err
	case ok && stored <= start && stored >= logStart:
		return stored, nil
	case !ok && start <= logStart:
		return start, nil
	}
	if err := r.store.wipe(p); err != nil {
		return 0, err
	}
	return logStart, nil
}

// Close stops reading; closing again does nothing.
func (r *Reader) Close() {
	if r.cl != nil {
		r.cl.Close()
		r.cl = nil
	}
	if r.dlq != nil {
		r.dlq.Close()
		r.dlq = nil
	}
	if r.store != nil {
		_ = r.store.close()
		r.store = nil
	}
	if r.failed == nil {
		r.failed = errors.New("source: reader closed")
	}
}

// Poll waits for records and returns what they make, or ctx's error.
func (r *Reader) Poll(ctx context.Context) (*Batch, error) {
	if r.failed != nil {
		return nil, r.failed
	}
	b, err := r.poll(ctx)
	if err != nil && ctx.Err() == nil {
		r.failed = err
	}
	return b, err
}

func (r *Reader) poll(ctx context.Context) (*Batch, error) {
	fs := r.cl.PollRecords(ctx, r.cfg.MaxPollRecords)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var ferr error
	fs.EachError(func(t string, p int32, err error) {
		if ferr == nil && !errors.Is(err, context.Canceled) {
			ferr = fmt.Errorf("source: reading %s/%d: %w", t, p, err)
		}
	})
	if ferr != nil {
		return nil, ferr
	}
	var ub *upsertBatch
	if r.store != nil {
		ub = r.store.batch()
		defer ub.close()
	}
	byPart := map[int32]*PartitionBatch{}
	var dead []*kgo.Record
	var perr error
	fs.EachRecord(func(rec *kgo.Record) {
		if perr != nil {
			return
		}
		ps, ok := r.parts[rec.Partition]
		if !ok || rec.Offset < ps.next {
			return // a partition not asked for, or a record seen already
		}
		if until, ok := r.cfg.Until[rec.Partition]; ok && rec.Offset >= until {
			return // past where this reading stops
		}
		pb := byPart[rec.Partition]
		if pb == nil {
			pb = &PartitionBatch{Partition: rec.Partition}
			byPart[rec.Partition] = pb
		}
		ps.next = rec.Offset + 1
		if rec.Attrs.IsControl() {
			return
		}
		if rec.Timestamp.After(pb.NewestTimestamp) {
			pb.NewestTimestamp = rec.Timestamp
		}
		emit := rec.Offset >= ps.emitFrom
		if emit {
			r.metrics.read(recordSize{rec.Key, rec.Value})
		}
		var bad *BadRecord
		bad, perr = r.record(ctx, rec, ps, pb, ub, emit)
		if perr != nil || bad == nil || !emit {
			return
		}
		pb.Bad++
		r.metrics.bad[bad.Reason].Inc()
		if r.dlq != nil {
			dead = append(dead, deadLetter(r.cfg.Def, rec, bad))
		}
	})
	if perr != nil {
		return nil, perr
	}
	if err := produceDeadLetters(ctx, r.dlq, dead); err != nil {
		return nil, err
	}
	r.pauseDone()
	out := &Batch{}
	for _, p := range sortedPartitions(byPart) {
		pb, ps := byPart[p], r.parts[p]
		pb.Next = Position{Offset: ps.next, MaxEventTime: ps.maxEvent}
		pb.Watermark = r.watermarkOf(ps)
		if ub != nil {
			if err := ub.setOffset(p, ps.next); err != nil {
				return nil, err
			}
		}
		out.Partitions = append(out.Partitions, *pb)
	}
	if ub != nil {
		if err := ub.commit(); err != nil {
			return nil, fmt.Errorf("source: upsert state: %w", err)
		}
	}
	out.Watermark = r.Watermark()
	return out, nil
}

// pauseDone stops fetching the partitions that reached Until, so a
// reader that stopped does not keep fetching records it drops.
func (r *Reader) pauseDone() {
	var done []int32
	for p, until := range r.cfg.Until {
		if ps, ok := r.parts[p]; ok && ps.next >= until {
			done = append(done, p)
		}
	}
	if len(done) > 0 {
		r.cl.PauseFetchPartitions(map[string][]int32{r.cfg.Def.Topic: done})
	}
}

// record turns one record into pb's changes. A record that does not
// decode is returned as bad, changing nothing.
func (r *Reader) record(ctx context.Context, rec *kgo.Record, ps *partState, pb *PartitionBatch, ub *upsertBatch, emit bool) (*BadRecord, error) {
	def := r.cfg.Def
	if def.Envelope == Upsert && rec.Key == nil {
		return badf(ReasonKey, sqlerr.NullValueNotAllowed, "an upsert source's record has no key"), nil
	}
	var row types.Row
	if rec.Value != nil || def.Envelope == Append {
		var err error
		row, err = r.cfg.Decoder.Decode(ctx, rec)
		var bad *BadRecord
		if errors.As(err, &bad) {
			return bad, nil
		}
		if err != nil {
			return nil, err
		}
	}
	if def.Envelope == Upsert {
		prev, had, err := ub.get(rec.Partition, rec.Key)
		if err != nil {
			return nil, err
		}
		if row == nil {
			if had {
				if err := ub.del(rec.Partition, rec.Key); err != nil {
					return nil, err
				}
				if emit {
					pb.Changes = append(pb.Changes, types.Change{Row: prev, Diff: -1})
				}
			}
			return nil, nil
		}
		if err := ub.put(rec.Partition, rec.Key, row); err != nil {
			return nil, err
		}
		if had && emit {
			if types.CompareRows(prev, row) == 0 {
				return nil, nil
			}
			pb.Changes = append(pb.Changes, types.Change{Row: prev, Diff: -1})
		}
	}
	if r.late(ps, row) && emit {
		pb.Late = append(pb.Late, len(pb.Changes))
		r.metrics.late.Inc()
	}
	if emit {
		pb.Changes = append(pb.Changes, types.Change{Row: row, Diff: +1})
	}
	return nil, nil
}

// late reports whether row's event time is earlier than its
// partition's watermark, and advances the watermark.
func (r *Reader) late(ps *partState, row types.Row) bool {
	col := r.cfg.Def.WatermarkColumn
	if col < 0 {
		return false
	}
	t, ok := row[col].(time.Time)
	if !ok {
		return false // NULL event time: no say in the watermark
	}
	wm := r.watermarkOf(ps)
	if t.After(ps.maxEvent) || ps.maxEvent.IsZero() {
		ps.maxEvent = t
	}
	return !wm.IsZero() && t.Before(wm)
}

func (r *Reader) watermarkOf(ps *partState) time.Time {
	if ps.maxEvent.IsZero() || r.cfg.Def.WatermarkColumn < 0 {
		return time.Time{}
	}
	return ps.maxEvent.Add(-r.cfg.Def.WatermarkDelay)
}

// Watermark is the source's watermark: the least of its partitions';
// zero while any has none.
func (r *Reader) Watermark() time.Time {
	var min time.Time
	for _, ps := range r.parts {
		wm := r.watermarkOf(ps)
		if wm.IsZero() {
			return time.Time{}
		}
		if min.IsZero() || wm.Before(min) {
			min = wm
		}
	}
	return min
}
