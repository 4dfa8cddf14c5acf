package kafka

import (
	"net/netip"
	"strings"
	"sync"

	"github.com/strandkafka/strand/internal/meta"
)

// Zones (DESIGN.md 7b). Cross-zone transfer is most of a cloud Kafka's
// bill, and any agent serves any partition, so a client whose zone is
// known is answered with agents of its zone: Metadata's leaders
// (03_metadata.go) and Fetch's preferred read replica (01_fetch.go).
// Coordinators (FindCoordinator) stay where placement puts them: group
// and transaction traffic is small beside records.
//
// A connection's zone is learned, first to last, from:
//   - the listener it connected to (Listener.Zone): per-zone listeners
//     need nothing of the client;
//   - client.rack, which Fetch v11+ (KIP-392) and ConsumerGroupHeartbeat
//     (KIP-848) carry, on this connection or, remembered by client
//     address and client.id (zoneMemo), on another of the same client
//     to this agent. Clients send it on those requests only, but their
//     Metadata comes on another connection; and a consumer steered only
//     by preferred read replicas stays on one that went away (franz-go
//     until RecheckPreferredReplicaInterval), while one whose Metadata
//     leaders are in its zone follows them when an agent goes;
//   - a hint in client.id, a key=value among tokens separated by ',',
//     ';', '&' or spaces, under zoneHintKeys.
//
// Left out: the RackId KIP-1163/1181 add to Metadata, which the kmsg
// version in use does not decode yet.

// zoneHintKeys are the client.id keys that name a zone: Strand's, and
// those of other diskless systems, so clients moving over keep working.
var zoneHintKeys = []string{"strand_zone", "ws_az", "warpstream_az", "automq_az", "diskless_az", "zone"}

// maxZoneBytes bounds a zone a client names; meta bounds an agent's rack
// at 255 bytes, but zone names are short ("us-east-1a", "use1-az4").
const maxZoneBytes = 64

// ZoneFromClientID returns the zone a client.id names, or "".
func ZoneFromClientID(id string) string {
	for _, tok := range strings.FieldsFunc(id, func(r rune) bool {
		return r == ',' || r == ';' || r == '&' || r == ' ' || r == '\t'
	}) {
		k, v, ok := strings.Cut(tok, "=")
		if !ok {
			continue
		}
		for _, key := range zoneHintKeys {
			if strings.EqualFold(k, key) && ValidZone(v) {
				return v
			}
		}
	}
	return ""
}

// ValidZone keeps a client-named zone to what cloud zone names use, so
// it is safe in logs and metric labels.
func ValidZone(z string) bool {
	if z == "" || len(z) > maxZoneBytes {
		return false
	}
	for i := 0; i < len(z); i++ {
		c := z[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// Zone is the client's zone as this connection learned it, "" while
// unknown.
func (c *Conn) Zone() string {
	if c == nil {
		return ""
	}
	if c.listener.Zone != "" {
		return c.listener.Zone
	}
	c.mu.Lock()
	rack, id, idZone := c.mu.rack, c.mu.clientID, c.mu.idZone
	c.mu.Unlock()
	if rack != "" {
		return rack
	}
	if z := c.srv.zoneMemo().get(c.ip, id); z != "" {
		return z
	}
	return idZone
}

// noteRack records the client.rack a request carried.
func (c *Conn) noteRack(rack string) {
	if c == nil || !ValidZone(rack) {
		return
	}
	c.mu.Lock()
	c.mu.rack = rack
	id := c.mu.clientID
	c.mu.Unlock()
	c.srv.zoneMemo().put(c.ip, id, rack)
}

// noteClientID records the zone a new client.id names (reader goroutine).
func (c *Conn) noteClientID(id string) {
	z := ZoneFromClientID(id)
	if len(id) > maxMemoClientIDBytes {
		// Too long to remember by; the zone it names still counts.
		id = ""
	}
	c.mu.Lock()
	c.mu.clientID, c.mu.idZone = id, z
	c.mu.Unlock()
}

// zoneMemo remembers the client.rack clients sent, by client address
// and client.id, so their other connections to this agent know it.
// Bounded: past maxZoneMemoEntries it starts over, and clients teach it
// again with their next Fetch.
type zoneMemo struct {
	mu struct {
		sync.RWMutex
		zones map[zoneMemoKey]string
	}
}

type zoneMemoKey struct {
	ip       netip.Addr
	clientID string
}

const (
	maxZoneMemoEntries   = 1 << 14
	maxMemoClientIDBytes = 255
)

func newZoneMemo() *zoneMemo {
	m := new(zoneMemo)
	m.mu.zones = map[zoneMemoKey]string{}
	return m
}

// get returns the zone remembered for a client, "" for none. A
// connection without an address (in-process) is no one's.
func (m *zoneMemo) get(ip netip.Addr, clientID string) string {
	if m == nil || !ip.IsValid() {
		return ""
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.mu.zones[zoneMemoKey{ip, clientID}]
}

func (m *zoneMemo) put(ip netip.Addr, clientID, zone string) {
	if m == nil || !ip.IsValid() {
		return
	}
	k := zoneMemoKey{ip, clientID}
	if m.get(ip, clientID) == zone {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.zones[k] == zone {
		return
	}
	if len(m.mu.zones) >= maxZoneMemoEntries {
		clear(m.mu.zones)
	}
	m.mu.zones[k] = zone
}

// zoneMemo is the server's, nil for a connection without one.
func (s *Server) zoneMemo() *zoneMemo {
	if s == nil || s.cfg.Deps.shared == nil {
		return nil
	}
	return s.cfg.Deps.shared.zones
}

// placeLeaders returns the brokers leaders are placed on for a client of
// zone: those of the zone, or all of them when the zone is unknown or
// has no live agent; and the zone they are of, "" for all.
func placeLeaders(brokers []Broker, zone string) (placeOn []Broker, of string) {
	if in := inZone(brokers, zone); len(in) > 0 {
		return in, zone
	}
	return brokers, ""
}

// inZone returns the brokers of zone, nil for none or an unknown zone.
func inZone(brokers []Broker, zone string) []Broker {
	if zone == "" {
		return nil
	}
	var in []Broker
	for _, b := range brokers {
		if b.Rack == zone {
			in = append(in, b)
		}
	}
	return in
}

// preferredReplica is Fetch's PreferredReadReplica for a partition: the
// agent of the client's zone Metadata names its leader when this agent
// is of another zone, else -1 (this agent serves it).
func (d *Deps) preferredReplica(brokers []Broker, zone string, id meta.TopicID, partition int32) int32 {
	if zone == "" || zone == d.Cluster.Rack {
		return -1
	}
	in := inZone(brokers, zone)
	if len(in) == 0 {
		return -1
	}
	if n := d.partitionLeader(in, id, partition); n != d.Cluster.NodeID {
		return n
	}
	return -1
}
