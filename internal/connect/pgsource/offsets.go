package pgsource

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// OffsetsTopic holds every PostgreSQL source's offsets: one partition,
// compacted, keyed as Kafka Connect keys source offsets
// (["<connector>",{"server":"<topic.prefix>"}], Debezium's partition).
const OffsetsTopic = "__strand_connect_offsets"

// TransactionalID is the transactional id connector name produces
// with: a new owner's InitProducerID fences the previous one.
func TransactionalID(name string) string { return "strand-connect-" + name }

// Offset is what a connector has committed, written in the same Kafka
// transaction as the records it covers. Field names are Debezium's
// where Debezium has one.
type Offset struct {
	// LSN is the end LSN of the last PostgreSQL transaction committed
	// (or the slot's consistent point after the snapshot): where
	// streaming resumes.
	LSN uint64 `json:"lsn"`
	// CommitLSN is the commit LSN of the last PostgreSQL transaction
	// committed; a transaction resent with a commit LSN at or below it
	// is skipped.
	CommitLSN uint64 `json:"lsn_commit"`
	TxID      uint32 `json:"txId,omitempty"`
	// TsUsec is that transaction's commit time.
	TsUsec int64 `json:"ts_usec,omitempty"`
	// Snapshot is true while the initial snapshot is being written
	// (it is redone from the start if the task restarts then);
	// SnapshotCompleted once it is all committed.
	Snapshot          bool `json:"snapshot,omitempty"`
	SnapshotCompleted bool `json:"snapshot_completed,omitempty"`
}

// offsetKey is the connector's key in OffsetsTopic.
func offsetKey(name, prefix string) []byte {
	b, _ := json.Marshal([]any{name, map[string]string{"server": prefix}})
	return b
}

// idleRead bounds how long a read of the offsets topic waits for its
// next records.
const idleRead = 10 * time.Second

func ensureOffsetsTopic(ctx context.Context, adm *kadm.Client) error {
	res, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, OffsetsTopic)
	if err == nil {
		err = res.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("offsets topic %s: %w", OffsetsTopic, err)
	}
	return nil
}

// readOffset returns the last committed offset under key, ok false if
// there is none. The caller has initialized its transactional producer
// first: that ends any transaction of an earlier owner, so every
// record under key is decided.
//
// The topic is shared by every connector, and another connector's
// open transaction holds the last stable offset back, maybe before
// this connector's last commit: a read_committed read could miss it.
// So the read is read_uncommitted, to the high watermark, and keeps a
// value only once its transaction's commit marker is read.
//
// It reads a window before the end first, growing eightfold while the
// window holds no committed value under key. The first window that
// holds one holds the last: every value under key comes from this
// connector's transactional id, whose transactions run one after the
// other and are all decided (ended by the caller's InitProducerID), so
// a committed value in the window is later than any before it.
func readOffset(ctx context.Context, opts []kgo.Opt, key []byte) (o Offset, ok bool, err error) {
	admCl, err := kgo.NewClient(opts...)
	if err != nil {
		return o, false, err
	}
	adm := kadm.NewClient(admCl)
	starts, err := adm.ListStartOffsets(ctx, OffsetsTopic)
	if err == nil {
		err = starts.Error()
	}
	var ends kadm.ListedOffsets
	if err == nil {
		ends, err = adm.ListEndOffsets(ctx, OffsetsTopic)
		if err == nil {
			err = ends.Error()
		}
	}
	admCl.Close()
	if err != nil {
		return o, false, fmt.Errorf("offsets topic %s: %w", OffsetsTopic, err)
	}
	s, _ := starts.Lookup(OffsetsTopic, 0)
	e, _ := ends.Lookup(OffsetsTopic, 0)
	start, end := s.Offset, e.Offset
	for window := int64(offsetsWindow); ; window *= 8 {
		from := max(start, end-window)
		val, found, err := lastValue(ctx, opts, key, from, end)
		if err != nil {
			return o, false, err
		}
		if found {
			if err := json.Unmarshal(val, &o); err != nil {
				return o, false, fmt.Errorf("offsets topic %s: %w", OffsetsTopic, err)
			}
			return o, true, nil
		}
		if from == start {
			return o, false, nil
		}
	}
}

// offsetsWindow is how far before the offsets topic's end the read of
// the last offset starts first.
const offsetsWindow = 1024

// lastValue reads OffsetsTopic from from up to end and returns key's
// last committed value: a transactional record counts once its
// producer's commit marker follows, and not at all if an abort does.
func lastValue(ctx context.Context, opts []kgo.Opt, key []byte, from, end int64) ([]byte, bool, error) {
	if from >= end {
		return nil, false, nil
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{OffsetsTopic: {0: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords())...)
	if err != nil {
		return nil, false, err
	}
	defer cl.Close()
	var last []byte
	found := false
	pending := map[int64][]byte{} // producer id -> its open transaction's value under key
	for next := from; next < end; {
		pctx, cancel := context.WithTimeout(ctx, idleRead)
		fs := cl.PollRecords(pctx, 1000)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		if pctx.Err() != nil && fs.NumRecords() == 0 {
			// Rather fail than resume from an older offset (which
			// would write transactions again): the task starts again.
			return nil, false, fmt.Errorf("offsets topic %s: no record past offset %d in %v, its end is %d", OffsetsTopic, next, idleRead, end)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = err
			}
		})
		if ferr != nil {
			return nil, false, fmt.Errorf("offsets topic %s: %w", OffsetsTopic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < next || r.Offset >= end {
				return
			}
			next = r.Offset + 1
			switch {
			case r.Attrs.IsControl():
				// A control record's key: version int16, type int16
				// (0 abort, 1 commit).
				v, ok := pending[r.ProducerID]
				delete(pending, r.ProducerID)
				if ok && len(r.Key) >= 4 && r.Key[3] == 1 {
					last, found = v, v != nil
				}
			case !bytes.Equal(r.Key, key):
			case r.Attrs.IsTransactional():
				pending[r.ProducerID] = r.Value
			default:
				last, found = r.Value, r.Value != nil
			}
		})
	}
	return last, found, nil
}
