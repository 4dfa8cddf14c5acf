package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// startAgentOn starts an in-process agent on dir and returns a func that
// stops it (also run at cleanup if the test did not).
func startAgentOn(t *testing.T, dir string) (*agent.Agent, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), commandDeadline)
	defer cancel()
	a, err := agent.Start(ctx, agent.Config{
		DataDir:          dir,
		KafkaListen:      "127.0.0.1:0",
		HTTPListen:       "127.0.0.1:0",
		SnapshotInterval: agent.SnapshotsOff,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("agent.Start: %v", err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), commandDeadline)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("agent.Stop: %v", err)
		}
	}
	t.Cleanup(stop)
	return a, stop
}

// TestStorageVerify runs `strand storage verify` against an agent whose
// store is clean, then against the same data with one object deleted:
// the first finds nothing and succeeds, the second lists the object,
// the partition and offsets it held, and fails.
func TestStorageVerify(t *testing.T) {
	dir := t.TempDir()
	a, stop := startAgentOn(t, dir)
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.KafkaAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), commandDeadline)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "v"); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		var rs []*kgo.Record
		for i := range 5 {
			rs = append(rs, &kgo.Record{Topic: "v", Partition: p, Value: []byte(strings.Repeat("x", 10+i))})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	http := "--http=" + a.HTTPAddr()

	r := runAdmin(t, "storage", "verify", http, "--rate", "64MiB")
	if r.err != nil || !strings.Contains(r.stdout, "no damage found") || !strings.Contains(r.stdout, "partitions: 2 index entries") {
		t.Fatalf("clean store: %v\n%s", r.err, r.stdout)
	}

	stop()
	var objects []string
	filepath.WalkDir(filepath.Join(dir, "objects"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".strd") {
			objects = append(objects, p)
		}
		return err
	})
	if len(objects) != 2 {
		t.Fatalf("data objects %v, want one per produce call", objects)
	}
	if err := os.Remove(objects[1]); err != nil {
		t.Fatal(err)
	}
	a, _ = startAgentOn(t, dir)
	http = "--http=" + a.HTTPAddr()

	r = runAdmin(t, "storage", "verify", http)
	if !errors.Is(r.err, ErrDamage) {
		t.Fatalf("verify after deleting an object: %v\n%s", r.err, r.stdout)
	}
	rs := rows(r.stdout)
	var found bool
	for _, row := range rs {
		if len(row) == 5 && row[1] == "missing" && row[2] == "v" && row[3] == "1" && row[4] == "0-4" &&
			strings.HasSuffix(row[0], "/"+filepath.Base(objects[1])) {
			found = true
		}
	}
	if !found || !strings.Contains(r.stdout, "damaged objects: 1 (1 missing, 0 corrupt)") {
		t.Fatalf("verify output does not list the deleted object %s:\n%s", objects[1], r.stdout)
	}

	r = runAdmin(t, "storage", "verify", http, "--json")
	var rep agent.StorageVerifyReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || !errors.Is(r.err, ErrDamage) {
		t.Fatalf("--json: %v, %v\n%s", err, r.err, r.stdout)
	}
	if rep.Missing != 1 || len(rep.Damaged) != 1 || len(rep.Damaged[0].Ranges) != 1 || rep.Damaged[0].Ranges[0].Partition != 1 {
		t.Fatalf("--json report %+v", rep)
	}

	if r := runAdmin(t, "storage", "verify", http, "--rate", "fast"); !errors.Is(r.err, ErrUsage) {
		t.Fatalf("--rate fast: %v", r.err)
	}
}

func TestParseByteRate(t *testing.T) {
	for in, want := range map[string]int64{
		"16MiB": 16 << 20, "500KiB": 500 << 10, "1GiB": 1 << 30, "4096": 4096, "7B": 7, " 2 MiB ": 2 << 20,
		"0": -1, "-1MiB": -1, "fast": -1, "MiB": -1, "1.5MiB": -1, "99999999999GiB": -1,
	} {
		got, err := parseByteRate(in)
		if want < 0 {
			if err == nil {
				t.Errorf("parseByteRate(%q) = %d, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("parseByteRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

// TestDescribeShowsLevels: with --http, topic describe adds each
// partition's index entries and objects by compaction level, here all
// level 0: two flushes into partition 1, none into partition 0.
func TestDescribeShowsLevels(t *testing.T) {
	a, _ := startAgentOn(t, t.TempDir())
	brokers := a.KafkaAddr()
	mustRun(t, brokers, "", "topic", "create", "lv", "-p", "2")
	mustRun(t, brokers, "a\nb\n", "produce", "lv", "-p", "1")
	mustRun(t, brokers, "c\n", "produce", "lv", "-p", "1")

	r := mustRun(t, brokers, "", "topic", "describe", "lv", "--http", a.HTTPAddr())
	// The table after its header, up to the blank line.
	var got []string
	in := false
	for line := range strings.SplitSeq(r.stdout, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 1 && f[0] == "PARTITION" && f[1] == "ENTRIES":
			in = true
		case in && len(f) == 0:
			in = false
		case in:
			got = append(got, strings.Join(f, " "))
		}
	}
	want := []string{"0 0 0 0 entries in 0 objects 0 entries in 0 objects", "1 2 2 2 entries in 2 objects 0 entries in 0 objects"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("storage rows %q, want %q\n%s", got, want, r.stdout)
	}

	// The same answer in json, under the agent's own field names.
	r = mustRun(t, brokers, "", "topic", "describe", "lv", "--http", a.HTTPAddr(), "--format", "json")
	var descs []struct {
		Name       string                 `json:"name"`
		Storage    *agent.TopicStorage    `json:"storage"`
		Compaction *agent.TopicCompaction `json:"compaction"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &descs); err != nil || len(descs) != 1 || descs[0].Storage == nil {
		t.Fatalf("describe --format json --http: %v\n%s", err, r.stdout)
	}
	ps := descs[0].Storage.Partitions
	if len(ps) != 2 || ps[1].Entries != 2 || ps[1].Level0Objects != 2 || ps[0].Entries != 0 || descs[0].Compaction != nil {
		t.Fatalf("describe --format json --http: %s", r.stdout)
	}
}
