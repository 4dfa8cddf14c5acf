package produce_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/fetch"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/objstore"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// testTimeout guards against deadlocks only; nothing waits it out on
// purpose.
const testTimeout = 60 * time.Second

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openReplica opens a replica of log in a temp dir, closed at cleanup.
func openReplica(t testing.TB, log sharedlog.Log, writer string) *replica.Replica {
	t.Helper()
	r, err := replica.Open(testCtx(t), replica.Config{Dir: t.TempDir(), Log: log, WriterID: writer, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("replica.Open: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func createTopic(t testing.TB, r *replica.Replica, name string, partitions int32) meta.TopicID {
	t.Helper()
	res, err := r.Propose(testCtx(t), meta.CreateTopic{Name: name, Partitions: partitions})
	if err != nil || res.Code != 0 {
		t.Fatalf("CreateTopic(%s) = %v, %v", name, res.Err(), err)
	}
	return res.TopicID
}

// env is one agent: a replica over a memory log (or, from newMemEnv, a
// copy in memory), a topic, and a store.
type env struct {
	log     *memlog.Loglet
	replica *replica.Replica
	// db is the copy of an env from newMemEnv, which has no log or
	// replica.
	db    *metatest.DB
	topic meta.TopicID
	store objstore.Store
}

func newEnv(t testing.TB, store objstore.Store, partitions int32) *env {
	t.Helper()
	log := memlog.New()
	r := openReplica(t, log, "agent-1")
	return &env{log: log, replica: r, topic: createTopic(t, r, "t", partitions), store: store}
}

// newMemEnv is newEnv on a metatest.DB: the pipeline commits to a copy
// in memory, without Pebble or a log.
func newMemEnv(t testing.TB, store objstore.Store, partitions int32) *env {
	t.Helper()
	db := metatest.New(nil)
	res, err := db.Propose(testCtx(t), meta.CreateTopic{Name: "t", Partitions: partitions})
	if err != nil || res.Code != 0 {
		t.Fatalf("CreateTopic = %v, %v", res.Err(), err)
	}
	return &env{db: db, topic: res.TopicID, store: store}
}

// viewer is e's copy.
func (e *env) viewer() meta.Viewer {
	if e.db != nil {
		return e.db
	}
	return e.replica
}

// pipeline starts a pipeline on e, closed at cleanup.
func (e *env) pipeline(t testing.TB, cfg produce.Config) *produce.Pipeline {
	t.Helper()
	cfg.Store = e.store
	switch {
	case e.db != nil:
		cfg.Replica = e.db
		if cfg.AgentID == "" {
			cfg.AgentID = "agent-1-1"
		}
	default:
		cfg.Replica = e.replica
		if cfg.AgentID == "" {
			cfg.AgentID = fmt.Sprintf("agent-1-%d", e.replica.Incarnation())
		}
	}
	cfg.Logger = quietLogger()
	p, err := produce.New(cfg)
	if err != nil {
		t.Fatalf("produce.New: %v", err)
	}
	t.Cleanup(func() {
		// Bounded, so a test that failed with an upload held cannot hang.
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		p.Close(ctx)
	})
	return p
}

// batch builds one record batch of n records whose values derive from
// seed, and its Batch for partition.
func (e *env) batch(t testing.TB, partition int32, n int, valueBytes int, seed uint64) (produce.Batch, batchtest.Options) {
	t.Helper()
	o := batchtest.Options{Records: n, ValueBytes: valueBytes, Seed: seed}
	b, err := produce.BatchFrom(e.topic, partition, batchtest.Build(t, o))
	if err != nil {
		t.Fatal(err)
	}
	return b, o
}

// readAll fetches a partition from offset 0 to its high watermark.
func (e *env) readAll(t testing.TB, r *fetch.Reader, partition int32) []byte {
	t.Helper()
	v := e.viewer().View()
	defer v.Close()
	var all []byte
	for off := int64(0); ; {
		res, err := r.Read(testCtx(t), v, e.topic, partition, off, 1<<20)
		if err != nil || res.Err != 0 {
			t.Fatalf("Read(p%d, %d) = %d, %v", partition, off, res.Err, err)
		}
		if off == res.HighWatermark {
			return all
		}
		if len(res.Records) == 0 {
			t.Fatalf("Read(p%d, %d): no records below the high watermark %d", partition, off, res.HighWatermark)
		}
		all = append(all, res.Records...)
		off = lastOffset(t, res.Records) + 1
	}
}

// lastOffset is the last offset of the last batch in records.
func lastOffset(t testing.TB, records []byte) int64 {
	t.Helper()
	var last int64 = -1
	for rest := records; len(rest) > 0; {
		b, next, err := recordbatch.Next(rest)
		if err != nil {
			t.Fatal(err)
		}
		h, err := recordbatch.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		last = h.LastOffset()
		rest = next
	}
	return last
}

func highWatermark(t testing.TB, r meta.Viewer, id meta.TopicID, p int32) int64 {
	t.Helper()
	v := r.View()
	defer v.Close()
	st, ok, err := v.Partition(id, p)
	if err != nil || !ok {
		t.Fatalf("Partition(%d) = %v, %v", p, ok, err)
	}
	return st.HighWatermark()
}

// logCommits decodes every entry of log and returns, per entry, how many
// CommitObject commands it holds (entries without any are left out).
func logCommits(t testing.TB, log sharedlog.Log) []int {
	t.Helper()
	ctx := testCtx(t)
	tail, _, err := log.CheckTail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for from := sharedlog.Pos(0); from < tail; {
		es, err := log.ReadNext(ctx, from, tail)
		if err != nil {
			t.Fatal(err)
		}
		for _, le := range es {
			e, err := meta.DecodeEntry(le.Data)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, c := range e.Commands {
				if c.Type == meta.TypeCommitObject {
					n++
				}
			}
			if n > 0 {
				out = append(out, n)
			}
		}
		from += sharedlog.Pos(len(es))
	}
	return out
}

// gateStore holds Puts while armed: each held Put reports its key on
// entered and waits for release(key) (or ctx).
type gateStore struct {
	objstore.Store
	entered chan string

	mu struct {
		sync.Mutex
		armed   bool
		waiting map[string]chan struct{}
		// released keys pass even if they arrive after release.
		released map[string]bool
	}
	puts atomic.Int64
}

func newGateStore(s objstore.Store) *gateStore {
	g := &gateStore{Store: s, entered: make(chan string, 1024)}
	g.mu.waiting = make(map[string]chan struct{})
	g.mu.released = make(map[string]bool)
	return g
}

func (g *gateStore) arm(on bool) {
	g.mu.Lock()
	g.mu.armed = on
	g.mu.Unlock()
}

func (g *gateStore) release(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.released[key] = true
	if ch, ok := g.mu.waiting[key]; ok {
		close(ch)
		delete(g.mu.waiting, key)
	}
}

func (g *gateStore) Put(ctx context.Context, key string, data []byte) error {
	g.puts.Add(1)
	g.mu.Lock()
	var ch chan struct{}
	if g.mu.armed && !g.mu.released[key] {
		ch = make(chan struct{})
		g.mu.waiting[key] = ch
	}
	g.mu.Unlock()
	if ch != nil {
		g.entered <- key
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Store.Put(ctx, key, data)
}

// next waits for the next held Put and returns its key.
func (g *gateStore) next(t testing.TB) string {
	t.Helper()
	select {
	case k := <-g.entered:
		return k
	case <-time.After(testTimeout):
		t.Fatal("timed out waiting for a Put")
		return ""
	}
}

func waitAck(t testing.TB, a *produce.Ack) []meta.BatchResult {
	t.Helper()
	res, err := a.Wait(testCtx(t))
	if err != nil {
		t.Fatalf("Ack.Wait: %v", err)
	}
	for i, r := range res {
		if r.Code != 0 {
			t.Fatalf("batch %d: error code %d", i, r.Code)
		}
	}
	return res
}

func submit(t testing.TB, p *produce.Pipeline, batches ...produce.Batch) *produce.Ack {
	t.Helper()
	a, err := p.Submit(testCtx(t), batches)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	return a
}

// chanObserver reports each upload's object size on uploads.
type chanObserver struct {
	uploads chan int
}

func (o *chanObserver) FlushCut(int, int, int) {}
func (o *chanObserver) UploadDone(size, _ int, _ time.Duration, _ error) {
	o.uploads <- size
}
func (o *chanObserver) CommitDone(int, time.Duration, error) {}
func (o *chanObserver) FlushDone(int, time.Duration, error)  {}

func recvUpload(t testing.TB, ch <-chan int) int {
	t.Helper()
	select {
	case n := <-ch:
		return n
	case <-time.After(testTimeout):
		t.Fatal("timed out waiting for an upload")
		return 0
	}
}
