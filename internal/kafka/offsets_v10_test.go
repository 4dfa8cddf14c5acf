package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit and OffsetFetch v10 (KIP-848) name topics by id: an id
// that names no topic is UNKNOWN_TOPIC_ID, and a v10 commit is read
// back by name at older versions (offsets are kept by name).
func TestOffsetsByTopicID(t *testing.T) {
	a := newTestAgent(t, withGroups(t, nil, nil))
	id := a.createTopic(t, "ids", 2, nil)
	var ghost [16]byte
	ghost[0] = 0x42

	commit := commitReq(10, "g", "", -1, "", map[int32]int64{0: 7, 1: 9})
	commit.Topics[0].TopicID = id
	gt := kmsg.NewOffsetCommitRequestTopic()
	gt.TopicID = ghost
	gp := kmsg.NewOffsetCommitRequestTopicPartition()
	gp.Partition, gp.Offset = 0, 1
	gt.Partitions = append(gt.Partitions, gp)
	commit.Topics = append(commit.Topics, gt)
	cresp := a.rawRequest(t, commit).(*kmsg.OffsetCommitResponse)
	if len(cresp.Topics) != 2 || cresp.Topics[0].TopicID != id || cresp.Topics[1].TopicID != ghost {
		t.Fatalf("commit answer topics: %+v", cresp.Topics)
	}
	if got := commitCodes(cresp); len(got) != 3 || got[0] != 0 || got[1] != 0 || got[2] != kerr.UnknownTopicID.Code {
		t.Fatalf("commit codes %v", got)
	}

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 10
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{
		{TopicID: id, Partitions: []int32{0, 1}},
		{TopicID: ghost, Partitions: []int32{0}},
	}}}
	fresp := a.rawRequest(t, fetch).(*kmsg.OffsetFetchResponse)
	got := map[[16]byte]map[int32][2]int64{}
	for _, rt := range fresp.Groups[0].Topics {
		got[rt.TopicID] = map[int32][2]int64{}
		for _, rp := range rt.Partitions {
			got[rt.TopicID][rp.Partition] = [2]int64{rp.Offset, int64(rp.ErrorCode)}
		}
	}
	if fresp.Groups[0].ErrorCode != 0 || got[id][0] != [2]int64{7, 0} || got[id][1] != [2]int64{9, 0} ||
		got[ghost][0] != [2]int64{-1, int64(kerr.UnknownTopicID.Code)} {
		t.Fatalf("fetch by id: %v", got)
	}

	// Every offset of the group, by id.
	fetch.Groups[0].Topics = nil
	fresp = a.rawRequest(t, fetch).(*kmsg.OffsetFetchResponse)
	if ts := fresp.Groups[0].Topics; len(ts) != 1 || ts[0].TopicID != id || len(ts[0].Partitions) != 2 {
		t.Fatalf("all offsets by id: %+v", ts)
	}

	// The same offsets by name at v9.
	fetch.Version = 9
	fetch.Groups[0].Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "ids", Partitions: []int32{1}}}
	fresp = a.rawRequest(t, fetch).(*kmsg.OffsetFetchResponse)
	if p := fresp.Groups[0].Topics[0].Partitions[0]; p.Offset != 9 || p.ErrorCode != 0 {
		t.Fatalf("v9 by name: %+v", p)
	}
}
