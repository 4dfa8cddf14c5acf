package history

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// maxExamples bounds the anomalies a Report keeps of each kind; Counts
// counts them all.
const maxExamples = 20

// Report is what Check found.
type Report struct {
	// Ops is the operations checked.
	Ops int
	// Sends is the records sent, Acked those acknowledged and
	// SendsUnknown those whose outcome the producer did not learn.
	Sends, Acked, SendsUnknown int
	// Txns is the transactions, by what became of them; TxnsUnknown are
	// those whose commit outcome neither the producer nor any
	// read_committed read settled.
	Txns, Committed, Aborted, TxnsUnknown int
	// Polls is the polls, Reads the records they returned.
	Polls, Reads int
	// Counts is the anomalies found, by kind; kinds not found are
	// absent.
	Counts map[Kind]int
	// Anomalies are examples: the first maxExamples of each kind, in
	// the order found.
	Anomalies []Anomaly

	seen map[string]bool
}

// Valid reports whether no anomaly was found.
func (r *Report) Valid() bool { return len(r.Counts) == 0 }

// Found returns the kinds found, in the order of Kinds.
func (r *Report) Found() []Kind {
	var out []Kind
	for _, k := range Kinds {
		if r.Counts[k] > 0 {
			out = append(out, k)
		}
	}
	return out
}

// Summary is one line of counts, then one line per anomaly example.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d operations: %d records sent (%d acknowledged, %d indeterminate), %d transactions (%d committed, %d aborted, %d indeterminate), %d polls returning %d records; ",
		r.Ops, r.Sends, r.Acked, r.SendsUnknown, r.Txns, r.Committed, r.Aborted, r.TxnsUnknown, r.Polls, r.Reads)
	if r.Valid() {
		b.WriteString("no anomalies")
		return b.String()
	}
	var kinds []string
	for _, k := range r.Found() {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, r.Counts[k]))
	}
	b.WriteString("anomalies: " + strings.Join(kinds, ", "))
	for _, a := range r.Anomalies {
		b.WriteString("\n  " + a.String())
	}
	return b.String()
}

// add records a, once per kind, process, partition, offset and value.
func (r *Report) add(a Anomaly) {
	key := fmt.Sprintf("%s\x00%s\x00%s\x00%d\x00%s", a.Kind, a.Process, a.TP, a.Offset, a.Value)
	if r.seen[key] {
		return
	}
	r.seen[key] = true
	if r.Counts[a.Kind] < maxExamples {
		r.Anomalies = append(r.Anomalies, a)
	}
	r.Counts[a.Kind]++
}

// value is everything known of one value.
type value struct {
	name string
	// send is the Send that wrote it; nil for a value read that no one
	// sent.
	send *Send
	txn  *txn
	// offsets are the distinct offsets it was acknowledged or read at
	// in send.TP.
	offsets []int64
	// read: some consumer read it, at either isolation level.
	read bool
}

func (v *value) addOffset(off int64) {
	if !slices.Contains(v.offsets, off) {
		v.offsets = append(v.offsets, off)
	}
}

// txn is everything known of one transaction.
type txn struct {
	id string
	// commitAt is when commit was first asked for; commitAsked whether
	// it ever was.
	commitAt    time.Duration
	commitAsked bool
	// commitOK: a commit was confirmed. commitUnsure: a commit's
	// outcome was not learned.
	commitOK, commitUnsure bool
	// readRC: a read_committed consumer read one of its records.
	readRC bool
}

// committed: confirmed, or proved by a read_committed read.
func (t *txn) committed() bool { return t.commitOK || (t.commitUnsure && t.readRC) }

// aborted: commit was never asked for, or every attempt was refused.
func (t *txn) aborted() bool { return !t.commitOK && !t.commitUnsure }

// partition is what is known of one partition's log.
type partition struct {
	// log maps each offset known to hold a record to the values
	// acknowledged or read there (one, if the cluster is right).
	log map[int64][]*value
	// offsets are log's keys, ascending.
	offsets []int64
	// maxRead is the highest offset any consumer read; -1 if none.
	maxRead int64
	// drained is the highest end a Drained gave; -1 if none.
	drained int64
}

// checker holds Check's state.
type checker struct {
	rep    *Report
	values map[string]*value
	txns   map[string]*txn
	parts  map[TP]*partition
}

// Check looks for anomalies in h.
func Check(h []Op) *Report {
	c := &checker{
		rep:    &Report{Ops: len(h), Counts: make(map[Kind]int), seen: make(map[string]bool)},
		values: make(map[string]*value),
		txns:   make(map[string]*txn),
		parts:  make(map[TP]*partition),
	}
	c.index(h)
	c.checkLog()
	c.checkReads(h)
	c.checkLost()
	c.checkSessions(h)
	c.checkGroups(h)
	c.checkSends(h)
	c.rep.seen = nil
	return c.rep
}

func (c *checker) part(tp TP) *partition {
	p := c.parts[tp]
	if p == nil {
		p = &partition{log: make(map[int64][]*value), maxRead: -1, drained: -1}
		c.parts[tp] = p
	}
	return p
}

func (c *checker) txn(id string) *txn {
	t := c.txns[id]
	if t == nil {
		t = &txn{id: id}
		c.txns[id] = t
	}
	return t
}

// place notes that v was seen at offset off of tp.
func (c *checker) place(v *value, tp TP, off int64) {
	p := c.part(tp)
	if !slices.Contains(p.log[off], v) {
		p.log[off] = append(p.log[off], v)
	}
	if v.send != nil && v.send.TP == tp {
		v.addOffset(off)
	}
}

// index builds values, transactions and partition logs from every send,
// end and read, and settles what became of each transaction.
func (c *checker) index(h []Op) {
	r := c.rep
	for _, op := range h {
		switch op := op.(type) {
		case *Send:
			r.Sends++
			v := c.values[op.Value]
			if v != nil && v.send != nil {
				// Values are unique by contract; a second send of
				// one would make every check about it ambiguous.
				panic(fmt.Sprintf("history: value %q sent twice", op.Value))
			}
			if v == nil {
				v = &value{name: op.Value}
				c.values[op.Value] = v
			}
			v.send = op
			if op.Txn != "" {
				v.txn = c.txn(op.Txn)
			}
			switch op.Outcome {
			case OK:
				r.Acked++
			case Unknown:
				r.SendsUnknown++
			}
		case *EndTxn:
			t := c.txn(op.Txn)
			if !op.Commit {
				continue
			}
			if !t.commitAsked || op.Invoke < t.commitAt {
				t.commitAt = op.Invoke
			}
			t.commitAsked = true
			switch op.Outcome {
			case OK:
				t.commitOK = true
			case Unknown:
				t.commitUnsure = true
			}
		case *Poll:
			r.Polls++
			r.Reads += len(op.Records)
		}
	}
	// Acknowledged offsets go in before reads, so a value read that no
	// one sent cannot be mistaken for the one acknowledged there.
	for _, op := range h {
		if s, ok := op.(*Send); ok && s.Outcome == OK {
			c.place(c.values[s.Value], s.TP, s.Offset)
		}
	}
	for _, op := range h {
		poll, ok := op.(*Poll)
		if !ok {
			continue
		}
		for _, rec := range poll.Records {
			v := c.values[rec.Value]
			if v == nil {
				v = &value{name: rec.Value}
				c.values[rec.Value] = v
			}
			v.read = true
			if poll.Isolation == ReadCommitted && v.txn != nil {
				v.txn.readRC = true
			}
			c.place(v, rec.TP, rec.Offset)
			p := c.part(rec.TP)
			p.maxRead = max(p.maxRead, rec.Offset)
		}
	}
	for _, op := range h {
		if d, ok := op.(*Drained); ok {
			p := c.part(d.TP)
			p.drained = max(p.drained, d.End)
		}
	}
	for _, p := range c.parts {
		p.offsets = slices.Sorted(maps.Keys(p.log))
	}
	for _, t := range c.txns {
		r.Txns++
		switch {
		case t.committed():
			r.Committed++
		case t.aborted():
			r.Aborted++
		default:
			r.TxnsUnknown++
		}
	}
}

// visible reports whether a consumer at iso must deliver v where it
// exists: read_uncommitted delivers every record, read_committed those
// outside transactions and those of committed ones.
func visible(v *value, iso Isolation) bool {
	return iso == ReadUncommitted || v.txn == nil || v.txn.committed()
}

// checkLog finds offsets holding two values and values at two offsets.
func (c *checker) checkLog() {
	for _, tp := range sortedTPs(c.parts) {
		p := c.parts[tp]
		for _, off := range p.offsets {
			if vs := p.log[off]; len(vs) > 1 {
				names := make([]string, len(vs))
				for i, v := range vs {
					names[i] = fmt.Sprintf("%q", v.name)
				}
				c.rep.add(Anomaly{Kind: InconsistentOffset, TP: tp, Offset: off,
					Detail: "holds " + strings.Join(names, " and ")})
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.values)) {
		v := c.values[name]
		if len(v.offsets) > 1 {
			offs := slices.Sorted(slices.Values(v.offsets))
			c.rep.add(Anomaly{Kind: Duplicate, TP: v.send.TP, Offset: offs[1], Value: name,
				Detail: fmt.Sprintf("stored at offsets %v", offs)})
		}
	}
}

// checkReads checks each record read on its own: that someone sent it
// there, and, under read_committed, that its transaction committed and
// had been asked to before the read.
func (c *checker) checkReads(h []Op) {
	for _, op := range h {
		poll, ok := op.(*Poll)
		if !ok {
			continue
		}
		for _, rec := range poll.Records {
			v := c.values[rec.Value]
			a := Anomaly{Process: poll.Process, TP: rec.TP, Offset: rec.Offset, Value: rec.Value}
			switch {
			case v.send == nil:
				a.Kind, a.Detail = UnwrittenRead, "no producer sent it"
				c.rep.add(a)
				continue
			case v.send.TP != rec.TP:
				a.Kind, a.Detail = UnwrittenRead, "sent to "+v.send.TP.String()
				c.rep.add(a)
				continue
			}
			if poll.Isolation != ReadCommitted {
				continue
			}
			switch t := v.txn; {
			case t == nil && v.send.Outcome == Failed:
				a.Kind, a.Detail = AbortedRead, "its send failed"
			case t == nil:
				continue
			case t.aborted():
				a.Kind, a.Detail = AbortedRead, "transaction "+t.id+" aborted"
				if !t.commitAsked {
					a.Detail += " (commit never asked for)"
				}
			case poll.Complete < t.commitAt:
				a.Kind = UncommittedRead
				a.Detail = fmt.Sprintf("poll returned at %v, commit of transaction %s asked for at %v", poll.Complete, t.id, t.commitAt)
			default:
				continue
			}
			c.rep.add(a)
		}
	}
}

// checkLost finds acknowledged records no one read, where reads went
// past them or a consumer drained their partition.
func (c *checker) checkLost() {
	for _, name := range slices.Sorted(maps.Keys(c.values)) {
		v := c.values[name]
		s := v.send
		if s == nil || v.read || s.Outcome != OK || (v.txn != nil && !v.txn.committed()) {
			continue
		}
		p := c.part(s.TP)
		a := Anomaly{Kind: LostWrite, Process: s.Process, TP: s.TP, Offset: s.Offset, Value: name}
		switch {
		case p.drained >= 0 && s.Offset >= p.drained:
			a.Detail = fmt.Sprintf("acknowledged at an offset the partition's end (%d) does not reach", p.drained)
		case p.drained >= 0:
			a.Detail = fmt.Sprintf("never read; the partition was drained to %d", p.drained)
		case s.Offset <= p.maxRead:
			a.Detail = fmt.Sprintf("never read; reads reached offset %d", p.maxRead)
		default:
			continue
		}
		if v.txn != nil {
			a.Detail += "; transaction " + v.txn.id + " committed"
		}
		c.rep.add(a)
	}
}

// session is one consumer's reading of one partition, from an Assign (or
// its first read) to a revocation, a Drained or the history's end.
type session struct {
	process string
	tp      TP
	iso     Isolation
	// from is where the session started reading, -1 if unknown.
	from int64
	// last is the offset last read, -1 before the first; lastAt is
	// when the poll that returned it completed, and since when the
	// session began (its Assign or first read).
	last          int64
	lastAt, since time.Duration
	// passed are records a gap between reads went over.
	passed []passed
	// txnsRead are the transactions it read a record of.
	txnsRead map[*txn]bool
}

// passed is a record a session went over, and its offset.
type passed struct {
	off int64
	v   *value
}

// passOver notes the visible records read by anyone at offsets strictly
// between lo and hi of s's partition.
func (c *checker) passOver(s *session, lo, hi int64) {
	p := c.part(s.tp)
	i, _ := slices.BinarySearch(p.offsets, lo+1)
	for ; i < len(p.offsets) && p.offsets[i] < hi; i++ {
		for _, v := range p.log[p.offsets[i]] {
			if v.read && v.send != nil && v.send.TP == s.tp && visible(v, s.iso) {
				s.passed = append(s.passed, passed{p.offsets[i], v})
			}
		}
	}
}

// read advances s over a record a poll completed at `at` returned.
func (c *checker) read(s *session, rec Record, at time.Duration) {
	v := c.values[rec.Value]
	if v.txn != nil {
		s.txnsRead[v.txn] = true
	}
	switch {
	case s.last >= 0 && rec.Offset <= s.last:
		c.rep.add(Anomaly{Kind: NonMonotonicPoll, Process: s.process, TP: s.tp, Offset: rec.Offset, Value: rec.Value,
			Detail: fmt.Sprintf("read by a poll that returned at %v, after offset %d was read by one that returned at %v, in a session since %v",
				at, s.last, s.lastAt, s.since)})
	case s.last >= 0:
		c.passOver(s, s.last, rec.Offset)
	case s.from >= 0:
		c.passOver(s, s.from-1, rec.Offset)
	}
	s.last, s.lastAt = rec.Offset, at
}

// end closes s: records it passed over are skips, or, when it read other
// records of their transaction, a transaction seen partially.
func (c *checker) end(s *session, drainedTo int64) {
	if drainedTo >= 0 {
		switch {
		case s.last >= 0:
			c.passOver(s, s.last, drainedTo)
		case s.from >= 0:
			c.passOver(s, s.from-1, drainedTo)
		}
	}
	for _, ps := range s.passed {
		v := ps.v
		a := Anomaly{Kind: PollSkip, Process: s.process, TP: s.tp, Offset: ps.off, Value: v.name,
			Detail: fmt.Sprintf("%s session passed over it", s.iso)}
		if s.iso == ReadCommitted && v.txn != nil && s.txnsRead[v.txn] {
			a.Kind = PartialTxn
			a.Detail = fmt.Sprintf("%s session read other records of transaction %s here but not this one", s.iso, v.txn.id)
		}
		c.rep.add(a)
	}
}

// checkSessions follows each consumer's sessions through its polls.
func (c *checker) checkSessions(h []Op) {
	open := make(map[string]map[TP]*session)
	start := func(proc string, tp TP, iso Isolation, from int64, at time.Duration) *session {
		ss := open[proc]
		if ss == nil {
			ss = make(map[TP]*session)
			open[proc] = ss
		}
		if old := ss[tp]; old != nil {
			c.end(old, -1)
		}
		s := &session{process: proc, tp: tp, iso: iso, from: from, last: -1, since: at, txnsRead: make(map[*txn]bool)}
		ss[tp] = s
		return s
	}
	stop := func(proc string, tp TP, drainedTo int64) {
		if s := open[proc][tp]; s != nil {
			c.end(s, drainedTo)
			delete(open[proc], tp)
		}
	}
	for _, op := range h {
		switch op := op.(type) {
		case *Assign:
			for _, tp := range op.Removed {
				stop(op.Process, tp, -1)
			}
			for _, tp := range op.Added {
				start(op.Process, tp, op.Isolation, op.From, op.At)
			}
		case *Poll:
			for _, rec := range op.Records {
				s := open[op.Process][rec.TP]
				if s == nil {
					s = start(op.Process, rec.TP, op.Isolation, -1, op.Complete)
				}
				c.read(s, rec, op.Complete)
			}
		case *Drained:
			stop(op.Process, op.TP, op.End)
		}
	}
	for _, proc := range slices.Sorted(maps.Keys(open)) {
		for _, tp := range sortedTPs(open[proc]) {
			c.end(open[proc][tp], -1)
		}
	}
}

// groupPart is what one group read of one partition.
type groupPart struct {
	iso      Isolation
	maxRead  int64
	read     map[*value]bool
	txnsRead map[*txn]bool
}

// checkGroups checks each group as one consumer: it starts every
// partition at its beginning and resumes from what its members
// committed, which covers only what they polled, so every visible
// record below the highest offset the group read must have reached one
// of its members.
func (c *checker) checkGroups(h []Op) {
	groups := make(map[string]map[TP]*groupPart)
	for _, op := range h {
		poll, ok := op.(*Poll)
		if !ok || poll.Group == "" {
			continue
		}
		g := groups[poll.Group]
		if g == nil {
			g = make(map[TP]*groupPart)
			groups[poll.Group] = g
		}
		for _, rec := range poll.Records {
			gp := g[rec.TP]
			if gp == nil {
				gp = &groupPart{iso: poll.Isolation, maxRead: -1, read: make(map[*value]bool), txnsRead: make(map[*txn]bool)}
				g[rec.TP] = gp
			}
			v := c.values[rec.Value]
			gp.read[v] = true
			if v.txn != nil {
				gp.txnsRead[v.txn] = true
			}
			gp.maxRead = max(gp.maxRead, rec.Offset)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		for _, tp := range sortedTPs(groups[name]) {
			gp := groups[name][tp]
			p := c.part(tp)
			for _, off := range p.offsets {
				if off > gp.maxRead {
					break
				}
				for _, v := range p.log[off] {
					if !v.read || gp.read[v] || v.send == nil || v.send.TP != tp || !visible(v, gp.iso) {
						continue
					}
					a := Anomaly{Kind: PollSkip, Process: "group:" + name, TP: tp, Offset: off, Value: v.name,
						Detail: fmt.Sprintf("%s group read up to offset %d but never this", gp.iso, gp.maxRead)}
					if gp.iso == ReadCommitted && v.txn != nil && gp.txnsRead[v.txn] {
						a.Kind = PartialTxn
						a.Detail = fmt.Sprintf("%s group read other records of transaction %s here but not this one", gp.iso, v.txn.id)
					}
					c.rep.add(a)
				}
			}
		}
	}
}

// checkSends checks that each producer's acknowledged records to a
// partition were stored in the order it sent them.
func (c *checker) checkSends(h []Op) {
	type key struct {
		process string
		tp      TP
	}
	sends := make(map[key][]*Send)
	for _, op := range h {
		if s, ok := op.(*Send); ok && s.Outcome == OK {
			k := key{s.Process, s.TP}
			sends[k] = append(sends[k], s)
		}
	}
	keys := slices.SortedFunc(maps.Keys(sends), func(a, b key) int {
		if c := strings.Compare(a.process, b.process); c != 0 {
			return c
		}
		return compareTP(a.tp, b.tp)
	})
	for _, k := range keys {
		// A history lists sends as their outcomes arrive; the order
		// they were sent in is their Invoke order.
		ss := sends[k]
		slices.SortStableFunc(ss, func(a, b *Send) int { return cmp.Compare(a.Invoke, b.Invoke) })
		for i := 1; i < len(ss); i++ {
			if prev, s := ss[i-1], ss[i]; s.Offset <= prev.Offset {
				c.rep.add(Anomaly{Kind: NonMonotonicSend, Process: s.Process, TP: s.TP, Offset: s.Offset, Value: s.Value,
					Detail: fmt.Sprintf("sent after %q, which was stored at offset %d", prev.Value, prev.Offset)})
			}
		}
	}
}

func sortedTPs[V any](m map[TP]V) []TP {
	return slices.SortedFunc(maps.Keys(m), compareTP)
}

func compareTP(a, b TP) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}
