package e2e

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// The share-group chaos test's history and its checker. Consumers
// (share_consumer_test.go) and the test itself append shareEvents; all
// times are CLOCK_MONOTONIC nanoseconds, one clock for every process of
// the machine, so events of different processes compare.
//
// A consumer holds a record from its acquisition (the poll that returned
// it) until the first of: it sends its acknowledgement, it dies (kill),
// the agent serving the partition dies (lost), or the acquisition lock
// expires (the deadline the broker gave). Holds of one record must not
// overlap; every record must be accepted exactly once (confirmed by the
// broker in ShareAckCallback) or archived after the delivery limit.

// Event kinds.
const (
	evAcquired = "acq"  // the consumer got the record from a poll
	evSent     = "send" // the consumer sent its ack (Ack then FlushAcks)
	evAckOK    = "ok"   // the broker confirmed that ack
	evAckErr   = "err"  // the broker refused it, or it was never confirmed
	evKill     = "kill" // the test is about to kill -9 consumer C
	evLost     = "lost" // the test is about to kill -9 the agent serving partition P
	evExit     = "exit" // consumer C stopped cleanly (or the run ended)
)

const (
	ackAccept  = "accept"
	ackRelease = "release"
)

// shareEvent is one line of the history, as JSON.
type shareEvent struct {
	T         int64  `json:"t"`            // CLOCK_MONOTONIC ns
	Ev        string `json:"ev"`           // one of the event kinds
	Consumer  string `json:"c,omitempty"`  // consumer incarnation, e.g. "c3.2"
	Partition int32  `json:"p"`            // record's partition (or lost's)
	Offset    int64  `json:"o"`            // record's offset
	ID        string `json:"id,omitempty"` // record's unique id (its value)
	Delivery  int32  `json:"dc,omitempty"` // delivery count (acq)
	Deadline  int64  `json:"dl,omitempty"` // lock deadline, monotonic ns (acq)
	Ack       string `json:"ack,omitempty"`
	Err       string `json:"err,omitempty"`
}

// readShareEvents parses a history file; a torn last line (the writer
// was killed mid-write) is dropped, any other bad line is an error.
func readShareEvents(r io.Reader) ([]shareEvent, error) {
	var out []shareEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var bad string
	for sc.Scan() {
		if bad != "" {
			return nil, fmt.Errorf("bad history line %q", bad)
		}
		var e shareEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			bad = sc.Text()
			continue
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// shareHold is one consumer's hold of one record.
type shareHold struct {
	consumer   string
	id         string
	start, end int64
	deadline   int64 // the lock's expiry, 0 if unknown
	delivery   int32
	ack        string // the ack it sent, "" if none
	confirmed  bool   // the broker confirmed the ack
	why        string // what ended it
}

func (h shareHold) String() string {
	return fmt.Sprintf("%s [%d, %d] delivery %d ended by %s", h.consumer, h.start, h.end, h.delivery, h.why)
}

// shareRecord is what the producer wrote: a unique id at an offset, and
// whether consumers always release it (so it must end archived).
type shareRecord struct {
	ID        string
	Partition int32
	Offset    int64
	Poison    bool
}

// shareVerdict sums up a checked history.
type shareVerdict struct {
	Accepted            int // exactly one broker-confirmed accept
	AcceptedUnconfirmed int // last holder sent accept and died or lost its answer; never redelivered
	Archived            int // delivered limit times, never accepted
	// ArchivedUnseen were seen delivered fewer times than the limit,
	// never accepted, and done: a delivery whose ShareFetch answer
	// died with a killed consumer (or agent) is counted by the broker
	// but logged by no one. Allowed only when at least as many kills
	// came after the record's last seen hold as deliveries are unseen.
	ArchivedUnseen int
	// UnseenDeliveries counts gaps in the delivery counts consumers saw
	// (deliveries whose answer nobody logged), for the same reason.
	UnseenDeliveries int
	Redelivered      int // records acquired more than once
	Holds            int
	Errs             []string
}

// checkShareHistory checks events against the records produced and the
// group's delivery count limit. It is pure: the unit tests feed it
// hand-made histories.
func checkShareHistory(records []shareRecord, events []shareEvent, limit int32) shareVerdict {
	var v shareVerdict
	fail := func(format string, args ...any) {
		if len(v.Errs) < 50 {
			v.Errs = append(v.Errs, fmt.Sprintf(format, args...))
		}
	}
	events = slices.Clone(events)
	slices.SortStableFunc(events, func(a, b shareEvent) int { return cmp.Compare(a.T, b.T) })

	byID := map[string]shareRecord{}
	for _, r := range records {
		byID[r.ID] = r
	}
	// open holds per consumer, by record id
	open := map[string]map[string]*shareHold{}
	var holds []*shareHold
	closeHold := func(h *shareHold, at int64, why string) {
		if h.why != "" {
			return // ended already: the consumer does not know it
		}
		h.end = max(h.start, min(at, h.deadlineOr(at)))
		h.why = why
		if at > h.deadlineOr(at) {
			h.why = why + " after lock expiry"
		}
	}
	ended := map[string]bool{}
	// kills are the times of consumer kills and of agent kills per
	// partition (-1: any partition), for unseen deliveries.
	type killAt struct {
		t         int64
		partition int32
	}
	var kills []killAt
	for _, e := range events {
		switch e.Ev {
		case evAcquired:
			r, ok := byID[e.ID]
			switch {
			case !ok:
				fail("%s acquired %q at %d/%d, which was never produced", e.Consumer, e.ID, e.Partition, e.Offset)
				continue
			case r.Partition != e.Partition || r.Offset != e.Offset:
				fail("%s acquired %q at %d/%d, produced at %d/%d", e.Consumer, e.ID, e.Partition, e.Offset, r.Partition, r.Offset)
			case ended[e.Consumer]:
				fail("%s acquired %q after it was killed or exited", e.Consumer, e.ID)
			}
			if e.Delivery > limit {
				fail("%q delivered a %d. time to %s, past the delivery count limit %d", e.ID, e.Delivery, e.Consumer, limit)
			}
			m := open[e.Consumer]
			if m == nil {
				m = map[string]*shareHold{}
				open[e.Consumer] = m
			}
			if prev := m[e.ID]; prev != nil {
				closeHold(prev, e.T, "its own reacquisition")
			}
			h := &shareHold{consumer: e.Consumer, id: e.ID, start: e.T, delivery: e.Delivery, deadline: e.Deadline}
			m[e.ID] = h
			holds = append(holds, h)
		case evSent:
			h := open[e.Consumer][e.ID]
			if h == nil {
				fail("%s sent %s of %q it does not hold", e.Consumer, e.Ack, e.ID)
				continue
			}
			closeHold(h, e.T, e.Ack)
			h.ack = e.Ack
		case evAckOK, evAckErr:
			// The answer belongs to the latest hold of this consumer
			// that sent an ack for the record.
			for i := len(holds) - 1; i >= 0; i-- {
				h := holds[i]
				if h.consumer == e.Consumer && h.id == e.ID && h.ack != "" {
					h.confirmed = e.Ev == evAckOK
					break
				}
			}
			if m := open[e.Consumer]; m != nil && m[e.ID] != nil && m[e.ID].ack != "" {
				delete(m, e.ID)
			}
		case evKill, evExit:
			if e.Ev == evKill {
				kills = append(kills, killAt{e.T, -1})
			}
			for _, h := range open[e.Consumer] {
				if h.ack == "" {
					closeHold(h, e.T, e.Ev)
				}
			}
			delete(open, e.Consumer)
			ended[e.Consumer] = true
		case evLost:
			kills = append(kills, killAt{e.T, e.Partition})
			for _, m := range open {
				for id, h := range m {
					if h.ack == "" && byID[id].Partition == e.Partition {
						// The consumer may still send an ack; the
						// broker must refuse it.
						closeHold(h, e.T, fmt.Sprintf("the death of partition %d's agent", e.Partition))
					}
				}
			}
		}
	}
	// Holds never ended in the history end at their lock deadline.
	for _, m := range open {
		for _, h := range m {
			if h.ack == "" && h.why == "" {
				h.end, h.why = max(h.start, h.deadline), "lock expiry (history ended)"
			}
		}
	}
	v.Holds = len(holds)
	killsAfter := func(after int64, p int32) int {
		n := 0
		for _, k := range kills {
			if k.t > after && (k.partition < 0 || k.partition == p) {
				n++
			}
		}
		return n
	}

	perID := map[string][]*shareHold{}
	for _, h := range holds {
		perID[h.id] = append(perID[h.id], h)
	}
	for _, r := range records {
		hs := perID[r.ID]
		slices.SortStableFunc(hs, func(a, b *shareHold) int { return cmp.Compare(a.start, b.start) })
		if len(hs) > 1 {
			v.Redelivered++
		}
		// No two holds at once: each starts at or after every earlier
		// one ended.
		for i := 1; i < len(hs); i++ {
			for _, prev := range hs[:i] {
				if hs[i].start < prev.end {
					fail("%q held by two consumers at once: %v and %v", r.ID, prev, hs[i])
				}
			}
		}
		var accepts []*shareHold
		var maxDelivery int32
		for _, h := range hs {
			if h.delivery > maxDelivery+1 {
				v.UnseenDeliveries += int(h.delivery - maxDelivery - 1)
			}
			maxDelivery = max(maxDelivery, h.delivery)
			if h.ack == ackAccept && h.confirmed {
				accepts = append(accepts, h)
			}
		}
		switch {
		case len(accepts) > 1:
			fail("%q accepted %d times: %v", r.ID, len(accepts), accepts)
		case len(accepts) == 1:
			for _, h := range hs {
				if h.start > accepts[0].end {
					fail("%q delivered again after its accept was confirmed: %v after %v", r.ID, h, accepts[0])
				}
			}
			if r.Poison {
				fail("%q (always released) was accepted: %v", r.ID, accepts[0])
			}
			v.Accepted++
		case len(hs) > 0 && hs[len(hs)-1].ack == ackAccept && !r.Poison:
			// The last holder sent accept and died before the answer
			// (or the answer was lost with the agent): the broker may
			// have taken it; it never handed the record out again.
			v.AcceptedUnconfirmed++
		case maxDelivery >= limit:
			v.Archived++
		case len(hs) > 0 && killsAfter(hs[len(hs)-1].end, r.Partition) >= int(limit-maxDelivery):
			v.ArchivedUnseen++
		case len(hs) == 0:
			fail("%q (%d/%d) lost: never delivered", r.ID, r.Partition, r.Offset)
		default:
			fail("%q (%d/%d) lost: delivered %d times (limit %d), never accepted; last %v", r.ID, r.Partition, r.Offset, maxDelivery, limit, hs[len(hs)-1])
		}
	}
	return v
}

// deadlineOr is the hold's lock deadline, or at when the consumer did
// not know one.
func (h *shareHold) deadlineOr(at int64) int64 {
	if h.deadline <= 0 {
		return at
	}
	return h.deadline
}

func (v shareVerdict) String() string {
	return fmt.Sprintf("%d accepted, %d accepted unconfirmed, %d archived (%d with unseen deliveries), %d redelivered, %d holds, %d unseen deliveries; %d errors: %s",
		v.Accepted, v.AcceptedUnconfirmed, v.Archived+v.ArchivedUnseen, v.ArchivedUnseen, v.Redelivered, v.Holds, v.UnseenDeliveries, len(v.Errs), strings.Join(v.Errs, "; "))
}
