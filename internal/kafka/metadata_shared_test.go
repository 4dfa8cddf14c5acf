package kafka

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// askMetadata runs the Metadata handler for every topic, as a connection
// of a's server would, and returns the answer's topics by name.
func askMetadata(t *testing.T, a *testAgent) map[string]kmsg.MetadataResponseTopic {
	t.Helper()
	r := &Request{Header: Header{Key: 3, Version: 12}, Body: metadataReq(12, nil), Deps: a.Deps}
	resp, err := handleMetadata(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	releaseResponse(resp)
	out := make(map[string]kmsg.MetadataResponseTopic)
	for _, rt := range unwrapResponse(resp).(*kmsg.MetadataResponse).Topics {
		out[*rt.Topic] = rt
	}
	return out
}

// TestMetadataSharesPartitionLists checks that answers for the same
// cluster state hold one copy of a topic's partition entries, whatever
// the connection, and that a change to what the entries say (the
// partition count, the live agents) is answered from new entries.
func TestMetadataSharesPartitionLists(t *testing.T) {
	var brokers atomic.Pointer[[]Broker]
	brokers.Store(&[]Broker{{NodeID: testNodeID}})
	a := newTestAgent(t, withDeps(func(d *Deps) {
		d.Cluster.Brokers = func() []Broker { return *brokers.Load() }
	}))
	a.createTopic(t, "big", 1000, nil)

	first, second := askMetadata(t, a)["big"], askMetadata(t, a)["big"]
	if len(first.Partitions) != 1000 || len(second.Partitions) != 1000 {
		t.Fatalf("%d and %d partitions, want 1000", len(first.Partitions), len(second.Partitions))
	}
	if &first.Partitions[0] != &second.Partitions[0] {
		t.Fatal("two answers for the same state made two copies of the partition entries")
	}

	if _, err := a.Admin.UpdatePartitions(a.ctx(t), 1200, "big"); err != nil {
		t.Fatal(err)
	}
	grown := askMetadata(t, a)["big"]
	if len(grown.Partitions) != 1200 {
		t.Fatalf("after growing to 1200: %d partitions", len(grown.Partitions))
	}
	for i, p := range grown.Partitions {
		if p.Partition != int32(i) || p.Leader != testNodeID {
			t.Fatalf("entry %d: partition %d leader %d", i, p.Partition, p.Leader)
		}
	}

	// A second agent joins: the leaders are spread over both.
	brokers.Store(&[]Broker{{NodeID: testNodeID}, {NodeID: testNodeID + 1, Host: "127.0.0.1", Port: 2}})
	spread := askMetadata(t, a)["big"]
	led := map[int32]int{}
	for _, p := range spread.Partitions {
		led[p.Leader]++
	}
	if led[testNodeID] != 600 || led[testNodeID+1] != 600 {
		t.Fatalf("leaders after a second agent joined: %v, want 600 each", led)
	}
}
