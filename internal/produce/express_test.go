package produce_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/express"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// outageEnv sets the outage of TestExpressZoneOutage's long form, as a
// Go duration ("1m" for issue 34's minute); the suite's short form is
// outageShort.
const (
	outageEnv   = "STRAND_TIER_OUTAGE"
	outageShort = 300 * time.Millisecond
)

// toggled is a zone store that fails (every operation) or slows (every
// write) while its mode says so.
type toggled struct {
	objstore.Store
	// mode: 0 healthy, 1 failing, 2 slow.
	mode  atomic.Int32
	delay time.Duration
}

var errZoneDown = errors.New("zone down")

func (s *toggled) check(ctx context.Context, write bool) error {
	switch s.mode.Load() {
	case 1:
		return errZoneDown
	case 2:
		if write {
			select {
			case <-time.After(s.delay):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

func (s *toggled) Put(ctx context.Context, k string, b []byte) error {
	if err := s.check(ctx, true); err != nil {
		return err
	}
	return s.Store.Put(ctx, k, b)
}

func (s *toggled) PutIfAbsent(ctx context.Context, k string, b []byte) error {
	if err := s.check(ctx, true); err != nil {
		return err
	}
	return s.Store.PutIfAbsent(ctx, k, b)
}

func (s *toggled) Get(ctx context.Context, k string, off, n int64) ([]byte, error) {
	if err := s.check(ctx, false); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, k, off, n)
}

// TestExpressZoneOutage runs idempotent producers through the tier while
// one zone's bucket fails, or is slow, for a while (outageShort; the
// long form takes STRAND_TIER_OUTAGE, e.g. 1m), with lost replies from
// another zone throughout. Every call must be acknowledged, and the
// partitions read back (through the tier, the failing zone still down)
// must hold each acknowledged batch exactly once, at its offset, in each
// producer's order.
func TestExpressZoneOutage(t *testing.T) {
	outage := outageShort
	if v := os.Getenv(outageEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", outageEnv, v, err)
		}
		outage = d
	}
	for _, tc := range []struct {
		name string
		mode int32
	}{{"failing", 1}, {"slow", 2}} {
		t.Run(tc.name, func(t *testing.T) { testZoneOutage(t, tc.mode, outage) })
	}
}

func testZoneOutage(t *testing.T, mode int32, outage time.Duration) {
	const producers, partitions = 4, 2
	db := metatest.New(time.Now)
	db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel4}}})
	topic := db.MustPropose(t, meta.CreateTopic{Name: "t", Partitions: partitions}).TopicID
	down := &toggled{Store: memobj.New(), delay: 200 * time.Millisecond}
	lossy := objstore.WithFaults(memobj.New(), objstore.NewFaults(7).FailRandomly(0.05, objstore.FaultAfter, objstore.OpPutIfAbsent))
	x, err := express.New(express.Config{Main: memobj.New(), Local: 1, Zones: []express.Zone{
		{Name: "a", Store: memobj.New()}, {Name: "b", Store: down}, {Name: "c", Store: lossy}}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := produce.New(produce.Config{Store: x, Express: x, Replica: db, AgentID: "agent-1-1", Logger: quietLogger(),
		HedgePercentile: 0.9, HedgeMaxRatio: 0.5, HedgeMinDelay: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())

	type ack struct {
		part int32
		base int64
	}
	acks := make([][]ack, producers)
	pids := make([]int64, producers)
	var acked atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	db.MustPropose(t, meta.AllocateProducerID{ProducerID: -1, ProducerEpoch: -1}) // id 0, which batchtest takes for none
	for g := range producers {
		pid := db.MustPropose(t, meta.AllocateProducerID{ProducerID: -1, ProducerEpoch: -1})
		pids[g] = pid.ProducerID
		part := int32(g % partitions)
		wg.Go(func() {
			seq := int32(0)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				o := crashOpts(g, i)
				o.ProducerID, o.ProducerEpoch, o.BaseSequence = pid.ProducerID, pid.ProducerEpoch, seq
				b, err := produce.BatchFrom(topic, part, batchtest.Build(t, o))
				if err != nil {
					t.Error(err)
					return
				}
				// A failed call is retried with the same sequence, as a
				// Kafka producer does: it must commit once.
				var rs []meta.BatchResult
				for try := 0; ; try++ {
					rs, err = p.Produce(testCtx(t), []produce.Batch{b})
					if err == nil && rs[0].Code == 0 {
						break
					}
					if try == 20 {
						t.Errorf("producer %d call %d: %v %+v", g, i, err, rs)
						return
					}
				}
				acks[g] = append(acks[g], ack{part: part, base: rs[0].BaseOffset})
				acked.Add(1)
				seq += int32(o.Records)
			}
		})
	}
	waitAcks := func(n int64) {
		for acked.Load() < n && !t.Failed() {
			time.Sleep(time.Millisecond)
		}
	}
	waitAcks(200)
	before := x.Stats()
	down.mode.Store(mode)
	time.Sleep(outage)
	during := x.Stats()
	down.mode.Store(0)
	waitAcks(acked.Load() + 200)
	if mode == 1 {
		down.mode.Store(1) // read back with the zone down again
	}
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	if during.Thirds == before.Thirds {
		t.Errorf("no flush went to the third zone during the outage: %+v -> %+v", before, during)
	}
	if mode == 1 && during.Puts[1] != before.Puts[1] {
		t.Errorf("the failing zone acknowledged %d writes", during.Puts[1]-before.Puts[1])
	}

	// Read every partition back through the tier.
	v := db.View()
	defer v.Close()
	r := fetch.NewReader(x, nil)
	type batchAt struct {
		offset int64
		pid    int64
		seq    int32
	}
	got := map[int32][]batchAt{}
	for part := range int32(partitions) {
		offset := int64(0)
		for {
			res, err := r.Read(testCtx(t), v, topic, part, offset, 1<<30)
			if err != nil || res.Err != 0 {
				t.Fatalf("read partition %d at %d: %v, code %d", part, offset, err, res.Err)
			}
			if len(res.Records) == 0 {
				break
			}
			for rest := res.Records; len(rest) > 0; {
				b, more, err := recordbatch.Next(rest)
				if err != nil {
					t.Fatal(err)
				}
				h, err := recordbatch.ParseHeader(b)
				if err != nil {
					t.Fatal(err)
				}
				got[part] = append(got[part], batchAt{offset: h.BaseOffset, pid: h.ProducerID, seq: h.BaseSequence})
				offset = h.LastOffset() + 1
				rest = more
			}
		}
	}
	total := 0
	byOffset := map[string]batchAt{}
	for part, bs := range got {
		total += len(bs)
		for _, b := range bs {
			byOffset[fmt.Sprint(part, b.offset)] = b
		}
	}
	want := 0
	for g := range producers {
		want += len(acks[g])
		seq := int32(0)
		for i, a := range acks[g] {
			b, ok := byOffset[fmt.Sprint(a.part, a.base)]
			if !ok || b.pid != pids[g] || b.seq != seq {
				t.Fatalf("producer %d call %d acknowledged at %d/%d: found %+v (%v), want sequence %d", g, i, a.part, a.base, b, ok, seq)
			}
			seq += int32(crashOpts(g, i).Records)
		}
	}
	if total != want {
		t.Fatalf("partitions hold %d batches, %d were acknowledged: duplicates or strays", total, want)
	}
	t.Logf("%d batches acknowledged; tier %+v", want, x.Stats())
}
