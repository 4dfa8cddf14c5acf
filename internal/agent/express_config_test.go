package agent_test

import (
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/agent"
)

// TestExpressConfig: --objstore-express takes two or three named zones,
// --objstore-express-zone one of them, and the tier needs compaction; it
// makes the store remote (compaction, hedging on by default) and its PUT
// budget each bucket's, 20 by default.
func TestExpressConfig(t *testing.T) {
	for _, tt := range []struct {
		name    string
		express string
		zone    string
		noComp  bool
		wantErr string
	}{
		{name: "off", express: ""},
		{name: "three zones", express: "a=/x/a,b=/x/b,c=/x/c", zone: "b"},
		{name: "two zones", express: "a=/x/a,b=s3://bucket--use1-az4--x-s3/p"},
		{name: "one zone", express: "a=/x/a", wantErr: "two or three"},
		{name: "four zones", express: "a=/a,b=/b,c=/c,d=/d", wantErr: "two or three"},
		{name: "no name", express: "=/x/a,b=/x/b", wantErr: "name=URL"},
		{name: "zone named twice", express: "a=/x/a,a=/x/b", wantErr: "named twice"},
		{name: "unknown local zone", express: "a=/x/a,b=/x/b", zone: "c", wantErr: "none of"},
		{name: "local zone without the tier", zone: "a", wantErr: "needs --objstore-express"},
		{name: "without compaction", express: "a=/x/a,b=/x/b", noComp: true, wantErr: "compaction"},
	} {
		cfg := agent.Config{DataDir: t.TempDir(), ObjStoreExpress: tt.express, ObjStoreExpressZone: tt.zone,
			MaxPutsPerSec: agent.PutBudgetAuto}
		cfg.SetDefaults()
		cfg.Compaction = cfg.RemoteObjStore() && !tt.noComp // as serve defaults it
		err := cfg.Validate()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want one saying %q", tt.name, err, tt.wantErr)
		}
		if tt.express != "" && tt.wantErr == "" && (cfg.MaxPutsPerSec != agent.DefaultExpressPutsPerSec || cfg.ObjStoreHedgePercentile <= 0) {
			t.Errorf("%s: budget %v, hedge percentile %v; want %v and hedging", tt.name, cfg.MaxPutsPerSec, cfg.ObjStoreHedgePercentile, agent.DefaultExpressPutsPerSec)
		}
	}
}
