package group

import (
	"cmp"
	"slices"
)

// assignShare is the share groups' simple assignor (KIP-932's
// SimpleAssignor): every partition of a subscribed topic is assigned,
// and a partition may go to several members, since the records of a
// share partition are handed out one acquisition at a time.
//
// Each topic is assigned among the members that subscribe to it:
//   - members <= partitions: each partition to exactly one member, each
//     member floor(P/M) or ceil(P/M) partitions;
//   - members > partitions: each member exactly one partition, each
//     partition floor(M/P) or ceil(M/P) members.
//
// Sticky where balance allows: the extra ("ceil") places go first to the
// members (or partitions) that held most before, and a member keeps what
// it had while its quota and the partition's room allow; the rest is
// handed out in member id order, each member taking the partition with
// most room left (lowest number on a tie). The result depends only on
// the members, subscriptions, previous assignments and partition counts:
// every coordinator computes the same one.
func assignShare(members []assignMember, partitions map[string]int32) map[string]assignment {
	slices.SortFunc(members, func(a, b assignMember) int { return cmp.Compare(a.id, b.id) })
	out := make(map[string]assignment, len(members))
	for _, m := range members {
		out[m.id] = make(assignment)
	}
	for _, topic := range sortedKeys(partitions) {
		n := int(partitions[topic])
		var subs []*assignMember
		for i := range members {
			if members[i].subscribes(topic) {
				subs = append(subs, &members[i])
			}
		}
		if n <= 0 || len(subs) == 0 {
			continue
		}
		assignShareTopic(topic, n, subs, out)
	}
	return out
}

// assignShareTopic assigns topic's n partitions to subs (sorted by id).
func assignShareTopic(topic string, n int, subs []*assignMember, out map[string]assignment) {
	m := len(subs)
	// held[i] is what subs[i] held of topic before, valid partitions
	// only; holders[p] how many held p.
	held := make([][]int32, m)
	holders := make([]int, n)
	for i, s := range subs {
		for _, p := range s.previous[topic] {
			if int(p) < n {
				held[i] = append(held[i], p)
				holders[p]++
			}
		}
	}
	quota := make([]int, m) // partitions per member
	room := make([]int, n)  // members per partition
	if m <= n {
		base, extra := n/m, n%m
		order := rankBy(m, func(i int) int { return len(held[i]) })
		for rank, i := range order {
			quota[i] = base
			if rank < extra {
				quota[i]++
			}
		}
		for p := range room {
			room[p] = 1
		}
	} else {
		base, extra := m/n, m%n
		order := rankBy(n, func(p int) int { return holders[p] })
		for rank, p := range order {
			room[p] = base
			if rank < extra {
				room[p]++
			}
		}
		for i := range quota {
			quota[i] = 1
		}
	}
	got := make([]map[int32]bool, m)
	for i := range subs {
		got[i] = make(map[int32]bool)
		for _, p := range held[i] {
			if len(got[i]) < quota[i] && room[p] > 0 && !got[i][p] {
				got[i][p] = true
				room[p]--
			}
		}
	}
	for i := range subs {
		for len(got[i]) < quota[i] {
			best := -1
			for p := range n {
				if room[p] > 0 && !got[i][int32(p)] && (best < 0 || room[p] > room[best]) {
					best = p
				}
			}
			if best < 0 {
				break // cannot happen: quotas and rooms sum alike
			}
			got[i][int32(best)] = true
			room[best]--
		}
		for p := range got[i] {
			out[subs[i].id].add(topic, p)
		}
	}
}

// rankBy orders 0..n-1 by score, highest first, then by index.
func rankBy(n int, score func(int) int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(score(b), score(a)) })
	return order
}
