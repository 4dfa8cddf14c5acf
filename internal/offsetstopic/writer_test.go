package offsetstopic

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch"
)

// TestPartitionFor: Kafka's placement of groups, checked against
// values Java 17 printed for String.hashCode and Utils.abs(h) % 50:
// "polygenelubricants".hashCode() is Integer.MIN_VALUE, which Kafka's
// Utils.abs maps to 0.
func TestPartitionFor(t *testing.T) {
	for _, c := range []struct {
		group string
		hash  int32
		want  int32
	}{
		{"", 0, 0},
		{"g1", 3242, 42},        // 'g'*31 + '1'
		{"hello", 99162322, 22}, // a classic
		{"polygenelubricants", -1 << 31, 0},
		{"console-consumer", -648006740, 40},
		{"\U0001F600", 1772899, 49}, // a surrogate pair: 0xD83D*31 + 0xDE00
	} {
		if h := javaStringHash(c.group); h != c.hash {
			t.Errorf("hash(%q) = %d, want %d", c.group, h, c.hash)
		}
		if p := PartitionFor(c.group, 50); p != c.want {
			t.Errorf("PartitionFor(%q) = %d, want %d", c.group, p, c.want)
		}
	}
}

// faultProducer fails the next fail calls, then records what it is
// given.
type faultProducer struct {
	mu      sync.Mutex
	fail    int
	calls   int
	records map[string][]byte // newest value by key; nil for a tombstone
	parts   map[string]int32
}

var errInjected = errors.New("injected produce failure")

func (p *faultProducer) Produce(_ context.Context, batches []produce.Batch) ([]meta.BatchResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.fail > 0 {
		p.fail--
		return nil, errInjected
	}
	for _, b := range batches {
		for rest := b.Data; len(rest) > 0; {
			entry, next, err := recordbatch.Next(rest)
			if err != nil {
				return nil, err
			}
			h, err := recordbatch.Validate(entry, 1<<20)
			if err != nil {
				return nil, err
			}
			err = recordbatch.EachRecord(entry[recordbatch.HeaderSize:], h, func(_ int, r recordbatch.Record) error {
				p.records[string(r.Key)] = r.Value
				p.parts[string(r.Key)] = b.Partition
				return nil
			})
			if err != nil {
				return nil, err
			}
			rest = next
		}
	}
	return make([]meta.BatchResult, len(batches)), nil
}

func (p *faultProducer) offset(t *testing.T, group, topic string, partition int32) (int64, bool) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	k := offsetKey(meta.OffsetRef{Group: group, Topic: topic, Partition: partition})
	v, ok := p.records[string(k)]
	if !ok || v == nil {
		return 0, ok
	}
	var ov kmsg.OffsetCommitValue
	if err := ov.ReadFrom(v); err != nil {
		t.Fatal(err)
	}
	if got, want := p.parts[string(k)], PartitionFor(group, 50); got != want {
		t.Errorf("%s in partition %d, want %d", group, got, want)
	}
	return ov.Offset, true
}

func newDB(t *testing.T) *metatest.DB {
	db := metatest.New(nil)
	db.MustPropose(t, meta.CreateTopic{Name: Topic, Partitions: 50, Configs: map[string]string{"cleanup.policy": "compact"}})
	db.MustPropose(t, meta.CreateTopic{Name: "t", Partitions: 1})
	return db
}

// newWriter starts a Writer over db and a faultProducer failing its
// first fail calls; cfg's Meta, Producer and Logger are filled in.
func newWriter(t *testing.T, db *metatest.DB, fail int, cfg Config) (*Writer, *faultProducer) {
	t.Helper()
	p := &faultProducer{fail: fail, records: map[string][]byte{}, parts: map[string]int32{}}
	cfg.Meta, cfg.Producer, cfg.Logger = db, p, quiet
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	return w, p
}

func commit(t *testing.T, db *metatest.DB, group string, offset int64) meta.Result {
	t.Helper()
	return db.MustPropose(t, meta.OffsetCommit{Group: group, Generation: -1, RetentionMs: -1,
		Offsets: []meta.OffsetCommitPartition{{Topic: "t", Offset: offset, LeaderEpoch: -1, CommitTimestamp: -1}}})
}

// TestWriterRetries: a write that fails is retried, re-reading the
// value, so the record carries the newest offset; the failures are
// counted, and nothing is lost.
func TestWriterRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := newDB(t)
		m := NewMetrics()
		w, p := newWriter(t, db, 2, Config{Metrics: m})
		w.Note([]meta.Result{commit(t, db, "g", 5)})
		if err := w.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if off, ok := p.offset(t, "g", "t", 0); !ok || off != 5 {
			t.Errorf("record: offset %d (%v), want 5", off, ok)
		}
		if got := value(t, m.writeFailures); got != 2 {
			t.Errorf("write failures %v, want 2", got)
		}
		if got := value(t, m.lost.WithLabelValues(reasonWriteFailed)); got != 0 {
			t.Errorf("lost %v, want 0", got)
		}
	})
}

// TestWriterGivesUp: a write that fails every attempt is counted lost
// after Attempts tries, and Sync does not hang on it; the group's next
// commit writes the current value once the producer works again. A
// full queue counts its changes lost instead of blocking.
func TestWriterGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := newDB(t)
		m := NewMetrics()
		w, p := newWriter(t, db, 1<<30, Config{Metrics: m, Attempts: 3, MaxPending: 2})
		w.Note([]meta.Result{commit(t, db, "g", 5)})
		if err := w.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		// The offset's record and the group's (the commit created it).
		if p.calls != 3 || value(t, m.lost.WithLabelValues(reasonWriteFailed)) != 2 {
			t.Errorf("%d produce calls, %v lost; want 3 and 2", p.calls, value(t, m.lost.WithLabelValues(reasonWriteFailed)))
		}
		if _, ok := p.offset(t, "g", "t", 0); ok {
			t.Error("a record despite every write failing")
		}

		p.mu.Lock()
		p.fail = 0
		p.mu.Unlock()
		w.Note([]meta.Result{commit(t, db, "g", 6)})
		if err := w.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if off, ok := p.offset(t, "g", "t", 0); !ok || off != 6 {
			t.Errorf("after recovery: offset %d (%v), want 6", off, ok)
		}

		// Three keys in one note against room for two.
		var rs []meta.Result
		for _, g := range []string{"a", "b", "c"} {
			rs = append(rs, commit(t, db, g, 1))
		}
		w.Note(rs)
		if err := w.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := value(t, m.lost.WithLabelValues(reasonQueueFull)); got < 1 {
			t.Errorf("queue_full lost %v, want at least 1", got)
		}
	})
}

func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestResync: Resync writes the current records of the groups owns
// claims, and none of the others'.
func TestResync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := newDB(t)
		commit(t, db, "mine", 3)
		commit(t, db, "mine", 4)
		commit(t, db, "theirs", 5)
		w, p := newWriter(t, db, 0, Config{MaxPending: 2})
		<-w.Resync(func(g string) bool { return g == "mine" })
		if off, ok := p.offset(t, "mine", "t", 0); !ok || off != 4 {
			t.Errorf("mine: offset %d (%v), want 4", off, ok)
		}
		if _, ok := p.records[string(groupKey("mine"))]; !ok {
			t.Error("mine: no group record")
		}
		if _, ok := p.offset(t, "theirs", "t", 0); ok {
			t.Error("theirs: rewritten by an agent that does not own it")
		}
	})
}

// TestGroupValueVersion: a group value is v1 (Burrow 1.2 reads no
// later one) unless a member has an instance id, which needs v3.
func TestGroupValueVersion(t *testing.T) {
	for _, c := range []struct {
		instance string
		want     int16
	}{{"", 1}, {"static-1", 3}} {
		g := meta.Group{Name: "g", ProtocolType: "consumer", Protocol: "range", Generation: 4, Leader: "m",
			Members: []meta.GroupMember{{MemberID: "m", InstanceID: c.instance, ClientID: "c", Assignment: []byte{1}}}}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(groupValue(&g)); err != nil {
			t.Fatal(err)
		}
		if v.Version != c.want || v.Generation != 4 || *v.Leader != "m" || len(v.Members) != 1 || v.Members[0].ClientID != "c" {
			t.Errorf("instance id %q: %+v, want version %d", c.instance, v, c.want)
		}
		if got := v.Members[0].InstanceID; c.want == 3 && (got == nil || *got != c.instance) {
			t.Errorf("instance id %q: decoded %v", c.instance, got)
		}
	}
}
