package flow

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/strandkafka/strand/internal/sql/types"
)

// intervalGraph is an interval join of l (k, t, v) and r (k, t, v) on
// l.k = r.k AND r.t BETWEEN l.t - 2s AND l.t + 3s: an inner one as the
// planner builds it (Join, then the bounds as a Filter), an outer one
// as a ResidualJoin. With expire, each side's rows expire as the
// planner derives it: a left row once no right time up to l.t + 3s can
// come, a right row once no left time up to r.t + 2s can.
func intervalGraph(kind JoinKind, expire bool) func() *Graph {
	within := func(r types.Row) (any, error) {
		lt, ok1 := r[1].(time.Time)
		rt, ok2 := r[4].(time.Time)
		if !ok1 || !ok2 {
			return nil, nil
		}
		return !rt.Before(lt.Add(-2*time.Second)) && !rt.After(lt.Add(3*time.Second)), nil
	}
	var exp [2][]JoinExpiry
	if expire {
		exp = [2][]JoinExpiry{{{Col: 1, Offset: 3 * time.Second}}, {{Col: 1, Offset: 2 * time.Second}}}
	}
	return func() *Graph {
		var g Graph
		l, r := g.Input("l"), g.Input("r")
		if kind == InnerJoin {
			j := g.Add("join", &Join{Kind: kind, LeftKey: []int{0}, RightKey: []int{0}, LeftWidth: 3, RightWidth: 3, Expire: exp}, l, r)
			g.SetOutput(g.Add("filter", &Filter{Pred: within}, j))
		} else {
			g.SetOutput(g.Add("join", &ResidualJoin{Kind: kind, LeftKey: []int{0}, RightKey: []int{0}, LeftWidth: 3, RightWidth: 3, Residual: within, Expire: exp}, l, r))
		}
		return &g
	}
}

// intervalEpochs are epochs of two append-only inputs whose records
// are at or after the watermark before their epoch (late ones dropped,
// as a view drops them), a few keys, times up to 4 s out of order, and
// some NULL times and keys.
func intervalEpochs(seed uint64, n int) []Epoch {
	r := rand.New(rand.NewPCG(seed, 7))
	var eps []Epoch
	var wm, maxT time.Time
	base := time.Unix(1000, 0).UTC()
	for len(eps) < n {
		e := Epoch{Inputs: make([][]types.Change, 2)}
		for side := range 2 {
			for range r.IntN(6) {
				t := base.Add(time.Duration(len(eps))*time.Second/2 + time.Duration(r.IntN(4000))*time.Millisecond)
				if !wm.IsZero() && t.Before(wm) {
					continue // late: dropped before the join
				}
				if t.After(maxT) {
					maxT = t
				}
				var k, tv any = int64(r.IntN(3)), t
				switch r.IntN(40) {
				case 0:
					k = nil
				case 1:
					tv = nil
				}
				e.Inputs[side] = append(e.Inputs[side], types.Change{Row: types.Row{k, tv, int64(r.IntN(2))}, Diff: 1})
			}
		}
		if !maxT.IsZero() {
			wm = maxT.Add(-3 * time.Second)
		}
		e.Watermark = wm
		eps = append(eps, e)
	}
	return eps
}

// TestJoinExpire: an interval join that frees its rows by the
// watermark ends with the contents of one that keeps them all, for
// every join kind, on every store, and holds a fraction of its rows;
// a run reopened halfway over the same Pebble database (as a restarted
// view's) ends with the same contents and the same state.
func TestJoinExpire(t *testing.T) {
	eps := intervalEpochs(3, 400)
	for _, kind := range []JoinKind{InnerJoin, LeftJoin, RightJoin, FullJoin} {
		t.Run([]string{"inner", "left", "right", "full"}[kind], func(t *testing.T) {
			want, kept := runExpiring(t, intervalGraph(kind, false), NewMemStore(), eps)
			for _, s := range stores {
				t.Run(s.name, func(t *testing.T) {
					st := s.open(t)
					got, left := runExpiring(t, intervalGraph(kind, true), st, eps)
					if got != want {
						t.Fatalf("contents with rows freed differ from those with every row kept:\n%s\nwant:\n%s", got, want)
					}
					if left*5 > kept {
						t.Fatalf("%d operator keys left with rows freed, %d with all kept", left, kept)
					}
					checkExpiries(t, st, eps[len(eps)-1].Watermark)
				})
			}
			t.Run("reopen", func(t *testing.T) {
				fs := vfs.NewMem()
				db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: quietLogger{}})
				if err != nil {
					t.Fatal(err)
				}
				half := len(eps) / 2
				first := NewPebbleStore(db, []byte("v"), false)
				runExpiring(t, intervalGraph(kind, true), first, eps[:half])
				if err := first.Close(); err != nil {
					t.Fatal(err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				db = openPebble(t, fs, "db")
				got, left := runExpiring(t, intervalGraph(kind, true), NewPebbleStore(db, []byte("v"), false), eps[half:])
				_, whole := runExpiring(t, intervalGraph(kind, true), NewMemStore(), eps)
				if got != want || left != whole {
					t.Fatalf("reopened: %d keys (one run %d), contents equal: %v", left, whole, got == want)
				}
			})
		})
	}
}

// runExpiring runs eps over a driver of build on st and returns the
// view's contents (sorted lines) and the count of operator state keys.
func runExpiring(t *testing.T, build func() *Graph, st Store, eps []Epoch) (string, int) {
	t.Helper()
	if c, ok := st.(interface{ Close() error }); ok {
		// Before its database closes (cleanups run last in, first out).
		t.Cleanup(func() { c.Close() })
	}
	d, err := NewDriver(build(), st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range eps {
		if _, err := d.Step(e); err != nil {
			t.Fatalf("epoch %d: %v", i, err)
		}
	}
	rows, err := d.View().Rows()
	if err != nil {
		t.Fatal(err)
	}
	lines := make([]string, len(rows))
	for i, r := range rows {
		lines[i] = showRow(r)
	}
	slices.Sort(lines)
	n := 0
	if err := st.Scan([]byte{'n'}, []byte{'o'}, false, func(_, _ []byte) (bool, error) {
		n++
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(lines), n
}

// TestJoinExpireRetraction: a retraction of a row already freed fails
// the epoch (the planner expires only inputs that never retract), and
// one of a row still held removes its expiry entry too.
func TestJoinExpireRetraction(t *testing.T) {
	build := intervalGraph(InnerJoin, true)
	d, err := NewDriver(build(), NewMemStore(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := types.Row{int64(1), ts(10), int64(0)}
	b := types.Row{int64(1), ts(30), int64(0)}
	if _, err := d.Step(Epoch{Inputs: [][]types.Change{{{Row: a, Diff: 1}, {Row: b, Diff: 1}}}, Watermark: ts(20)}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Step(Epoch{Inputs: [][]types.Change{{{Row: b, Diff: -1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Step(Epoch{Inputs: [][]types.Change{{{Row: a, Diff: -1}}}}); err == nil {
		t.Fatal("a retraction of a freed row was taken")
	}
	var freed int64
	for _, s := range d.Stats() {
		freed += s.Freed
	}
	if freed != 1 {
		t.Fatalf("freed %d rows, want 1", freed)
	}
}

// sessionGraph is SESSION windows of a 2 s gap per k over (k, t, v),
// with the view's contents the session rows themselves, or (agg) a
// count per window_end and k, windowed by the end as a view's
// aggregate over a session is.
func sessionGraph(expire, agg bool) func() *Graph {
	return func() *Graph {
		var g Graph
		in := g.Input("in")
		s := g.Add("session", &Session{TimeCol: 1, PartitionBy: []int{0}, Gap: 2 * time.Second, Expire: expire}, in)
		if agg {
			var w *WindowPolicy
			if expire {
				w = &WindowPolicy{}
			}
			s = g.Add("agg", &Aggregate{GroupBy: []int{4, 0, 3}, Aggs: []AggCall{{Kind: CountStar}, {Kind: Sum, Col: 2}}, Window: w}, s)
		}
		g.SetOutput(s)
		return &g
	}
}

// TestSessionExpire: sessions freed by the watermark leave the same
// contents as sessions kept, with and without an aggregate over them
// (whose closed windows' groups go too), on every store and across a
// reopen, and a fraction of the state.
func TestSessionExpire(t *testing.T) {
	eps := intervalEpochs(5, 400)
	for i := range eps {
		eps[i].Inputs = eps[i].Inputs[:1]
	}
	for _, agg := range []bool{false, true} {
		t.Run(fmt.Sprint("agg=", agg), func(t *testing.T) {
			want, kept := runExpiring(t, sessionGraph(false, agg), NewMemStore(), eps)
			for _, s := range stores {
				t.Run(s.name, func(t *testing.T) {
					st := s.open(t)
					got, left := runExpiring(t, sessionGraph(true, agg), st, eps)
					if got != want {
						t.Fatalf("contents with sessions freed differ from those with every row kept:\n%s\nwant:\n%s", got, want)
					}
					if left*5 > kept {
						t.Fatalf("%d operator keys left with sessions freed, %d with all kept", left, kept)
					}
					checkSessions(t, st, eps[len(eps)-1].Watermark)
				})
			}
			t.Run("reopen", func(t *testing.T) {
				fs := vfs.NewMem()
				db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: quietLogger{}})
				if err != nil {
					t.Fatal(err)
				}
				half := len(eps) / 2
				first := NewPebbleStore(db, []byte("v"), false)
				runExpiring(t, sessionGraph(true, agg), first, eps[:half])
				if err := first.Close(); err != nil {
					t.Fatal(err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				db = openPebble(t, fs, "db")
				got, left := runExpiring(t, sessionGraph(true, agg), NewPebbleStore(db, []byte("v"), false), eps[half:])
				_, whole := runExpiring(t, sessionGraph(true, agg), NewMemStore(), eps)
				if got != want || left != whole {
					t.Fatalf("reopened: %d keys (one run %d), contents equal: %v", left, whole, got == want)
				}
			})
		})
	}
}

// checkExpiries checks the join's (node 2) state is exactly the rows
// the watermark wm has not passed: each side's rows and expiry entries
// pair up, and no entry's expiry is before wm.
func checkExpiries(t *testing.T, st Store, wm time.Time) {
	t.Helper()
	counts := map[byte]int{}
	err := st.Scan([]byte{'n', 0, 2}, []byte{'n', 0, 3}, false, func(k, _ []byte) (bool, error) {
		counts[k[3]]++
		if k[3] == 'e' {
			if at := decodeMicros(k[5:13]); at.Before(wm) {
				t.Errorf("a row expiring at %v kept past watermark %v", at, wm)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if counts['e'] == 0 || counts['e'] != counts['r'] {
		t.Fatalf("%d rows and %d expiry entries", counts['r'], counts['e'])
	}
}

// checkSessions checks the session operator's (node 1) index holds only
// sessions the watermark wm has not closed, each with rows.
func checkSessions(t *testing.T, st Store, wm time.Time) {
	t.Helper()
	var sessions, rows int
	err := st.Scan([]byte{'n', 0, 1}, []byte{'n', 0, 2}, false, func(k, _ []byte) (bool, error) {
		if k[3] != sessionIndexTag {
			rows++
			return true, nil
		}
		sessions++
		if end := decodeMicros(k[4:12]); !end.After(wm) {
			t.Errorf("a session ending at %v kept past watermark %v", end, wm)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sessions == 0 || rows < sessions {
		t.Fatalf("%d sessions indexed, %d rows", sessions, rows)
	}
}
