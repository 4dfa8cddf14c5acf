package history

import (
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	p0 = TP{"t", 0}
	p1 = TP{"t", 1}
)

// builder writes a synthetic history; every operation gets the next
// tick of a fake clock unless it says otherwise.
type builder struct {
	ops []Op
	now time.Duration
}

func (b *builder) tick() time.Duration { b.now++; return b.now }

// acked records a send acknowledged at off.
func (b *builder) acked(proc, txn string, tp TP, val string, off int64) *builder {
	t := b.tick()
	b.ops = append(b.ops, &Send{Process: proc, Txn: txn, TP: tp, Value: val, Invoke: t, Complete: t, Outcome: OK, Offset: off})
	return b
}

// unsure records a send whose outcome was not learned.
func (b *builder) unsure(proc, txn string, tp TP, val string) *builder {
	t := b.tick()
	b.ops = append(b.ops, &Send{Process: proc, Txn: txn, TP: tp, Value: val, Invoke: t, Complete: t, Outcome: Unknown, Offset: -1})
	return b
}

func (b *builder) end(proc, txn string, commit bool, out Outcome) *builder {
	t := b.tick()
	b.ops = append(b.ops, &EndTxn{Process: proc, Txn: txn, Commit: commit, Invoke: t, Complete: t, Outcome: out})
	return b
}

// poll records one poll returning recs, each "offset:value" in tp.
func (b *builder) poll(proc, group string, iso Isolation, tp TP, recs ...string) *builder {
	t := b.tick()
	p := &Poll{Process: proc, Group: group, Isolation: iso, Invoke: t, Complete: t}
	for _, r := range recs {
		off, val, _ := strings.Cut(r, ":")
		var o int64
		for _, c := range off {
			o = o*10 + int64(c-'0')
		}
		p.Records = append(p.Records, Record{TP: tp, Offset: o, Value: val})
	}
	b.ops = append(b.ops, p)
	return b
}

func (b *builder) assign(proc string, iso Isolation, from int64, added, removed []TP) *builder {
	b.ops = append(b.ops, &Assign{Process: proc, At: b.tick(), Isolation: iso, Added: added, Removed: removed, From: from})
	return b
}

func (b *builder) drained(proc string, tp TP, end int64) *builder {
	b.ops = append(b.ops, &Drained{Process: proc, At: b.tick(), TP: tp, End: end})
	return b
}

// base is a clean history: in p0 an idempotent producer's a (0) and b
// (1), a committed transaction T1 with c (2) and d (3), its marker (4),
// an aborted transaction T2 with e (5), its marker (6), then f (7). In
// p1 one record, g (0).
func base() *builder {
	b := new(builder)
	b.acked("idem", "", p0, "a", 0).acked("idem", "", p0, "b", 1)
	b.acked("txn", "T1", p0, "c", 2).acked("txn", "T1", p0, "d", 3).end("txn", "T1", true, OK)
	b.acked("txn", "T2", p0, "e", 5).end("txn", "T2", false, OK)
	b.acked("idem", "", p0, "f", 7).acked("idem", "", p1, "g", 0)
	return b
}

// drains adds read_uncommitted and read_committed consumers that read
// both partitions from 0 to their ends.
func (b *builder) drains() *builder {
	b.assign("ru", ReadUncommitted, 0, []TP{p0, p1}, nil)
	b.poll("ru", "", ReadUncommitted, p0, "0:a", "1:b", "2:c", "3:d", "5:e", "7:f")
	b.poll("ru", "", ReadUncommitted, p1, "0:g")
	b.drained("ru", p0, 8).drained("ru", p1, 1)
	b.assign("rc", ReadCommitted, 0, []TP{p0, p1}, nil)
	b.poll("rc", "", ReadCommitted, p0, "0:a", "1:b", "2:c")
	b.poll("rc", "", ReadCommitted, p0, "3:d", "7:f")
	b.poll("rc", "", ReadCommitted, p1, "0:g")
	b.drained("rc", p0, 8).drained("rc", p1, 1)
	return b
}

func TestCheckClean(t *testing.T) {
	tests := []struct {
		name string
		h    *builder
	}{
		{"drained at both isolation levels", base().drains()},
		{"read_committed passes over an aborted record", base().drains().
			poll("c", "", ReadCommitted, p0, "3:d", "7:f")},
		{"a group hands a partition over and redelivers", base().
			assign("m1", ReadUncommitted, -1, []TP{p0}, nil).
			poll("m1", "g", ReadUncommitted, p0, "0:a", "1:b", "2:c").
			assign("m1", ReadUncommitted, -1, nil, []TP{p0}).
			assign("m2", ReadUncommitted, -1, []TP{p0}, nil).
			poll("m2", "g", ReadUncommitted, p0, "2:c", "3:d", "5:e")},
		{"an acknowledged record past every read, not drained", base().
			poll("c", "", ReadUncommitted, p0, "0:a", "1:b")},
		{"an indeterminate send never read", base().drains().unsure("idem", "", p0, "x")},
		{"an indeterminate commit never read", base().drains().
			unsure("txn", "T3", p1, "y").end("txn", "T3", true, Unknown).end("txn", "T3", false, OK)},
		{"an indeterminate commit proved by a read", base().drains().
			acked("txn", "T3", p1, "y", 1).acked("txn", "T3", p1, "z", 2).end("txn", "T3", true, Unknown).
			poll("rc2", "", ReadCommitted, p1, "1:y", "2:z")},
		{"read_uncommitted reads an open transaction", base().
			acked("txn", "T3", p1, "y", 1).poll("c", "", ReadUncommitted, p1, "0:g", "1:y")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.h.ops)
			if !r.Valid() {
				t.Fatalf("anomalies in a clean history:\n%s", r.Summary())
			}
			if r.Ops != len(tc.h.ops) {
				t.Fatalf("Ops = %d, want %d", r.Ops, len(tc.h.ops))
			}
		})
	}
}

func TestCheckFinds(t *testing.T) {
	tests := []struct {
		name string
		h    *builder
		want Kind
		// at is the anomaly's value, or its offset in p0 when it has
		// none.
		at string
	}{
		{"acknowledged record drained past", base().
			assign("ru", ReadUncommitted, 0, []TP{p0}, nil).
			poll("ru", "", ReadUncommitted, p0, "0:a", "2:c", "3:d", "5:e", "7:f").
			drained("ru", p0, 8),
			LostWrite, "b"},
		{"acknowledged record read past by another consumer", base().
			poll("c", "", ReadUncommitted, p0, "0:a", "2:c"),
			LostWrite, "b"},
		{"acknowledged at an offset past the drained end", base().
			assign("ru", ReadUncommitted, 0, []TP{p0}, nil).
			poll("ru", "", ReadUncommitted, p0, "0:a", "1:b", "2:c", "3:d", "5:e").
			drained("ru", p0, 6),
			LostWrite, "f"},
		{"committed transaction's record never read", base().
			poll("c", "", ReadCommitted, p0, "0:a", "1:b", "2:c", "7:f"),
			LostWrite, "d"},
		{"record of a transaction proved committed never read", base().drains().
			acked("txn", "T3", p1, "y", 1).acked("txn", "T3", p1, "z", 2).end("txn", "T3", true, Unknown).
			poll("rc2", "", ReadCommitted, p1, "1:y").drained("ru", p1, 4),
			LostWrite, "z"},
		{"one value at two offsets", base().drains().
			poll("c", "", ReadUncommitted, p0, "7:f", "8:b"),
			Duplicate, "b"},
		{"two values at one offset", base().drains().
			unsure("idem", "", p0, "x").
			poll("c", "", ReadUncommitted, p0, "7:x"),
			InconsistentOffset, "7"},
		{"read_committed reads an aborted transaction", base().drains().
			poll("c", "", ReadCommitted, p0, "3:d", "5:e"),
			AbortedRead, "e"},
		{"read_committed reads a transaction never committed", base().
			acked("txn", "T3", p1, "y", 1).poll("c", "", ReadCommitted, p1, "0:g", "1:y"),
			AbortedRead, "y"},
		{"read_committed reads before the commit", base().
			acked("txn", "T3", p1, "y", 1).poll("c", "", ReadCommitted, p1, "0:g", "1:y").end("txn", "T3", true, OK),
			UncommittedRead, "y"},
		{"offsets go back within a session", base().
			poll("c", "", ReadUncommitted, p0, "0:a", "1:b", "2:c").
			poll("c", "", ReadUncommitted, p0, "1:b", "2:c", "3:d"),
			NonMonotonicPoll, "b"},
		{"a poll passes over a record another consumer read", base().
			poll("c1", "", ReadUncommitted, p0, "0:a", "1:b", "2:c").
			poll("c2", "", ReadUncommitted, p0, "0:a").poll("c2", "", ReadUncommitted, p0, "2:c"),
			PollSkip, "b"},
		{"read_uncommitted passes over an aborted record", base().drains().
			poll("c", "", ReadUncommitted, p0, "3:d", "7:f"),
			PollSkip, "e"},
		{"a drain stops short of its end", base().drains().
			assign("ru2", ReadUncommitted, 0, []TP{p0}, nil).
			poll("ru2", "", ReadUncommitted, p0, "0:a", "1:b", "2:c", "3:d", "5:e").drained("ru2", p0, 8),
			PollSkip, "f"},
		{"a drain starts late", base().drains().
			assign("ru2", ReadUncommitted, 0, []TP{p0}, nil).
			poll("ru2", "", ReadUncommitted, p0, "1:b", "2:c", "3:d", "5:e", "7:f").drained("ru2", p0, 8),
			PollSkip, "a"},
		{"a group loses a record in a handover", base().drains().
			assign("m1", ReadUncommitted, -1, []TP{p0}, nil).
			poll("m1", "g", ReadUncommitted, p0, "0:a", "1:b").
			assign("m1", ReadUncommitted, -1, nil, []TP{p0}).
			assign("m2", ReadUncommitted, -1, []TP{p0}, nil).
			poll("m2", "g", ReadUncommitted, p0, "3:d", "5:e"),
			PollSkip, "c"},
		{"read_committed sees part of a transaction", base().drains().
			poll("c", "", ReadCommitted, p0, "1:b", "2:c", "7:f"),
			PartialTxn, "d"},
		{"a group sees part of a transaction", base().drains().
			assign("m1", ReadCommitted, -1, []TP{p0}, nil).
			poll("m1", "g", ReadCommitted, p0, "0:a", "1:b", "2:c").
			assign("m1", ReadCommitted, -1, nil, []TP{p0}).
			assign("m2", ReadCommitted, -1, []TP{p0}, nil).
			poll("m2", "g", ReadCommitted, p0, "7:f"),
			PartialTxn, "d"},
		{"a producer's records stored out of order", base().drains().
			acked("idem", "", p1, "y", 3).acked("idem", "", p1, "z", 2).
			poll("c", "", ReadUncommitted, p1, "2:z", "3:y"),
			NonMonotonicSend, "z"},
		{"a value no one sent", base().drains().
			poll("c", "", ReadUncommitted, p1, "0:g", "1:x"),
			UnwrittenRead, "x"},
		{"a value read in another partition", base().drains().
			poll("c", "", ReadUncommitted, p1, "0:g", "1:a"),
			UnwrittenRead, "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.h.ops)
			if got := r.Found(); !slices.Equal(got, []Kind{tc.want}) {
				t.Fatalf("found %v, want exactly [%s]:\n%s", got, tc.want, r.Summary())
			}
			for _, a := range r.Anomalies {
				if a.Value == tc.at || (a.Value == "" && a.TP == p0 && tc.at == itoa(a.Offset)) {
					return
				}
			}
			t.Fatalf("no %s anomaly at %s:\n%s", tc.want, tc.at, r.Summary())
		})
	}
}

func itoa(n int64) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + itoa(n%10)
}

// TestCheckCounts checks the report's tallies of what the history held.
func TestCheckCounts(t *testing.T) {
	h := base().drains().unsure("idem", "", p1, "x").
		unsure("txn", "T3", p1, "y").end("txn", "T3", true, Unknown)
	r := Check(h.ops)
	want := [...]int{len(h.ops), 9, 7, 2, 3, 1, 1, 1, 5, 13}
	got := [...]int{r.Ops, r.Sends, r.Acked, r.SendsUnknown, r.Txns, r.Committed, r.Aborted, r.TxnsUnknown, r.Polls, r.Reads}
	if got != want {
		t.Fatalf("ops, sends, acked, unknown sends, txns, committed, aborted, unknown txns, polls, reads = %v, want %v", got, want)
	}
	if !strings.Contains(r.Summary(), "no anomalies") {
		t.Fatalf("summary %q", r.Summary())
	}
}

// TestCheckBoundsExamples checks that a report keeps a bounded number of
// examples while counting every anomaly.
func TestCheckBoundsExamples(t *testing.T) {
	b := new(builder)
	const n = 3 * maxExamples
	for i := range n {
		b.acked("p", "", p0, "v"+itoa(int64(i)), int64(i))
	}
	b.poll("c", "", ReadUncommitted, p0, itoa(n)+":last").acked("p", "", p0, "last", n)
	r := Check(b.ops)
	if r.Counts[LostWrite] != n || len(r.Anomalies) != maxExamples {
		t.Fatalf("%d lost writes counted, %d kept; want %d and %d", r.Counts[LostWrite], len(r.Anomalies), n, maxExamples)
	}
}
