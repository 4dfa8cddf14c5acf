package kafka

import (
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// metadataReq builds a Metadata request; topics nil asks for all.
func metadataReq(version int16, topics []string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// answered maps each answered topic to its error code.
func answered(resp *kmsg.MetadataResponse) map[string]int16 {
	m := make(map[string]int16, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.Topic != nil {
			m[*t.Topic] = t.ErrorCode
		}
	}
	return m
}

// The topic list semantics per version, as kafka-python 2.0.2 (v0, v1, v5)
// and newer clients send them.
func TestMetadataVersions(t *testing.T) {
	a := newTestAgent(t)
	ids := map[string]meta.TopicID{
		"one": a.createTopic(t, "one", 2, nil),
		"two": a.createTopic(t, "two", 1, nil),
	}
	tests := []struct {
		version int16
		topics  []string // nil: null (all from v1)
		want    map[string]int16
	}{
		{0, []string{}, map[string]int16{"one": 0, "two": 0}}, // v0: empty is all
		{0, []string{"one", "gone"}, map[string]int16{"one": 0, "gone": kerr.UnknownTopicOrPartition.Code}},
		{1, nil, map[string]int16{"one": 0, "two": 0}},
		{1, []string{}, map[string]int16{}}, // v1+: empty is none
		{1, []string{"two", "two"}, map[string]int16{"two": 0}},
		{4, []string{"bad name"}, map[string]int16{"bad name": kerr.UnknownTopicOrPartition.Code}}, // no auto-creation
		{5, nil, map[string]int16{"one": 0, "two": 0}},
		{7, []string{"one"}, map[string]int16{"one": 0}},
		{9, nil, map[string]int16{"one": 0, "two": 0}},
		{10, []string{"two"}, map[string]int16{"two": 0}},
		{12, nil, map[string]int16{"one": 0, "two": 0}},
		{13, []string{"one"}, map[string]int16{"one": 0}},
	}
	for _, tt := range tests {
		t.Run("v"+strconv.Itoa(int(tt.version))+"/"+strconv.Itoa(len(tt.topics)), func(t *testing.T) {
			resp := a.rawRequest(t, metadataReq(tt.version, tt.topics)).(*kmsg.MetadataResponse)
			got := answered(resp)
			if resp.ErrorCode != 0 {
				t.Fatalf("top-level error %v", kerr.ErrorForCode(resp.ErrorCode))
			}
			if len(got) != len(tt.want) || len(resp.Topics) != len(tt.want) {
				t.Fatalf("topics %v, want %v", got, tt.want)
			}
			for name, code := range tt.want {
				if c, ok := got[name]; !ok || c != code {
					t.Errorf("%s: code %d (answered %v), want %d", name, c, ok, code)
				}
			}
			if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != testNodeID || resp.Brokers[0].Host != "127.0.0.1" {
				t.Errorf("brokers %+v", resp.Brokers)
			}
			// Per-version fields; a field the version lacks decodes
			// to its default.
			wantController, wantCluster := int32(-1), ""
			if tt.version >= 1 {
				wantController = testNodeID
			}
			if tt.version >= 2 {
				wantCluster = testClusterID
			}
			if resp.ControllerID != wantController || (resp.ClusterID == nil) != (wantCluster == "") ||
				(resp.ClusterID != nil && *resp.ClusterID != wantCluster) {
				t.Errorf("controller %d cluster %v, want %d %q", resp.ControllerID, resp.ClusterID, wantController, wantCluster)
			}
			for _, rt := range resp.Topics {
				if rt.ErrorCode != 0 {
					continue
				}
				wantID := [16]byte{}
				if tt.version >= 10 {
					wantID = ids[*rt.Topic]
				}
				if rt.TopicID != wantID || rt.AuthorizedOperations != authorizedOpsOmitted {
					t.Errorf("%s: id %v ops %d", *rt.Topic, rt.TopicID, rt.AuthorizedOperations)
				}
				tp, _ := a.topic(t, *rt.Topic)
				if int32(len(rt.Partitions)) != tp.Partitions {
					t.Fatalf("%s: %d partitions, want %d", *rt.Topic, len(rt.Partitions), tp.Partitions)
				}
				wantEpoch := int32(-1)
				if tt.version >= 7 {
					wantEpoch = 0
				}
				for i, p := range rt.Partitions {
					if p.Partition != int32(i) || p.Leader != testNodeID || p.LeaderEpoch != wantEpoch ||
						!slices.Equal(p.Replicas, []int32{testNodeID}) || !slices.Equal(p.ISR, []int32{testNodeID}) ||
						len(p.OfflineReplicas) != 0 || p.ErrorCode != 0 {
						t.Errorf("%s/%d: %+v", *rt.Topic, i, p)
					}
				}
			}
		})
	}
}

func TestMetadataTopicIDs(t *testing.T) {
	a := newTestAgent(t)
	id := a.createTopic(t, "by-id", 3, nil)
	byID := func(version int16, ids ...meta.TopicID) *kmsg.MetadataRequest {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = version
		for _, id := range ids {
			rt := kmsg.NewMetadataRequestTopic()
			rt.TopicID = id
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	resp := a.rawRequest(t, byID(12, id, meta.TopicID{9}, id)).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("answers %+v", resp.Topics)
	}
	if r := resp.Topics[0]; r.ErrorCode != 0 || r.Topic == nil || *r.Topic != "by-id" || r.TopicID != [16]byte(id) || len(r.Partitions) != 3 {
		t.Errorf("known id: %+v", r)
	}
	if r := resp.Topics[1]; r.ErrorCode != kerr.UnknownTopicID.Code || r.Topic != nil || r.TopicID != [16]byte{9} {
		t.Errorf("unknown id: %+v", r)
	}
	resp = a.rawRequest(t, byID(11, id)).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("id in v11: %+v", resp.Topics)
	}

	// v8-10 can ask for cluster operations.
	req := metadataReq(8, []string{"by-id"})
	req.IncludeClusterAuthorizedOperations = true
	req.IncludeTopicAuthorizedOperations = true
	resp = a.rawRequest(t, req).(*kmsg.MetadataResponse)
	if resp.AuthorizedOperations != clusterAuthorizedOps || resp.Topics[0].AuthorizedOperations != topicAuthorizedOps {
		t.Fatalf("operations %d %d", resp.AuthorizedOperations, resp.Topics[0].AuthorizedOperations)
	}
}

// TestMetadataAutoCreate: as Kafka, the Metadata request that creates a
// topic answers LEADER_NOT_AVAILABLE with no partitions and no id, and
// the client's next one finds the topic; also for a topic just deleted.
func TestMetadataAutoCreate(t *testing.T) {
	on := newTestAgent(t, withAutoCreate(3))
	off := newTestAgent(t)
	on.createTopic(t, "a.b", 1, nil)
	leaderNA := kerr.LeaderNotAvailable
	tests := []struct {
		name     string
		agent    *testAgent
		version  int16
		allow    bool
		topic    string
		wantCode *kerr.Error
		// wantParts is what the database holds afterwards (0 for no
		// topic): the answer itself never has partitions.
		wantParts int32
	}{
		{name: "allowed", agent: on, version: 12, allow: true, topic: "auto-12", wantCode: leaderNA, wantParts: 3},
		{name: "not allowed by the request", agent: on, version: 12, topic: "auto-no", wantCode: kerr.UnknownTopicOrPartition},
		{name: "v3 always allows", agent: on, version: 3, topic: "auto-3", wantCode: leaderNA, wantParts: 3},
		{name: "v1 as kafka-python", agent: on, version: 1, topic: "auto-1", wantCode: leaderNA, wantParts: 3},
		{name: "invalid name", agent: on, version: 12, allow: true, topic: "bad name", wantCode: kerr.InvalidTopicException},
		{name: "collision", agent: on, version: 12, allow: true, topic: "a_b", wantCode: kerr.InvalidTopicException},
		{name: "off", agent: off, version: 12, allow: true, topic: "auto-off", wantCode: kerr.UnknownTopicOrPartition},
		{name: "off v0", agent: off, version: 0, topic: "auto-off0", wantCode: kerr.UnknownTopicOrPartition},
		{name: "off invalid name", agent: off, version: 12, allow: true, topic: "bad name", wantCode: kerr.UnknownTopicOrPartition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := metadataReq(tt.version, []string{tt.topic})
			req.AllowAutoTopicCreation = tt.allow
			resp := tt.agent.rawRequest(t, req).(*kmsg.MetadataResponse)
			if len(resp.Topics) != 1 {
				t.Fatalf("answers %+v", resp.Topics)
			}
			r := resp.Topics[0]
			if r.ErrorCode != tt.wantCode.Code || len(r.Partitions) != 0 || r.TopicID != [16]byte{} {
				t.Fatalf("code %d with %d partitions and id %v, want %d with none", r.ErrorCode, len(r.Partitions), r.TopicID, tt.wantCode.Code)
			}
			tp, ok := tt.agent.topic(t, tt.topic)
			if ok != (tt.wantParts > 0) || tp.Partitions != tt.wantParts {
				t.Fatalf("in the database: %v with %d partitions", ok, tp.Partitions)
			}
		})
	}
	// Asked again, the topic is simply there.
	ask := func(topic string) kmsg.MetadataResponseTopic {
		req := metadataReq(12, []string{topic})
		req.AllowAutoTopicCreation = true
		resp := on.rawRequest(t, req).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 1 {
			t.Fatalf("answers %+v", resp.Topics)
		}
		return resp.Topics[0]
	}
	if r := ask("auto-12"); r.ErrorCode != 0 || len(r.Partitions) != 3 || r.TopicID != [16]byte(on.topicID(t, "auto-12")) {
		t.Fatalf("second ask: %+v", r)
	}
	// Deleted, then created again by the next ask: LEADER_NOT_AVAILABLE
	// again, then the new topic, not the old one's entries.
	old := on.topicID(t, "auto-12")
	if _, err := on.Admin.DeleteTopic(on.ctx(t), "auto-12"); err != nil {
		t.Fatal(err)
	}
	if r := ask("auto-12"); r.ErrorCode != leaderNA.Code || len(r.Partitions) != 0 {
		t.Fatalf("first ask after deletion: %+v", r)
	}
	r := ask("auto-12")
	if id := on.topicID(t, "auto-12"); r.ErrorCode != 0 || len(r.Partitions) != 3 || r.TopicID != [16]byte(id) || id == old {
		t.Fatalf("second ask after deletion: %+v (old id %v)", r, old)
	}
}

// KIP-1102: a draining agent that is the last one the client could
// learn of sends it back to its bootstrap servers.
func TestMetadataRebootstrap(t *testing.T) {
	drained := make(chan struct{})
	close(drained)
	self, other := Broker{NodeID: testNodeID}, Broker{NodeID: testNodeID + 1}
	for _, tc := range []struct {
		name    string
		drain   chan struct{}
		brokers []Broker
		want    bool
	}{
		{"serving", make(chan struct{}), []Broker{self}, false},
		{"draining, alone", drained, []Broker{self}, true},
		{"draining, with a peer", drained, []Broker{self, other}, false},
	} {
		r := &Request{Conn: &Conn{srv: &Server{drain: tc.drain}}, Deps: &Deps{Cluster: ClusterInfo{NodeID: testNodeID}}}
		if got := rebootstrapRequired(r, tc.brokers); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
