package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/group"
	"github.com/strandkafka/strand/internal/meta"
)

// tuneKIP848 makes KIP-848 members heartbeat often, so reconciliation
// (several heartbeats) takes test time, not the default 5s rounds.
func tuneKIP848(c *group.Config) {
	c.ConsumerHeartbeatInterval = 50 * time.Millisecond
	c.ConsumerSessionTimeout = 10 * time.Second
}

// Three kgo consumers opted into KIP-848 (server-side uniform assignor)
// on a 6-partition topic get two partitions each; when one leaves, the
// other two take three each, and no record committed before is
// delivered again.
func TestGroupKIP848ThreeConsumers(t *testing.T) {
	a, _ := newDataAgent(t, nil, withProducerIDs(t), withGroups(t, nil, tuneKIP848))
	const topic, parts, perPart = "six", 6, 50
	a.createTopic(t, topic, parts, nil)
	a.produceSpread(t, topic, parts, 0, parts*perPart)
	tr := newTracker()
	names := []string{"c1", "c2", "c3"}
	for _, name := range names {
		tr.start(t, a, name, "g848", topic, kgo.CooperativeStickyBalancer(), kgo.ServerSideBalancer())
	}
	tr.waitFor(t, "two partitions each, everything committed", func() bool {
		union := make(map[int32]bool)
		for _, name := range names {
			if len(tr.assigned[name]) != 2 {
				return false
			}
			for p := range tr.assigned[name] {
				union[p] = true
			}
		}
		return len(union) == parts && tr.committedUpTo(parts, perPart)
	})

	// The group really runs KIP-848: stored as a consumer group, and
	// described by ConsumerGroupDescribe.
	v := a.Replica.View()
	stored, ok, err := v.Group("g848")
	v.Close()
	if err != nil || !ok || stored.Kind != meta.GroupConsumer {
		t.Fatalf("stored group: %v %v kind %v, want a consumer group", ok, err, stored.Kind)
	}
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"g848"}
	resp := a.request(t, req).(*kmsg.ConsumerGroupDescribeResponse)
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Members) != 3 || resp.Groups[0].AssignorName != "uniform" {
		t.Fatalf("ConsumerGroupDescribe: %+v", resp.Groups)
	}
	for _, m := range resp.Groups[0].Members {
		n := 0
		for _, at := range m.Assignment.TopicPartitions {
			n += len(at.Partitions)
		}
		if n != 2 || m.MemberEpoch != resp.Groups[0].AssignmentEpoch {
			t.Fatalf("member %s: %d partitions at epoch %d (assignment epoch %d)", m.MemberID, n, m.MemberEpoch, resp.Groups[0].AssignmentEpoch)
		}
	}

	tr.stop("c3")
	tr.waitFor(t, "the other two to take three each", func() bool {
		return len(tr.assigned["c1"]) == 3 && len(tr.assigned["c2"]) == 3
	})
	a.produceSpread(t, topic, parts, parts*perPart, parts*perPart)
	tr.waitFor(t, "everything delivered and committed", func() bool { return tr.committedUpTo(parts, 2*perPart) })
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for p := range int64(parts) {
		for o := range int64(2 * perPart) {
			if tr.delivered[[2]int64{p, o}] == 0 {
				t.Fatalf("partition %d offset %d never delivered", p, o)
			}
		}
	}
}

// A classic JoinGroup to a KIP-848 group with members is
// INCONSISTENT_GROUP_PROTOCOL, and a KIP-848 heartbeat to a classic group
// with members GROUP_ID_NOT_FOUND, as Kafka answers.
func TestGroupKIP848ClassicConflict(t *testing.T) {
	a, _ := newDataAgent(t, nil, withProducerIDs(t), withGroups(t, nil, tuneKIP848))
	a.createTopic(t, "t", 1, nil)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = 1, "new", "m1", 1000
	hb.SubscribedTopicNames, hb.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if resp := a.request(t, hb).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != 0 || resp.MemberEpoch != 1 {
		t.Fatalf("join: %v epoch %d", kerr.ErrorForCode(resp.ErrorCode), resp.MemberEpoch)
	}
	join := consumerJoin(4, "new", "", 10_000, "t")
	if resp := a.request(t, join).(*kmsg.JoinGroupResponse); resp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("classic join to a consumer group: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}
