package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

// Defaults of a scan's limits.
const (
	DefaultScanMaxRows  = 100_000
	DefaultScanMaxBytes = 64 << 20
)

// ScanConfig configures a Scan.
type ScanConfig struct {
	Def     *Def
	Decoder *Decoder
	Kafka   []kgo.Opt
	// MaxRows and MaxBytes bound what the scan reads: the records of
	// the topic (append) or the rows kept per key (upsert), the bytes
	// their keys and values take. Past either the scan fails with
	// 53400 rather than read on. Zero takes the defaults.
	MaxRows  int
	MaxBytes int64
	Metrics  *Metrics
}

// Scan reads a source's current contents, for an ad-hoc query: every
// partition from its start to its last stable offset at the time of
// the call, committed records only; for an upsert source the newest row
// per key. Bad records are counted and skipped (a scan writes no
// dead letters: it is a look, and the source's Reader sends them).
//
// An append source's rows are streamed in partition, then offset,
// order; an upsert source's are gathered first (the newest per key
// needs the whole partition) and returned in partition, then key, order.
type Scan struct {
	cfg     ScanConfig
	cl      *kgo.Client
	metrics *sourceMetrics
	// left are the partitions not yet read to their end, and where
	// that end is.
	left  map[int32]int64
	queue []types.Row
	// kept are an upsert scan's rows by partition and key.
	kept      map[string]keptRow
	rows      int
	bytes     int64
	done, err error
}

type keptRow struct {
	p   int32
	key []byte
	row types.Row
	n   int64 // bytes
}

// NewScan starts a scan.
func NewScan(ctx context.Context, cfg ScanConfig) (*Scan, error) {
	if cfg.MaxRows <= 0 {
		cfg.MaxRows = DefaultScanMaxRows
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultScanMaxBytes
	}
	s := &Scan{cfg: cfg, metrics: cfg.Metrics.of(cfg.Def.Name), left: map[int32]int64{}}
	admin, err := kgo.NewClient(cfg.Kafka...)
	if err != nil {
		return nil, err
	}
	sp, err := spans(ctx, admin, cfg.Def.Topic)
	admin.Close()
	if err != nil {
		return nil, err
	}
	offsets := map[int32]kgo.Offset{}
	for p, span := range sp {
		if span.end > span.start {
			s.left[p] = span.end
			offsets[p] = kgo.NewOffset().At(span.start)
		}
	}
	if cfg.Def.Envelope == Upsert {
		s.kept = map[string]keptRow{}
	}
	if len(offsets) == 0 {
		return s, nil
	}
	opts := append(append([]kgo.Opt(nil), cfg.Kafka...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Def.Topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// The last offset before the end may be a transaction marker:
		// seeing it is how the scan knows it reached the end.
		kgo.KeepControlRecords(),
	)
	if s.cl, err = kgo.NewClient(opts...); err != nil {
		return nil, err
	}
	return s, nil
}

// Close ends the scan.
func (s *Scan) Close() {
	if s.cl != nil {
		s.cl.Close()
	}
}

// Next returns the next row; false at the end or on an error (Err).
func (s *Scan) Next(ctx context.Context) (types.Row, bool) {
	for len(s.queue) == 0 {
		if s.err != nil || len(s.left) == 0 {
			if s.err == nil && s.kept != nil {
				s.flushKept()
				continue
			}
			return nil, false
		}
		s.err = s.fetch(ctx)
	}
	row := s.queue[0]
	s.queue = s.queue[1:]
	return row, true
}

// Err is what ended the scan early.
func (s *Scan) Err() error { return s.err }

func (s *Scan) overLimit() error {
	e := sqlerr.Errorf(sqlerr.ConfigurationLimitExceeded, "source %q holds more than the scan limit of %d rows or %d bytes", s.cfg.Def.Name, s.cfg.MaxRows, s.cfg.MaxBytes)
	e.Hint = "narrow the query, or read the source through a materialized view"
	return e
}

func (s *Scan) fetch(ctx context.Context) error {
	fs := s.cl.PollRecords(ctx, 1000)
	if err := ctx.Err(); err != nil {
		return err
	}
	var ferr error
	fs.EachError(func(t string, p int32, err error) {
		if ferr == nil {
			ferr = fmt.Errorf("source: reading %s/%d: %w", t, p, err)
		}
	})
	if ferr != nil {
		return ferr
	}
	var err error
	fs.EachRecord(func(rec *kgo.Record) {
		end, ok := s.left[rec.Partition]
		if err != nil || !ok || rec.Offset >= end {
			return
		}
		if rec.Offset+1 >= end {
			delete(s.left, rec.Partition)
		}
		if rec.Attrs.IsControl() {
			return
		}
		s.metrics.read(recordSize{rec.Key, rec.Value})
		err = s.record(ctx, rec)
	})
	return err
}

func (s *Scan) record(ctx context.Context, rec *kgo.Record) error {
	size := int64(len(rec.Key) + len(rec.Value))
	if s.kept == nil {
		s.rows++
		s.bytes += size
		if s.rows > s.cfg.MaxRows || s.bytes > s.cfg.MaxBytes {
			return s.overLimit()
		}
	}
	if s.kept != nil && rec.Key == nil {
		s.metrics.bad[ReasonKey].Inc()
		return nil
	}
	var row types.Row
	if rec.Value != nil || s.kept == nil {
		var err error
		row, err = s.cfg.Decoder.Decode(ctx, rec)
		var bad *BadRecord
		if errors.As(err, &bad) {
			s.metrics.bad[bad.Reason].Inc()
			return nil
		}
		if err != nil {
			return err
		}
	}
	if s.kept == nil {
		s.queue = append(s.queue, row)
		return nil
	}
	k := string(rowKey(rec.Partition, rec.Key))
	if old, ok := s.kept[k]; ok {
		s.rows--
		s.bytes -= old.n
		delete(s.kept, k)
	}
	if row == nil {
		return nil // a tombstone
	}
	s.kept[k] = keptRow{p: rec.Partition, key: rec.Key, row: row, n: size}
	s.rows++
	s.bytes += size
	if s.rows > s.cfg.MaxRows || s.bytes > s.cfg.MaxBytes {
		return s.overLimit()
	}
	return nil
}

// flushKept queues an upsert scan's rows, in partition and key order.
func (s *Scan) flushKept() {
	keys := make([]string, 0, len(s.kept))
	for k := range s.kept {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	for _, k := range keys {
		s.queue = append(s.queue, s.kept[k].row)
	}
	s.kept = nil
}
