package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/logurl"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// startWith is start with a config of the test's own (kernel-chosen
// loopback ports unless it names them) and a logger.
// memLogRuns numbers the in-memory logs memLogURL names.
var memLogRuns atomic.Int64

// memLogURL names an in-memory log of t's own: mem:// logs live as long
// as the process, so a name reused by -count=N would start the next run
// on the last one's topics.
func memLogURL(t *testing.T) string {
	return fmt.Sprintf("mem://%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), memLogRuns.Add(1))
}

func startWith(t *testing.T, cfg agent.Config, logger *slog.Logger) *agent.Agent {
	t.Helper()
	if cfg.KafkaListen == "" && cfg.Listeners == "" {
		cfg.KafkaListen = "127.0.0.1:0"
	}
	if cfg.HTTPListen == "" {
		cfg.HTTPListen = "127.0.0.1:0"
	}
	if logger == nil {
		logger = quietLogger()
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a, err := agent.Start(ctx, cfg, logger)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if !wasStopped(a) {
			stop(t, a)
		}
	})
	return a
}

// logBuffer collects an agent's log for assertions.
type logBuffer struct {
	mu struct {
		sync.Mutex
		b bytes.Buffer
	}
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.b.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// adminCall sends a request to the admin API and returns the status and
// body.
func adminCall(t testing.TB, method, httpAddr, path, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+httpAddr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		// As the CLI sends every mutating call, body or not.
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// adminOK sends a request that must succeed and decodes its answer.
func adminOK[T any](t *testing.T, method, httpAddr, path, body string) T {
	t.Helper()
	code, b := adminCall(t, method, httpAddr, path, body)
	if code != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, code, b)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
	}
	return v
}

func logStatus(t *testing.T, httpAddr string) agent.LogStatus {
	t.Helper()
	return adminOK[agent.LogStatus](t, http.MethodGet, httpAddr, agent.PathLogStatus, "")
}

func migrate(t *testing.T, httpAddr, to string) agent.MigrateResult {
	t.Helper()
	body, _ := json.Marshal(agent.MigrateRequest{To: to})
	return adminOK[agent.MigrateResult](t, http.MethodPost, httpAddr, agent.PathLogMigrate, string(body))
}

func takeSnapshot(t *testing.T, httpAddr string) agent.SnapshotTakenStatus {
	t.Helper()
	return adminOK[agent.SnapshotTakenStatus](t, http.MethodPost, httpAddr, agent.PathSnapshot, "")
}

// records returns n records for topic spread over partitions, values
// tagged so that batches of different calls differ.
func records(topic string, partitions int32, n int, tag string) []*kgo.Record {
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: fmt.Appendf(nil, "%s-%d", tag, i)}
	}
	return rs
}

// TestLogStatus checks the fields of GET /v1/log/status before and after
// POST /v1/snapshot, by name in the raw JSON and by value.
func TestLogStatus(t *testing.T) {
	a := start(t, t.TempDir())
	const topic = "status"
	createTopic(t, a.KafkaAddr(), topic, 2)
	first := records(topic, 2, 20, "a")
	produce(t, a.KafkaAddr(), first)
	applied := a.Replica().NextToApply()

	code, raw := adminCall(t, http.MethodGet, a.HTTPAddr(), agent.PathLogStatus, "")
	if code != http.StatusOK {
		t.Fatalf("status: %d %s", code, raw)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatalf("status is not a JSON object: %v\n%s", err, raw)
	}
	for _, f := range []string{"chain", "tail", "trim_point", "snapshot", "agent"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("status lacks %q:\n%s", f, raw)
		}
	}
	for _, f := range []string{`"segments"`, `"start"`, `"end"`, `"sealed"`, `"url"`, `"writer_id"`, `"applied"`} {
		if !bytes.Contains(raw, []byte(f)) {
			t.Errorf("status lacks %s:\n%s", f, raw)
		}
	}

	st := logStatus(t, a.HTTPAddr())
	segs := st.Chain.Segments
	switch {
	case st.Chain.Version != 1 || len(segs) != 1:
		t.Fatalf("chain %+v, want version 1 with one segment", st.Chain)
	case segs[0].Start != 0 || segs[0].Sealed || segs[0].URL != "file:seg-00000000" || segs[0].End != st.Tail:
		t.Errorf("segment %+v, want the active file:seg-00000000 from 0 to the tail %d", segs[0], st.Tail)
	case st.Tail < uint64(applied) || st.Tail == 0:
		t.Errorf("tail %d, want at least %d", st.Tail, applied)
	case st.TrimPoint != 0 || st.Snapshot != nil || st.SnapshotError != "":
		t.Errorf("trim point %d, snapshot %+v (%s): want none before any snapshot", st.TrimPoint, st.Snapshot, st.SnapshotError)
	case st.Agent.WriterID != a.Replica().WriterID() || st.Agent.Incarnation != a.Replica().Incarnation():
		t.Errorf("agent %+v, want writer %s incarnation %d", st.Agent, a.Replica().WriterID(), a.Replica().Incarnation())
	case st.Agent.Applied < uint64(applied) || st.Agent.Applied > st.Tail:
		t.Errorf("applied %d, want between %d and the tail %d", st.Agent.Applied, applied, st.Tail)
	}

	taken := takeSnapshot(t, a.HTTPAddr())
	if taken.Snapshot.Pos < uint64(applied) || taken.Snapshot.Files == 0 || taken.TrimPoint != taken.Snapshot.Pos {
		t.Errorf("snapshot %+v, want one at %d or later, with the log trimmed there", taken, applied)
	}
	if !strings.HasPrefix(taken.Snapshot.Key, agent.SnapshotPrefix) {
		t.Errorf("snapshot key %q is not under %q", taken.Snapshot.Key, agent.SnapshotPrefix)
	}
	st = logStatus(t, a.HTTPAddr())
	if st.Snapshot == nil || *st.Snapshot != taken.Snapshot || st.TrimPoint != taken.Snapshot.Pos {
		t.Errorf("after the snapshot: status snapshot %+v, trim point %d; want %+v trimmed at its position", st.Snapshot, st.TrimPoint, taken.Snapshot)
	}

	// The trimmed log still serves: the records are in the data objects
	// and the index, not in the trimmed entries.
	second := records(topic, 2, 20, "b")
	produce(t, a.KafkaAddr(), second)
	checkRecords(t, a.KafkaAddr(), topic, append(first, second...))
}

// TestLogMigrate moves a file log onto a second file segment and onto
// PostgreSQL. Records produced before and after stay readable, offsets
// continue, the status shows the new active segment (with its password
// hidden), and a restarted agent follows the new chain.
func TestLogMigrate(t *testing.T) {
	tests := []struct {
		name string
		// to returns the --to URL and how the status must show it.
		to func(t *testing.T) (to, shown string)
	}{
		{
			name: "file segment",
			to:   func(t *testing.T) (string, string) { return "file:seg-moved", "file:seg-moved" },
		},
		{
			name: "postgres",
			to: func(t *testing.T) (string, string) {
				u, err := url.Parse(pgtest.URL(t))
				if err != nil {
					t.Fatal(err)
				}
				// No password: a migration to a URL with one is refused
				// (TestLogPasswordStaysOutOfTheChain), since the chain
				// would store it.
				q := u.Query()
				q.Set("log", fmt.Sprintf("agent-migrate-%d", time.Now().UnixNano()))
				u.RawQuery = q.Encode()
				return u.String(), u.String()
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			to, shown := tt.to(t)
			dir := t.TempDir()
			a := start(t, dir)
			const topic = "migrate"
			createTopic(t, a.KafkaAddr(), topic, 3)
			before := records(topic, 3, 30, "before")
			produce(t, a.KafkaAddr(), before)
			tailBefore := logStatus(t, a.HTTPAddr()).Tail

			res := migrate(t, a.HTTPAddr(), to)
			old, next := res.OldChain.Segments, res.NewChain.Segments
			switch {
			case len(old) != 1 || len(next) != 2:
				t.Fatalf("old chain %+v, new chain %+v: want 1 then 2 segments", res.OldChain, res.NewChain)
			case res.SealedTail < tailBefore:
				t.Errorf("sealed at %d, below the tail %d seen before", res.SealedTail, tailBefore)
			case !next[0].Sealed || next[0].End != res.SealedTail || next[0].URL != old[0].URL:
				t.Errorf("new chain's first segment %+v, want %s sealed at %d", next[0], old[0].URL, res.SealedTail)
			case next[1].Sealed || next[1].Start != res.SealedTail || next[1].URL != shown:
				t.Errorf("new active segment %+v, want %s from %d", next[1], shown, res.SealedTail)
			case res.NewChain.Version != res.OldChain.Version+1 || res.DurationNS <= 0:
				t.Errorf("versions %d -> %d, duration %v", res.OldChain.Version, res.NewChain.Version, res.DurationNS)
			}

			after := records(topic, 3, 30, "after")
			produce(t, a.KafkaAddr(), after)
			for i, r := range after {
				if want := before[i].Offset + 10; r.Offset != want {
					t.Fatalf("record %d after the migration at %d/%d, want offset %d", i, r.Partition, r.Offset, want)
				}
			}
			checkRecords(t, a.KafkaAddr(), topic, append(before, after...))

			_, raw := adminCall(t, http.MethodGet, a.HTTPAddr(), agent.PathLogStatus, "")
			if bytes.Contains(raw, []byte("hunter2")) {
				t.Errorf("status shows the password:\n%s", raw)
			}
			st := logStatus(t, a.HTTPAddr())
			if act := st.Chain.Segments[len(st.Chain.Segments)-1]; act.URL != shown || act.Sealed || st.Tail <= res.SealedTail {
				t.Errorf("status after producing: active %+v, tail %d; want %s past %d", act, st.Tail, shown, res.SealedTail)
			}

			stop(t, a)
			b := start(t, dir)
			more := records(topic, 3, 3, "restart")
			produce(t, b.KafkaAddr(), more)
			checkRecords(t, b.KafkaAddr(), topic, append(append(before, after...), more...))
			if act := logStatus(t, b.HTTPAddr()).Chain.Segments; act[len(act)-1].URL != shown {
				t.Errorf("restarted agent's chain %+v, want the active segment %s", act, shown)
			}
		})
	}
}

// TestLogMigrateErrors checks that bad migrations are refused with the
// right status and leave the log as it was.
func TestLogMigrateErrors(t *testing.T) {
	a := start(t, t.TempDir())
	full := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	ll, err := logurl.Open(ctx, "file://"+filepath.ToSlash(full))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ll.Append(ctx, []byte("taken")); err != nil {
		t.Fatal(err)
	}
	ll.Close()

	tests := []struct {
		name, method, body string
		want               int
	}{
		{"GET", http.MethodGet, "", http.StatusMethodNotAllowed},
		{"no body", http.MethodPost, "", http.StatusBadRequest},
		{"no URL", http.MethodPost, `{"to": " "}`, http.StatusBadRequest},
		{"unknown field", http.MethodPost, `{"url": "file:x"}`, http.StatusBadRequest},
		{"unknown scheme", http.MethodPost, `{"to": "nope://x/y"}`, http.StatusBadRequest},
		{"loglet not empty", http.MethodPost, `{"to": "file://` + filepath.ToSlash(full) + `"}`, http.StatusConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := adminCall(t, tt.method, a.HTTPAddr(), agent.PathLogMigrate, tt.body)
			if code != tt.want {
				t.Fatalf("%s %s: %d %s, want %d", tt.method, tt.body, code, body, tt.want)
			}
			if tt.method == http.MethodPost {
				var eb agent.ErrorBody
				if err := json.Unmarshal(body, &eb); err != nil || eb.Error == "" {
					t.Errorf("error body %s: want {\"error\": ...}", body)
				}
			}
			st := logStatus(t, a.HTTPAddr())
			if st.Chain.Version != 1 || len(st.Chain.Segments) != 1 || st.Sealed {
				t.Errorf("chain after a refused migration: %+v (sealed %v)", st.Chain, st.Sealed)
			}
		})
	}
	checkRoundTrip(t, a.KafkaAddr())
}

// TestLogMigrateUnreachable is issue 19's defect 6: a migration onto a
// PostgreSQL that refuses connections is answered with 502 and the
// reason (the password hidden), and leaves the stored chain as it was,
// its active segment unsealed and taking records.
func TestLogMigrateUnreachable(t *testing.T) {
	dir := t.TempDir()
	a := start(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	ms, err := sharedlog.OpenFileMetaStore(filepath.Join(dir, "log", "chain.json"))
	if err != nil {
		t.Fatal(err)
	}
	before, err := ms.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	to := fmt.Sprintf("postgres://strand@%s/strand?log=unreachable", ln.Addr())
	ln.Close() // nothing listens there now

	body, _ := json.Marshal(agent.MigrateRequest{To: to})
	code, raw := adminCall(t, http.MethodPost, a.HTTPAddr(), agent.PathLogMigrate, string(body))
	var eb agent.ErrorBody
	if err := json.Unmarshal(raw, &eb); err != nil {
		t.Fatalf("answer %d %s is not an error body: %v", code, raw, err)
	}
	if code != http.StatusBadGateway || !strings.Contains(eb.Error, "connection refused") {
		t.Errorf("migrate to an unreachable PostgreSQL: %d %q, want 502 saying the connection was refused", code, eb.Error)
	}
	if strings.Contains(eb.Error, "hunter2") {
		t.Errorf("the error shows the password: %q", eb.Error)
	}
	after, err := ms.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("stored chain %+v after the refused migration, was %+v", after, before)
	}
	if st := logStatus(t, a.HTTPAddr()); st.Sealed || st.Chain.Version != before.Version {
		t.Errorf("status after the refused migration: %+v (sealed %v)", st.Chain, st.Sealed)
	}
	checkRoundTrip(t, a.KafkaAddr())
}

// checkRoundTrip produces one record and reads it back.
func checkRoundTrip(t *testing.T, addr string) {
	t.Helper()
	const topic = "probe"
	createTopic(t, addr, topic, 1)
	rs := records(topic, 1, 1, "probe")
	produce(t, addr, rs)
	checkRecords(t, addr, topic, rs)
}

// TestRestoreOnEmptyDataDir starts agents on empty data dirs over an
// object store and a log kept outside them.
func TestRestoreOnEmptyDataDir(t *testing.T) {
	shared := t.TempDir()
	cfg := func(dataDir, logDir string) agent.Config {
		return agent.Config{
			DataDir:          dataDir,
			ObjStore:         "file://" + filepath.ToSlash(filepath.Join(shared, "objects")),
			Log:              "file://" + filepath.ToSlash(filepath.Join(shared, logDir)),
			SnapshotInterval: agent.SnapshotsOff,
		}
	}
	const topic = "restore"
	a := startWith(t, cfg(t.TempDir(), "log"), nil)
	createTopic(t, a.KafkaAddr(), topic, 2)
	want := records(topic, 2, 40, "before-snapshot")
	produce(t, a.KafkaAddr(), want)
	taken := takeSnapshot(t, a.HTTPAddr())
	tail := records(topic, 2, 10, "after-snapshot")
	produce(t, a.KafkaAddr(), tail)
	want = append(want, tail...)
	stop(t, a)

	t.Run("restores and plays the tail", func(t *testing.T) {
		var logs logBuffer
		b := startWith(t, cfg(t.TempDir(), "log"), logs.logger())
		if !strings.Contains(logs.String(), "restored the newest metadata snapshot") ||
			!strings.Contains(logs.String(), "key="+taken.Snapshot.Key) {
			t.Errorf("start log does not tell of restoring %s:\n%s", taken.Snapshot.Key, logs.String())
		}
		// The log is trimmed at the snapshot, so replaying alone could
		// not have rebuilt what precedes it.
		st := logStatus(t, b.HTTPAddr())
		if st.TrimPoint != taken.Snapshot.Pos || st.Agent.Applied != st.Tail {
			t.Errorf("status %+v: want trim point %d and everything applied", st, taken.Snapshot.Pos)
		}
		checkRecords(t, b.KafkaAddr(), topic, want)
		more := records(topic, 2, 2, "after-restore")
		produce(t, b.KafkaAddr(), more)
		for i, r := range more {
			if wantOff := int64(25 + i/2); r.Offset != wantOff {
				t.Errorf("record after the restore at %d/%d, want offset %d", r.Partition, r.Offset, wantOff)
			}
		}
	})
	t.Run("snapshot of another log", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		c := cfg(t.TempDir(), "other-log")
		c.KafkaListen, c.HTTPListen = "127.0.0.1:0", "127.0.0.1:0"
		b, err := agent.Start(ctx, c, quietLogger())
		if err == nil {
			b.Stop(ctx)
			t.Fatal("Start restored a snapshot past the tail of a new log")
		}
		if !strings.Contains(err.Error(), "do not belong") {
			t.Errorf("Start: %v, want the snapshot refused as another cluster's", err)
		}
	})
}

// TestPeriodicSnapshots checks that the snapshot loop takes snapshots on
// its own and trims the log, and that the agent stops cleanly with it.
func TestPeriodicSnapshots(t *testing.T) {
	a := startWith(t, agent.Config{DataDir: t.TempDir(), SnapshotInterval: 10 * time.Millisecond}, nil)
	const topic = "periodic"
	createTopic(t, a.KafkaAddr(), topic, 1)
	rs := records(topic, 1, 10, "v")
	produce(t, a.KafkaAddr(), rs)
	applied := a.Replica().NextToApply()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	// Snapshots taken before the produce may be at lower positions; wait
	// for one that holds it.
	for n := 1; ; n++ {
		res, err := a.WaitSnapshots(ctx, n)
		if err != nil {
			t.Fatalf("waiting for snapshot %d: %v", n, err)
		}
		if res.Snapshot.Pos >= applied {
			if res.TrimPoint < res.Snapshot.Pos {
				t.Errorf("snapshot at %d, log trimmed at %d only", res.Snapshot.Pos, res.TrimPoint)
			}
			break
		}
	}
	st := logStatus(t, a.HTTPAddr())
	if st.Snapshot == nil || st.Snapshot.Pos < uint64(applied) || st.TrimPoint < uint64(applied) {
		t.Errorf("status %+v: want a snapshot and trim point at %d or later", st, applied)
	}
	checkRecords(t, a.KafkaAddr(), topic, rs)
}

func TestSnapshotIntervalFlag(t *testing.T) {
	tests := []struct {
		arg     string
		want    time.Duration
		wantErr bool
	}{
		{arg: "0", want: agent.SnapshotsOff},
		{arg: "0s", want: agent.SnapshotsOff},
		{arg: "90s", want: 90 * time.Second},
		{arg: "-1m", wantErr: true},
		{arg: "often", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			var d time.Duration
			f := agent.SnapshotIntervalFlag(&d)
			if d != agent.DefaultSnapshotInterval || f.String() != agent.DefaultSnapshotInterval.String() {
				t.Fatalf("default %v (%s), want %v", d, f, agent.DefaultSnapshotInterval)
			}
			err := f.Set(tt.arg)
			switch {
			case tt.wantErr && err == nil:
				t.Fatalf("Set(%q) = nil, want an error", tt.arg)
			case !tt.wantErr && err != nil:
				t.Fatalf("Set(%q): %v", tt.arg, err)
			case !tt.wantErr && d != tt.want:
				t.Errorf("Set(%q): %v, want %v", tt.arg, d, tt.want)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"file:seg-00000001", "file:seg-00000001"},
		{"file:///var/strand/log", "file:///var/strand/log"},
		{"postgres://u@h:5432/db?log=x", "postgres://u@h:5432/db?log=x"},
		{"postgres://u:pw@h:5432/db?log=x", "postgres://u:xxxxx@h:5432/db?log=x"},
		{"postgres://u@h/db?log=x&password=pw", "postgres://u@h/db?log=x&password=xxxxx"},
		{"s3://b/p?endpoint=e&session_token=tk", "s3://b/p?endpoint=e&session_token=xxxxx"},
		{"postgres://u:pw@h:bad port/db", "postgres://xxxxx"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := agent.RedactURL(tt.in); got != tt.want {
				t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestRestoreWhenTrimmedPast: an agent that was down while another agent
// snapshotted and trimmed the shared log past its copy restores the newest
// snapshot instead of halting.
func TestRestoreWhenTrimmedPast(t *testing.T) {
	shared := t.TempDir()
	cfg := func(dataDir string, node int32) agent.Config {
		return agent.Config{
			DataDir:          dataDir,
			NodeID:           node,
			ObjStore:         "file://" + filepath.ToSlash(filepath.Join(shared, "objects")),
			Log:              "file://" + filepath.ToSlash(filepath.Join(shared, "log")),
			SnapshotInterval: agent.SnapshotsOff,
		}
	}
	const topic = "trimmed"
	dirA := t.TempDir()
	a := startWith(t, cfg(dirA, 1), nil)
	createTopic(t, a.KafkaAddr(), topic, 2)
	want := records(topic, 2, 10, "a")
	produce(t, a.KafkaAddr(), want)
	stop(t, a)

	b := startWith(t, cfg(t.TempDir(), 2), nil)
	more := records(topic, 2, 10, "b")
	produce(t, b.KafkaAddr(), more)
	want = append(want, more...)
	// a left the agent table when it stopped, so nothing holds the
	// trim below b's snapshot.
	taken := takeSnapshot(t, b.HTTPAddr())
	if taken.TrimPoint != taken.Snapshot.Pos || taken.TrimHeldBy != nil {
		t.Fatalf("snapshot %+v: want the log trimmed at its position", taken)
	}
	stop(t, b)

	var logs logBuffer
	a = startWith(t, cfg(dirA, 1), logs.logger())
	if !strings.Contains(logs.String(), "below the log's trim point") ||
		!strings.Contains(logs.String(), "key="+taken.Snapshot.Key) {
		t.Errorf("start log does not tell of restoring %s over a trimmed-out copy:\n%s", taken.Snapshot.Key, logs.String())
	}
	checkRecords(t, a.KafkaAddr(), topic, want)
}

// TestLogStatusAgents: with two agents on one log, the status lists both
// with the applied positions their renewals report, a snapshot does not
// trim past the other live agent, and once it leaves the trim goes up to
// the snapshot.
func TestLogStatusAgents(t *testing.T) {
	// A file log takes one agent at a time; PostgreSQL takes several.
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("log", fmt.Sprintf("agent-status-%d", time.Now().UnixNano()))
	u.RawQuery = q.Encode()
	objects := "file://" + filepath.ToSlash(t.TempDir())
	cfg := func(node int32) agent.Config {
		return agent.Config{
			DataDir:          t.TempDir(),
			NodeID:           node,
			ObjStore:         objects,
			Log:              u.String(),
			SnapshotInterval: agent.SnapshotsOff,
		}
	}
	a := startWith(t, cfg(1), nil)
	b := startWith(t, cfg(2), nil)
	const topic = "agents"
	createTopic(t, a.KafkaAddr(), topic, 2)
	rs := records(topic, 2, 10, "a")
	produce(t, a.KafkaAddr(), rs)

	st := logStatus(t, a.HTTPAddr())
	if len(st.Agents) != 2 {
		t.Fatalf("status lists agents %+v, want nodes 1 and 2", st.Agents)
	}
	for i, want := range []*agent.Agent{a, b} {
		l := st.Agents[i]
		switch {
		case l.NodeID != int32(i+1) || l.AgentID != want.Replica().WriterID() || !l.Live:
			t.Errorf("agent %d: %+v, want live node %d, agent %s", i, l, i+1, want.Replica().WriterID())
		case l.Applied > st.Tail || (want == b && l.Applied == 0):
			// a registered on the empty log, at applied 0; b after it.
			t.Errorf("agent %d reports applied %d, want a position up to the tail %d (past 0 for b)", i, l.Applied, st.Tail)
		case l.Host != "127.0.0.1" || l.Port == 0 || !l.Expires.After(time.Unix(0, 0)):
			t.Errorf("agent %d: address %s:%d, lease until %v", i, l.Host, l.Port, l.Expires)
		}
	}

	taken := takeSnapshot(t, a.HTTPAddr())
	t.Logf("snapshot at %d with b live: trim point %d, held by %+v", taken.Snapshot.Pos, taken.TrimPoint, taken.TrimHeldBy)
	// b's renewal may have landed after the snapshot, reporting a
	// position past it; otherwise b holds the trim at what it reported.
	if h := taken.TrimHeldBy; h != nil {
		if h.NodeID != 2 || taken.TrimPoint != h.Applied || h.Applied >= taken.Snapshot.Pos {
			t.Errorf("snapshot %+v: want the trim held at node 2's applied position, below the snapshot", taken)
		}
	} else if taken.TrimPoint != taken.Snapshot.Pos {
		t.Errorf("snapshot %+v: trim point neither the snapshot's nor held by an agent", taken)
	}
	if bApplied := uint64(b.Replica().NextToApply()); taken.TrimPoint > bApplied {
		t.Errorf("log trimmed at %d, past live agent b at %d", taken.TrimPoint, bApplied)
	}
	more := records(topic, 2, 10, "b")
	produce(t, b.KafkaAddr(), more)
	checkRecords(t, b.KafkaAddr(), topic, append(rs, more...))
	if err := b.Replica().Err(); err != nil {
		t.Fatalf("agent b: %v", err)
	}

	stop(t, b)
	taken = takeSnapshot(t, a.HTTPAddr())
	if taken.TrimPoint != taken.Snapshot.Pos || taken.TrimHeldBy != nil {
		t.Errorf("snapshot after b left: %+v; want the log trimmed at its position", taken)
	}
	if st := logStatus(t, a.HTTPAddr()); len(st.Agents) != 1 || st.Agents[0].NodeID != 1 {
		t.Errorf("agents after b left: %+v, want node 1 alone", st.Agents)
	}
}
