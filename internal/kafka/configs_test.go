package kafka

import (
	"errors"
	"maps"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/topicconfig"
)

// configOf finds key in a kadm answer.
func configOf(t *testing.T, rc kadm.ResourceConfig, key string) kadm.Config {
	t.Helper()
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("%s has no config %s", rc.Name, key)
	return kadm.Config{}
}

func TestDescribeTopicConfigs(t *testing.T) {
	a := newTestAgent(t)
	a.createTopic(t, "described", 1, map[string]*string{"retention.ms": sp("1000")})

	rcs, err := a.Admin.DescribeTopicConfigs(a.ctx(t), "described", "unknown", "bad name")
	if err != nil {
		t.Fatal(err)
	}
	byName := make(map[string]kadm.ResourceConfig)
	for _, rc := range rcs {
		byName[rc.Name] = rc
	}
	if err := byName["unknown"].Err; !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: %v", err)
	}
	if err := byName["bad name"].Err; !errors.Is(err, kerr.InvalidTopicException) {
		t.Errorf("invalid name: %v", err)
	}
	rc := byName["described"]
	if rc.Err != nil {
		t.Fatal(rc.Err)
	}
	if got, want := len(rc.Configs), len(topicconfig.Keys()); got != want {
		t.Errorf("%d configs, want every one of the %d known", got, want)
	}

	set := configOf(t, rc, "retention.ms")
	if set.MaybeValue() != "1000" || set.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("retention.ms: %q from %v", set.MaybeValue(), set.Source)
	}
	// kadm asks for synonyms: the topic's value, then the default.
	if len(set.Synonyms) != 2 ||
		set.Synonyms[0].Key != "retention.ms" || *set.Synonyms[0].Value != "1000" || set.Synonyms[0].Source != kmsg.ConfigSourceDynamicTopicConfig ||
		set.Synonyms[1].Key != "log.retention.ms" || *set.Synonyms[1].Value != "604800000" || set.Synonyms[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("retention.ms synonyms %+v", set.Synonyms)
	}
	def := configOf(t, rc, "max.message.bytes")
	if def.MaybeValue() != "1048588" || def.Source != kmsg.ConfigSourceDefaultConfig || def.Sensitive {
		t.Errorf("max.message.bytes: %+v", def)
	}
	if len(def.Synonyms) != 1 || def.Synonyms[0].Key != "message.max.bytes" {
		t.Errorf("max.message.bytes synonyms %+v", def.Synonyms)
	}
	if c := configOf(t, rc, "cleanup.policy"); c.MaybeValue() != "delete" {
		t.Errorf("cleanup.policy %q", c.MaybeValue())
	}
}

// Per-version fields kadm does not show.
func TestDescribeConfigsVersions(t *testing.T) {
	a := newTestAgent(t)
	a.createTopic(t, "versions", 1, map[string]*string{"cleanup.policy": sp("compact")})
	for _, v := range []int16{0, 1, 3, 4} {
		t.Run("v"+strconv.Itoa(int(v)), func(t *testing.T) {
			req := kmsg.NewPtrDescribeConfigsRequest()
			req.Version = v
			req.IncludeSynonyms = true
			req.IncludeDocumentation = true
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "versions"
			rr.ConfigNames = []string{"cleanup.policy", "retention.ms", "not.a.config"}
			req.Resources = append(req.Resources, rr)
			resp := a.rawRequest(t, req).(*kmsg.DescribeConfigsResponse)
			if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
				t.Fatalf("answer %+v", resp.Resources)
			}
			cs := resp.Resources[0].Configs
			if len(cs) != 2 || cs[0].Name != "cleanup.policy" || cs[1].Name != "retention.ms" {
				t.Fatalf("configs %+v, want cleanup.policy and retention.ms", cs)
			}
			set, def := cs[0], cs[1]
			if *set.Value != "compact" || set.ReadOnly || set.IsSensitive {
				t.Errorf("cleanup.policy %+v", set)
			}
			if v == 0 {
				// v0 has IsDefault, not Source.
				if set.IsDefault || !def.IsDefault {
					t.Errorf("IsDefault: set %v, default %v", set.IsDefault, def.IsDefault)
				}
				return
			}
			if set.Source != kmsg.ConfigSourceDynamicTopicConfig || def.Source != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("sources %v %v", set.Source, def.Source)
			}
			if len(set.ConfigSynonyms) != 2 || set.ConfigSynonyms[1].Name != "log.cleanup.policy" {
				t.Errorf("synonyms %+v", set.ConfigSynonyms)
			}
			if v >= 3 {
				if set.ConfigType != kmsg.ConfigTypeList || def.ConfigType != kmsg.ConfigTypeLong {
					t.Errorf("types %v %v", set.ConfigType, def.ConfigType)
				}
				if set.Documentation == nil || *set.Documentation == "" {
					t.Error("no documentation")
				}
			}
		})
	}
}

func TestDescribeBrokerConfigs(t *testing.T) {
	a := newTestAgent(t, withAutoCreate(3))
	rcs, err := a.Admin.DescribeBrokerConfigs(a.ctx(t), testNodeID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rcs) != 1 || rcs[0].Err != nil {
		t.Fatalf("answer %+v", rcs)
	}
	want := map[string]string{
		"broker.id":                 strconv.Itoa(testNodeID),
		"auto.create.topics.enable": "true",
		"num.partitions":            "3",
		"advertised.listeners":      "PLAINTEXT://" + a.addr,
		"log.retention.ms":          "604800000",
		"message.max.bytes":         "1048588",
		"socket.request.max.bytes":  strconv.Itoa(DefaultMaxRequestBytes),
	}
	for k, v := range want {
		if c := configOf(t, rcs[0], k); c.MaybeValue() != v {
			t.Errorf("%s = %q, want %q", k, c.MaybeValue(), v)
		}
	}
	if c := configOf(t, rcs[0], "broker.rack"); c.Value != nil {
		t.Errorf("broker.rack %q, want null", *c.Value)
	}

	// Another broker's id, and the cluster-wide defaults.
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, name := range []string{"99", "", "x"} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, name
		req.Resources = append(req.Resources, rr)
	}
	resp := a.request(t, req).(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 3 ||
		resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code ||
		resp.Resources[1].ErrorCode != 0 || len(resp.Resources[1].Configs) != 0 ||
		resp.Resources[2].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("answers %+v", resp.Resources)
	}
	// Broker configs are read-only but the dynamic ones.
	req = kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, strconv.Itoa(testNodeID)
	req.Resources = append(req.Resources, rr)
	resp = a.request(t, req).(*kmsg.DescribeConfigsResponse)
	for _, c := range resp.Resources[0].Configs {
		if !c.ReadOnly && !isDynamic(c.Name) {
			t.Errorf("%s is not read-only", c.Name)
		}
	}
}

func TestIncrementalAlterConfigs(t *testing.T) {
	a := newTestAgent(t)
	a.createTopic(t, "inc", 1, map[string]*string{"retention.ms": sp("1000")})
	set := func(name, v string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: &v}
	}
	del := func(name string) kadm.AlterConfig { return kadm.AlterConfig{Op: kadm.DeleteConfig, Name: name} }
	app := func(name, v string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: kadm.AppendConfig, Name: name, Value: &v}
	}
	sub := func(name, v string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: kadm.SubtractConfig, Name: name, Value: &v}
	}

	tests := []struct {
		name     string
		ops      []kadm.AlterConfig
		topic    string
		validate bool
		wantErr  error
		want     map[string]string // the topic's stored configs afterwards
	}{
		{name: "set", ops: []kadm.AlterConfig{set("retention.bytes", "100"), set("retention.ms", "2000")},
			want: map[string]string{"retention.ms": "2000", "retention.bytes": "100"}},
		{name: "delete", ops: []kadm.AlterConfig{del("retention.bytes")},
			want: map[string]string{"retention.ms": "2000"}},
		{name: "append to the default", ops: []kadm.AlterConfig{app("cleanup.policy", "compact")},
			want: map[string]string{"retention.ms": "2000", "cleanup.policy": "delete,compact"}},
		{name: "append again is a no-op", ops: []kadm.AlterConfig{app("cleanup.policy", "compact")},
			want: map[string]string{"retention.ms": "2000", "cleanup.policy": "delete,compact"}},
		{name: "subtract", ops: []kadm.AlterConfig{sub("cleanup.policy", "delete")},
			want: map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}},
		{name: "subtract to empty", ops: []kadm.AlterConfig{sub("cleanup.policy", "compact")}, wantErr: kerr.InvalidConfig,
			want: map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}},
		{name: "append to a non-list", ops: []kadm.AlterConfig{app("retention.ms", "5")}, wantErr: kerr.InvalidConfig,
			want: map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}},
		{name: "bad value", ops: []kadm.AlterConfig{set("retention.bytes", "1"), set("message.timestamp.type", "Now")}, wantErr: kerr.InvalidConfig,
			want: map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}},
		{name: "unknown name", ops: []kadm.AlterConfig{set("retention.weeks", "1")}, wantErr: kerr.InvalidConfig,
			want: map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}},
		{name: "delete unknown name", ops: []kadm.AlterConfig{del("retention.weeks")}, wantErr: kerr.InvalidConfig,
			want: map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}},
		{name: "named twice", ops: []kadm.AlterConfig{set("retention.ms", "1"), del("retention.ms")}, wantErr: kerr.InvalidRequest,
			want: map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}},
		{name: "validate only", validate: true, ops: []kadm.AlterConfig{del("retention.ms")},
			want: map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}},
		{name: "unknown topic", topic: "nope", ops: []kadm.AlterConfig{set("retention.ms", "1")}, wantErr: kerr.UnknownTopicOrPartition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := tt.topic
			if topic == "" {
				topic = "inc"
			}
			alter := a.Admin.AlterTopicConfigs
			if tt.validate {
				alter = a.Admin.ValidateAlterTopicConfigs
			}
			rs, err := alter(a.ctx(t), tt.ops, topic)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 || !errors.Is(rs[0].Err, tt.wantErr) || (tt.wantErr == nil) != (rs[0].Err == nil) {
				t.Fatalf("answer %+v, want %v", rs, tt.wantErr)
			}
			if tt.want == nil {
				return
			}
			tp, _ := a.topic(t, "inc")
			if !maps.Equal(tp.Configs, tt.want) {
				t.Fatalf("configs %v, want %v", tp.Configs, tt.want)
			}
		})
	}
	// The typed view the data path reads.
	tp, _ := a.topic(t, "inc")
	if c := topicconfig.Effective(tp.Configs); c.RetentionMs != 2000 || c.CleanupPolicy != (topicconfig.CleanupPolicy{Compact: true}) {
		t.Fatalf("effective %+v", c)
	}
}

func TestAlterConfigs(t *testing.T) {
	a := newTestAgent(t)
	a.createTopic(t, "whole", 1, map[string]*string{"retention.ms": sp("1000"), "cleanup.policy": sp("compact")})
	set := func(name, v string) kadm.AlterConfig { return kadm.AlterConfig{Name: name, Value: &v} }

	rs, err := a.Admin.AlterTopicConfigsState(a.ctx(t), []kadm.AlterConfig{set("retention.bytes", "5")}, "whole")
	if err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, rs)
	}
	// The configs are replaced: the ones not given are gone.
	if tp, _ := a.topic(t, "whole"); !maps.Equal(tp.Configs, map[string]string{"retention.bytes": "5"}) {
		t.Fatalf("configs %v", tp.Configs)
	}
	rs, err = a.Admin.AlterTopicConfigsState(a.ctx(t), []kadm.AlterConfig{set("retention.bytes", "five")}, "whole")
	if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidConfig) {
		t.Fatalf("bad value: %v %+v", err, rs)
	}
	rs, err = a.Admin.ValidateAlterTopicConfigsState(a.ctx(t), nil, "whole")
	if err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("validate: %v %+v", err, rs)
	}
	if tp, _ := a.topic(t, "whole"); len(tp.Configs) != 1 {
		t.Fatalf("validate-only changed configs to %v", tp.Configs)
	}

	// Static broker configs cannot change (broker_configs_test.go has
	// the dynamic ones).
	brs, err := a.Admin.AlterBrokerConfigsState(a.ctx(t), []kadm.AlterConfig{set("num.partitions", "1")}, testNodeID)
	if err != nil || len(brs) != 1 || !errors.Is(brs[0].Err, kerr.InvalidRequest) {
		t.Fatalf("broker alter: %v %+v", err, brs)
	}

	// A resource twice, and a key twice.
	req := kmsg.NewPtrAlterConfigsRequest()
	for _, name := range []string{"whole", "whole"} {
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, name
		req.Resources = append(req.Resources, rr)
	}
	resp := a.request(t, req).(*kmsg.AlterConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("resource twice: %+v", resp.Resources)
	}
	req.Resources = req.Resources[:1]
	for range 2 {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "retention.ms", sp("1")
		req.Resources[0].Configs = append(req.Resources[0].Configs, c)
	}
	resp = a.request(t, req).(*kmsg.AlterConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("key twice: %+v", resp.Resources)
	}
}

func TestDescribeCluster(t *testing.T) {
	peers := []Broker{
		{NodeID: 3, Host: "agent-3.example", Port: 9092, Rack: "r1"},
		{NodeID: testNodeID}, // this agent: address from the connection
	}
	a := newTestAgent(t, withDeps(func(d *Deps) {
		d.Cluster.Host, d.Cluster.Port = "", 0
		d.Cluster.Brokers = func() []Broker { return peers }
	}))
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeClusterAuthorizedOperations = true
	resp := a.request(t, req).(*kmsg.DescribeClusterResponse)
	if resp.ErrorCode != 0 || resp.ClusterID != testClusterID || resp.ControllerID != testNodeID || resp.EndpointType != 1 {
		t.Fatalf("answer %+v", resp)
	}
	if got := kadm.DecodeACLOperations(resp.ClusterAuthorizedOperations); len(got) != 7 {
		t.Errorf("cluster operations %v, want the 7 a cluster supports", got)
	}
	host, port, _ := splitAddr(a.addr)
	if len(resp.Brokers) != 2 ||
		resp.Brokers[0].NodeID != 3 || resp.Brokers[0].Host != "agent-3.example" || resp.Brokers[0].Rack == nil || *resp.Brokers[0].Rack != "r1" ||
		resp.Brokers[1].NodeID != testNodeID || resp.Brokers[1].Host != host || resp.Brokers[1].Port != port || resp.Brokers[1].Rack != nil {
		t.Fatalf("brokers %+v", resp.Brokers)
	}

	// Metadata lists the same brokers.
	md, err := a.Admin.BrokerMetadata(a.ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 2 || md.Brokers[1].Host != host || md.Brokers[1].Port != port {
		t.Fatalf("metadata brokers %+v", md.Brokers)
	}

	req = kmsg.NewPtrDescribeClusterRequest()
	req.Version, req.IncludeFencedBrokers = 2, true
	resp = a.rawRequest(t, req).(*kmsg.DescribeClusterResponse)
	if resp.ErrorCode != 0 || len(resp.Brokers) != 2 || resp.Brokers[0].IsFenced || resp.Brokers[1].IsFenced {
		t.Fatalf("v2 with fenced brokers: %+v", resp)
	}

	req = kmsg.NewPtrDescribeClusterRequest()
	req.Version = 1
	req.EndpointType = 2 // controllers
	resp = a.rawRequest(t, req).(*kmsg.DescribeClusterResponse)
	if resp.ErrorCode != kerr.MismatchedEndpointType.Code {
		t.Fatalf("controller endpoint: code %d", resp.ErrorCode)
	}
	req.Version = 0
	resp = a.rawRequest(t, req).(*kmsg.DescribeClusterResponse)
	if resp.ErrorCode != 0 || len(resp.Brokers) != 2 {
		t.Fatalf("v0: %+v", resp)
	}
}

// TestDescribeConfigsBrokerDefaults: an agent whose flags change a
// topic config's default (--log-retention-ms) reports it as Kafka does a
// server.properties value: STATIC_BROKER_CONFIG for a topic that sets
// nothing, with the broker config and then Kafka's default as synonyms;
// the broker's own entry is static too.
func TestDescribeConfigsBrokerDefaults(t *testing.T) {
	a := newTestAgent(t, withDeps(func(d *Deps) {
		d.BrokerDefaults = map[string]string{"retention.ms": "3600000"}
		d.RetentionCheckIntervalMs = 1000
	}))
	a.createTopic(t, "plain", 1, nil)
	a.createTopic(t, "own", 1, map[string]*string{"retention.ms": sp("1000")})
	rcs, err := a.Admin.DescribeTopicConfigs(a.ctx(t), "plain", "own")
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		c := configOf(t, rc, "retention.ms")
		var want []kadm.ConfigSynonym
		if rc.Name == "own" {
			if c.MaybeValue() != "1000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
				t.Errorf("own: retention.ms %q from %v", c.MaybeValue(), c.Source)
			}
			want = append(want, kadm.ConfigSynonym{Key: "retention.ms", Value: sp("1000"), Source: kmsg.ConfigSourceDynamicTopicConfig})
		} else if c.MaybeValue() != "3600000" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
			t.Errorf("plain: retention.ms %q from %v, want the broker's 3600000", c.MaybeValue(), c.Source)
		}
		want = append(want,
			kadm.ConfigSynonym{Key: "log.retention.ms", Value: sp("3600000"), Source: kmsg.ConfigSourceStaticBrokerConfig},
			kadm.ConfigSynonym{Key: "log.retention.ms", Value: sp("604800000"), Source: kmsg.ConfigSourceDefaultConfig})
		if len(c.Synonyms) != len(want) {
			t.Fatalf("%s: synonyms %+v, want %+v", rc.Name, c.Synonyms, want)
		}
		for i, s := range c.Synonyms {
			if s.Key != want[i].Key || s.Value == nil || *s.Value != *want[i].Value || s.Source != want[i].Source {
				t.Errorf("%s: synonym %d %+v, want %s=%q from %v", rc.Name, i, s, want[i].Key, *want[i].Value, want[i].Source)
			}
		}
	}
	brokers, err := a.Admin.DescribeBrokerConfigs(a.ctx(t), testNodeID)
	if err != nil || len(brokers) != 1 {
		t.Fatal(brokers, err)
	}
	for key, want := range map[string]string{"log.retention.ms": "3600000", "log.retention.check.interval.ms": "1000"} {
		if c := configOf(t, brokers[0], key); c.MaybeValue() != want || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
			t.Errorf("broker %s = %q from %v, want %q static", key, c.MaybeValue(), c.Source, want)
		}
	}
	if c := configOf(t, brokers[0], "log.retention.bytes"); c.MaybeValue() != "-1" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("broker log.retention.bytes = %q from %v, want the default -1", c.MaybeValue(), c.Source)
	}
}
