package agent_test

import (
	"time"

	"testing"

	"github.com/strandkafka/strand/internal/agent"
)

// TestHedgeDefault checks that uploads are hedged by default only where
// their times have a tail of their own: an S3 store or a latency profile,
// not a local directory, whose second write would only add to its disk's.
func TestHedgeDefault(t *testing.T) {
	for _, tt := range []struct {
		name    string
		cfg     agent.Config
		hedging bool
	}{
		{"local directory", agent.Config{DataDir: t.TempDir()}, false},
		{"file URL", agent.Config{DataDir: t.TempDir(), ObjStore: "file:///data/objects"}, false},
		{"S3", agent.Config{DataDir: t.TempDir(), ObjStore: "s3://bucket/prefix"}, true},
		{"latency profile", agent.Config{DataDir: t.TempDir(), ObjStoreLatency: "s3-standard"}, true},
		{"set off on S3", agent.Config{DataDir: t.TempDir(), ObjStore: "s3://bucket/prefix", ObjStoreHedgePercentile: agent.HedgeOff}, false},
		{"set on a local directory", agent.Config{DataDir: t.TempDir(), ObjStoreHedgePercentile: 0.5}, true},
	} {
		tt.cfg.SetDefaults()
		if got := tt.cfg.ObjStoreHedgePercentile > 0; got != tt.hedging {
			t.Errorf("%s: hedge percentile %v, want hedging %v", tt.name, tt.cfg.ObjStoreHedgePercentile, tt.hedging)
		}
	}
}

// TestPutBudgetDefault: the flag's default (PutBudgetAuto) paces PUTs on
// a remote store, where they are billed, and not on a local directory;
// an explicit value, 0 included, stays.
func TestPutBudgetDefault(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  agent.Config
		want float64
	}{
		{"local directory", agent.Config{MaxPutsPerSec: agent.PutBudgetAuto}, 0},
		{"S3", agent.Config{ObjStore: "s3://bucket/prefix", MaxPutsPerSec: agent.PutBudgetAuto}, agent.DefaultRemotePutsPerSec},
		{"latency profile", agent.Config{ObjStoreLatency: "s3-standard", MaxPutsPerSec: agent.PutBudgetAuto}, agent.DefaultRemotePutsPerSec},
		{"off on S3", agent.Config{ObjStore: "s3://bucket/prefix", MaxPutsPerSec: 0}, 0},
		{"set", agent.Config{MaxPutsPerSec: 10}, 10},
	} {
		tt.cfg.DataDir = t.TempDir()
		tt.cfg.SetDefaults()
		if tt.cfg.MaxPutsPerSec != tt.want || tt.cfg.PacedObjectBytes != agent.DefaultPacedObjectBytes {
			t.Errorf("%s: budget %v, paced object bytes %d; want %v, %d", tt.name, tt.cfg.MaxPutsPerSec, tt.cfg.PacedObjectBytes, tt.want, agent.DefaultPacedObjectBytes)
		}
		if err := tt.cfg.Validate(); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

// TestLeaseDefault: on a log that bills every request the default lease
// is DefaultBilledLogLease (a renewal every 12s), elsewhere
// DefaultLease; a lease given stays.
func TestLeaseDefault(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  agent.Config
		want time.Duration
	}{
		{"file", agent.Config{}, agent.DefaultLease},
		{"postgres", agent.Config{Log: "postgres://strand@127.0.0.1/strand?log=main"}, agent.DefaultLease},
		{"s3", agent.Config{Log: "s3://bucket/log?region=us-east-1"}, agent.DefaultBilledLogLease},
		{"dynamodb", agent.Config{Log: "dynamodb://strand/log?region=us-east-1"}, agent.DefaultBilledLogLease},
		{"set on s3", agent.Config{Log: "s3://bucket/log", Lease: 10 * time.Second}, 10 * time.Second},
	} {
		tt.cfg.DataDir = t.TempDir()
		tt.cfg.SetDefaults()
		if tt.cfg.Lease != tt.want {
			t.Errorf("%s: lease %v, want %v", tt.name, tt.cfg.Lease, tt.want)
		}
	}
}
