package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/objstore"
)

// TestBenchEmbeddedJSON is the acceptance run: `strand bench --embedded
// --duration 2s --producers 2 --consumers 1 --json` must measure
// something on every line of the report.
func TestBenchEmbeddedJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an agent and loads it for several seconds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	var stdout, stderr bytes.Buffer
	cmd := NewCommand()
	cmd.SetArgs([]string{"--embedded", "--duration", "2s", "--producers", "2", "--consumers", "1", "--json",
		"--data-dir", t.TempDir()})
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("bench: %v\nstderr:\n%s", err, stderr.String())
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout.String())
	}
	s := rep.Strand
	if s == nil {
		t.Fatalf("no strand result:\n%s", stdout.String())
	}
	if s.Agent == nil || s.Consumed == nil || s.E2ELatency == nil {
		t.Fatalf("missing sections (agent %v, consumed %v, e2e %v):\n%s", s.Agent != nil, s.Consumed != nil, s.E2ELatency != nil, stdout.String())
	}
	for _, c := range []struct {
		what string
		v    float64
	}{
		{"produced records/s", s.Produced.RecordsPerSec},
		{"produced MB/s", s.Produced.MBPerSec},
		{"consumed MB/s", s.Consumed.MBPerSec},
		{"produce latency count", float64(s.ProduceLatency.Count)},
		{"produce p50", s.ProduceLatency.P50Ms},
		{"produce p99", s.ProduceLatency.P99Ms},
		{"produce max", s.ProduceLatency.MaxMs},
		{"e2e latency count", float64(s.E2ELatency.Count)},
		{"e2e p99", s.E2ELatency.P99Ms},
		{"object store PUTs", s.Agent.Puts},
		{"PUTs per MB", s.Agent.PutsPerMB},
		{"log appends", s.Agent.LogAppends},
		{"flushes", s.Agent.Flushes},
		{"log appends per flush", s.Agent.LogAppendsPerFlush},
		{"cpu cores", s.Agent.CPUCores},
		{"rss", s.Agent.RSSBytes},
		{"server CPU-s per GB", s.CPUSecondsPerGB},
	} {
		if !(c.v > 0) {
			t.Errorf("%s = %v, want > 0", c.what, c.v)
		}
	}
	if s.Produced.Errors != 0 {
		t.Errorf("%d produce errors; first: %s", s.Produced.Errors, s.FirstError)
	}
	l := s.ProduceLatency
	if !(l.P50Ms <= l.P90Ms && l.P90Ms <= l.P99Ms && l.P99Ms <= l.P999Ms && l.P999Ms <= l.MaxMs) {
		t.Errorf("produce percentiles not ordered: %+v", l)
	}
	if rep.Options.Target != "embedded" || rep.Options.Producers != 2 || rep.Options.Consumers != 1 {
		t.Errorf("options echoed as %+v", rep.Options)
	}
}

// TestBenchBrokersKfakeComparisonDiskPlot drives kfake as the "cluster"
// (no /metrics), compares with a second, in-memory kfake, measures the
// disk and draws the plot: every optional part of the report.
func TestBenchBrokersKfakeComparisonDiskPlot(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two load phases")
	}
	c, ctx := newKfake(t)
	dir := t.TempDir()
	plot := filepath.Join(dir, "latency.svg")
	var stdout, stderr bytes.Buffer
	rep, err := Run(ctx, Options{
		Brokers: c.ListenAddrs(), Producers: 1, Consumers: 2, Partitions: 3, RecordSize: 100,
		Rate: 3000, Duration: 1500 * time.Millisecond, Warmup: 0, Linger: time.Millisecond,
		CompareKfake: true, KfakeMemory: true, DiskBandwidth: true, DiskBytes: 2 << 20,
		DataDir: dir, Plot: plot,
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("Run: %v\nstderr:\n%s", err, stderr.String())
	}
	if rep.Strand.Agent != nil {
		t.Error("agent stats without --http")
	}
	for _, p := range []*PhaseResult{rep.Strand, rep.Kfake} {
		if p == nil {
			t.Fatal("a phase is missing")
		}
		if p.Produced.Records == 0 || p.Consumed == nil || p.Consumed.Records == 0 || p.E2ELatency.Count == 0 {
			t.Errorf("%s: produced %d, consumed %+v, e2e %+v", p.Target, p.Produced.Records, p.Consumed, p.E2ELatency)
		}
		// The rate is far below what kfake sustains: it must be met.
		if p.Produced.RecordsPerSec < 1500 || p.Produced.RecordsPerSec > 4500 {
			t.Errorf("%s: %.0f records/s for a 3000 target", p.Target, p.Produced.RecordsPerSec)
		}
	}
	if rep.Ratios == nil || !(rep.Ratios.Throughput > 0) || !(rep.Ratios.ProduceP99 > 0) {
		t.Errorf("ratios %+v", rep.Ratios)
	}
	// kfake ran in a child process, so its CPU alone is known; the
	// "cluster" without --http has none, and so no CPU ratio.
	if !(rep.Kfake.CPUSecondsPerGB > 0) || rep.Strand.CPUSecondsPerGB != 0 || rep.Ratios.CPUPerGB != 0 {
		t.Errorf("CPU-s per GB: kfake %v, strand %v, ratio %v; want kfake's alone", rep.Kfake.CPUSecondsPerGB, rep.Strand.CPUSecondsPerGB, rep.Ratios.CPUPerGB)
	}
	if rep.Disk == nil || !(rep.Disk.BytesPerSec > 0) || !(rep.Disk.IngestPercent > 0) {
		t.Errorf("disk %+v", rep.Disk)
	}
	for _, want := range []string{"strand / kfake", "disk:", "end-to-end"} {
		if !bytes.Contains(stdout.Bytes(), []byte(want)) {
			t.Errorf("text report lacks %q:\n%s", want, stdout.String())
		}
	}
	f, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	for {
		if _, err := dec.Token(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("plot is not well-formed: %v", err)
		}
	}
}

// newKfake starts a one-broker kfake cluster as the target of a run, and
// the run's deadlock guard.
func newKfake(t *testing.T) (*kfake.Cluster, context.Context) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c, ctx
}

func TestOptionsValidate(t *testing.T) {
	ok := func() Options { return Options{Embedded: true} }
	for _, tc := range []struct {
		name  string
		edit  func(o *Options)
		valid bool
	}{
		{"defaults", func(*Options) {}, true},
		{"brokers instead", func(o *Options) { o.Embedded, o.Brokers = false, []string{"h:1"} }, true},
		{"acks -1 means all", func(o *Options) { o.Acks = "-1" }, true},
		{"no target", func(o *Options) { o.Embedded = false }, false},
		{"both targets", func(o *Options) { o.Brokers = []string{"h:1"} }, false},
		{"record too small for the stamp", func(o *Options) { o.RecordSize = 7 }, false},
		{"bad acks", func(o *Options) { o.Acks = "2" }, false},
		{"bad compression", func(o *Options) { o.Compression = "brotli" }, false},
		{"negative rate", func(o *Options) { o.Rate = -1 }, false},
		{"negative consumers", func(o *Options) { o.Consumers = -1 }, false},
		{"too many producers", func(o *Options) { o.Producers = maxClients + 1 }, false},
		{"storage sampling without a store", func(o *Options) {
			o.Embedded, o.Brokers, o.StorageEvery = false, []string{"h:1"}, time.Second
		}, false},
		{"topic config not key=value", func(o *Options) { o.TopicConfigs = []string{"retention.ms"} }, false},
		{"agent flags without embedded", func(o *Options) {
			o.Embedded, o.Brokers, o.ObjStoreLatency = false, []string{"h:1"}, "s3-standard"
		}, false},
		{"read-ahead without embedded", func(o *Options) {
			o.Embedded, o.Brokers, o.FetchReadAheadBytes = false, []string{"h:1"}, 1<<20
		}, false},
		{"cold read", func(o *Options) { o.ColdRead = true }, true},
		{"cold read of a running cluster", func(o *Options) {
			o.ColdRead, o.Embedded, o.Brokers = true, false, []string{"h:1"}
		}, false},
		{"cold read under stress", func(o *Options) { o.ColdRead, o.Stress = true, StressCatchUp }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok()
			tc.edit(&o)
			o.SetDefaults()
			err := o.Validate()
			if tc.valid && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if !tc.valid && !errors.Is(err, ErrUsage) {
				t.Fatalf("Validate = %v, want ErrUsage", err)
			}
		})
	}
}

// TestEmbeddedObjStoreLatency checks that --objstore-latency reaches the
// agent: with s3-standard every PUT waits at least the profile's minimum
// (12 ms, several local fsyncs), and a produce is acknowledged only after
// its PUT, so no produce can be faster. An unknown profile fails the
// start.
func TestEmbeddedObjStoreLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an agent")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	var stdout, stderr bytes.Buffer
	rep, err := Run(ctx, Options{
		Embedded: true, ObjStoreLatency: "s3-standard", DataDir: t.TempDir(),
		Rate: 500, Duration: time.Second, Linger: time.Millisecond,
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("Run: %v\nstderr:\n%s", err, stderr.String())
	}
	floor := float64(objstore.S3Standard.Write[0].D) / 1e6
	if l := rep.Strand.ProduceLatency; l.Count == 0 || l.MinMs < floor {
		t.Errorf("produce latency min %.3f ms over %d records; the s3-standard PUT floor is %.3f ms", l.MinMs, l.Count, floor)
	}
	if rep.Options.ObjStoreLatency != "s3-standard" {
		t.Errorf("report says objstore latency %q", rep.Options.ObjStoreLatency)
	}

	_, err = Run(ctx, Options{Embedded: true, ObjStoreLatency: "s3-glacier", DataDir: t.TempDir(), Duration: time.Second}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "objstore-latency") {
		t.Errorf("unknown profile: err = %v", err)
	}
}

// TestColdRead fills two partitions through an embedded agent, restarts
// it and reads partition 0 back: every record comes back, and the
// restarted agent read it from the store (its cache started empty), with
// and without read-ahead; the second run finds the topic filled in the
// same data directory and reads it without filling it again.
func TestColdRead(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agents")
	}
	dir := t.TempDir()
	for i, ra := range []int64{0, agent.ReadAheadOff} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t.Cleanup(cancel)
		var stdout, stderr bytes.Buffer
		const perPartition = 1 << 20
		rep, err := Run(ctx, Options{
			Embedded: true, DataDir: dir, ColdRead: true, ColdReadBytes: perPartition,
			Partitions: 2, RecordSize: 1024, Linger: time.Millisecond, FetchReadAheadBytes: ra,
		}, &stdout, &stderr)
		if err != nil {
			t.Fatalf("Run: %v\nstderr:\n%s", err, stderr.String())
		}
		c := rep.ColdRead
		if c == nil || c.Records != perPartition/1024 || c.Bytes != perPartition || c.Gets < 1 || c.GetBytes < perPartition {
			t.Fatalf("read-ahead %d: cold read %+v; want %d records of %d bytes read through GETs", ra, c, perPartition/1024, perPartition)
		}
		if c.Reused != (i == 1) {
			t.Errorf("run %d: reused the fill: %v", i, c.Reused)
		}
		if !strings.Contains(stdout.String(), "GETs") {
			t.Errorf("report:\n%s", stdout.String())
		}
	}
}

// TestCatchUpBacklogIsStored: the catch-up stress reads back a backlog of
// StressBacklogBytes, so that many bytes must be stored. Its records all
// carry one value; produced with the client's default compression they
// were stored at a small fraction of that.
func TestCatchUpBacklogIsStored(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := Options{Embedded: true, DataDir: t.TempDir(), Stress: StressCatchUp, StressBacklogBytes: 8 << 20}
	o.SetDefaults()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	a, err := startEmbedded(ctx, &o, filepath.Join(o.DataDir, "agent"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	tgt := target{name: "strand", brokers: []string{a.KafkaAddr()}}
	if _, err := prepareCatchUp(ctx, &o, tgt, newProgressWriter(io.Discard)); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	dirs, err := kadm.NewClient(cl).DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stored int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == stressTopicPrefix+"backlog" {
				stored += p.Size
			}
		})
	})
	if stored < o.StressBacklogBytes {
		t.Fatalf("backlog stored in %d bytes, want at least the %d produced", stored, o.StressBacklogBytes)
	}
}
