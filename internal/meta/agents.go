package meta

// Agent registration: every agent renews a lease on its node id through
// the log, so the set of live agents is replicated state, and whether an
// agent is live is decided by the log clock, identically on every copy.
// The first registration also fixes the cluster id, derived from where it
// sits in the log, so every agent on one log reports the same id.
//
// A heartbeat also carries the agent's applied position, so that whoever
// trims the shared log can leave every live agent the entries it still
// has to play (View.LowestLiveApplied, TrimLog's bound).

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Limits on an AgentHeartbeat. Like apply's other limits they are part of
// what apply means.
const (
	maxAgentIDBytes   = 256
	maxAgentHostBytes = 255
	maxAgentRackBytes = 255
	// maxAgentLeaseMs bounds a lease to a day: a dead agent must drop out
	// in a time an operator can wait for.
	maxAgentLeaseMs = 24 * 60 * 60 * 1000
	// maxAgentEndpoints and maxListenerNameBytes bound the listeners
	// one heartbeat carries.
	maxAgentEndpoints    = 16
	maxListenerNameBytes = 64
)

// AgentHeartbeat registers an agent under NodeID, or renews its lease,
// until the log clock at apply plus LeaseMs. LeaseMs 0 deregisters the
// agent (a graceful leave): the record is deleted if AgentID still holds
// NodeID. A node id belongs to the newest heartbeat for it: a heartbeat
// from another AgentID takes the node id over.
// Result: INVALID_REQUEST for a negative node id or lease, an empty or
// oversized agent id, host or rack, a port outside [0, 65535]. Code
// DUPLICATE_BROKER_REGISTRATION (the heartbeat still applied) when it
// took the node id over from another agent whose lease had not expired:
// two agents were given one --node-id.
//
// Applied (version 2) is the proposer's next position to apply when it
// proposed (a shared log position): every entry below it is in its copy,
// and it still needs every entry from there on. Apply stores it as AgentInfo.Applied, clamped to
// the heartbeat's own position, which no proposer can have applied yet.
// Version 1 carries none and decodes as 0: see LowestLiveApplied.
//
// Features (version 3, written from strand.metadata.version 2) are the
// levels the agent's build supports, sorted by name: FinalizeFeatures
// refuses a level a live agent does not support. At level 1 the agent
// writes version 2, which builds before feature levels read, and its
// ranges stay unknown to the log. INVALID_REQUEST also for more than 64
// features, an empty or oversized name, or a range with a negative or
// inverted bound.
//
// Endpoints (version 4, written from strand.metadata.version 4) are the
// agent's advertised Kafka listeners in its configured order, the
// first being the one Host and Port name, so that Metadata can answer a
// client with the addresses of the listener it connected on. Below
// level 4 the agent writes version 3 and other agents know only
// Host:Port. INVALID_REQUEST also for more than 16 endpoints, a
// listener name empty, longer than 64 bytes or given twice, an
// oversized host or a port outside [0, 65535].
type AgentHeartbeat struct {
	NodeID    int32
	AgentID   string
	Host      string
	Port      int32
	Rack      string
	LeaseMs   int64
	Applied   uint64
	Features  []FeatureRange
	Endpoints []AgentEndpoint
}

// AgentEndpoint is the address one of an agent's Kafka listeners is
// advertised at.
type AgentEndpoint struct {
	Listener string
	Host     string
	Port     int32
}

// AgentInfo is a registered agent as a View returns it.
type AgentInfo struct {
	NodeID  int32
	AgentID string
	Host    string
	Port    int32
	Rack    string
	LeaseMs int64
	// RegisteredAt is the log clock (unix ms) of the heartbeat that
	// registered AgentID under NodeID; Expires is the log clock at which
	// its lease ends unless renewed.
	RegisteredAt int64
	Expires      int64
	// Applied is the applied position of the agent's newest heartbeat: a
	// lower bound of where its copy is now, since a live copy only moves
	// forward. 0 when the heartbeat carried none (version 1).
	Applied uint64
	// Features are the ranges its build supports, sorted by name; nil
	// when its newest heartbeat carried none (version 1 or 2: written at
	// strand.metadata.version 1, or by a build before feature levels).
	Features []FeatureRange
	// Endpoints are its advertised listeners, first the one Host:Port
	// names; nil when its newest heartbeat carried none (below version
	// 4).
	Endpoints []AgentEndpoint
}

func (AgentHeartbeat) Type() CommandType { return TypeAgentHeartbeat }
func (AgentHeartbeat) version() uint16   { return 4 }

// appendPayload writes version 4: version 3's fields, then Endpoints.
func (c AgentHeartbeat) appendPayload(b []byte) []byte {
	return appendAgentEndpoints(c.appendPayloadV3(b), c.Endpoints)
}

// appendPayloadV3 writes version 2's fields, then Features.
func (c AgentHeartbeat) appendPayloadV3(b []byte) []byte {
	return appendFeatureRanges(c.appendPayloadV2(b), c.Features)
}

// appendPayloadAt writes version 2, without Features, for
// strand.metadata.version 1, and version 3, without Endpoints, for
// levels 2 and 3.
func (c AgentHeartbeat) appendPayloadAt(b []byte, v uint16) []byte {
	switch v {
	case 2:
		return c.appendPayloadV2(b)
	case 3:
		return c.appendPayloadV3(b)
	}
	panic(fmt.Sprintf("meta: AgentHeartbeat is not written at version %d", v))
}

func appendAgentEndpoints(b []byte, eps []AgentEndpoint) []byte {
	b = appendUvarint(b, uint64(len(eps)))
	for _, e := range eps {
		b = appendString(b, e.Listener)
		b = appendString(b, e.Host)
		b = appendVarint(b, int64(e.Port))
	}
	return b
}

// agentEndpoints reads what appendAgentEndpoints wrote; nil for none.
func (r *reader) agentEndpoints() []AgentEndpoint {
	// Each takes at least three bytes: two string lengths and a port.
	n := r.count(3)
	if n == 0 {
		return nil
	}
	eps := make([]AgentEndpoint, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		eps = append(eps, AgentEndpoint{Listener: r.string(), Host: r.string(), Port: r.int32()})
	}
	return eps
}

// appendPayloadV2 writes version 1's fields, then Applied.
func (c AgentHeartbeat) appendPayloadV2(b []byte) []byte {
	b = appendVarint(b, int64(c.NodeID))
	b = appendString(b, c.AgentID)
	b = appendString(b, c.Host)
	b = appendVarint(b, int64(c.Port))
	b = appendString(b, c.Rack)
	b = appendVarint(b, c.LeaseMs)
	return appendUvarint(b, uint64(c.Applied))
}

// readAgentHeartbeatV1 reads version 1's fields, which version 2 extends.
func readAgentHeartbeatV1(r *reader) AgentHeartbeat {
	var c AgentHeartbeat
	c.NodeID = r.int32()
	c.AgentID = r.string()
	c.Host = r.string()
	c.Port = r.int32()
	c.Rack = r.string()
	c.LeaseMs = r.varint()
	return c
}

func decodeAgentHeartbeatV1(p []byte) (AgentHeartbeat, error) {
	r := &reader{b: p}
	c := readAgentHeartbeatV1(r)
	return c, r.done()
}

func decodeAgentHeartbeatV2(p []byte) (AgentHeartbeat, error) {
	r := &reader{b: p}
	c := readAgentHeartbeatV1(r)
	c.Applied = r.uvarint()
	return c, r.done()
}

func decodeAgentHeartbeatV3(p []byte) (AgentHeartbeat, error) {
	r := &reader{b: p}
	c := readAgentHeartbeatV1(r)
	c.Applied = r.uvarint()
	c.Features = r.featureRanges()
	return c, r.done()
}

func decodeAgentHeartbeatV4(p []byte) (AgentHeartbeat, error) {
	r := &reader{b: p}
	c := readAgentHeartbeatV1(r)
	c.Applied = r.uvarint()
	c.Features = r.featureRanges()
	c.Endpoints = r.agentEndpoints()
	return c, r.done()
}

func agentKey(nodeID int32) []byte {
	return binary.BigEndian.AppendUint32([]byte{prefixAgent}, uint32(nodeID))
}

var keyClusterID = []byte{prefixClusterID}

// agentRecordV2 is the agent record with Applied appended. A record with
// Applied 0 keeps the version 1 layout byte for byte, so a log of version
// 1 heartbeats builds the same state, and digest, as builds before
// version 2 did: their snapshots and ours of one position still agree.
// agentRecordV3 appends Features to version 2 (Applied may then be 0), and
// likewise only a record with Features uses it; agentRecordV4 appends
// Endpoints to version 3 (Applied and Features may then be empty), only
// for a record with Endpoints.
const (
	agentRecordV2 = 2
	agentRecordV3 = 3
	agentRecordV4 = 4
)

func (a *AgentInfo) encode() []byte {
	version := byte(recordV1)
	switch {
	case len(a.Endpoints) > 0:
		version = agentRecordV4
	case len(a.Features) > 0:
		version = agentRecordV3
	case a.Applied != 0:
		version = agentRecordV2
	}
	b := []byte{version}
	b = appendString(b, a.AgentID)
	b = appendString(b, a.Host)
	b = appendVarint(b, int64(a.Port))
	b = appendString(b, a.Rack)
	b = appendVarint(b, a.LeaseMs)
	b = appendVarint(b, a.RegisteredAt)
	b = appendVarint(b, a.Expires)
	if version >= agentRecordV2 {
		b = appendUvarint(b, uint64(a.Applied))
	}
	if version >= agentRecordV3 {
		b = appendFeatureRanges(b, a.Features)
	}
	if version == agentRecordV4 {
		b = appendAgentEndpoints(b, a.Endpoints)
	}
	return b
}

func decodeAgentInfo(k, v []byte) (AgentInfo, error) {
	if len(k) != 5 {
		return AgentInfo{}, fmt.Errorf("%w: agent key is %d bytes", ErrCorrupt, len(k))
	}
	a := AgentInfo{NodeID: int32(binary.BigEndian.Uint32(k[1:]))}
	var version byte
	if len(v) > 0 {
		version = v[0]
	}
	var r reader
	if version == agentRecordV2 || version == agentRecordV3 || version == agentRecordV4 {
		r = reader{b: v[1:]}
	} else {
		r = recordReader(v)
	}
	a.AgentID = r.string()
	a.Host = r.string()
	a.Port = r.int32()
	a.Rack = r.string()
	a.LeaseMs = r.varint()
	a.RegisteredAt = r.varint()
	a.Expires = r.varint()
	if version >= agentRecordV2 {
		a.Applied = r.uvarint()
	}
	if version >= agentRecordV3 {
		a.Features = r.featureRanges()
	}
	if version == agentRecordV4 {
		a.Endpoints = r.agentEndpoints()
	}
	// encode writes the lowest version that holds the state: one state,
	// one encoding.
	if (version == agentRecordV2 && a.Applied == 0) || (version == agentRecordV3 && len(a.Features) == 0) ||
		(version == agentRecordV4 && len(a.Endpoints) == 0) {
		r.fail(errRange)
	}
	if err := r.done(); err != nil {
		return AgentInfo{}, corrupt("agent", err)
	}
	return a, nil
}

func validHeartbeat(c *AgentHeartbeat) (Result, bool) {
	switch {
	case c.NodeID < 0:
		return failed(kerr.InvalidRequest, "node id %d is negative", c.NodeID), false
	case c.AgentID == "" || len(c.AgentID) > maxAgentIDBytes:
		return failed(kerr.InvalidRequest, "agent id of %d bytes, want 1 to %d", len(c.AgentID), maxAgentIDBytes), false
	case len(c.Host) > maxAgentHostBytes || len(c.Rack) > maxAgentRackBytes:
		return failed(kerr.InvalidRequest, "host or rack too long"), false
	case c.Port < 0 || c.Port > 65535:
		return failed(kerr.InvalidRequest, "port %d out of range", c.Port), false
	case c.LeaseMs < 0 || c.LeaseMs > maxAgentLeaseMs:
		return failed(kerr.InvalidRequest, "lease %d ms, want 0 to %d", c.LeaseMs, maxAgentLeaseMs), false
	case len(c.Features) > maxFeatures:
		return failed(kerr.InvalidRequest, "%d features, want at most %d", len(c.Features), maxFeatures), false
	case len(c.Endpoints) > maxAgentEndpoints:
		return failed(kerr.InvalidRequest, "%d endpoints, want at most %d", len(c.Endpoints), maxAgentEndpoints), false
	}
	for i, e := range c.Endpoints {
		switch {
		case e.Listener == "" || len(e.Listener) > maxListenerNameBytes:
			return failed(kerr.InvalidRequest, "listener name of %d bytes, want 1 to %d", len(e.Listener), maxListenerNameBytes), false
		case len(e.Host) > maxAgentHostBytes:
			return failed(kerr.InvalidRequest, "listener %s: host too long", e.Listener), false
		case e.Port < 0 || e.Port > 65535:
			return failed(kerr.InvalidRequest, "listener %s: port %d out of range", e.Listener, e.Port), false
		}
		for _, o := range c.Endpoints[:i] {
			if o.Listener == e.Listener {
				return failed(kerr.InvalidRequest, "listener %s given twice", e.Listener), false
			}
		}
	}
	for _, f := range c.Features {
		if !validFeatureName(f.Name) || f.Min < 0 || f.Min > f.Max {
			return failed(kerr.InvalidRequest, "feature %q range %d-%d", f.Name, f.Min, f.Max), false
		}
	}
	return Result{}, true
}

func (a *Applier) agentHeartbeat(c AgentHeartbeat) (Result, error) {
	if res, ok := validHeartbeat(&c); !ok {
		return res, nil
	}
	if err := a.loadClock(); err != nil {
		return Result{}, err
	}
	key := agentKey(c.NodeID)
	var prev AgentInfo
	v, held, err := a.get(key)
	if err != nil {
		return Result{}, err
	}
	if held {
		if prev, err = decodeAgentInfo(key, v); err != nil {
			return Result{}, err
		}
	}
	if c.LeaseMs == 0 {
		if held && prev.AgentID == c.AgentID {
			if err := a.heartbeatVoice(AgentInfo{}, a.ts, c.AgentID); err != nil {
				return Result{}, err
			}
			return Result{}, a.b.Delete(key)
		}
		return Result{}, nil
	}
	if err := a.fixClusterID(); err != nil {
		return Result{}, err
	}
	info := AgentInfo{
		NodeID: c.NodeID, AgentID: c.AgentID, Host: c.Host, Port: c.Port, Rack: c.Rack,
		LeaseMs: c.LeaseMs, RegisteredAt: a.clock, Expires: satAdd(a.clock, c.LeaseMs),
		// A proposer cannot have applied its own heartbeat before
		// proposing it; a larger claim would only let a trim cut it off.
		Applied:   min(c.Applied, a.pos),
		Features:  c.Features,
		Endpoints: c.Endpoints,
	}
	var res Result
	left := ""
	if held && prev.AgentID == c.AgentID {
		info.RegisteredAt = prev.RegisteredAt
	} else if held {
		left = prev.AgentID
		if prev.Expires > a.clock {
			res = failed(kerr.DuplicateBrokerRegistration, "node id %d taken over from live agent %s", c.NodeID, prev.AgentID)
		}
	}
	if err := a.heartbeatVoice(info, a.ts, left); err != nil {
		return Result{}, err
	}
	return res, a.b.Set(key, info.encode())
}

// fixClusterID stores the cluster id if none is stored yet. It is derived
// from the position of the first registration, so it is the same on every
// copy and differs between logs.
func (a *Applier) fixClusterID() error {
	if _, ok, err := a.get(keyClusterID); err != nil || ok {
		return err
	}
	h := sha256.New()
	h.Write([]byte("strand cluster id\x00"))
	var nums [12]byte
	binary.BigEndian.PutUint64(nums[0:], a.pos)
	binary.BigEndian.PutUint32(nums[8:], uint32(a.idx))
	h.Write(nums[:])
	sum := h.Sum(nil)
	// Kafka prints a cluster id as a base64url UUID: 16 bytes, 22 chars.
	id := base64.RawURLEncoding.EncodeToString(sum[:16])
	return a.b.Set(keyClusterID, append([]byte{recordV1}, id...))
}

// ClusterID returns the replicated cluster id, or "" before the first
// agent registered.
func (v *View) ClusterID() (string, error) {
	val, ok, err := v.get(keyClusterID)
	if err != nil || !ok {
		return "", err
	}
	if len(val) < 1 || val[0] != recordV1 {
		return "", fmt.Errorf("%w: cluster id record", ErrCorrupt)
	}
	return string(val[1:]), nil
}

// Agents returns every registered agent, live or not, sorted by node id.
func (v *View) Agents() ([]AgentInfo, error) {
	it, err := v.r.NewIter([]byte{prefixAgent}, []byte{prefixAgent + 1})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var as []AgentInfo
	for ok := it.First(); ok; ok = it.Next() {
		a, err := decodeAgentInfo(it.Key(), it.Value())
		if err != nil {
			return nil, err
		}
		as = append(as, a)
	}
	return as, it.Error()
}

// LiveAgents returns the agents whose lease ends after the log clock,
// sorted by node id. Time is the log's only: an agent that stopped
// renewing drops out once other entries move the clock past its expiry.
func (v *View) LiveAgents() ([]AgentInfo, error) {
	clock, err := v.LogClock()
	if err != nil {
		return nil, err
	}
	as, err := v.Agents()
	if err != nil {
		return nil, err
	}
	live := as[:0]
	for _, a := range as {
		if a.Expires > clock {
			live = append(live, a)
		}
	}
	return live, nil
}

// LowestLiveApplied returns the live agent (lease ending after this view's
// log clock, as in LiveAgents) with the lowest Applied, skipping the agent
// named except, and false if no other agent is live. The log must not be
// trimmed above its Applied, or that agent halts with
// sharedlog.ErrTrimmed while it is still serving.
//
// The caller skips itself because it knows its own position better than
// its last heartbeat does: a replica that snapshotted at P has applied P.
//
// An agent whose heartbeat carried no applied position (version 1, from a
// build before version 2) counts as Applied 0: where it is is unknown, so
// while its lease is live it holds trimming back entirely. A version 2
// renewal, a leave or the end of its lease releases it. Agents whose
// lease ran out hold nothing, even if they are still running: liveness
// is the log clock's, as everywhere else.
func (v *View) LowestLiveApplied(except string) (AgentInfo, bool, error) {
	live, err := v.LiveAgents()
	if err != nil {
		return AgentInfo{}, false, err
	}
	var low AgentInfo
	found := false
	for _, a := range live {
		if a.AgentID == except {
			continue
		}
		if !found || a.Applied < low.Applied {
			low, found = a, true
		}
	}
	return low, found, nil
}
