package compat

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Bounds on reading a topic back raw.
const (
	// verifyFetchBytes is the most one raw fetch asks for per partition.
	verifyFetchBytes = 4 << 20
	// verifyFetchRounds bounds the fetches per topic; a script's topic is
	// a few thousand small records, far below this many rounds.
	verifyFetchRounds = 1000
)

// ErrClaim: what a client script claimed does not match the agent.
var ErrClaim = errors.New("compat: claim not confirmed by the agent")

// claim is what one result line says about the agent's state. Zero
// fields claim nothing.
type claim struct {
	Topic        string `json:"topic"`
	Produced     int64  `json:"produced"`
	Codec        string `json:"codec"`
	Idempotent   bool   `json:"idempotent"`
	Group        string `json:"group"`
	Committed    int64  `json:"committed"`
	TxnCommitted int64  `json:"txn_committed"`
}

func (c claim) empty() bool { return c == claim{} }

// verifier checks claims against one agent with franz-go.
type verifier struct {
	cl  *kgo.Client
	adm *kadm.Client
}

func newVerifier(addr string) (*verifier, error) {
	// Fetch at v12 or below names topics, not ids: kgo sends the
	// highest version both sides serve, so cap it at 2.8.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(kversion.V2_8_0()))
	if err != nil {
		return nil, err
	}
	return &verifier{cl: cl, adm: kadm.NewClient(cl)}, nil
}

func (v *verifier) close() { v.cl.Close() }

// check returns nil if the agent confirms c, else an error wrapping
// ErrClaim that says what it holds instead.
func (v *verifier) check(ctx context.Context, c claim) error {
	if c.Topic == "" {
		if c.empty() {
			return nil
		}
		return fmt.Errorf("%w: a claim without a topic: %+v", ErrClaim, c)
	}
	needBatches := c.Produced > 0 || c.Codec != "" || c.Idempotent || c.TxnCommitted > 0
	if needBatches {
		st, err := v.scan(ctx, c.Topic)
		if err != nil {
			return err
		}
		if err := st.confirm(c); err != nil {
			return err
		}
	}
	if c.Group != "" {
		resps, err := v.adm.FetchOffsets(ctx, c.Group)
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			return fmt.Errorf("offset fetch of group %s: %w", c.Group, err)
		}
		var total int64
		resps.Each(func(o kadm.OffsetResponse) {
			if o.Topic == c.Topic && o.At > 0 {
				total += o.At
			}
		})
		if total != c.Committed {
			return fmt.Errorf("%w: group %s has committed offsets adding up to %d on %s, the client claims %d",
				ErrClaim, c.Group, total, c.Topic, c.Committed)
		}
	}
	return nil
}

// topicScan is what a raw read of a whole topic found.
type topicScan struct {
	highWatermarks int64 // summed over partitions
	dataRecords    int64 // records in non-control batches
	codecBatches   map[int8]int
	noProducerID   int   // data batches without a producer id
	txnCommitted   int64 // records of transactional batches later committed
	txnAborted     int64
}

func (s *topicScan) confirm(c claim) error {
	var errs []error
	if c.Produced > 0 && (s.dataRecords != c.Produced || s.highWatermarks != c.Produced) {
		errs = append(errs, fmt.Errorf("%w: %s holds %d records (high watermarks add up to %d), the client claims %d",
			ErrClaim, c.Topic, s.dataRecords, s.highWatermarks, c.Produced))
	}
	if c.Codec != "" {
		want, ok := codecs[Capability(c.Codec)]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%w: unknown codec %q", ErrClaim, c.Codec))
		case s.codecBatches[want] == 0:
			errs = append(errs, fmt.Errorf("%w: no batch of %s is stored %s-compressed (batches by codec number: %v): the client sent it uncompressed",
				ErrClaim, c.Topic, c.Codec, s.codecBatches))
		default:
			for codec, n := range s.codecBatches {
				if codec != want && codec != 0 {
					errs = append(errs, fmt.Errorf("%w: %d batches of %s stored with codec %d, want %s", ErrClaim, n, c.Topic, codec, c.Codec))
				}
			}
		}
	}
	if c.Idempotent && s.noProducerID > 0 {
		errs = append(errs, fmt.Errorf("%w: %d batches of %s carry no producer id: not produced idempotently", ErrClaim, s.noProducerID, c.Topic))
	}
	if c.TxnCommitted > 0 && s.txnCommitted != c.TxnCommitted {
		errs = append(errs, fmt.Errorf("%w: %s holds %d records of committed transactions (%d aborted), the client claims %d",
			ErrClaim, c.Topic, s.txnCommitted, s.txnAborted, c.TxnCommitted))
	}
	return errors.Join(errs...)
}

// scan reads every batch of topic raw, from offset 0 to each partition's
// high watermark, and tallies them; transactional records count once
// their producer's commit marker follows them.
func (v *verifier) scan(ctx context.Context, topic string) (*topicScan, error) {
	ends, err := v.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	s := &topicScan{codecBatches: make(map[int8]int)}
	next := make(map[int32]int64)
	hw := make(map[int32]int64)
	ends.Each(func(o kadm.ListedOffset) {
		hw[o.Partition] = o.Offset
		s.highWatermarks += o.Offset
		if o.Offset > 0 {
			next[o.Partition] = 0
		}
	})
	// Per partition: records of open transactions, by producer id.
	open := make(map[int32]map[int64]int64)
	for round := 0; len(next) > 0; round++ {
		if round == verifyFetchRounds {
			return nil, fmt.Errorf("reading %s: still short of the high watermarks after %d fetches", topic, round)
		}
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis = 0
		req.MaxBytes = verifyFetchBytes
		req.SessionEpoch = -1
		req.IsolationLevel = 0 // read_uncommitted: every batch, markers too
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		parts := make([]int32, 0, len(next))
		for p := range next {
			parts = append(parts, p)
		}
		slices.Sort(parts)
		for _, p := range parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = p
			rp.FetchOffset = next[p]
			rp.PartitionMaxBytes = verifyFetchBytes
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, v.cl)
		if err != nil {
			return nil, fmt.Errorf("raw fetch of %s: %w", topic, err)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("raw fetch of %s/%d: %w", topic, p.Partition, err)
				}
				if open[p.Partition] == nil {
					open[p.Partition] = make(map[int64]int64)
				}
				last, err := s.addBatches(topic, p.Partition, p.RecordBatches, next[p.Partition], open[p.Partition])
				if err != nil {
					return nil, err
				}
				next[p.Partition] = last
				if last >= hw[p.Partition] {
					delete(next, p.Partition)
				}
			}
		}
	}
	for _, byPID := range open {
		for _, n := range byPID {
			s.txnAborted += n // still open: not committed
		}
	}
	return s, nil
}

// addBatches tallies the batches in raw and returns the offset after the
// last one.
func (s *topicScan) addBatches(topic string, partition int32, raw []byte, from int64, open map[int64]int64) (int64, error) {
	next := from
	for len(raw) > 0 {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw); err != nil || 12+int(b.Length) > len(raw) {
			if next > from {
				break // a partial batch at the end of the response
			}
			return 0, fmt.Errorf("raw fetch of %s/%d at %d: bad batch (length %d of %d bytes): %v", topic, partition, from, b.Length, len(raw), err)
		}
		raw = raw[12+int(b.Length):]
		end := b.FirstOffset + int64(b.LastOffsetDelta) + 1
		if end <= next {
			continue // a batch before the requested offset
		}
		next = end
		transactional := b.Attributes&0x10 != 0
		if b.Attributes&0x20 != 0 { // control batch
			var rec kmsg.Record
			if err := rec.ReadFrom(b.Records); err != nil {
				return 0, fmt.Errorf("%s/%d: control batch at %d: %v", topic, partition, b.FirstOffset, err)
			}
			var key kmsg.ControlRecordKey
			if err := key.ReadFrom(rec.Key); err != nil {
				return 0, fmt.Errorf("%s/%d: control record key at %d: %v", topic, partition, b.FirstOffset, err)
			}
			switch key.Type {
			case 1: // COMMIT
				s.txnCommitted += open[b.ProducerID]
			case 0: // ABORT
				s.txnAborted += open[b.ProducerID]
			}
			delete(open, b.ProducerID)
			continue
		}
		s.dataRecords += int64(b.NumRecords)
		s.codecBatches[int8(b.Attributes&0x07)]++
		if b.ProducerID < 0 {
			s.noProducerID++
		}
		if transactional {
			open[b.ProducerID] += int64(b.NumRecords)
		}
	}
	return next, nil
}
