package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// TestGroupConfigs sets, deletes, replaces and describes GROUP config
// resources, with Kafka's refusals, on a log below and at level 9.
func TestGroupConfigs(t *testing.T) {
	a := newTestAgent(t)
	incr := func(t *testing.T, group string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) int16 {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeGroupConfig, group, ops
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(a.ctx(t), a.Client)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Resources[0].ErrorCode
	}
	op := func(o kmsg.IncrementalAlterConfigOp, name, v string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Op, c.Name = o, name
		if o == kmsg.IncrementalAlterConfigOpSet {
			c.Value = &v
		}
		return c
	}
	set := func(name, v string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		return op(kmsg.IncrementalAlterConfigOpSet, name, v)
	}
	describe := func(t *testing.T, group string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(a.ctx(t), a.Client)
		if err != nil {
			t.Fatal(err)
		}
		if c := resp.Resources[0].ErrorCode; c != 0 {
			t.Fatalf("describe %s: %v", group, kerr.ErrorForCode(c))
		}
		out := make(map[string]kmsg.DescribeConfigsResponseResourceConfig)
		for _, c := range resp.Resources[0].Configs {
			out[c.Name] = c
		}
		return out
	}

	v := a.Replica.View()
	f, err := v.Features()
	v.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !meta.ShareGroupsAt(f.MetadataLevel()) {
		if code := incr(t, "g", set(meta.GroupShareAutoOffsetReset, "earliest")); code != kerr.UnsupportedVersion.Code {
			t.Fatalf("below level 9: %v", kerr.ErrorForCode(code))
		}
		finalize(t, a, meta.FeatureLevel{Name: meta.FeatureMetadata, Level: meta.MaxMetadataLevel})
	}

	for _, tc := range []struct {
		name string
		ops  []kmsg.IncrementalAlterConfigsRequestResourceConfig
		want *kerr.Error
	}{
		{"set", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(meta.GroupShareAutoOffsetReset, "earliest"), set(meta.GroupShareIsolationLevel, "read_committed")}, nil},
		{"bad value", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(meta.GroupShareRecordLockDurationMs, "100")}, kerr.InvalidConfig},
		{"bad reset", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(meta.GroupShareAutoOffsetReset, "none")}, kerr.InvalidConfig},
		{"broker name", []kmsg.IncrementalAlterConfigsRequestResourceConfig{set("group.share.record.lock.duration.ms", "20000")}, kerr.InvalidConfig},
		{"append", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op(kmsg.IncrementalAlterConfigOpAppend, meta.GroupShareIsolationLevel, "x")}, kerr.InvalidConfig},
		{"delete", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op(kmsg.IncrementalAlterConfigOpDelete, meta.GroupShareIsolationLevel, "")}, nil},
	} {
		if code := incr(t, "g", tc.ops...); code != errCode(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(code), tc.want)
		}
	}
	got := describe(t, "g")
	if c := got[meta.GroupShareAutoOffsetReset]; c.Value == nil || *c.Value != "earliest" || c.Source != kmsg.ConfigSourceGroupConfig {
		t.Errorf("share.auto.offset.reset: %+v", c)
	}
	if c := got[meta.GroupShareIsolationLevel]; c.Value == nil || *c.Value != "read_uncommitted" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("deleted share.isolation.level: %+v", c)
	}
	if len(got) != len(meta.GroupConfigNames()) {
		t.Errorf("%d configs described, want %d", len(got), len(meta.GroupConfigNames()))
	}

	// AlterConfigs replaces every config of the group.
	req := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = meta.GroupShareSessionTimeoutMs, kmsg.StringPtr("50000")
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(a.ctx(t), a.Client)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v %+v", err, resp)
	}
	v = a.Replica.View()
	defer v.Close()
	stored, err := v.GroupConfigs("g")
	if err != nil || len(stored) != 1 || stored[meta.GroupShareSessionTimeoutMs] != "50000" {
		t.Fatalf("stored after AlterConfigs: %v %v", stored, err)
	}
}

func errCode(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}
