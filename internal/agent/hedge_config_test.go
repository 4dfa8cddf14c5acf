package agent_test

import (
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
