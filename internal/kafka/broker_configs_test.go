package kafka

import (
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// brokerConfigsOf reads the dynamic configs of a BROKER resource from
// the agent's copy.
func brokerConfigsOf(t *testing.T, a *testAgent, resource string) map[string]string {
	t.Helper()
	v := a.Replica.View()
	defer v.Close()
	m, err := v.BrokerConfigs(resource)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestIncrementalAlterBrokerConfigs: the dynamic broker configs Strand
// applies (log.retention.ms, log.retention.bytes) can be set and deleted
// cluster-wide and per agent, at every version; others are refused as
// Kafka refuses them.
func TestIncrementalAlterBrokerConfigs(t *testing.T) {
	a := newTestAgent(t)
	raiseToLevel3(t, a)
	self := strconv.Itoa(testNodeID)
	op := func(o kmsg.IncrementalAlterConfigOp, name string, v *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Op, c.Name, c.Value = o, name, v
		return c
	}
	set := func(name, v string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		return op(kmsg.IncrementalAlterConfigOpSet, name, &v)
	}
	tests := []struct {
		name     string
		resource string
		ops      []kmsg.IncrementalAlterConfigsRequestResourceConfig
		validate bool
		wantErr  *kerr.Error
		wantMsg  string
		want     map[string]string // the resource's configs afterwards
	}{
		{name: "cluster set", ops: []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("log.retention.ms", "60000"), set("log.retention.bytes", "1000")},
			want: map[string]string{"log.retention.ms": "60000", "log.retention.bytes": "1000"}},
		{name: "cluster delete", ops: []kmsg.IncrementalAlterConfigsRequestResourceConfig{op(kmsg.IncrementalAlterConfigOpDelete, "log.retention.bytes", nil)},
			want: map[string]string{"log.retention.ms": "60000"}},
		{name: "per agent", resource: self, ops: []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("log.retention.bytes", "-1")},
			want: map[string]string{"log.retention.bytes": "-1"}},
		{name: "validate only", validate: true, ops: []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("log.retention.ms", "1")},
			want: map[string]string{"log.retention.ms": "60000"}},
		{name: "read-only", ops: []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("log.retention.ms", "1"), set("num.partitions", "3")},
			wantErr: kerr.InvalidRequest, wantMsg: "Cannot update these configs dynamically: Set(num.partitions)",
			want: map[string]string{"log.retention.ms": "60000"}},
		{name: "unknown", ops: []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("log.retention.weeks", "1")},
			wantErr: kerr.InvalidConfig, want: map[string]string{"log.retention.ms": "60000"}},
		{name: "bad value", ops: []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("log.retention.ms", "soon")},
			wantErr: kerr.InvalidConfig, want: map[string]string{"log.retention.ms": "60000"}},
		{name: "null value", ops: []kmsg.IncrementalAlterConfigsRequestResourceConfig{op(kmsg.IncrementalAlterConfigOpSet, "log.retention.ms", nil)},
			wantErr: kerr.InvalidConfig, want: map[string]string{"log.retention.ms": "60000"}},
		{name: "append to a non-list", ops: []kmsg.IncrementalAlterConfigsRequestResourceConfig{op(kmsg.IncrementalAlterConfigOpAppend, "log.retention.ms", kmsg.StringPtr("1"))},
			wantErr: kerr.InvalidConfig, want: map[string]string{"log.retention.ms": "60000"}},
		{name: "named twice", ops: []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("log.retention.ms", "1"), set("log.retention.ms", "2")},
			wantErr: kerr.InvalidRequest, want: map[string]string{"log.retention.ms": "60000"}},
		{name: "unknown broker", resource: "99", ops: []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("log.retention.ms", "1")},
			wantErr: kerr.InvalidRequest},
		{name: "not a broker id", resource: "x", ops: []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("log.retention.ms", "1")},
			wantErr: kerr.InvalidRequest},
	}
	for v := int16(0); v <= 1; v++ {
		for _, tt := range tests {
			t.Run(strconv.Itoa(int(v))+"/"+tt.name, func(t *testing.T) {
				req := kmsg.NewPtrIncrementalAlterConfigsRequest()
				req.Version, req.ValidateOnly = v, tt.validate
				rr := kmsg.NewIncrementalAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeBroker, tt.resource, tt.ops
				req.Resources = append(req.Resources, rr)
				resp := a.request(t, req).(*kmsg.IncrementalAlterConfigsResponse)
				if len(resp.Resources) != 1 {
					t.Fatalf("answers %+v", resp.Resources)
				}
				got := resp.Resources[0]
				var msg string
				if got.ErrorMessage != nil {
					msg = *got.ErrorMessage
				}
				if tt.wantErr != nil && got.ErrorCode != tt.wantErr.Code || tt.wantErr == nil && got.ErrorCode != 0 {
					t.Fatalf("code %d (%s), want %v", got.ErrorCode, msg, tt.wantErr)
				}
				if tt.wantMsg != "" && msg != tt.wantMsg {
					t.Errorf("message %q, want %q", msg, tt.wantMsg)
				}
				if tt.want == nil {
					return
				}
				if m := brokerConfigsOf(t, a, tt.resource); !maps.Equal(m, tt.want) {
					t.Fatalf("configs %v, want %v", m, tt.want)
				}
			})
		}
		// The next version starts from nothing again.
		for _, res := range []string{"", self} {
			if _, err := a.Replica.Propose(a.ctx(t), meta.AlterBrokerConfigs{Resource: res, Replace: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestAlterBrokerConfigsReplaces: AlterConfigs (v0-2) on a BROKER
// resource makes its dynamic configs exactly the ones given.
func TestAlterBrokerConfigsReplaces(t *testing.T) {
	a := newTestAgent(t)
	raiseToLevel3(t, a)
	for v := int16(0); v <= 2; v++ {
		alter := func(configs map[string]string, validate bool) (int16, *string) {
			req := kmsg.NewPtrAlterConfigsRequest()
			req.Version, req.ValidateOnly = v, validate
			rr := kmsg.NewAlterConfigsRequestResource()
			rr.ResourceType = kmsg.ConfigResourceTypeBroker
			for k, val := range configs {
				c := kmsg.NewAlterConfigsRequestResourceConfig()
				c.Name, c.Value = k, kmsg.StringPtr(val)
				rr.Configs = append(rr.Configs, c)
			}
			req.Resources = append(req.Resources, rr)
			resp := a.request(t, req).(*kmsg.AlterConfigsResponse)
			return resp.Resources[0].ErrorCode, resp.Resources[0].ErrorMessage
		}
		if code, msg := alter(map[string]string{"log.retention.ms": "1000", "log.retention.bytes": "5"}, false); code != 0 {
			t.Fatalf("v%d: set: %d %v", v, code, msg)
		}
		if code, msg := alter(map[string]string{"log.retention.bytes": "6"}, false); code != 0 {
			t.Fatalf("v%d: replace: %d %v", v, code, msg)
		}
		if m := brokerConfigsOf(t, a, ""); !maps.Equal(m, map[string]string{"log.retention.bytes": "6"}) {
			t.Fatalf("v%d: configs %v after replacing", v, m)
		}
		if code, _ := alter(map[string]string{"log.retention.bytes": "7"}, true); code != 0 {
			t.Fatalf("v%d: validate: %d", v, code)
		}
		if code, msg := alter(map[string]string{"broker.id": "7"}, false); code != kerr.InvalidRequest.Code || msg == nil || !strings.Contains(*msg, "Set(broker.id)") {
			t.Fatalf("v%d: read-only: %d %v", v, code, msg)
		}
		if m := brokerConfigsOf(t, a, ""); !maps.Equal(m, map[string]string{"log.retention.bytes": "6"}) {
			t.Fatalf("v%d: configs %v after validating and refusing", v, m)
		}
		if code, _ := alter(nil, false); code != 0 || len(brokerConfigsOf(t, a, "")) != 0 {
			t.Fatalf("v%d: clearing: %d", v, code)
		}
	}
}

// TestBrokerConfigsKadm: kadm's AlterBrokerConfigs (per broker and, with
// no broker, cluster-wide) and DescribeBrokerConfigs round trip, and
// DescribeConfigs reports each value with its source and Kafka's synonym
// order: topic, dynamic per-broker, dynamic default, static, default.
func TestBrokerConfigsKadm(t *testing.T) {
	a := newTestAgent(t, withDeps(func(d *Deps) {
		d.BrokerDefaults = map[string]string{"retention.ms": "7200000"}
	}))
	raiseToLevel3(t, a)
	a.createTopic(t, "plain", 1, nil)
	set := func(name, v string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: &v}
	}

	rs, err := a.Admin.AlterBrokerConfigs(a.ctx(t), []kadm.AlterConfig{set("log.retention.ms", "3600000"), set("log.retention.bytes", "1000")})
	if err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("cluster-wide: %v %+v", err, rs)
	}
	rs, err = a.Admin.AlterBrokerConfigs(a.ctx(t), []kadm.AlterConfig{set("log.retention.ms", "60000")}, testNodeID)
	if err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("per broker: %v %+v", err, rs)
	}
	rs, err = a.Admin.AlterBrokerConfigs(a.ctx(t), []kadm.AlterConfig{set("num.partitions", "3")}, testNodeID)
	if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidRequest) {
		t.Fatalf("read-only: %v %+v", err, rs)
	}

	type syn struct {
		key, value string
		src        kmsg.ConfigSource
	}
	check := func(t *testing.T, c kadm.Config, value string, src kmsg.ConfigSource, want []syn) {
		t.Helper()
		if c.MaybeValue() != value || c.Source != src {
			t.Errorf("%s = %q from %v, want %q from %v", c.Key, c.MaybeValue(), c.Source, value, src)
		}
		var got []syn
		for _, s := range c.Synonyms {
			got = append(got, syn{s.Key, *s.Value, s.Source})
		}
		if len(got) != len(want) {
			t.Fatalf("%s synonyms %+v, want %+v", c.Key, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s synonym %d %+v, want %+v", c.Key, i, got[i], want[i])
			}
		}
	}
	msChain := []syn{
		{"log.retention.ms", "60000", kmsg.ConfigSourceDynamicBrokerConfig},
		{"log.retention.ms", "3600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		{"log.retention.ms", "7200000", kmsg.ConfigSourceStaticBrokerConfig},
		{"log.retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig},
	}
	bytesChain := []syn{
		{"log.retention.bytes", "1000", kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		{"log.retention.bytes", "-1", kmsg.ConfigSourceDefaultConfig},
	}

	brokers, err := a.Admin.DescribeBrokerConfigs(a.ctx(t), testNodeID)
	if err != nil || len(brokers) != 1 || brokers[0].Err != nil {
		t.Fatalf("describe broker: %v %+v", err, brokers)
	}
	check(t, configOf(t, brokers[0], "log.retention.ms"), "60000", kmsg.ConfigSourceDynamicBrokerConfig, msChain)
	check(t, configOf(t, brokers[0], "log.retention.bytes"), "1000", kmsg.ConfigSourceDynamicDefaultBrokerConfig, bytesChain)
	// Only the dynamic configs are not read-only.
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, strconv.Itoa(testNodeID)
	req.Resources = append(req.Resources, rr)
	for _, c := range a.request(t, req).(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
		dynamic := map[string]bool{"log.retention.ms": true, "log.retention.bytes": true, "message.max.bytes": true,
			"max.connections": true, "max.connections.per.ip": true, "log.cleaner.backoff.ms": true,
			"log.cleaner.dedupe.buffer.size": true, "max.connections.per.ip.overrides": true, meta.GCGraceConfig: true,
			meta.DeleteDelayConfig: true}[c.Name]
		if c.ReadOnly == dynamic {
			t.Errorf("%s read-only %v", c.Name, c.ReadOnly)
		}
	}

	// The cluster-wide resource lists what is set at it.
	cluster, err := a.Admin.DescribeBrokerConfigs(a.ctx(t))
	if err != nil || len(cluster) != 1 || cluster[0].Err != nil {
		t.Fatalf("describe cluster: %v %+v", err, cluster)
	}
	if len(cluster[0].Configs) != 2 {
		t.Fatalf("cluster-wide configs %+v", cluster[0].Configs)
	}
	check(t, configOf(t, cluster[0], "log.retention.ms"), "3600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig,
		[]syn{{"log.retention.ms", "3600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig}})

	topics, err := a.Admin.DescribeTopicConfigs(a.ctx(t), "plain")
	if err != nil || len(topics) != 1 {
		t.Fatalf("describe topic: %v %+v", err, topics)
	}
	check(t, configOf(t, topics[0], "retention.ms"), "60000", kmsg.ConfigSourceDynamicBrokerConfig, msChain)
	check(t, configOf(t, topics[0], "retention.bytes"), "1000", kmsg.ConfigSourceDynamicDefaultBrokerConfig, bytesChain)
}

// TestDeleteDelayConfig: strand.gc.delete.delay.ms is taken on the
// cluster-wide resource at or above its floor, refused on one broker
// (the janitor reads only the cluster's) and below the floor.
func TestDeleteDelayConfig(t *testing.T) {
	a := newTestAgent(t)
	raiseMetadataLevel(t, a, meta.MetadataLevel5)
	set := func(v string) []kadm.AlterConfig {
		return []kadm.AlterConfig{{Op: kadm.SetConfig, Name: meta.DeleteDelayConfig, Value: &v}}
	}
	rs, err := a.Admin.AlterBrokerConfigs(a.ctx(t), set("90000"))
	if err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("cluster-wide: %v %+v", err, rs)
	}
	rs, err = a.Admin.AlterBrokerConfigs(a.ctx(t), set("90000"), testNodeID)
	if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidConfig) {
		t.Fatalf("per broker: %v %+v, want INVALID_CONFIG", err, rs)
	}
	rs, err = a.Admin.AlterBrokerConfigs(a.ctx(t), set(strconv.FormatInt(meta.MinDeleteDelayMs-1, 10)))
	if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidConfig) {
		t.Fatalf("below the floor: %v %+v, want INVALID_CONFIG", err, rs)
	}
	v := a.Replica.View()
	defer v.Close()
	cluster, err := v.BrokerConfigs("")
	if err != nil || cluster[meta.DeleteDelayConfig] != "90000" {
		t.Fatalf("cluster-wide configs %v (%v), want the delay at 90000", cluster, err)
	}
	if got := meta.DeleteDelayMs(cluster, meta.DefaultGCGrace, meta.MetadataLevel5); got != 90000 {
		t.Errorf("delete delay %d, want 90000", got)
	}
}
