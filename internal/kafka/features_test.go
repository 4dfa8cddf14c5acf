package kafka

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// versionedRoundTrip sends req at its version on a new connection and decodes the
// answer at that version: kmsg encodes the request and decodes the
// response, as a client of that version would.
func versionedRoundTrip[R kmsg.Response](t *testing.T, addr string, req kmsg.Request) R {
	t.Helper()
	c := dial(t, addr)
	defer c.Close()
	write(t, c, frameFor(3, req))
	resp := req.ResponseKind()
	decodeResponse(t, readFrame(t, c), resp, req.GetVersion())
	return resp.(R)
}

// finalize proposes levels through the agent's replica, as UpdateFeatures
// would after its checks.
func finalize(t *testing.T, a *testAgent, levels ...meta.FeatureLevel) {
	t.Helper()
	res, err := a.Replica.Propose(ctxT(t), meta.FinalizeFeatures{Features: levels})
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		t.Fatalf("FinalizeFeatures %v: %v", levels, err)
	}
}

// heartbeat registers an agent at the log's current level: version 3
// carries features, at level 1 they are dropped.
func heartbeat(t *testing.T, a *testAgent, node int32, features []meta.FeatureRange) {
	t.Helper()
	res, err := a.Replica.Propose(ctxT(t), meta.AgentHeartbeat{NodeID: node, AgentID: fmt.Sprint("agent-", node),
		Host: "127.0.0.1", Port: 1000 + node, LeaseMs: 60_000, Features: features})
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		t.Fatalf("AgentHeartbeat %d: %v", node, err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	t.Cleanup(cancel)
	return ctx
}

func apiVersionsFeatures(t *testing.T, addr string, version int16) *kmsg.ApiVersionsResponse {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = version
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strand-test", "1.0"
	resp := versionedRoundTrip[*kmsg.ApiVersionsResponse](t, addr, req)
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions v%d: error %d", version, resp.ErrorCode)
	}
	return resp
}

type finalized = kmsg.ApiVersionsResponseFinalizedFeature
type supported = kmsg.ApiVersionsResponseSupportedFeature

// TestAPIVersionsFeatures: what ApiVersions v3 and v4 report, on a log
// of builds before feature levels (the flag's transaction.version) and
// once levels are finalized.
func TestAPIVersionsFeatures(t *testing.T) {
	all := []supported{{Name: "group.version", MinVersion: 0, MaxVersion: 1},
		{Name: "strand.metadata.version", MinVersion: 1, MaxVersion: meta.MaxMetadataLevel}, {Name: "transaction.version", MinVersion: 0, MaxVersion: 2}}
	// KAFKA-17492: below v4, ranges starting at 0 are left out.
	v3 := all[1:2]
	a := newTestAgent(t, withDeps(func(d *Deps) { d.TransactionVersion = 1 }))
	for _, tc := range []struct {
		name      string
		setup     func()
		finalized []finalized
		epoch     int64 // 0: any above 1
	}{
		{name: "no levels in the log", setup: func() {},
			finalized: []finalized{{Name: "group.version", MinVersionLevel: 1, MaxVersionLevel: 1},
				{Name: "strand.metadata.version", MinVersionLevel: 1, MaxVersionLevel: 1},
				{Name: "transaction.version", MinVersionLevel: 1, MaxVersionLevel: 1}},
			epoch: 1},
		{name: "finalized", setup: func() {
			heartbeat(t, a, testNodeID, nil) // a log that served an agent: the epoch is past 1
			finalize(t, a, meta.FeatureLevel{Name: meta.FeatureMetadata, Level: 2}, meta.FeatureLevel{Name: meta.FeatureTransaction, Level: 2})
		}, finalized: []finalized{{Name: "group.version", MinVersionLevel: 1, MaxVersionLevel: 1},
			{Name: "strand.metadata.version", MinVersionLevel: 2, MaxVersionLevel: 2},
			{Name: "transaction.version", MinVersionLevel: 2, MaxVersionLevel: 2}}},
		{name: "level 0 left out", setup: func() {
			finalize(t, a, meta.FeatureLevel{Name: meta.FeatureGroup, Level: 0})
		}, finalized: []finalized{{Name: "strand.metadata.version", MinVersionLevel: 2, MaxVersionLevel: 2},
			{Name: "transaction.version", MinVersionLevel: 2, MaxVersionLevel: 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup()
			for _, version := range []int16{3, 4} {
				resp := apiVersionsFeatures(t, a.addr, version)
				want := all
				if version < 4 {
					want = v3
				}
				if !reflect.DeepEqual(resp.SupportedFeatures, want) {
					t.Errorf("v%d supported %+v, want %+v", version, resp.SupportedFeatures, want)
				}
				if !reflect.DeepEqual(resp.FinalizedFeatures, tc.finalized) {
					t.Errorf("v%d finalized %+v, want %+v", version, resp.FinalizedFeatures, tc.finalized)
				}
				if tc.epoch != 0 && resp.FinalizedFeaturesEpoch != tc.epoch || tc.epoch == 0 && resp.FinalizedFeaturesEpoch <= 1 {
					t.Errorf("v%d epoch %d, want %d (0: above 1)", version, resp.FinalizedFeaturesEpoch, tc.epoch)
				}
			}
		})
	}
}

// fakeProber answers ApiVersions' features for agents by port.
type fakeProber map[int32]proberAnswer

type proberAnswer struct {
	ranges []meta.FeatureRange
	err    error
}

func (p fakeProber) SupportedFeatures(_ context.Context, _ string, port int32) ([]meta.FeatureRange, error) {
	a, ok := p[port]
	if !ok {
		return nil, errors.New("connection refused")
	}
	return a.ranges, a.err
}

// olderBuild is what a build before feature levels answers in
// ApiVersions: transaction.version only.
var olderBuild = []meta.FeatureRange{{Name: meta.FeatureTransaction, Min: 0, Max: 2}}

func update(name string, level int16, upgradeType int8) kmsg.UpdateFeaturesRequestFeatureUpdate {
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = name, level, upgradeType
	return u
}

// TestUpdateFeatures: each case runs at every version Strand serves, on a
// fresh agent, against kmsg's encoding and decoding: the answer's code
// and message, and the levels ApiVersions reports after it.
func TestUpdateFeatures(t *testing.T) {
	const (
		upgrade = upgradeTypeUpgrade
		safe    = upgradeTypeSafeDowngrade
		unsafe  = upgradeTypeUnsafeDowngrade
	)
	atLevel2 := func(t *testing.T, a *testAgent) {
		finalize(t, a, meta.FeatureLevel{Name: meta.FeatureMetadata, Level: 2}, meta.FeatureLevel{Name: meta.FeatureTransaction, Level: 2})
	}
	prefix := updateFailedPrefix
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, a *testAgent)
		prober  FeatureProber
		updates []kmsg.UpdateFeaturesRequestFeatureUpdate
		// v0 sends AllowDowngrade for types other than upgrade; a
		// case that only v1+ can express skips v0.
		v1Only       bool
		validateOnly bool
		code         int16
		msg          string
		// levels are what ApiVersions v4 finalizes afterwards, as
		// name=level.
		levels string
	}{
		{name: "raise strand.metadata.version alone",
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("strand.metadata.version", 2, upgrade)},
			levels:  "group.version=1 strand.metadata.version=2 transaction.version=2"},
		{name: "raise with transaction.version",
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("transaction.version", 1, safe), update("strand.metadata.version", 2, upgrade)},
			levels:  "group.version=1 strand.metadata.version=2 transaction.version=1"},
		{name: "transaction.version needs level 2",
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("transaction.version", 1, safe)},
			code:    kerr.InvalidUpdateVersion.Code,
			msg:     prefix + "Invalid update version 1 for feature transaction.version. transaction.version could not be set to 1 because it depends on strand.metadata.version level 2",
			levels:  "group.version=1 strand.metadata.version=1 transaction.version=2"},
		{name: "unknown feature",
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("share.version", 1, upgrade)},
			code:    kerr.InvalidUpdateVersion.Code,
			msg:     prefix + "Invalid update version 1 for feature share.version. Local agent 7 does not support this feature.",
			levels:  "group.version=1 strand.metadata.version=1 transaction.version=2"},
		{name: "above this build",
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("strand.metadata.version", meta.MaxMetadataLevel+1, upgrade)},
			code:    kerr.InvalidUpdateVersion.Code,
			msg: fmt.Sprintf("%sInvalid update version %d for feature strand.metadata.version. Local agent 7 only supports versions 1-%d",
				prefix, meta.MaxMetadataLevel+1, meta.MaxMetadataLevel),
			levels: "group.version=1 strand.metadata.version=1 transaction.version=2"},
		{name: "negative", v1Only: true,
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("group.version", -1, safe)},
			code:    kerr.InvalidUpdateVersion.Code,
			msg:     prefix + "Invalid update version -1 for feature group.version. A feature version cannot be less than 0.",
			levels:  "group.version=1 strand.metadata.version=1 transaction.version=2"},
		{name: "unknown upgrade type", v1Only: true,
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("strand.metadata.version", 2, 0)},
			code:    kerr.InvalidUpdateVersion.Code,
			msg:     prefix + "Invalid update version 2 for feature strand.metadata.version. The controller does not support the given upgrade type.",
			levels:  "group.version=1 strand.metadata.version=1 transaction.version=2"},
		{name: "downgrade typed as upgrade", setup: atLevel2,
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("transaction.version", 1, upgrade)},
			code:    kerr.InvalidUpdateVersion.Code,
			msg:     prefix + "Invalid update version 1 for feature transaction.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.",
			levels:  "group.version=1 strand.metadata.version=2 transaction.version=2"},
		{name: "upgrade typed as downgrade", v1Only: true,
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("strand.metadata.version", 2, safe)},
			code:    kerr.InvalidUpdateVersion.Code,
			msg:     prefix + "Invalid update version 2 for feature strand.metadata.version. Can't downgrade to a newer version.",
			levels:  "group.version=1 strand.metadata.version=1 transaction.version=2"},
		{name: "safe downgrade of transaction.version and group.version", setup: atLevel2,
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("transaction.version", 1, safe), update("group.version", 0, safe)},
			levels:  "strand.metadata.version=2 transaction.version=1"},
		{name: "strand.metadata.version never goes down", setup: atLevel2,
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("strand.metadata.version", 1, safe)},
			code:    kerr.InvalidUpdateVersion.Code,
			msg:     prefix + "Invalid strand.metadata.version 1. Refusing to perform the requested downgrade: the log may hold commands that builds supporting only 1 cannot read.",
			levels:  "group.version=1 strand.metadata.version=2 transaction.version=2"},
		{name: "nor unsafely", setup: atLevel2, v1Only: true,
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("strand.metadata.version", 1, unsafe)},
			code:    kerr.InvalidUpdateVersion.Code,
			msg:     prefix + "Invalid strand.metadata.version 1. Unsafe metadata downgrade is not supported in this version.",
			levels:  "group.version=1 strand.metadata.version=2 transaction.version=2"},
		{name: "validate only", v1Only: true, validateOnly: true,
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("strand.metadata.version", 2, upgrade)},
			levels:  "group.version=1 strand.metadata.version=1 transaction.version=2"},
		{name: "a build before levels is live",
			setup:   func(t *testing.T, a *testAgent) { heartbeat(t, a, 2, nil) },
			prober:  fakeProber{1002: {ranges: olderBuild}},
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("strand.metadata.version", 2, upgrade)},
			code:    kerr.InvalidUpdateVersion.Code,
			msg:     prefix + "Invalid update version 2 for feature strand.metadata.version. Agent 2 only supports versions 1",
			levels:  "group.version=1 strand.metadata.version=1 transaction.version=2"},
		{name: "a newer build registered at level 1 is asked",
			setup:   func(t *testing.T, a *testAgent) { heartbeat(t, a, 2, meta.SupportedFeatures()) },
			prober:  fakeProber{1002: {ranges: meta.SupportedFeatures()}},
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("strand.metadata.version", 2, upgrade)},
			levels:  "group.version=1 strand.metadata.version=2 transaction.version=2"},
		{name: "an agent that does not answer",
			setup:   func(t *testing.T, a *testAgent) { heartbeat(t, a, 2, nil) },
			prober:  fakeProber{},
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("strand.metadata.version", 2, upgrade)},
			code:    kerr.InvalidUpdateVersion.Code,
			msg: prefix + "Invalid update version 2 for feature strand.metadata.version. Agent 2 registered without its supported features and did not answer ApiVersions " +
				"at 127.0.0.1:1002 (connection refused), so it may not support this feature.",
			levels: "group.version=1 strand.metadata.version=1 transaction.version=2"},
		{name: "an agent's registered ranges",
			setup: func(t *testing.T, a *testAgent) {
				atLevel2(t, a)
				heartbeat(t, a, 2, []meta.FeatureRange{{Name: meta.FeatureMetadata, Min: 1, Max: 2}, {Name: meta.FeatureTransaction, Min: 0, Max: 2}})
			},
			updates: []kmsg.UpdateFeaturesRequestFeatureUpdate{update("group.version", 1, upgrade)},
			code:    kerr.InvalidUpdateVersion.Code,
			msg:     prefix + "Invalid update version 1 for feature group.version. Agent 2 does not support this feature.",
			levels:  "group.version=1 strand.metadata.version=2 transaction.version=2"},
	} {
		for version := int16(0); version <= 2; version++ {
			if version == 0 && (tc.v1Only || tc.validateOnly) {
				continue
			}
			t.Run(fmt.Sprintf("%s/v%d", tc.name, version), func(t *testing.T) {
				a := newTestAgent(t, withDeps(func(d *Deps) { d.Features = tc.prober }))
				if tc.setup != nil {
					tc.setup(t, a)
				}
				req := kmsg.NewPtrUpdateFeaturesRequest()
				req.Version, req.ValidateOnly = version, tc.validateOnly
				req.FeatureUpdates = tc.updates
				if version == 0 {
					for i := range req.FeatureUpdates {
						req.FeatureUpdates[i].AllowDowngrade = req.FeatureUpdates[i].UpgradeType != upgrade
					}
				}
				resp := versionedRoundTrip[*kmsg.UpdateFeaturesResponse](t, a.addr, req)
				msg := ""
				if resp.ErrorMessage != nil {
					msg = *resp.ErrorMessage
				}
				if resp.ErrorCode != tc.code || msg != tc.msg {
					t.Errorf("answer %d %q, want %d %q", resp.ErrorCode, msg, tc.code, tc.msg)
				}
				var want []kmsg.UpdateFeaturesResponseResult
				if version <= 1 && tc.code == 0 {
					for _, u := range tc.updates {
						rr := kmsg.NewUpdateFeaturesResponseResult()
						rr.Feature, rr.ErrorMessage = u.Feature, strPtr("NONE")
						want = append(want, rr)
					}
				}
				if !reflect.DeepEqual(resp.Results, want) {
					t.Errorf("results %+v, want %+v", resp.Results, want)
				}
				var got []string
				for _, f := range apiVersionsFeatures(t, a.addr, 4).FinalizedFeatures {
					got = append(got, fmt.Sprintf("%s=%d", f.Name, f.MaxVersionLevel))
				}
				if s := strings.Join(got, " "); s != tc.levels {
					t.Errorf("finalized after: %s, want %s", s, tc.levels)
				}
			})
		}
	}
}

// TestFeaturesKadm: kadm's UpdateFeatures (which sends v2 to us) and
// ApiVersions, through which franz-go and Kafka's tools describe
// features; and group.version 0 turns the consumer protocol off.
func TestFeaturesKadm(t *testing.T) {
	a := newTestAgent(t, withGroups(t, nil, nil))
	ctx := ctxT(t)
	res, err := a.Admin.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: meta.FeatureMetadata, MaxVersionLevel: 2, UpgradeType: upgradeTypeUpgrade})
	if err != nil || res.Error() != nil {
		t.Fatalf("kadm UpdateFeatures: %v, %v", err, res.Error())
	}
	res, err = a.Admin.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: meta.FeatureMetadata, MaxVersionLevel: meta.MaxMetadataLevel + 1, UpgradeType: upgradeTypeUpgrade})
	if err != nil || !errors.Is(res.Error(), kerr.InvalidUpdateVersion) {
		t.Fatalf("kadm UpdateFeatures above this build: %v, %v; want INVALID_UPDATE_VERSION", err, res.Error())
	}
	res, err = a.Admin.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: meta.FeatureGroup, MaxVersionLevel: 0, UpgradeType: upgradeTypeSafeDowngrade})
	if err != nil || res.Error() != nil {
		t.Fatalf("kadm UpdateFeatures group.version 0: %v, %v", err, res.Error())
	}
	vs, err := a.Admin.ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		raw := v.Raw()
		if v.Err != nil || raw == nil {
			t.Fatalf("kadm ApiVersions: %v", v.Err)
		}
		got := map[string]int16{}
		for _, f := range raw.FinalizedFeatures {
			got[f.Name] = f.MaxVersionLevel
		}
		if want := map[string]int16{meta.FeatureMetadata: 2, meta.FeatureTransaction: 2}; !reflect.DeepEqual(got, want) {
			t.Errorf("kadm ApiVersions finalized %v, want %v", got, want)
		}
	}

	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberEpoch, hb.SubscribedTopicNames, hb.RebalanceTimeoutMillis = "g", 0, []string{"t"}, 60000
	hb.MemberID = "m1"
	hbResp, err := hb.RequestWith(ctx, a.Client)
	if err != nil || hbResp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("ConsumerGroupHeartbeat under group.version 0: %v, code %d; want UNSUPPORTED_VERSION", err, hbResp.ErrorCode)
	}
	desc := kmsg.NewPtrConsumerGroupDescribeRequest()
	desc.Groups = []string{"g"}
	descResp, err := desc.RequestWith(ctx, a.Client)
	if err != nil || len(descResp.Groups) != 1 || descResp.Groups[0].ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("ConsumerGroupDescribe under group.version 0: %v, %+v; want UNSUPPORTED_VERSION", err, descResp)
	}
}
