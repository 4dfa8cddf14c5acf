package cleaner

import (
	"strconv"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/meta"
)

// TestDynamicDedupeBuffer: log.cleaner.dedupe.buffer.size set through
// the log, cluster-wide, shrinks the next round's map below Config's
// (cleaning in prefixes, as TestRoundSmallMap's small map does), and
// this agent's own value wins over it.
func TestDynamicDedupeBuffer(t *testing.T) {
	e := newRoundEnv(t, compactNow, func(c *Config) { c.MapBytes = 1 << 20 })
	in := smallMapInput(t)
	rounds := func() int { return e.roundsToClean(in) }
	if n := rounds(); n != 1 {
		t.Fatalf("Config's 1 MiB map: %d rounds, want 1", n)
	}
	small := strconv.Itoa(5 * EntryBytes)
	e.propose(meta.AlterBrokerConfigs{Resource: "", Set: map[string]string{DedupeBufferConfig: small}})
	if n := rounds(); n < 3 {
		t.Fatalf("cluster-wide %s-byte map: %d rounds, want at least 3", small, n)
	}
	e.propose(meta.AlterBrokerConfigs{Resource: "0", Set: map[string]string{DedupeBufferConfig: "1048576"}})
	if n := rounds(); n != 1 {
		t.Fatalf("agent's 1 MiB map over the cluster's small one: %d rounds, want 1", n)
	}
}

// TestDynamicBackoff: the wait before a pass is log.cleaner.backoff.ms
// as the log has it, else Config's Interval.
func TestDynamicBackoff(t *testing.T) {
	e := newRoundEnv(t, nil, func(c *Config) { c.Interval = 15 * time.Second })
	if got := e.c.interval(); got != 15*time.Second {
		t.Fatalf("unset: %v", got)
	}
	e.propose(meta.AlterBrokerConfigs{Resource: "", Set: map[string]string{BackoffConfig: "2500"}})
	if got := e.c.interval(); got != 2500*time.Millisecond {
		t.Fatalf("cluster-wide 2500: %v", got)
	}
	e.propose(meta.AlterBrokerConfigs{Resource: "0", Set: map[string]string{BackoffConfig: "0"}})
	if got := e.c.interval(); got != 2500*time.Millisecond {
		t.Fatalf("agent's out-of-range 0 (written by another build): %v, want the cluster-wide 2500ms", got)
	}
	e.propose(meta.AlterBrokerConfigs{Resource: "0", Set: map[string]string{BackoffConfig: "100"}})
	if got := e.c.interval(); got != 100*time.Millisecond {
		t.Fatalf("agent's 100: %v", got)
	}
}
