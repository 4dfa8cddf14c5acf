package compact_test

import (
	"context"
	"testing"

	"github.com/strandkafka/strand/internal/compact"
	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
)

// dropEven is a Rewriter that keeps every other record batch: the shape
// of key deduplication, offsets left out between batches.
type dropEven struct{}

func (dropEven) Rewrite(_ context.Context, _ compact.Run, in []compact.Batch) ([]compact.Batch, error) {
	var out []compact.Batch
	for i, b := range in {
		if i%2 == 1 || b.IsMarker() {
			out = append(out, b)
		}
	}
	return out, nil
}

// A compacted topic's rewrite may leave offsets out: the new entry
// carries its own offsets, a fetch returns the batches kept at the
// offsets they had, and storage verification accepts them. The same
// rewrite of a plain topic is refused by apply.
func TestRewriterLeavesOffsetsOut(t *testing.T) {
	e := newEnv(t)
	k := tp{e.propose(meta.CreateTopic{Name: "k", Partitions: 1, Configs: map[string]string{"cleanup.policy": "compact"}}).TopicID, 0}
	plain := tp{e.topic("plain", 1), 0}
	for i := range 6 {
		e.produce(uint64(i), 2, k, plain)
	}
	before := e.read(nil, k, 0)
	var want []byte
	for i, rest := 0, before; len(rest) > 0; i++ {
		b := firstBatch(t, rest)
		if i%2 == 1 {
			want = append(want, b...)
		}
		rest = rest[len(b):]
	}
	c := e.compactor(compact.Config{RewriterFor: func(meta.Topic) compact.Rewriter { return dropEven{} }})
	e.advance(compact.DefaultMaxLag)
	if _, err := c.Pass(testCtx(t)); err == nil {
		t.Fatal("a pass that drops records of a plain topic succeeded")
	}
	if l0, _ := e.levels(plain); l0 != 6 {
		t.Fatalf("plain topic: %d level-0 entries, want its 6 untouched", l0)
	}
	es := e.entries(k)
	if len(es) != 1 || !es[0].OwnOffsets || es[0].BaseOffset != 2 || es[0].LastOffset() != 11 || es[0].BatchCount != 3 {
		t.Fatalf("compacted topic's index: %+v, want one entry of its own offsets 2..11 in 3 batches", es)
	}
	mustEqual(t, "read of the compacted topic", e.read(nil, k, 0), want)
	mustEqual(t, "read from inside a gap", e.read(nil, k, 5), want[len(firstBatch(t, want)):])
	rep, err := fetch.Verify(testCtx(t), e.db, e.store, fetch.VerifyOptions{BytesPerSecond: 1 << 30})
	if err != nil || rep.DamagedObjects != 0 || rep.Entries == 0 {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
}
