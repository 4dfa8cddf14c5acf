package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/fetch"
)

// countingHandler counts the log records at warning level and above, by
// message, and passes nothing on.
type countingHandler struct {
	mu *sync.Mutex
	n  map[string]int
}

func newCountingHandler() countingHandler {
	return countingHandler{mu: new(sync.Mutex), n: make(map[string]int)}
}

func (h countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n[r.Message]++
	return nil
}

func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// warnings returns the count of each message logged so far, and their
// total.
func (h countingHandler) warnings() (map[string]int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.n))
	total := 0
	for m, n := range h.n {
		out[m] = n
		total += n
	}
	return out, total
}

// dataObjects returns the paths of the data objects under an agent's
// data dir (the default file object store).
func dataObjects(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(filepath.Join(dir, "objects"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".strd") {
			paths = append(paths, path)
		}
		return err
	})
	if err != nil || len(paths) == 0 {
		t.Fatalf("data objects under %s: %v, %v", dir, paths, err)
	}
	return paths
}

// objectHolding returns the data object holding needle and needle's
// position in it.
func objectHolding(t *testing.T, dir string, needle []byte) (string, int) {
	t.Helper()
	for _, path := range dataObjects(t, dir) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, needle); i >= 0 {
			return path, i
		}
	}
	t.Fatalf("no data object under %s holds %q", dir, needle)
	return "", 0
}

// damagedFixture produces n uncompressed records to each of partitions 0
// and 1 of a new topic, in separate objects, with values "p<P>-<i>", and
// stops the agent.
func damagedFixture(t *testing.T, topic string, n int) (dir string) {
	t.Helper()
	dir = t.TempDir()
	a := start(t, dir)
	createTopic(t, a.KafkaAddr(), topic, 2)
	cl := client(t, a.KafkaAddr(), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for p := range int32(2) {
		rs := make([]*kgo.Record, n)
		for i := range rs {
			rs[i] = &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d-value-%03d", p, i)}
		}
		// One call per partition: the first is committed before the
		// second starts, so each partition has an object of its own.
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	stop(t, a)
	return dir
}

// consumeAroundDamage polls cl, which consumes partitions 0 and 1 of a
// damagedFixture topic from the start, until it has the n records of
// partition 1 and wantErrors errors of partition 0, and returns how many
// errors it saw. Partition 0 must serve no record and fail only with
// wantErr, the agent's answer; partition 1 must serve its values.
func consumeAroundDamage(t *testing.T, cl *kgo.Client, logs countingHandler, n, wantErrors int, wantErr *kerr.Error) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var p1, errs int
	for p1 < n || errs < wantErrors {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			_, warned := logs.warnings()
			t.Fatalf("consumer hung: after %v, %d records of partition 1 and %d errors of partition 0; the agent logged %d warnings",
				opTimeout, p1, errs, warned)
		}
		fs.EachError(func(_ string, p int32, err error) {
			if p != 0 || !errors.Is(err, wantErr) {
				t.Fatalf("fetch error on partition %d: %v; want only %s from the agent on partition 0", p, err, wantErr.Message)
			}
			errs++
		})
		fs.EachRecord(func(r *kgo.Record) {
			if r.Partition == 0 {
				t.Fatalf("partition 0 served offset %d, value %q, from a damaged object", r.Offset, r.Value)
			}
			if want := fmt.Sprintf("p1-value-%03d", r.Offset); string(r.Value) != want {
				t.Fatalf("partition 1 offset %d: %q, want %q", r.Offset, r.Value, want)
			}
			p1++
		})
	}
	return errs
}

// TestCorruptValueNotServed is the first reproduction in
// process: one value byte of a stored record is flipped while the agent
// is down. After a restart a consumer never receives the altered value:
// the agent answers CORRUPT_MESSAGE for that partition (kgo surfaces it
// with KeepRetryableFetchErrors; by default it retries it quietly, as a
// retriable error), the other partition of the same fetches is served,
// and the agent logs the damaged object once and counts it.
func TestCorruptValueNotServed(t *testing.T) {
	const topic, n = "t", 20
	dir := damagedFixture(t, topic, n)
	path, at := objectHolding(t, dir, []byte("p0-value-007"))
	obj, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	obj[at+len("p0-value-0")] ^= 0x01 // "p0-value-007" -> "p0-value-107"
	if err := os.WriteFile(path, obj, 0o644); err != nil {
		t.Fatal(err)
	}

	logs := newCountingHandler()
	a := startWith(t, agent.Config{DataDir: dir}, slog.New(logs))
	cl := client(t, a.KafkaAddr(), kgo.KeepRetryableFetchErrors(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0), 1: kgo.NewOffset().At(0)}}))
	corruptErrs := consumeAroundDamage(t, cl, logs, n, 10, kerr.CorruptMessage)
	checkMetrics(t, a.HTTPAddr(), []metricCheck{
		{name: "strand_fetch_damaged_objects_total", labels: map[string]string{"kind": "corrupt"}},
		{name: "strand_kafka_requests_total", labels: map[string]string{"api": "Fetch", "error": "CORRUPT_MESSAGE"}},
	})
	if byMsg, total := logs.warnings(); total != 1 {
		t.Fatalf("%d fetches of one damaged object logged %d warnings, want 1: %v", corruptErrs, total, byMsg)
	}
}

// TestMissingObjectVisible is the fifth reproduction: an object
// the index points at is deleted while the agent is down. A consumer
// with kgo's default options sees an error for that partition in
// PollFetches (UNKNOWN_SERVER_ERROR, which kgo and librdkafka hand to
// the application, where KAFKA_STORAGE_ERROR makes both retry quietly)
// instead of hanging; the other partition is served; and the agent logs
// the missing object once, however many fetches fail on it.
func TestMissingObjectVisible(t *testing.T) {
	const topic, n = "t", 20
	dir := damagedFixture(t, topic, n)
	path, _ := objectHolding(t, dir, []byte("p0-value-000"))
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}

	logs := newCountingHandler()
	a := startWith(t, agent.Config{DataDir: dir}, slog.New(logs))
	cl := client(t, a.KafkaAddr(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0), 1: kgo.NewOffset().At(0)}}))
	missingErrs := consumeAroundDamage(t, cl, logs, n, 50, kerr.UnknownServerError)
	checkMetrics(t, a.HTTPAddr(), []metricCheck{
		{name: "strand_fetch_damaged_objects_total", labels: map[string]string{"kind": "missing"}},
	})
	if byMsg, total := logs.warnings(); total != 1 {
		t.Fatalf("%d failed fetches of one missing object logged %d warnings, want 1: %v", missingErrs, total, byMsg)
	}
}

// signalHandler closes seen when a record with message msg is logged.
type signalHandler struct {
	msg  string
	once *sync.Once
	seen chan struct{}
}

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }

// TestStorageVerifyEndpoint checks POST /v1/storage/verify against a
// clean store and a damaged one, then that a second verification is
// refused while one runs and that stopping the agent ends a running one
// rather than waiting for it.
func TestStorageVerifyEndpoint(t *testing.T) {
	const topic, n = "t", 10
	dir := damagedFixture(t, topic, n)
	a := start(t, dir)
	rep := adminOK[agent.StorageVerifyReport](t, http.MethodPost, a.HTTPAddr(), agent.PathStorageVerify, "")
	if rep.DamagedObjects != 0 || rep.Entries != 2 {
		t.Fatalf("clean store: %+v", rep)
	}
	stop(t, a)

	path, _ := objectHolding(t, dir, []byte("p1-value-000"))
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	logs := newCountingHandler()
	a = startWith(t, agent.Config{DataDir: dir}, slog.New(logs))
	rep = adminOK[agent.StorageVerifyReport](t, http.MethodPost, a.HTTPAddr(), agent.PathStorageVerify, `{"bytes_per_second": 1048576}`)
	want := fetch.DamagedRange{Topic: topic, Partition: 1, FirstOffset: 0, LastOffset: n - 1}
	if rep.Missing != 1 || len(rep.Damaged) != 1 || len(rep.Damaged[0].Ranges) != 1 || rep.Damaged[0].Ranges[0] != want {
		t.Fatalf("report %+v, want the deleted object holding %+v", rep, want)
	}
	if _, total := logs.warnings(); total != 1 {
		t.Fatalf("%d warnings, want 1 for the missing object", total)
	}
	checkMetrics(t, a.HTTPAddr(), []metricCheck{
		{name: "strand_fetch_damaged_objects_total", labels: map[string]string{"kind": "missing"}},
	})
	if code, body := adminCall(t, http.MethodPost, a.HTTPAddr(), agent.PathStorageVerify, `{"bytes_per_second": -1}`); code != http.StatusBadRequest {
		t.Fatalf("negative rate: %d %s", code, body)
	}
	stop(t, a)

	started := signalHandler{msg: "storage verification starting", once: new(sync.Once), seen: make(chan struct{})}
	a = startWith(t, agent.Config{DataDir: dir}, slog.New(started))
	slow := make(chan int, 1)
	go func() {
		// At 1 byte a second the second read waits for hours.
		resp, err := http.Post("http://"+a.HTTPAddr()+agent.PathStorageVerify, "application/json", strings.NewReader(`{"bytes_per_second": 1}`))
		if err != nil {
			slow <- -1
			return
		}
		resp.Body.Close()
		slow <- resp.StatusCode
	}()
	<-started.seen
	if code, body := adminCall(t, http.MethodPost, a.HTTPAddr(), agent.PathStorageVerify, ""); code != http.StatusConflict {
		t.Fatalf("second verification while one runs: %d %s", code, body)
	}
	stop(t, a) // fails the test if Shutdown waited out its deadline
	if code := <-slow; code == http.StatusOK {
		t.Fatal("the verification stopped by the agent's stop answered 200")
	}
}
