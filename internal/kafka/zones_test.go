package kafka

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func TestZoneFromClientID(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"", ""},
		{"my-app", ""},
		{"strand_zone=us-east-1a", "us-east-1a"},
		{"ws_az=use1-az4", "use1-az4"},
		{"my-app,warpstream_az=us-east-1b", "us-east-1b"},
		{"app;automq_az=eu-west-1c;x=y", "eu-west-1c"},
		{"diskless_az=b app", "b"},
		{"ZONE=c", "c"},
		{"myzone=c", ""},
		{"zone=", ""},
		{"zone=a/b", ""},
		{"zone=" + string(make([]byte, maxZoneBytes+1)), ""},
		{"other=x,zone=first,zone=second", "first"},
	} {
		if got := ZoneFromClientID(tc.id); got != tc.want {
			t.Errorf("ZoneFromClientID(%q) = %q, want %q", tc.id, got, tc.want)
		}
	}
}

// TestZonePlacement: leaders for a client of a zone are that zone's
// agents, spread evenly over them and the same whichever agent answers;
// a zone without agents falls back to all of them. The preferred read
// replica is the same agent, named only by an agent of another zone.
func TestZonePlacement(t *testing.T) {
	brokers := []Broker{{NodeID: 1, Rack: "a"}, {NodeID: 2, Rack: "b"}, {NodeID: 3, Rack: "a"}, {NodeID: 4, Rack: "c"}}
	id := meta.TopicID{7, 1, 2, 3}
	const partitions = 12
	for _, tc := range []struct {
		zone string
		want []int32 // the agents leaders are spread over
	}{
		{"a", []int32{1, 3}},
		{"b", []int32{2}},
		{"", []int32{1, 2, 3, 4}},
		{"d", []int32{1, 2, 3, 4}},
	} {
		t.Run(fmt.Sprintf("zone=%q", tc.zone), func(t *testing.T) {
			counts := map[int32]int{}
			for p := range int32(partitions) {
				var leader int32 = -1
				for _, self := range brokers {
					d := &Deps{Cluster: ClusterInfo{NodeID: self.NodeID, Rack: self.Rack}}
					placeOn, _ := placeLeaders(brokers, tc.zone)
					l := d.partitionLeader(placeOn, id, p)
					if leader != -1 && l != leader {
						t.Fatalf("partition %d: agent %d names leader %d, another %d", p, self.NodeID, l, leader)
					}
					leader = l
					pref := d.preferredReplica(brokers, tc.zone, id, p)
					switch {
					case len(tc.want) == len(brokers) || self.Rack == tc.zone || l == self.NodeID:
						if pref != -1 {
							t.Errorf("partition %d at agent %d (rack %s): preferred replica %d, want -1", p, self.NodeID, self.Rack, pref)
						}
					case pref != l:
						t.Errorf("partition %d at agent %d: preferred replica %d, want the leader %d", p, self.NodeID, pref, l)
					}
				}
				counts[leader]++
			}
			for _, n := range tc.want {
				if counts[n] != partitions/len(tc.want) {
					t.Errorf("leaders %v, want %d partitions on each of %v", counts, partitions/len(tc.want), tc.want)
					break
				}
			}
		})
	}
}

func TestZoneMemoBound(t *testing.T) {
	m := newZoneMemo()
	ip := netip.MustParseAddr("10.0.0.1")
	m.put(ip, "app", "a")
	if got := m.get(ip, "app"); got != "a" {
		t.Fatalf("get = %q, want a", got)
	}
	if got := m.get(ip, "other"); got != "" {
		t.Fatalf("another client id: %q, want none", got)
	}
	if got := m.get(netip.Addr{}, "app"); got != "" {
		t.Fatalf("no address: %q, want none", got)
	}
	for i := range maxZoneMemoEntries + 10 {
		m.put(ip, fmt.Sprint(i), "b")
	}
	m.mu.RLock()
	n := len(m.mu.zones)
	m.mu.RUnlock()
	if n > maxZoneMemoEntries {
		t.Fatalf("%d entries, bound %d", n, maxZoneMemoEntries)
	}
}

// FuzzZoneFromClientID: any client.id gives no zone or a valid one that
// it contains.
func FuzzZoneFromClientID(f *testing.F) {
	for _, s := range []string{"", "ws_az=a", "app,zone=b;x", "zone==", "strand_zone=\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		z := ZoneFromClientID(id)
		if z != "" && (!ValidZone(z) || !strings.Contains(id, "="+z)) {
			t.Fatalf("ZoneFromClientID(%q) = %q", id, z)
		}
	})
}

// TestZoneLearned: over real connections, Metadata places leaders on the
// zone a client.id names; a Fetch naming client.rack gets preferred read
// replicas of that zone, and the same client's Metadata on another
// connection then leads from that zone too.
func TestZoneLearned(t *testing.T) {
	brokers := []Broker{{NodeID: testNodeID, Rack: "a"}, {NodeID: testNodeID + 1, Rack: "b"}, {NodeID: testNodeID + 2, Rack: "c"}}
	a := newTestAgent(t, withDataPath(t, new(dataPath)), withDeps(func(d *Deps) {
		d.Cluster.Rack = "a"
		brokers[0].Host, brokers[0].Port = d.Cluster.Host, d.Cluster.Port
		for i := 1; i < len(brokers); i++ {
			brokers[i].Host, brokers[i].Port = "127.0.0.1", 1
		}
		d.Cluster.Brokers = func() []Broker { return slices.Clone(brokers) }
	}))
	const partitions = 6
	id := a.createTopic(t, "zoned", partitions, nil)
	send := func(clientID string, req kmsg.Request) kmsg.Response {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(a.addr), kgo.ClientID(clientID))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		resp, err := cl.SeedBrokers()[0].Request(a.ctx(t), req)
		if err != nil {
			t.Fatalf("%T: %v", req, err)
		}
		return resp
	}
	leaders := func(clientID string) []int32 {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("zoned")
		req.Topics = append(req.Topics, rt)
		resp := send(clientID, req).(*kmsg.MetadataResponse)
		var ls []int32
		for _, p := range resp.Topics[0].Partitions {
			ls = append(ls, p.Leader)
		}
		return ls
	}
	all := func(ls []int32, node int32) bool {
		return len(ls) == partitions && !slices.ContainsFunc(ls, func(n int32) bool { return n != node })
	}

	if ls := leaders("app,ws_az=b"); !all(ls, testNodeID+1) {
		t.Errorf("client.id in zone b: leaders %v, want all %d", ls, testNodeID+1)
	}
	if ls := leaders("consumer"); all(ls, testNodeID+2) {
		t.Errorf("a client of no zone: leaders %v, want them spread", ls)
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Rack = "c"
	fetch.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "zoned", id
	for p := range int32(partitions) {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes = p, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
	}
	fetch.Topics = append(fetch.Topics, ft)
	resp := send("consumer", fetch).(*kmsg.FetchResponse)
	for _, p := range resp.Topics[0].Partitions {
		if p.PreferredReadReplica != testNodeID+2 {
			t.Errorf("fetch of rack c at the agent of rack a: partition %d preferred replica %d, want %d", p.Partition, p.PreferredReadReplica, testNodeID+2)
		}
	}
	if ls := leaders("consumer"); !all(ls, testNodeID+2) {
		t.Errorf("after its Fetch named rack c, the client's leaders %v, want all %d", ls, testNodeID+2)
	}
	// A replica list the operator gave: its agent of the client's zone
	// leads for the client, its first for a client of no zone.
	finalize(t, a, meta.FeatureLevel{Name: meta.FeatureMetadata, Level: meta.MetadataLevel3})
	var ra kadm.AlterPartitionAssignmentsReq
	ra.Assign("zoned", 0, []int32{testNodeID, testNodeID + 1, testNodeID + 2})
	if res, err := a.Admin.AlterPartitionAssignments(a.ctx(t), ra); err != nil {
		t.Fatal(err)
	} else if err := res.Error(); err != nil {
		t.Fatal(err)
	}
	if ls := leaders("ws_az=b"); ls[0] != testNodeID+1 {
		t.Errorf("replica list [%d %d %d], client of zone b: leader %d, want %d", testNodeID, testNodeID+1, testNodeID+2, ls[0], testNodeID+1)
	}
	if ls := leaders("no-zone"); ls[0] != testNodeID {
		t.Errorf("replica list [%d %d %d], client of no zone: leader %d, want %d", testNodeID, testNodeID+1, testNodeID+2, ls[0], testNodeID)
	}

	// The zone of c going away: back to every agent.
	brokers = brokers[:2]
	if ls := leaders("consumer"); all(ls, testNodeID) || all(ls, testNodeID+1) {
		t.Errorf("zone c without agents: leaders %v, want them spread over a and b", ls)
	}
}
