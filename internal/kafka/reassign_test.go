package kafka

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// reassignAgent is an agent at metadata level 3 (reassignments are
// written from there) with topics t (2 partitions) and u (1), and agent 2
// registered but not live: a broker a replica list may name, which
// Metadata reports offline.
func reassignAgent(t *testing.T) *testAgent {
	t.Helper()
	a := newTestAgent(t)
	finalize(t, a, meta.FeatureLevel{Name: meta.FeatureMetadata, Level: meta.MetadataLevel3})
	heartbeat(t, a, 2, nil)
	a.createTopic(t, "t", 2, nil)
	a.createTopic(t, "u", 1, nil)
	return a
}

// reassign records replica lists through AlterPartitionReassignments
// (kadm), failing the test on any error.
func reassign(t *testing.T, a *testAgent, topic string, lists map[int32][]int32) {
	t.Helper()
	var req kadm.AlterPartitionAssignmentsReq
	for p, l := range lists {
		req.Assign(topic, p, l)
	}
	res, err := a.Admin.AlterPartitionAssignments(ctxT(t), req)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("reassigning %s %v: %v", topic, lists, err)
	}
}

// results renders per-partition answers as "topic/partition CODE message"
// lines, in answer order.
func renderResult(topic string, p int32, code int16, msg *string) string {
	s := fmt.Sprintf("%s/%d %s", topic, p, codeLabel(code))
	if msg != nil {
		s += " " + *msg
	}
	return s
}

func codeLabel(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return fmt.Sprint(code)
}

func electTopics(spec map[string][]int32) []kmsg.ElectLeadersRequestTopic {
	var ts []kmsg.ElectLeadersRequestTopic
	for _, name := range slices.Sorted(maps.Keys(spec)) {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = name, spec[name]
		ts = append(ts, rt)
	}
	return ts
}

// TestElectLeaders: leaders are placement, so every partition already
// has the leader either election would give it (ELECTION_NOT_NEEDED),
// except where a reassignment put a broker that is not live first
// (PREFERRED_LEADER_NOT_AVAILABLE, as Kafka answers when the preferred
// replica is down). Each case runs at every version Strand serves,
// through kmsg's encoding and decoding.
func TestElectLeaders(t *testing.T) {
	const notNeeded = "Leader election not needed for topic partition."
	for _, tc := range []struct {
		name    string
		lists   map[int32][]int32 // reassignments of t first
		typ     int8
		v1Only  bool
		all     bool // null topics
		topics  map[string][]int32
		code    int16 // top level, v1+
		results string
	}{
		{name: "preferred", topics: map[string][]int32{"t": {0, 1, 5}, "nope": {0}},
			results: "nope/0 UNKNOWN_TOPIC_OR_PARTITION No such topic as nope\n" +
				"t/0 ELECTION_NOT_NEEDED " + notNeeded + "\n" +
				"t/1 ELECTION_NOT_NEEDED " + notNeeded + "\n" +
				"t/5 UNKNOWN_TOPIC_OR_PARTITION No such partition as t-5"},
		{name: "unclean", typ: 1, v1Only: true, topics: map[string][]int32{"t": {0}},
			results: "t/0 ELECTION_NOT_NEEDED " + notNeeded},
		{name: "all partitions lists every topic and no partition", all: true,
			results: "t:\nu:"},
		{name: "preferred replica not live", lists: map[int32][]int32{1: {2, 7}},
			topics: map[string][]int32{"t": {0, 1}},
			results: "t/0 ELECTION_NOT_NEEDED " + notNeeded + "\n" +
				"t/1 PREFERRED_LEADER_NOT_AVAILABLE The preferred leader was not available."},
		{name: "unclean with the preferred replica not live", typ: 1, v1Only: true, lists: map[int32][]int32{1: {2, 7}},
			topics:  map[string][]int32{"t": {1}},
			results: "t/1 ELECTION_NOT_NEEDED " + notNeeded},
		{name: "all partitions lists those an election would change", all: true, lists: map[int32][]int32{1: {2, 7}},
			results: "t:\nt/1 PREFERRED_LEADER_NOT_AVAILABLE The preferred leader was not available.\nu:"},
		{name: "unknown election type", typ: 2, v1Only: true, topics: map[string][]int32{"t": {0}},
			code:    kerr.InvalidRequest.Code,
			results: "t/0 INVALID_REQUEST Unknown election type 2"},
	} {
		for version := int16(0); version <= 2; version++ {
			if version == 0 && tc.v1Only {
				continue
			}
			t.Run(fmt.Sprintf("%s/v%d", tc.name, version), func(t *testing.T) {
				a := reassignAgent(t)
				if tc.lists != nil {
					reassign(t, a, "t", tc.lists)
				}
				req := kmsg.NewPtrElectLeadersRequest()
				req.Version, req.ElectionType = version, tc.typ
				if !tc.all {
					req.Topics = electTopics(tc.topics)
				}
				resp := versionedRoundTrip[*kmsg.ElectLeadersResponse](t, a.addr, req)
				if resp.ErrorCode != tc.code {
					t.Errorf("top-level code %d, want %d", resp.ErrorCode, tc.code)
				}
				var lines []string
				for _, rt := range resp.Topics {
					if tc.all {
						lines = append(lines, rt.Topic+":")
					}
					for _, rp := range rt.Partitions {
						lines = append(lines, renderResult(rt.Topic, rp.Partition, rp.ErrorCode, rp.ErrorMessage))
					}
				}
				if !tc.all {
					slices.Sort(lines)
				}
				if got := strings.Join(lines, "\n"); got != tc.results {
					t.Errorf("results:\n%s\nwant:\n%s", got, tc.results)
				}
			})
		}
	}
}

// metadataPartition is what Metadata v12 reports of one partition.
func metadataPartition(t *testing.T, a *testAgent, topic string, p int32) kmsg.MetadataResponseTopicPartition {
	t.Helper()
	resp := a.rawRequest(t, metadataReq(12, []string{topic})).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || int(p) >= len(resp.Topics[0].Partitions) {
		t.Fatalf("metadata of %s: %+v", topic, resp.Topics)
	}
	return resp.Topics[0].Partitions[p]
}

func replicaLine(rp kmsg.MetadataResponseTopicPartition) string {
	return fmt.Sprintf("leader=%d replicas=%v isr=%v offline=%v", rp.Leader, rp.Replicas, rp.ISR, rp.OfflineReplicas)
}

// TestAlterPartitionReassignments: validated as Kafka's controller
// validates, with its wording; a reassignment completes at once, and
// Metadata reports the replica list; cancelling finds nothing in
// progress. Each case at every version Strand serves, through kmsg.
func TestAlterPartitionReassignments(t *testing.T) {
	type part struct {
		topic     string
		partition int32
		replicas  []int32
		cancel    bool
	}
	for _, tc := range []struct {
		name     string
		level1   bool
		v1Only   bool
		forbidRF bool
		parts    []part
		results  string
		// metadata is what Metadata reports of t/0 afterwards.
		metadata string
	}{
		{name: "reassign",
			parts:    []part{{topic: "t", partition: 0, replicas: []int32{2, 7}}, {topic: "t", partition: 1, replicas: []int32{7}}},
			results:  "t/0 NONE\nt/1 NONE",
			metadata: "leader=7 replicas=[2 7] isr=[7] offline=[2]"},
		{name: "the preferred replica leads when live",
			parts:    []part{{topic: "t", partition: 0, replicas: []int32{7, 2}}},
			results:  "t/0 NONE",
			metadata: "leader=7 replicas=[7 2] isr=[7] offline=[2]"},
		{name: "invalid",
			parts: []part{
				{topic: "t", partition: 0, replicas: []int32{7, 7}},
				{topic: "t", partition: 1, replicas: []int32{9, 7}},
				{topic: "u", partition: 0, replicas: []int32{}},
				{topic: "u", partition: 3, replicas: []int32{7}},
				{topic: "nope", partition: 0, replicas: []int32{7}},
			},
			results: "nope/0 UNKNOWN_TOPIC_OR_PARTITION Unable to find a topic named nope.\n" +
				"t/0 INVALID_REPLICA_ASSIGNMENT The manual partition assignment includes the broker 7 more than once.\n" +
				"t/1 INVALID_REPLICA_ASSIGNMENT The manual partition assignment includes broker 9, but no such broker is registered.\n" +
				"u/0 INVALID_REPLICA_ASSIGNMENT The manual partition assignment includes an empty replica list.\n" +
				"u/3 UNKNOWN_TOPIC_OR_PARTITION Unable to find partition u:3.",
			metadata: "leader=7 replicas=[7] isr=[7] offline=[]"},
		{name: "cancel finds nothing in progress",
			parts:    []part{{topic: "t", partition: 0, cancel: true}, {topic: "t", partition: 7, cancel: true}},
			results:  "t/0 NO_REASSIGNMENT_IN_PROGRESS\nt/7 UNKNOWN_TOPIC_OR_PARTITION Unable to find partition t:7.",
			metadata: "leader=7 replicas=[7] isr=[7] offline=[]"},
		{name: "replication factor change forbidden", v1Only: true, forbidRF: true,
			parts:    []part{{topic: "t", partition: 0, replicas: []int32{2, 7}}, {topic: "t", partition: 1, replicas: []int32{2}}},
			results:  "t/0 INVALID_REPLICATION_FACTOR The replication factor is changed from 1 to 2\nt/1 NONE",
			metadata: "leader=7 replicas=[7] isr=[7] offline=[]"},
		{name: "below metadata level 3", level1: true,
			parts: []part{{topic: "t", partition: 0, replicas: []int32{7}}},
			results: "t/0 UNSUPPORTED_VERSION Reassignments are recorded from strand.metadata.version 3; " +
				"the log is at 1 (strand features upgrade raises it).",
			metadata: "leader=7 replicas=[7] isr=[7] offline=[]"},
	} {
		for version := int16(0); version <= 1; version++ {
			if version == 0 && tc.v1Only {
				continue
			}
			t.Run(fmt.Sprintf("%s/v%d", tc.name, version), func(t *testing.T) {
				var a *testAgent
				if tc.level1 {
					a = newTestAgent(t)
					a.createTopic(t, "t", 2, nil)
				} else {
					a = reassignAgent(t)
				}
				req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
				req.Version = version
				req.AllowReplicationFactorChange = !tc.forbidRF
				for _, p := range tc.parts {
					rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
					rt.Topic = p.topic
					rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
					rp.Partition, rp.Replicas = p.partition, p.replicas
					if !p.cancel && rp.Replicas == nil {
						rp.Replicas = []int32{}
					}
					rt.Partitions = append(rt.Partitions, rp)
					req.Topics = append(req.Topics, rt)
				}
				resp := versionedRoundTrip[*kmsg.AlterPartitionAssignmentsResponse](t, a.addr, req)
				if resp.ErrorCode != 0 || resp.ErrorMessage != nil {
					t.Errorf("top level %d %v", resp.ErrorCode, resp.ErrorMessage)
				}
				if version >= 1 && resp.AllowReplicationFactorChange != !tc.forbidRF {
					t.Errorf("AllowReplicationFactorChange answered %v", resp.AllowReplicationFactorChange)
				}
				var lines []string
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						lines = append(lines, renderResult(rt.Topic, rp.Partition, rp.ErrorCode, rp.ErrorMessage))
					}
				}
				slices.Sort(lines)
				if got := strings.Join(lines, "\n"); got != tc.results {
					t.Errorf("results:\n%s\nwant:\n%s", got, tc.results)
				}
				if got := replicaLine(metadataPartition(t, a, "t", 0)); got != tc.metadata {
					t.Errorf("metadata of t/0: %s, want %s", got, tc.metadata)
				}
			})
		}
	}
}

// TestListPartitionReassignments: a reassignment completes when it
// applies, so none is ever in progress, for every topic or named ones.
func TestListPartitionReassignments(t *testing.T) {
	a := reassignAgent(t)
	reassign(t, a, "t", map[int32][]int32{0: {2, 7}})
	for _, topics := range [][]kmsg.ListPartitionReassignmentsRequestTopic{
		nil,
		{{Topic: "t", Partitions: []int32{0, 1}}, {Topic: "nope", Partitions: []int32{0}}},
	} {
		req := kmsg.NewPtrListPartitionReassignmentsRequest()
		req.Topics = topics
		resp := versionedRoundTrip[*kmsg.ListPartitionReassignmentsResponse](t, a.addr, req)
		if resp.ErrorCode != 0 || resp.ErrorMessage != nil || resp.Topics != nil {
			t.Errorf("topics %v: answered %d %v %+v, want nothing in progress", topics, resp.ErrorCode, resp.ErrorMessage, resp.Topics)
		}
	}
}

// TestReassignKadm: kadm's calls for the three APIs, and Metadata (as
// kadm's ListTopics describes topics) reporting what a reassignment
// recorded, until the topic is deleted and made again.
func TestReassignKadm(t *testing.T) {
	a := reassignAgent(t)
	ctx := a.ctx(t)

	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("t", 1, []int32{7, 2})
	req.Assign("t", 0, []int32{3})
	req.CancelAssign("u", 0)
	res, err := a.Admin.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res.Sorted() {
		got = append(got, fmt.Sprintf("%s/%d %v", r.Topic, r.Partition, r.Err))
	}
	want := []string{
		"t/0 INVALID_REPLICA_ASSIGNMENT: Replica assignment is invalid.",
		"t/1 <nil>",
		"u/0 NO_REASSIGNMENT_IN_PROGRESS: No partition reassignment is in progress.",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("kadm AlterPartitionAssignments: %q, want %q", got, want)
	}
	res, err = a.Admin.AlterPartitionAssignments(kadm.ForbidAlterRf(ctx), kadm.AlterPartitionAssignmentsReq{"u": {0: {2, 7}}})
	if err != nil || !errors.Is(res.Error(), kerr.InvalidReplicationFactor) {
		t.Errorf("kadm AlterPartitionAssignments changing the replication factor when forbidden: %v, %v", err, res.Error())
	}

	listed, err := a.Admin.ListPartitionReassignments(ctx, nil)
	if err != nil || len(listed) != 0 {
		t.Errorf("kadm ListPartitionReassignments: %v, %v; want nothing in progress", listed, err)
	}

	topics, err := a.Admin.ListTopics(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	p1 := topics["t"].Partitions[1]
	if p1.Leader != 7 || !reflect.DeepEqual(p1.Replicas, []int32{7, 2}) || !reflect.DeepEqual(p1.ISR, []int32{7}) || !reflect.DeepEqual(p1.OfflineReplicas, []int32{2}) {
		t.Errorf("kadm ListTopics t/1: %+v", p1)
	}

	elected, err := a.Admin.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"t": {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for p, r := range elected["t"] {
		if !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			t.Errorf("kadm ElectLeaders t/%d: %v, want ELECTION_NOT_NEEDED", p, r.Err)
		}
	}
	if len(elected["t"]) != 2 {
		t.Errorf("kadm ElectLeaders answered %v", elected)
	}
	elected, err = a.Admin.ElectLeaders(ctx, kadm.ElectLiveReplica, nil)
	if err != nil {
		t.Fatal(err)
	}
	for topic, ps := range elected {
		if len(ps) != 0 {
			t.Errorf("kadm ElectLeaders of every partition answered %s: %v; want none needing an election", topic, ps)
		}
	}

	if _, err := a.Admin.DeleteTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	a.createTopic(t, "t", 2, nil)
	if got := replicaLine(metadataPartition(t, a, "t", 1)); got != "leader=7 replicas=[7] isr=[7] offline=[]" {
		t.Errorf("a new topic t reports its predecessor's replicas: %s", got)
	}
}

// TestReassignManyPartitions: a request over more partitions than one
// command carries is split, and every partition is answered and
// recorded.
func TestReassignManyPartitions(t *testing.T) {
	a := reassignAgent(t)
	const n = 2*maxReassignPerCommand + 5
	a.createTopic(t, "many", n, nil)
	var req kadm.AlterPartitionAssignmentsReq
	for p := range int32(n) {
		l := []int32{2, 7}
		if p%3 == 0 {
			l = []int32{7, 7} // refused: every third answer must land on its own partition
		}
		req.Assign("many", p, l)
	}
	res, err := a.Admin.AlterPartitionAssignments(a.ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(res["many"]) != n {
		t.Fatalf("%d answers, want %d", len(res["many"]), n)
	}
	for p, r := range res["many"] {
		if refused := p%3 == 0; refused != errors.Is(r.Err, kerr.InvalidReplicaAssignment) || !refused && r.Err != nil {
			t.Fatalf("many/%d: %v", p, r.Err)
		}
	}
	resp := a.rawRequest(t, metadataReq(12, []string{"many"})).(*kmsg.MetadataResponse)
	for _, rp := range resp.Topics[0].Partitions {
		want := "[2 7]"
		if rp.Partition%3 == 0 {
			want = "[7]"
		}
		if got := fmt.Sprint(rp.Replicas); got != want {
			t.Fatalf("many/%d replicas %s, want %s", rp.Partition, got, want)
		}
	}
}
