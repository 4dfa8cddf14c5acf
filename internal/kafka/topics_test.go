package kafka

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
)

func sp(s string) *string { return &s }

func TestCreateTopics(t *testing.T) {
	a := newTestAgent(t, withDeps(func(d *Deps) { d.DefaultPartitions = 4 }))
	a.createTopic(t, "existing", 1, nil)
	a.createTopic(t, "dotted.name", 1, nil)

	tests := []struct {
		name       string
		topic      string
		partitions int32
		rf         int16
		configs    map[string]*string
		wantErr    error
		wantParts  int32 // in Metadata afterwards; 0 means not created
	}{
		{name: "plain", topic: "orders", partitions: 3, rf: -1, wantParts: 3},
		{name: "default partitions", topic: "defaulted", partitions: -1, rf: -1, wantParts: 4},
		{name: "any replication factor", topic: "rf3", partitions: 1, rf: 3, wantParts: 1},
		{
			name: "configs", topic: "configured", partitions: 2, rf: 1, wantParts: 2,
			configs: map[string]*string{"retention.ms": sp("1000"), "cleanup.policy": sp("compact,delete")},
		},
		{name: "exists", topic: "existing", partitions: 1, rf: -1, wantErr: kerr.TopicAlreadyExists, wantParts: 1},
		{name: "invalid name", topic: "no spaces", partitions: 1, rf: -1, wantErr: kerr.InvalidTopicException},
		{name: "name too long", topic: strings.Repeat("x", 250), partitions: 1, rf: -1, wantErr: kerr.InvalidTopicException},
		{name: "dot name", topic: "..", partitions: 1, rf: -1, wantErr: kerr.InvalidTopicException},
		{name: "collides", topic: "dotted_name", partitions: 1, rf: -1, wantErr: kerr.InvalidTopicException},
		{name: "zero partitions", topic: "zero", partitions: 0, rf: -1, wantErr: kerr.InvalidPartitions},
		{name: "too many partitions", topic: "huge", partitions: maxPartitionsPerTopic + 1, rf: -1, wantErr: kerr.InvalidPartitions},
		{name: "zero replication factor", topic: "rf0", partitions: 1, rf: 0, wantErr: kerr.InvalidReplicationFactor},
		{
			name: "bad config value", topic: "badvalue", partitions: 1, rf: -1, wantErr: kerr.InvalidConfig,
			configs: map[string]*string{"retention.ms": sp("a week")},
		},
		{
			name: "unknown config", topic: "badname", partitions: 1, rf: -1, wantErr: kerr.InvalidConfig,
			configs: map[string]*string{"retention.weeks": sp("1")},
		},
		{
			name: "null config", topic: "nullvalue", partitions: 1, rf: -1, wantErr: kerr.InvalidConfig,
			configs: map[string]*string{"retention.ms": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resps, err := a.Admin.CreateTopics(a.ctx(t), tt.partitions, tt.rf, tt.configs, tt.topic)
			if err != nil {
				t.Fatal(err)
			}
			r := resps[tt.topic]
			if !errors.Is(r.Err, tt.wantErr) || (tt.wantErr == nil) != (r.Err == nil) {
				t.Fatalf("error %v (%s), want %v", r.Err, r.ErrMessage, tt.wantErr)
			}
			if tt.wantErr != nil && r.ErrMessage == "" {
				t.Error("no error message")
			}
			if tt.wantErr == nil {
				if r.ID == ([16]byte{}) || r.NumPartitions != tt.wantParts || r.ReplicationFactor != 1 {
					t.Errorf("answer id %v partitions %d rf %d, want an id, %d, 1", r.ID, r.NumPartitions, r.ReplicationFactor, tt.wantParts)
				}
				for name, v := range tt.configs {
					c, ok := r.Configs[name]
					if !ok || c.Value == nil || *c.Value != *v || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
						t.Errorf("config %s in answer: %+v", name, c)
					}
				}
				if c := r.Configs["max.message.bytes"]; c.Value == nil || *c.Value != "1048588" || c.Source != kmsg.ConfigSourceDefaultConfig {
					t.Errorf("default config in answer: %+v", c)
				}
			}
			// The topic is visible at once, through the same agent.
			tds, err := a.Admin.ListTopics(a.ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			td, ok := tds[tt.topic]
			if got := int32(len(td.Partitions)); ok != (tt.wantParts > 0) || got != tt.wantParts {
				t.Fatalf("listed %v with %d partitions, want %d", ok, got, tt.wantParts)
			}
			if ok && tt.wantErr == nil && td.ID != r.ID {
				t.Errorf("listed id %v, created %v", td.ID, r.ID)
			}
		})
	}
}

func TestCreateTopicsValidateOnly(t *testing.T) {
	a := newTestAgent(t)
	resps, err := a.Admin.ValidateCreateTopics(a.ctx(t), 2, -1, map[string]*string{"retention.ms": sp("5")}, "dry")
	if err != nil {
		t.Fatal(err)
	}
	if r := resps["dry"]; r.Err != nil || r.NumPartitions != 2 {
		t.Fatalf("validate: %v, %d partitions", r.Err, r.NumPartitions)
	}
	if _, ok := a.topic(t, "dry"); ok {
		t.Fatal("validate-only created the topic")
	}
	resps, err = a.Admin.ValidateCreateTopics(a.ctx(t), 2, -1, map[string]*string{"retention.ms": sp("x")}, "dry")
	if err != nil {
		t.Fatal(err)
	}
	if r := resps["dry"]; !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Fatalf("validate bad config: %v", r.Err)
	}
}

// The raw request cases kadm cannot send.
func TestCreateTopicsRaw(t *testing.T) {
	a := newTestAgent(t)
	topic := func(name string, partitions int32, rf int16) kmsg.CreateTopicsRequestTopic {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
		return rt
	}
	assign := func(rt kmsg.CreateTopicsRequestTopic, lists ...[]int32) kmsg.CreateTopicsRequestTopic {
		for i, l := range lists {
			ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			ra.Partition, ra.Replicas = int32(i), l
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		}
		return rt
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	req.Topics = []kmsg.CreateTopicsRequestTopic{
		topic("dup", 1, -1),
		topic("dup", 2, -1),
		topic("a.b", 1, -1),
		topic("a_b", 1, -1), // collides with a.b of the same request
		assign(topic("assigned", -1, -1), []int32{testNodeID}, []int32{testNodeID}),
		assign(topic("assigned-and-count", 2, -1), []int32{testNodeID}),
		assign(topic("unknown-broker", -1, -1), []int32{99}),
		assign(topic("twice-same-broker", -1, -1), []int32{testNodeID, testNodeID}),
	}
	resp := a.rawRequest(t, req).(*kmsg.CreateTopicsResponse)
	want := []struct {
		topic string
		err   *kerr.Error
	}{
		{"dup", kerr.InvalidRequest},
		{"a.b", nil},
		{"a_b", kerr.InvalidTopicException},
		{"assigned", nil},
		{"assigned-and-count", kerr.InvalidRequest},
		{"unknown-broker", kerr.InvalidReplicaAssignment},
		{"twice-same-broker", kerr.InvalidReplicaAssignment},
	}
	if len(resp.Topics) != len(want) {
		t.Fatalf("%d answers, want %d: %+v", len(resp.Topics), len(want), resp.Topics)
	}
	for i, w := range want {
		got := resp.Topics[i]
		var wantCode int16
		if w.err != nil {
			wantCode = w.err.Code
		}
		if got.Topic != w.topic || got.ErrorCode != wantCode {
			t.Errorf("answer %d: %s code %d, want %s code %d", i, got.Topic, got.ErrorCode, w.topic, wantCode)
		}
	}
	if tp, ok := a.topic(t, "assigned"); !ok || tp.Partitions != 2 {
		t.Errorf("assigned topic: %v, %+v", ok, tp)
	}
	if _, ok := a.topic(t, "dup"); ok {
		t.Error("a duplicated topic was created")
	}
}

// errMetaDB fails every proposal with err.
type errMetaDB struct {
	MetaDB
	err error
}

func (e errMetaDB) ProposeBatch(context.Context, []meta.Command) ([]meta.Result, error) {
	return nil, e.err
}

func TestCreateTopicsProposeFailure(t *testing.T) {
	tests := []struct {
		err  error
		want *kerr.Error
	}{
		{replica.ErrAmbiguous, kerr.RequestTimedOut},
		{context.DeadlineExceeded, kerr.RequestTimedOut},
		{replica.ErrClosed, kerr.NotController},
		{replica.ErrHalted, kerr.UnknownServerError},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			a := newTestAgent(t, withMetaDB(func(r *replica.Replica) MetaDB { return errMetaDB{r, tt.err} }))
			req := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 1, -1
			req.Topics = append(req.Topics, rt)
			resp := a.request(t, req).(*kmsg.CreateTopicsResponse)
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != tt.want.Code {
				t.Fatalf("answer %+v, want %v", resp.Topics, tt.want)
			}
		})
	}
}

func TestMetadataListsTopics(t *testing.T) {
	a := newTestAgent(t)
	ids := map[string]meta.TopicID{
		"alpha": a.createTopic(t, "alpha", 3, nil),
		"beta":  a.createTopic(t, "beta", 1, nil),
	}
	tds, err := a.Admin.ListTopics(a.ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := tds.Names(); !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Fatalf("topics %v", got)
	}
	for name, td := range tds {
		if td.Err != nil || td.ID != [16]byte(ids[name]) || td.IsInternal {
			t.Errorf("%s: err %v id %v internal %v", name, td.Err, td.ID, td.IsInternal)
		}
		// Asked for by the harness's context; no authorizer allows all
		// a topic supports.
		wantOps := []kmsg.ACLOperation{
			kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDelete,
			kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs,
		}
		if !slices.Equal(td.AuthorizedOperations, wantOps) {
			t.Errorf("%s: authorized operations %v, want %v", name, td.AuthorizedOperations, wantOps)
		}
		for p, pd := range td.Partitions {
			if pd.Err != nil || pd.Leader != testNodeID || pd.LeaderEpoch != 0 ||
				!slices.Equal(pd.Replicas, []int32{testNodeID}) || !slices.Equal(pd.ISR, []int32{testNodeID}) || len(pd.OfflineReplicas) != 0 {
				t.Errorf("%s/%d: %+v", name, p, pd)
			}
		}
	}

	md, err := a.Admin.Metadata(a.ctx(t), "alpha", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if md.Cluster != testClusterID || md.Controller != testNodeID || len(md.Brokers) != 1 {
		t.Fatalf("cluster %q controller %d brokers %v", md.Cluster, md.Controller, md.Brokers)
	}
	if b := md.Brokers[0]; b.NodeID != testNodeID || b.Host != "127.0.0.1" || b.Rack != nil {
		t.Fatalf("broker %+v", b)
	}
	if !errors.Is(md.Topics["missing"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("missing topic: %v", md.Topics["missing"].Err)
	}
	if _, ok := a.topic(t, "missing"); ok {
		t.Fatal("auto-created with auto-creation off")
	}
}

func TestDeleteTopics(t *testing.T) {
	a := newTestAgent(t)
	a.createTopic(t, "byname", 2, nil)
	a.commit(t, "byname", 0, testBatch{records: 5, firstTs: 1, maxTsMs: 1})

	resps, err := a.Admin.DeleteTopics(a.ctx(t), "byname", "neverwas")
	if err != nil {
		t.Fatal(err)
	}
	if r := resps["byname"]; r.Err != nil {
		t.Fatalf("delete byname: %v", r.Err)
	}
	if r := resps["neverwas"]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete neverwas: %v", r.Err)
	}
	if _, ok := a.topic(t, "byname"); ok {
		t.Fatal("topic still there")
	}
	// Created again, it starts empty with a new id.
	a.createTopic(t, "byname", 1, nil)
	offs, err := a.Admin.ListEndOffsets(a.ctx(t), "byname")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("byname", 0); o.Err != nil || o.Offset != 0 {
		t.Fatalf("recreated topic end offset %+v", o)
	}

	// v6 by id.
	id := a.createTopic(t, "byid", 1, nil)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	for _, tid := range []meta.TopicID{id, {1, 2, 3}} {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.TopicID = tid
		req.Topics = append(req.Topics, rt)
	}
	both := kmsg.NewDeleteTopicsRequestTopic()
	both.Topic, both.TopicID = kmsg.StringPtr("byname"), id
	req.Topics = append(req.Topics, both)
	resp := a.rawRequest(t, req).(*kmsg.DeleteTopicsResponse)
	if len(resp.Topics) != 3 {
		t.Fatalf("answers %+v", resp.Topics)
	}
	if r := resp.Topics[0]; r.ErrorCode != 0 || r.Topic == nil || *r.Topic != "byid" || r.TopicID != [16]byte(id) {
		t.Errorf("by id: %+v", r)
	}
	if r := resp.Topics[1]; r.ErrorCode != kerr.UnknownTopicID.Code || r.Topic != nil {
		t.Errorf("unknown id: %+v", r)
	}
	if r := resp.Topics[2]; r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("name and id: %+v", r)
	}
	if _, ok := a.topic(t, "byid"); ok {
		t.Fatal("byid still there")
	}
	if _, ok := a.topic(t, "byname"); !ok {
		t.Fatal("byname deleted by an invalid entry")
	}

	// v0 by name, the same topic twice.
	req0 := kmsg.NewPtrDeleteTopicsRequest()
	req0.Version = 0
	req0.TopicNames = []string{"byname", "byname"}
	resp0 := a.rawRequest(t, req0).(*kmsg.DeleteTopicsResponse)
	if len(resp0.Topics) != 1 || resp0.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("duplicate: %+v", resp0.Topics)
	}
}

func TestCreatePartitions(t *testing.T) {
	a := newTestAgent(t)
	a.createTopic(t, "grow", 2, nil)
	tests := []struct {
		name    string
		run     func() (map[string]error, error)
		topic   string
		wantErr error
		want    int32
	}{
		{name: "validate only", topic: "grow", want: 2, run: func() (map[string]error, error) {
			return errsOf(a.Admin.ValidateCreatePartitions(a.ctx(t), 3, "grow"))
		}},
		{name: "add", topic: "grow", want: 5, run: func() (map[string]error, error) {
			return errsOf(a.Admin.CreatePartitions(a.ctx(t), 3, "grow"))
		}},
		{name: "same count", topic: "grow", want: 5, wantErr: kerr.InvalidPartitions, run: func() (map[string]error, error) {
			return errsOf(a.Admin.UpdatePartitions(a.ctx(t), 5, "grow"))
		}},
		{name: "validate same count", topic: "grow", want: 5, wantErr: kerr.InvalidPartitions, run: func() (map[string]error, error) {
			return errsOf(a.Admin.ValidateUpdatePartitions(a.ctx(t), 5, "grow"))
		}},
		{name: "fewer", topic: "grow", want: 5, wantErr: kerr.InvalidPartitions, run: func() (map[string]error, error) {
			return errsOf(a.Admin.UpdatePartitions(a.ctx(t), 1, "grow"))
		}},
		{name: "unknown topic", topic: "nope", wantErr: kerr.UnknownTopicOrPartition, run: func() (map[string]error, error) {
			return errsOf(a.Admin.UpdatePartitions(a.ctx(t), 3, "nope"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs, err := tt.run()
			if err != nil {
				t.Fatal(err)
			}
			if got := errs[tt.topic]; !errors.Is(got, tt.wantErr) || (tt.wantErr == nil) != (got == nil) {
				t.Fatalf("error %v, want %v", got, tt.wantErr)
			}
			tp, _ := a.topic(t, tt.topic)
			if tp.Partitions != tt.want {
				t.Fatalf("%d partitions, want %d", tp.Partitions, tt.want)
			}
		})
	}
	// The new partitions exist in Metadata and start empty.
	offs, err := a.Admin.ListEndOffsets(a.ctx(t), "grow")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(5) {
		if o, ok := offs.Lookup("grow", p); !ok || o.Err != nil || o.Offset != 0 {
			t.Errorf("partition %d: %+v", p, o)
		}
	}

	// A raw request with an assignment of the wrong length.
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "grow", 7
	ra := kmsg.NewCreatePartitionsRequestTopicAssignment()
	ra.Replicas = []int32{testNodeID}
	rt.Assignment = append(rt.Assignment, ra)
	req.Topics = append(req.Topics, rt)
	resp := a.request(t, req).(*kmsg.CreatePartitionsResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("short assignment: %+v", resp.Topics)
	}
	req.Topics[0].Assignment = append(req.Topics[0].Assignment, ra)
	resp = a.request(t, req).(*kmsg.CreatePartitionsResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("full assignment: %+v", resp.Topics)
	}
}

func errsOf(rs map[string]kadm.CreatePartitionsResponse, err error) (map[string]error, error) {
	out := make(map[string]error, len(rs))
	for k, r := range rs {
		out[k] = r.Err
	}
	return out, err
}
