package kafka

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

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
