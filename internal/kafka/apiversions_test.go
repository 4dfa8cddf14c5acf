package kafka

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The built-in table is what the NN_name.go files register; this is the
// list a client sees.
func TestDefaultRegistryServes(t *testing.T) {
	got := DefaultRegistry().APIVersions()
	want := []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 2, MinVersion: 0, MaxVersion: 11}, // ListOffsets
		{ApiKey: 3, MinVersion: 0, MaxVersion: 13}, // Metadata
		{ApiKey: 18, MinVersion: 0, MaxVersion: 4}, // ApiVersions
		{ApiKey: 19, MinVersion: 0, MaxVersion: 7}, // CreateTopics
		{ApiKey: 20, MinVersion: 0, MaxVersion: 6}, // DeleteTopics
		{ApiKey: 23, MinVersion: 0, MaxVersion: 4}, // OffsetForLeaderEpoch
		{ApiKey: 32, MinVersion: 0, MaxVersion: 4}, // DescribeConfigs
		{ApiKey: 33, MinVersion: 0, MaxVersion: 2}, // AlterConfigs
		{ApiKey: 37, MinVersion: 0, MaxVersion: 3}, // CreatePartitions
		{ApiKey: 44, MinVersion: 0, MaxVersion: 1}, // IncrementalAlterConfigs
		{ApiKey: 57, MinVersion: 0, MaxVersion: 2}, // UpdateFeatures
		{ApiKey: 60, MinVersion: 0, MaxVersion: 2}, // DescribeCluster
	}
	// Keys registered by other files of this package (Produce, Fetch,
	// groups) are not this test's business.
	var mine []kmsg.ApiVersionsResponseApiKey
	for _, k := range got {
		for _, w := range want {
			if k.ApiKey == w.ApiKey {
				mine = append(mine, k)
			}
		}
	}
	assertKeys(t, mine, want)
}

// kgo opens with ApiVersions at its own max (v5, above ours), gets the
// KIP-511 answer and retries at v4; then our explicit request is answered
// from the registry.
func TestAPIVersionsKgo(t *testing.T) {
	ts := startServer(t, Config{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()

	// Broker.Request sends the request as is; v3+ requires the software
	// fields (Kafka answers INVALID_REQUEST without them, as we do).
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName = "strand-test"
	req.ClientSoftwareVersion = "0.1"
	raw, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	resp := raw.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	if resp.Version != 4 {
		t.Errorf("kgo used ApiVersions v%d, want v4 (our max)", resp.Version)
	}
	assertKeys(t, resp.ApiKeys, ts.APIVersions())

	// The handshake went v5 (refused at v0), v4, then ours at v4, and the
	// software name reached the connection. Requests are accounted for
	// by the time their connection's close is reported.
	cl.Close()
	ts.obs.waitClose(t)
	var versions []int16
	for _, st := range ts.obs.requests() {
		if st.Key == apiVersionsKey {
			versions = append(versions, st.Version)
		}
	}
	if len(versions) != 3 || versions[0] != 5 || versions[1] != 4 || versions[2] != 4 {
		t.Errorf("ApiVersions requests seen at versions %v, want [5 4 4]", versions)
	}
	ts.obs.mu.Lock()
	c := ts.obs.mu.conns[len(ts.obs.mu.conns)-1]
	ts.obs.mu.Unlock()
	if name, version := c.ClientSoftware(); name != "strand-test" || version != "0.1" {
		t.Errorf("client software %q %q, want the last ApiVersions' strand-test 0.1", name, version)
	}
}

// kadm discovers brokers with Metadata (a test handler here) and then asks
// each for ApiVersions.
func TestAPIVersionsKadm(t *testing.T) {
	ts := startServer(t, Config{Registry: withHandlers(t, registration{3, 0, 12, metadataHandler})})
	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()

	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		t.Fatalf("kadm ApiVersions: %v", err)
	}
	v, ok := vs[0]
	if !ok || v.Err != nil {
		t.Fatalf("broker 0: present %v, err %v", ok, v.Err)
	}
	var got []kmsg.ApiVersionsResponseApiKey
	v.EachKeySorted(func(key, lo, hi int16) {
		got = append(got, kmsg.ApiVersionsResponseApiKey{ApiKey: key, MinVersion: lo, MaxVersion: hi})
	})
	want := ts.APIVersions()
	if len(want) < 2 {
		t.Fatalf("registry table %v, want at least keys 3 and 18", want)
	}
	assertKeys(t, got, want)
}

func TestAPIVersionsRaw(t *testing.T) {
	ts := startServer(t, Config{})
	only18 := []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 4}}
	tests := []struct {
		name     string
		version  int16
		software string
		wantVer  int16 // version of the answer
		wantCode int16
		wantKeys []kmsg.ApiVersionsResponseApiKey
	}{
		{name: "v0", version: 0, wantVer: 0, wantKeys: ts.APIVersions()},
		{name: "v1", version: 1, wantVer: 1, wantKeys: ts.APIVersions()},
		{name: "v2", version: 2, wantVer: 2, wantKeys: ts.APIVersions()},
		{name: "v3", version: 3, software: "librdkafka", wantVer: 3, wantKeys: ts.APIVersions()},
		{name: "v4", version: 4, software: "kgo", wantVer: 4, wantKeys: ts.APIVersions()},
		{name: "v3 bad software name", version: 3, software: "-bad", wantVer: 3, wantCode: kerr.InvalidRequest.Code},
		{name: "v3 empty software name", version: 3, software: "", wantVer: 3, wantCode: kerr.InvalidRequest.Code},
		{name: "v5 too new", version: 5, software: "kgo", wantVer: 0, wantCode: kerr.UnsupportedVersion.Code, wantKeys: only18},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, ts.addr)
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version = tt.version
			req.ClientSoftwareName = tt.software
			req.ClientSoftwareVersion = "1.2.3"
			write(t, c, frameFor(41, req))
			resp := kmsg.NewPtrApiVersionsResponse()
			if corr := decodeResponse(t, readFrame(t, c), resp, tt.wantVer); corr != 41 {
				t.Fatalf("correlation id %d, want 41", corr)
			}
			if resp.ErrorCode != tt.wantCode {
				t.Fatalf("error code %d, want %d", resp.ErrorCode, tt.wantCode)
			}
			assertKeys(t, resp.ApiKeys, tt.wantKeys)
			switch {
			case tt.wantVer < 3 || tt.wantCode != 0:
			case resp.FinalizedFeaturesEpoch < 0 || len(resp.FinalizedFeatures) != 3 || len(resp.SupportedFeatures) == 0:
				// TestAPIVersionsFeatures checks them in detail.
				t.Errorf("features: epoch %d, finalized %+v, supported %+v", resp.FinalizedFeaturesEpoch, resp.FinalizedFeatures, resp.SupportedFeatures)
			case resp.FinalizedFeatures[2].Name != "transaction.version" || resp.FinalizedFeatures[2].MaxVersionLevel != 2:
				t.Errorf("finalized %+v, want transaction.version 2 last", resp.FinalizedFeatures)
			}
			// None of these close the connection.
			checkAPIVersions(t, c, ts.Server)
		})
	}
}

func TestValidSoftwareField(t *testing.T) {
	for s, want := range map[string]bool{
		"kgo": true, "a": true, "librdkafka": true, "1.0.0-rc1": true, "apache-kafka-java": true,
		"": false, "-a": false, "a-": false, "a.": false, "a b": false, "a_b": false, "é": false,
	} {
		if got := validSoftwareField(s); got != want {
			t.Errorf("validSoftwareField(%q) = %v, want %v", s, got, want)
		}
	}
}
