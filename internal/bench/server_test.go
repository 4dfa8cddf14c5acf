package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/testservers/testproc"
)

func TestParseProcStatCPU(t *testing.T) {
	for _, c := range []struct {
		name, line string
		want       float64
		ok         bool
	}{
		{"plain", "4242 (strand) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 130 0 0 20 0 12 0 100 0 0", 3.80, true},
		{"name with spaces and parens", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 1 0 0", 0.03, true},
		{"truncated", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 1", 0, false},
		{"no name", "7 x R 1", 0, false},
		{"not a number", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 u 2 0", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseProcStatCPU([]byte(c.line))
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok %v", err, c.ok)
			}
			if c.ok && (got < c.want-1e-9 || got > c.want+1e-9) {
				t.Errorf("got %v CPU-s, want %v", got, c.want)
			}
		})
	}
}

// TestChildServerCPU starts kfake in a child process (this test binary,
// dispatched by TestMain), checks that its CPU is read from /proc and
// that closing its stdin ends it.
func TestChildServerCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		// The CPU figure needs /proc: skip elsewhere, fail under CI.
		testproc.SkipOrFail(t, fmt.Errorf("no /proc: %w", err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := startChildServer(ctx, serverSpec{Kind: "kfake", KfakeMemory: true}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.addrs.Kafka == "" {
		t.Error("no Kafka address")
	}
	if _, err := c.cpuSeconds(); err != nil {
		t.Errorf("cpuSeconds: %v", err)
	}
	if err := c.stop(30 * time.Second); err != nil {
		t.Errorf("stop: %v", err)
	}
	if _, err := c.cpuSeconds(); err == nil {
		t.Error("the child's /proc entry outlived stop")
	}
	// A child that cannot start says why.
	if _, err := startChildServer(ctx, serverSpec{Kind: "nope"}, io.Discard); err == nil || !strings.Contains(err.Error(), `unknown kind "nope"`) {
		t.Errorf("starting an unknown kind: err = %v", err)
	}
}

// TestChildServerConfig checks that the child's agent gets the config an
// in-process agent would: every option embeddedConfig reads survives
// the spec's trip through JSON (the express zones once did not, and the
// tier's benchmark measured an agent without its tier).
func TestChildServerConfig(t *testing.T) {
	o := Options{
		ObjStoreLatency: "s3-express", FlushInterval: 7 * time.Millisecond, FlushBytes: 123456,
		HedgePercentile: 0.8, HedgeMaxRatio: 0.2, MaxPutsPerSec: 20,
		FetchReadAheadBytes: 1 << 20, FetchMaxParallelGets: 3, ExpressZones: 3, SQLViewStepSlots: -1,
	}
	b, err := json.Marshal(specOf(&o, "strand", "d"))
	if err != nil {
		t.Fatal(err)
	}
	var spec serverSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	back := spec.options()
	if want, got := embeddedConfig(&o, "d"), embeddedConfig(&back, "d"); !reflect.DeepEqual(want, got) {
		t.Errorf("the child's agent config differs:\n got %+v\nwant %+v", got, want)
	}
}
