package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/objstore/fileobj"
	"github.com/strandkafka/strand/internal/objstore/memobj"
)

// TestStorageSample: a sample sums what the store holds, data apart from
// the metadata snapshots, and the rates come from two scrapes.
func TestStorageSample(t *testing.T) {
	ctx := context.Background()
	store := memobj.New()
	for key, size := range map[string]int{"data/a": 100, "data/b/c": 50, "meta/snap/1.json": 7, "meta/sst/x": 3} {
		if err := store.Put(ctx, key, make([]byte, size)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := sampleStore(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if got.DataBytes != 150 || got.DataObjects != 2 || got.SnapshotBytes != 10 || got.SnapshotObjects != 2 {
		t.Fatalf("sample %+v, want 150 B in 2 data objects and 10 B in 2 snapshot objects", got)
	}

	// A live agent's file store: opening it to list must leave the
	// writes in flight (temporary files) alone.
	dir := t.TempDir()
	fstore, err := fileobj.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := fstore.Put(ctx, "data/a", make([]byte, 9)); err != nil {
		t.Fatal(err)
	}
	inFlight := filepath.Join(dir, "%tmp-upload")
	if err := os.WriteFile(inFlight, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	listed, err := openSampledStore(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sampleStore(ctx, listed); err != nil || got.DataBytes != 9 || got.DataObjects != 1 {
		t.Fatalf("file store sample %+v, %v; want 9 B in 1 object", got, err)
	}
	if _, err := os.Stat(inFlight); err != nil {
		t.Fatalf("opening the store to list it removed a write in flight: %v", err)
	}

	prev := AgentMetrics{ObjRequests: map[string]float64{"delete": 10, "list": 1}, CPUSeconds: 3}
	cur := AgentMetrics{ObjRequests: map[string]float64{"delete": 30, "list": 5}, CPUSeconds: 4}
	var s StorageSample
	s.addRates(prev, cur, 2)
	if s.DeletesPerSec != 10 || s.ListsPerSec != 2 || s.CPUCores != 0.5 {
		t.Fatalf("rates %+v, want 10 deletes/s, 2 lists/s, 0.5 cores", s)
	}
}

// TestBenchTopicConfigAndStorage: --topic-config reaches the topic it
// creates, and --objstore with --storage-every samples the store from the
// start to the end of the run.
func TestBenchTopicConfigAndStorage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a load phase")
	}
	c, ctx := newKfake(t)
	dir := t.TempDir()
	store := memobj.New()
	if err := store.Put(ctx, "data/x", make([]byte, 42)); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	rep, err := Run(ctx, Options{
		Brokers: c.ListenAddrs(), Producers: 1, Consumers: 0, Partitions: 1, RecordSize: 100,
		Rate: 1000, Duration: 500 * time.Millisecond, Linger: time.Millisecond, DataDir: dir,
		TopicConfigs: []string{"retention.ms=60000"}, StorageEvery: time.Hour, store: store,
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("Run: %v\nstderr:\n%s", err, stderr.String())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, DefaultTopic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(DefaultTopic, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, cfg := range rc.Configs {
		found = found || cfg.Key == "retention.ms" && cfg.MaybeValue() == "60000"
	}
	if !found {
		t.Errorf("topic configs %+v lack retention.ms=60000", rc.Configs)
	}
	// The first and last samples are taken whatever the period.
	if s := rep.Storage; s == nil || len(s.Samples) < 2 || s.Samples[0].DataBytes != 42 || s.PeakDataBytes != 42 {
		t.Fatalf("storage %+v, want samples at the start and end of 42 B", rep.Storage)
	}
	if !strings.Contains(stdout.String(), "stored") {
		t.Errorf("text report lacks the storage table:\n%s", stdout.String())
	}
}
