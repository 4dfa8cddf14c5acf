package group

import (
	"slices"
	"strings"
)

// Server-side assignors of KIP-848 consumer groups. The coordinator, not a
// member, computes each member's target assignment whenever the group
// epoch moves (a member joins, leaves or changes its subscription, or a
// subscribed topic's partition count changes).

// Assignor names a client may put in ConsumerGroupHeartbeat's
// ServerAssignor (group.consumer.assignors).
const (
	UniformAssignor = "uniform"
	RangeAssignor   = "range"
)

// assignment is a set of partitions by topic name, each list sorted.
type assignment map[string][]int32

func (a assignment) clone() assignment {
	out := make(assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func (a assignment) equal(b assignment) bool {
	if a.count() != b.count() {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

func (a assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) has(topic string, p int32) bool {
	_, ok := slices.BinarySearch(a[topic], p)
	return ok
}

func (a assignment) add(topic string, p int32) {
	ps := a[topic]
	i, ok := slices.BinarySearch(ps, p)
	if !ok {
		a[topic] = slices.Insert(ps, i, p)
	}
}

func (a assignment) remove(topic string, p int32) {
	ps := a[topic]
	if i, ok := slices.BinarySearch(ps, p); ok {
		ps = slices.Delete(ps, i, i+1)
		if len(ps) == 0 {
			delete(a, topic)
		} else {
			a[topic] = ps
		}
	}
}

// minus is a without b.
func (a assignment) minus(b assignment) assignment {
	out := make(assignment)
	for t, ps := range a {
		for _, p := range ps {
			if !b.has(t, p) {
				out.add(t, p)
			}
		}
	}
	return out
}

// intersect is what a and b share.
func (a assignment) intersect(b assignment) assignment {
	out := make(assignment)
	for t, ps := range a {
		for _, p := range ps {
			if b.has(t, p) {
				out.add(t, p)
			}
		}
	}
	return out
}

// sortedTopics is a's topics in order, for output that must not depend on
// map order.
func (a assignment) sortedTopics() []string {
	ts := make([]string, 0, len(a))
	for t := range a {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}

// assignMember is what an assignor knows of a member.
type assignMember struct {
	id string
	// topics is the member's resolved subscription, sorted.
	topics []string
	// previous is the member's last target assignment: the uniform
	// assignor keeps what it can of it.
	previous assignment
}

func (m *assignMember) subscribes(topic string) bool {
	_, ok := slices.BinarySearch(m.topics, topic)
	return ok
}

// assign runs the named assignor (unknown names run uniform) over members
// sorted by id and the partition counts of the subscribed topics. It is
// deterministic: the same input gives the same output.
func assign(name string, members []assignMember, partitions map[string]int32) map[string]assignment {
	slices.SortFunc(members, func(a, b assignMember) int { return strings.Compare(a.id, b.id) })
	if name == RangeAssignor {
		return assignRange(members, partitions)
	}
	return assignUniform(members, partitions)
}

func knownAssignor(name string) bool { return name == UniformAssignor || name == RangeAssignor }

// assignRange is the range assignor: for each topic, the members that
// subscribe to it (by id) get contiguous ranges of its partitions, the
// first ones one more when the partitions do not divide evenly. Members
// at the same rank get the same partition numbers of equally sized
// topics, which is what co-partitioned joins rely on.
func assignRange(members []assignMember, partitions map[string]int32) map[string]assignment {
	out := make(map[string]assignment, len(members))
	for _, m := range members {
		out[m.id] = make(assignment)
	}
	for _, topic := range sortedKeys(partitions) {
		var subs []string
		for _, m := range members {
			if m.subscribes(topic) {
				subs = append(subs, m.id)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n := partitions[topic]
		per, extra := n/int32(len(subs)), n%int32(len(subs))
		next := int32(0)
		for i, id := range subs {
			take := per
			if int32(i) < extra {
				take++
			}
			for p := next; p < next+take; p++ {
				out[id].add(topic, p)
			}
			next += take
		}
	}
	return out
}

// assignUniform spreads partitions evenly over the members that subscribe
// to them and keeps each member's previous partitions where balance
// allows, so a change of membership moves as few partitions as it can.
func assignUniform(members []assignMember, partitions map[string]int32) map[string]assignment {
	out := make(map[string]assignment, len(members))
	idx := make(map[string]int, len(members))
	for i, m := range members {
		out[m.id] = make(assignment)
		idx[m.id] = i
	}
	if len(members) == 0 {
		return out
	}
	topics := sortedKeys(partitions)
	// eligible counts the partitions each member could take, to bound
	// how many it keeps: at most its fair share, rounded up.
	total := 0
	for _, t := range topics {
		for _, m := range members {
			if m.subscribes(t) {
				total += int(partitions[t])
				break
			}
		}
	}
	quota := (total + len(members) - 1) / len(members)

	taken := make(map[tp]bool)
	for _, m := range members {
		for _, t := range m.previous.sortedTopics() {
			if !m.subscribes(t) {
				continue
			}
			for _, p := range m.previous[t] {
				if p >= partitions[t] || taken[tp{t, p}] || out[m.id].count() >= quota {
					continue
				}
				out[m.id].add(t, p)
				taken[tp{t, p}] = true
			}
		}
	}
	// Free partitions go to the least loaded member that subscribes.
	for _, t := range topics {
		for p := range partitions[t] {
			if taken[tp{t, p}] {
				continue
			}
			best := -1
			for i, m := range members {
				if m.subscribes(t) && (best < 0 || out[m.id].count() < out[members[best].id].count()) {
					best = i
				}
			}
			if best >= 0 {
				out[members[best].id].add(t, p)
				taken[tp{t, p}] = true
			}
		}
	}
	// With different subscriptions, the fill can leave a member two or
	// more ahead of one that could take its partitions: move them. Each
	// move narrows the gap, so the rounds are bounded by the partitions.
	for range total + 1 {
		if !uniformMoveOne(members, out) {
			break
		}
	}
	return out
}

// uniformMoveOne moves one partition from the most loaded member to a
// member at least two behind that subscribes to it; false if none can.
func uniformMoveOne(members []assignMember, out map[string]assignment) bool {
	order := slices.Clone(members)
	slices.SortStableFunc(order, func(a, b assignMember) int { return out[b.id].count() - out[a.id].count() })
	for _, from := range order {
		for i := len(order) - 1; i >= 0; i-- {
			to := order[i]
			if out[from.id].count()-out[to.id].count() < 2 {
				break
			}
			for _, t := range out[from.id].sortedTopics() {
				if !to.subscribes(t) {
					continue
				}
				ps := out[from.id][t]
				p := ps[len(ps)-1]
				out[from.id].remove(t, p)
				out[to.id].add(t, p)
				return true
			}
		}
	}
	return false
}

// tp is a topic partition by name.
type tp struct {
	topic     string
	partition int32
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
