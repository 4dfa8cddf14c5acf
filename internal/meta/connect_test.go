package meta

import (
	"fmt"
	"strings"
	"testing"
)

// TestConnectorBounds: apply refuses configs past their bounds and a
// connector past MaxConnectors, with Connect's 400 and 409, and another
// copy reads back the same connectors.
func TestConnectorBounds(t *testing.T) {
	log := newTestLog()
	a, b := openReplica(t, log, nil, "a"), openReplica(t, log, nil, "b")
	mustOK(t, a, FinalizeFeatures{Bootstrap: true, Features: []FeatureLevel{{Name: FeatureMetadata, Level: MetadataLevel8}}})
	many := map[string]string{}
	for i := range MaxConnectorConfigEntries + 1 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	big := map[string]string{}
	for i := range 5 {
		big[fmt.Sprintf("k%d", i)] = strings.Repeat("x", MaxConnectorValueBytes)
	}
	for _, c := range []struct {
		name string
		cmd  Command
		want int32
	}{
		{"too many entries", PutConnector{Name: "x", Config: many}, 400},
		{"a value too long", PutConnector{Name: "x", Config: map[string]string{"k": strings.Repeat("x", MaxConnectorValueBytes+1)}}, 400},
		{"a config too long", PutConnector{Name: "x", Config: big}, 400},
		{"an empty key", PutConnector{Name: "x", Config: map[string]string{"": "v"}}, 400},
		{"a name too long", PutConnector{Name: strings.Repeat("n", MaxConnectorNameBytes+1)}, 400},
		{"a control character", PutConnector{Name: "a\tb"}, 400},
		{"an owner too long", PutConnector{Name: "x", Owner: strings.Repeat("o", 1025)}, 400},
		{"a trace too long", ConnectorTaskStatus{Name: "x", Generation: 1, State: TaskFailed, Trace: strings.Repeat("t", MaxConnectorTraceBytes+1)}, 400},
	} {
		if res := mustPropose(t, a, c.cmd); res.ConnectorError != c.want || res.Code == 0 {
			t.Errorf("%s: %+v, want HTTP %d", c.name, res, c.want)
		}
	}
	var batch []Command
	for i := range MaxConnectors {
		batch = append(batch, PutConnector{Name: fmt.Sprintf("c%04d", i), Config: map[string]string{"connector.class": "X"}, Mode: PutCreate})
	}
	res, err := a.ProposeBatch(testCtx(t), batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Code != 0 || !r.ConnectorCreated {
			t.Fatalf("connector %d: %+v", i, r)
		}
	}
	if r := mustPropose(t, a, PutConnector{Name: "one-more", Mode: PutCreate}); r.ConnectorError != 409 {
		t.Fatalf("connector %d: %+v, want 409 (full)", MaxConnectors+1, r)
	}
	// An update of an existing one still goes, and a delete makes room.
	mustOK(t, a, PutConnector{Name: "c0000", Config: map[string]string{"connector.class": "Y"}})
	mustOK(t, a, DeleteConnector{Name: "c0001"})
	if r := mustOK(t, a, PutConnector{Name: "one-more", Mode: PutCreate}); !r.ConnectorCreated {
		t.Fatalf("after a delete: %+v", r)
	}
	mustSync(t, b)
	cs, err := viewOf(t, b).Connectors()
	if err != nil || len(cs) != MaxConnectors || cs[0].Name != "c0000" || cs[0].Config["connector.class"] != "Y" || cs[0].Generation != 2 {
		t.Fatalf("Connectors on the other copy: %d, first %+v, %v", len(cs), cs[0], err)
	}
	if mustDigest(t, a) != mustDigest(t, b) {
		t.Fatal("copies diverged")
	}
}
