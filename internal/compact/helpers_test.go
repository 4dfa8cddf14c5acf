package compact_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/compact"
	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/objstore/memobj"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// env is one copy in memory at metadata level 4, a store and one fake
// clock that stamps entries (the log clock follows it) and ages entries
// for the compactor.
type env struct {
	t     testing.TB
	clk   *clock.Fake
	db    *metatest.DB
	mem   *memobj.Store
	store *objstore.Counting
	p     *produce.Pipeline
}

func newEnv(t testing.TB) *env {
	e := &env{t: t, clk: clock.NewFake(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)), mem: memobj.New()}
	e.store = objstore.WithCounters(e.mem)
	e.db = metatest.New(e.clk.Now)
	e.propose(meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel4}}})
	var err error
	e.p, err = produce.New(produce.Config{Store: e.store, Replica: e.db, AgentID: "agent-1-1", Logger: quiet(),
		KeyTime: func() int64 { return e.clk.Now().UnixMilli() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.p.Close(context.Background()) })
	return e
}

func (e *env) propose(c meta.Command) meta.Result {
	e.t.Helper()
	return e.db.MustPropose(e.t, c)
}

// advance moves the clock and applies an entry, so the log clock moves.
func (e *env) advance(d time.Duration) {
	e.t.Helper()
	e.clk.Advance(d)
	if _, err := e.db.Propose(testCtx(e.t), meta.AlterConfigs{Name: "no-such-topic"}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) topic(name string, partitions int32) meta.TopicID {
	e.t.Helper()
	return e.propose(meta.CreateTopic{Name: name, Partitions: partitions}).TopicID
}

// produce writes one flush (one level-0 object) holding a batch of
// records records for each partition named.
func (e *env) produce(seed uint64, records int, parts ...tp) {
	e.t.Helper()
	var bs []produce.Batch
	for i, p := range parts {
		b, err := produce.BatchFrom(p.id, p.partition, batchtest.Build(e.t, batchtest.Options{
			Records: records, ValueBytes: 100, Seed: seed*1000 + uint64(i)}))
		if err != nil {
			e.t.Fatal(err)
		}
		bs = append(bs, b)
	}
	res, err := e.p.Produce(testCtx(e.t), bs)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, r := range res {
		if r.Code != 0 {
			e.t.Fatalf("produce: code %d", r.Code)
		}
	}
}

type tp struct {
	id        meta.TopicID
	partition int32
}

func (e *env) compactor(cfg compact.Config) *compact.Compactor {
	e.t.Helper()
	if cfg.Store == nil {
		cfg.Store = e.store
	}
	if cfg.Meta == nil {
		cfg.Meta = e.db
	}
	if cfg.AgentID == "" {
		cfg.AgentID = "agent-1-1"
	}
	cfg.Clock, cfg.Logger = e.clk, quiet()
	c, err := compact.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) pass(c *compact.Compactor) compact.PassStats {
	e.t.Helper()
	st, err := c.Pass(testCtx(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// entries returns a partition's index entries.
func (e *env) entries(p tp) []meta.IndexEntry {
	e.t.Helper()
	v := e.db.View()
	defer v.Close()
	it, err := v.Seek(p.id, p.partition, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	defer it.Close()
	var es []meta.IndexEntry
	for it.Next() {
		es = append(es, it.Entry())
	}
	if it.Err() != nil {
		e.t.Fatal(it.Err())
	}
	return es
}

// read returns what a fetch of the whole partition from offset returns,
// as of view (nil: the current one), read cold (no cache).
func (e *env) read(view *meta.View, p tp, offset int64) []byte {
	e.t.Helper()
	if view == nil {
		view = e.db.View()
		defer view.Close()
	}
	r := fetch.NewReader(e.store, nil)
	var out []byte
	for {
		res, err := r.Read(testCtx(e.t), view, p.id, p.partition, offset, 1<<30)
		if err != nil || res.Err != 0 {
			e.t.Fatalf("read %v from %d: %v, code %d", p, offset, err, res.Err)
		}
		if len(res.Records) == 0 {
			return out
		}
		out = append(out, res.Records...)
		offset = nextOffset(e.t, res.Records)
	}
}

// nextOffset is the offset after the last batch of records.
func nextOffset(t testing.TB, records []byte) int64 {
	t.Helper()
	var next int64
	for rest := records; len(rest) > 0; {
		batch, more, err := recordbatch.Next(rest)
		if err != nil {
			t.Fatal(err)
		}
		h, err := recordbatch.ParseHeader(batch)
		if err != nil {
			t.Fatal(err)
		}
		next = h.LastOffset() + 1
		rest = more
	}
	return next
}

// mustEqual fails unless a fetch returns the same bytes.
func mustEqual(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes, want the %d bytes read before compaction", what, len(got), len(want))
	}
	if len(want) == 0 {
		t.Fatalf("%s: read nothing", what)
	}
}

// levels counts a partition's data entries in level-0 and compacted
// objects.
func (e *env) levels(p tp) (level0, compacted int) {
	e.t.Helper()
	for _, en := range e.entries(p) {
		switch {
		case en.Control:
		case compact.Compacted(en.ObjectKey):
			compacted++
		default:
			level0++
		}
	}
	return level0, compacted
}

// hookRewriter runs fn in the middle of every rewrite, between the
// compactor's read and its swap: where a race lands.
type hookRewriter struct{ fn func() }

func (h hookRewriter) Rewrite(ctx context.Context, run compact.Run, in []compact.Batch) ([]compact.Batch, error) {
	if h.fn != nil {
		h.fn()
	}
	return compact.Identity{}.Rewrite(ctx, run, in)
}

func (p tp) String() string { return fmt.Sprintf("%v/%d", p.id, p.partition) }

// firstBatch is the first whole batch of records.
func firstBatch(t testing.TB, records []byte) []byte {
	t.Helper()
	b, _, err := recordbatch.Next(records)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
