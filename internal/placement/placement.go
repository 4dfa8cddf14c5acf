// Package placement owns which agent coordinates a key: a consumer group
// id for the group coordinator, a transactional id for the transaction
// coordinator. Every agent computes the same answer from the same list of
// live agents, so FindCoordinator names one agent per key without asking
// anyone, and background work for a key (a group's offset expiry, a
// transaction's timeout) runs on that agent alone. It is the one place the
// mapping lives; leases in the log would replace it.
package placement

import (
	"hash/fnv"
	"slices"
)

// OwnerOf is a hash of key over the sorted, distinct node ids. It returns
// -1 when nodes is empty.
func OwnerOf(key string, nodes []int32) int32 {
	if len(nodes) == 0 {
		return -1
	}
	sorted := slices.Clone(nodes)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	h := fnv.New64a()
	h.Write([]byte(key))
	return sorted[h.Sum64()%uint64(len(sorted))]
}

// Ring places keys on the live agents as this agent sees them. While
// agents disagree on who is live, two may own a key, or none: what
// coordinates through it must stay correct then (apply re-checks every
// command), only slower.
type Ring struct {
	// Self is this agent's node id.
	Self int32
	// Live returns the node ids of the live agents, Self included. Nil,
	// or an empty list, means Self alone.
	Live func() []int32
	// Hold, when set and true, makes Self own nothing while others
	// still place keys on it: the work waits rather than move. The
	// agent holds what it decides by time while its clock disagrees
	// with the log's (package agent, clockskew.go).
	Hold func() bool
}

// Owner returns the node id of the agent that coordinates key.
func (r Ring) Owner(key string) int32 {
	var nodes []int32
	if r.Live != nil {
		nodes = r.Live()
	}
	if len(nodes) == 0 {
		return r.Self
	}
	return OwnerOf(key, nodes)
}

// Owns reports whether this agent coordinates key.
func (r Ring) Owns(key string) bool {
	if r.Hold != nil && r.Hold() {
		return false
	}
	return r.Owner(key) == r.Self
}
