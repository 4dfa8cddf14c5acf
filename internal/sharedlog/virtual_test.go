package sharedlog_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/sharedlog"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

const (
	// testTimeout guards each test against deadlock; no test should come
	// near it.
	testTimeout = 20 * time.Second
	maxPos      = sharedlog.Pos(math.MaxUint64)
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// memLoglets is a test Opener over named memlogs. Every Open of a URL
// returns a new handle on one shared memlog, as a second agent would
// have: closing a handle does not close the memlog.
type memLoglets struct {
	// noTailWaiter hides WaitTail, to test the polling path.
	noTailWaiter bool
	// beforeAppend, if set, runs as a handle's Append starts, before the
	// handle checks whether it was closed.
	beforeAppend func(url string)
	// sealedAppends counts appends refused with ErrSealed.
	sealedAppends *progress
	mu            sync.Mutex
	logs          map[string]sharedlog.Loglet
	// unreachable names the URLs whose open fails, see setUnreachable.
	unreachable map[string]bool
}

func newMemLoglets() *memLoglets {
	return &memLoglets{logs: make(map[string]sharedlog.Loglet), sealedAppends: newProgress()}
}

// get returns the shared loglet behind url, creating it.
func (m *memLoglets) get(url string) sharedlog.Loglet {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.logs[url]
	if !ok {
		l = memlog.New()
		m.logs[url] = l
	}
	return l
}

// set installs l as the loglet behind url.
func (m *memLoglets) set(url string, l sharedlog.Loglet) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.logs[url] = l
}

// errUnreachable is the error of opening an unreachable loglet.
var errUnreachable = errors.New("test: loglet unreachable")

// setUnreachable makes opening url fail, or work again, as a network
// backend's opener fails while its server is down.
func (m *memLoglets) setUnreachable(url string, down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unreachable == nil {
		m.unreachable = make(map[string]bool)
	}
	m.unreachable[url] = down
}

func (m *memLoglets) open(ctx context.Context, url string) (sharedlog.Loglet, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	down := m.unreachable[url]
	m.mu.Unlock()
	if down {
		// A typed nil with the error, as a backend's OpenURL returning
		// (*Loglet)(nil) gives through an Opener: a VirtualLog must not
		// take it for a handle.
		var h *memHandle
		return h, fmt.Errorf("open %s: %w", url, errUnreachable)
	}
	h := &memHandle{l: m.get(url), reg: m, url: url}
	h.done, h.close = context.WithCancel(context.Background())
	if m.noTailWaiter {
		return h, nil
	}
	return waitingHandle{h}, nil
}

type memHandle struct {
	reg   *memLoglets
	url   string
	l     sharedlog.Loglet
	done  context.Context
	close context.CancelFunc
}

func (h *memHandle) Append(ctx context.Context, e []byte) (sharedlog.Pos, error) {
	if h.reg.beforeAppend != nil {
		h.reg.beforeAppend(h.url)
	}
	if h.done.Err() != nil {
		return 0, sharedlog.ErrClosed
	}
	p, err := h.l.Append(ctx, e)
	if errors.Is(err, sharedlog.ErrSealed) {
		h.reg.sealedAppends.add()
	}
	return p, err
}

func (h *memHandle) CheckTail(ctx context.Context) (sharedlog.Pos, bool, error) {
	if h.done.Err() != nil {
		return 0, false, sharedlog.ErrClosed
	}
	return h.l.CheckTail(ctx)
}

func (h *memHandle) ReadNext(ctx context.Context, from, max sharedlog.Pos) ([]sharedlog.Entry, error) {
	if h.done.Err() != nil {
		return nil, sharedlog.ErrClosed
	}
	return h.l.ReadNext(ctx, from, max)
}

func (h *memHandle) Seal(ctx context.Context) error {
	if h.done.Err() != nil {
		return sharedlog.ErrClosed
	}
	return h.l.Seal(ctx)
}

func (h *memHandle) PrefixTrim(ctx context.Context, before sharedlog.Pos) error {
	if h.done.Err() != nil {
		return sharedlog.ErrClosed
	}
	return h.l.PrefixTrim(ctx, before)
}

func (h *memHandle) Close() error { h.close(); return nil }

type waitingHandle struct{ *memHandle }

func (h waitingHandle) WaitTail(ctx context.Context, after sharedlog.Pos) (sharedlog.Pos, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(h.done, cancel)
	defer stop()
	tail, err := h.l.(sharedlog.TailWaiter).WaitTail(ctx, after)
	if h.done.Err() != nil {
		return tail, sharedlog.ErrClosed
	}
	return tail, err
}

// leakyLoglet lets appends in after Seal, as a backend with a zombie
// writer might: it reports sealed but keeps taking entries.
type leakyLoglet struct {
	*memlog.Loglet
	sealed atomic.Bool
}

func (l *leakyLoglet) Seal(ctx context.Context) error { l.sealed.Store(true); return nil }

func (l *leakyLoglet) CheckTail(ctx context.Context) (sharedlog.Pos, bool, error) {
	tail, _, err := l.Loglet.CheckTail(ctx)
	return tail, l.sealed.Load(), err
}

// testOpts are options for tests: quick polling, and no appender steals
// a reconfiguration from the client that started it unless a test asks.
func testOpts(initial string) sharedlog.VirtualOptions {
	return sharedlog.VirtualOptions{
		InitialURL:   initial,
		PollInterval: time.Millisecond,
		StallTimeout: testTimeout,
	}
}

func openVirtual(t *testing.T, ms sharedlog.MetaStore, reg *memLoglets, opts sharedlog.VirtualOptions) *sharedlog.VirtualLog {
	t.Helper()
	v, err := sharedlog.OpenVirtual(testCtx(t), ms, reg.open, opts)
	if err != nil {
		t.Fatalf("OpenVirtual: %v", err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

func mustAppend(t *testing.T, ctx context.Context, l sharedlog.Log, data string) sharedlog.Pos {
	t.Helper()
	p, err := l.Append(ctx, []byte(data))
	if err != nil {
		t.Fatalf("Append(%q): %v", data, err)
	}
	return p
}

func mustReconfigure(t *testing.T, ctx context.Context, v *sharedlog.VirtualLog, url string) {
	t.Helper()
	if err := v.Reconfigure(ctx, url); err != nil {
		t.Fatalf("Reconfigure(%q): %v", url, err)
	}
}

func wantTail(t *testing.T, ctx context.Context, l sharedlog.Log, tail sharedlog.Pos, sealed bool) {
	t.Helper()
	got, gotSealed, err := l.CheckTail(ctx)
	if err != nil || got != tail || gotSealed != sealed {
		t.Fatalf("CheckTail = (%d, %v, %v), want (%d, %v, nil)", got, gotSealed, err, tail, sealed)
	}
}

// readAll reads [from, tail) and checks every ReadNext call's contract:
// entries start at from, are dense, and lie in one segment of v's chain.
func readAll(t *testing.T, ctx context.Context, v *sharedlog.VirtualLog, from sharedlog.Pos) []sharedlog.Entry {
	t.Helper()
	tail, _, err := v.CheckTail(ctx)
	if err != nil {
		t.Fatalf("CheckTail: %v", err)
	}
	var out []sharedlog.Entry
	for p := from; p < tail; {
		es, err := v.ReadNext(ctx, p, maxPos)
		if err != nil {
			t.Fatalf("ReadNext(%d): %v", p, err)
		}
		if len(es) == 0 {
			t.Fatalf("ReadNext(%d) below tail %d returned nothing", p, tail)
		}
		seg := segmentOf(v.Chain(), p)
		for i, e := range es {
			if e.Pos != p+sharedlog.Pos(i) {
				t.Fatalf("ReadNext(%d): entry %d at %d", p, i, e.Pos)
			}
			if s := segmentOf(v.Chain(), e.Pos); s != seg {
				t.Fatalf("ReadNext(%d) crossed from segment %q into %q at %d", p, seg, s, e.Pos)
			}
		}
		out = append(out, es...)
		p += sharedlog.Pos(len(es))
	}
	return out
}

func segmentOf(c sharedlog.Chain, p sharedlog.Pos) string {
	for _, s := range c.Segments {
		if p >= s.Start && (!s.Sealed || p < s.End) {
			return s.URL
		}
	}
	return ""
}

func wantData(t *testing.T, es []sharedlog.Entry, want ...string) {
	t.Helper()
	var got []string
	for _, e := range es {
		got = append(got, string(e.Data))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("log holds %q, want %q", got, want)
	}
}

func TestVirtualOpen(t *testing.T) {
	ctx := testCtx(t)
	t.Run("bootstraps an empty store", func(t *testing.T) {
		ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
		v := openVirtual(t, ms, reg, testOpts("mem://boot/0"))
		want := sharedlog.Chain{Version: 1, Segments: []sharedlog.Segment{{URL: "mem://boot/0"}}}
		if c := v.Chain(); fmt.Sprint(c) != fmt.Sprint(want) {
			t.Fatalf("chain %+v, want %+v", c, want)
		}
		if c, _ := ms.Get(ctx); fmt.Sprint(c) != fmt.Sprint(want) {
			t.Fatalf("stored chain %+v, want %+v", c, want)
		}
		wantTail(t, ctx, v, 0, false)
		mustAppend(t, ctx, v, "a")
		// A second agent ignores its InitialURL: the chain exists.
		w := openVirtual(t, ms, reg, testOpts("mem://boot/other"))
		wantData(t, readAll(t, ctx, w, 0), "a")
	})
	t.Run("needs an initial URL", func(t *testing.T) {
		_, err := sharedlog.OpenVirtual(ctx, sharedlog.NewMemMetaStore(), newMemLoglets().open, sharedlog.VirtualOptions{})
		if err == nil {
			t.Fatal("OpenVirtual of an empty store without InitialURL succeeded")
		}
	})
	t.Run("refuses a non-empty initial loglet", func(t *testing.T) {
		ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
		mustAppend(t, ctx, reg.get("mem://used"), "stray")
		_, err := sharedlog.OpenVirtual(ctx, ms, reg.open, testOpts("mem://used"))
		if !errors.Is(err, sharedlog.ErrSegmentNotEmpty) {
			t.Fatalf("OpenVirtual = %v, want ErrSegmentNotEmpty", err)
		}
		if c, _ := ms.Get(ctx); !c.Empty() {
			t.Fatalf("a failed bootstrap stored %+v", c)
		}
	})
	t.Run("racing bootstraps agree", func(t *testing.T) {
		ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
		var wg sync.WaitGroup
		vs := make([]*sharedlog.VirtualLog, 4)
		for i := range vs {
			wg.Go(func() {
				v, err := sharedlog.OpenVirtual(ctx, ms, reg.open, testOpts(fmt.Sprintf("mem://race/%d", i)))
				if err != nil {
					t.Errorf("agent %d: %v", i, err)
					return
				}
				t.Cleanup(func() { v.Close() })
				vs[i] = v
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		for _, v := range vs {
			if c := v.Chain(); c.Version != 1 || c.Active().URL != vs[0].Chain().Active().URL {
				t.Fatalf("agents disagree: %+v and %+v", c, vs[0].Chain())
			}
		}
	})
}

func TestVirtualReadsAcrossSegments(t *testing.T) {
	ctx := testCtx(t)
	ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
	v := openVirtual(t, ms, reg, testOpts("mem://x/0"))
	var want []string
	add := func(n int) {
		for range n {
			s := fmt.Sprintf("e%d", len(want))
			if p := mustAppend(t, ctx, v, s); p != sharedlog.Pos(len(want)) {
				t.Fatalf("append %q at %d, want %d", s, p, len(want))
			}
			want = append(want, s)
		}
	}
	add(10)
	mustReconfigure(t, ctx, v, "mem://x/1")
	add(10)
	mustReconfigure(t, ctx, v, "mem://x/2")
	mustReconfigure(t, ctx, v, "mem://x/3") // an empty segment
	add(5)

	c := v.Chain()
	wantSegs := []sharedlog.Segment{
		{Start: 0, End: 10, Sealed: true, URL: "mem://x/0"},
		{Start: 10, End: 20, Sealed: true, URL: "mem://x/1"},
		{Start: 20, End: 20, Sealed: true, URL: "mem://x/2"},
		{Start: 20, URL: "mem://x/3"},
	}
	if c.Version != 4 || fmt.Sprint(c.Segments) != fmt.Sprint(wantSegs) {
		t.Fatalf("chain %+v, want version 4 and %+v", c, wantSegs)
	}
	wantTail(t, ctx, v, 25, false)
	wantData(t, readAll(t, ctx, v, 0), want...)

	tests := []struct {
		name      string
		from, max sharedlog.Pos
		want      []string
	}{
		{"stops at a segment end", 8, 100, want[8:10]},
		{"starts at a segment start", 10, 12, want[10:12]},
		{"skips an empty segment", 20, 100, want[20:25]},
		{"bounded by max", 3, 5, want[3:5]},
		{"from at max", 5, 5, nil},
		{"at the tail", 25, 100, nil},
		{"past the tail", 40, 100, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es, err := v.ReadNext(ctx, tt.from, tt.max)
			if err != nil {
				t.Fatal(err)
			}
			wantData(t, es, tt.want...)
			for i, e := range es {
				if e.Pos != tt.from+sharedlog.Pos(i) {
					t.Fatalf("entry %d at %d", i, e.Pos)
				}
			}
		})
	}

	// The loglets hold their own positions from 0.
	es, err := reg.get("mem://x/1").ReadNext(ctx, 0, maxPos)
	if err != nil {
		t.Fatal(err)
	}
	wantData(t, es, want[10:20]...)

	// A new agent sees the same log.
	w := openVirtual(t, ms, reg, testOpts(""))
	wantData(t, readAll(t, ctx, w, 0), want...)
}

func TestVirtualReconfigureChecks(t *testing.T) {
	ctx := testCtx(t)
	ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
	v := openVirtual(t, ms, reg, testOpts("mem://chk/0"))
	mustAppend(t, ctx, v, "a")
	mustReconfigure(t, ctx, v, "mem://chk/1")
	mustAppend(t, ctx, v, "b")

	t.Run("already active", func(t *testing.T) {
		mustReconfigure(t, ctx, v, "mem://chk/1")
		if c := v.Chain(); c.Version != 2 {
			t.Fatalf("a no-op Reconfigure moved the chain to version %d", c.Version)
		}
	})
	t.Run("an old segment", func(t *testing.T) {
		if err := v.Reconfigure(ctx, "mem://chk/0"); !errors.Is(err, sharedlog.ErrInvalidChain) {
			t.Fatalf("Reconfigure to an old segment = %v, want ErrInvalidChain", err)
		}
	})
	t.Run("a non-empty loglet", func(t *testing.T) {
		mustAppend(t, ctx, reg.get("mem://chk/used"), "stray")
		if err := v.Reconfigure(ctx, "mem://chk/used"); !errors.Is(err, sharedlog.ErrSegmentNotEmpty) {
			t.Fatalf("Reconfigure to a used loglet = %v, want ErrSegmentNotEmpty", err)
		}
		// The check comes before the seal: the log is not stalled.
		if _, sealed, _ := reg.get("mem://chk/1").CheckTail(ctx); sealed {
			t.Fatal("a refused Reconfigure sealed the active loglet")
		}
		if p := mustAppend(t, ctx, v, "c"); p != 2 {
			t.Fatalf("append at %d, want 2", p)
		}
	})
	t.Run("empty URL", func(t *testing.T) {
		if err := v.Reconfigure(ctx, ""); err == nil {
			t.Fatal("Reconfigure to an empty URL succeeded")
		}
	})
	t.Run("sealed log", func(t *testing.T) {
		if err := sharedlog.SealVirtual(ctx, v); err != nil {
			t.Fatal(err)
		}
		if err := v.Reconfigure(ctx, "mem://chk/2"); !errors.Is(err, sharedlog.ErrSealed) {
			t.Fatalf("Reconfigure of a sealed log = %v, want ErrSealed", err)
		}
		if _, err := v.Append(ctx, []byte("x")); !errors.Is(err, sharedlog.ErrSealed) {
			t.Fatalf("Append to a sealed log = %v, want ErrSealed", err)
		}
		wantTail(t, ctx, v, 3, true)
		wantData(t, readAll(t, ctx, v, 0), "a", "b", "c")
	})
}

// TestVirtualConcurrentAppendsAndReconfigure appends from several
// goroutines (spread over agents sharing one MetaStore) while the log is
// reconfigured over and over, and optionally trimmed. Every acknowledged
// append must hold its bytes at its position, no position may be handed
// out twice, and the positions must be dense.
//
// The appenders and the reconfigurations are paced against each other so
// that every reconfiguration happens mid-stream and every one has an
// appender meet its seal: a reconfiguration holds its CAS (after the
// seal) until an appender got ErrSealed, and appenders past a point wait
// for the seal of the reconfiguration due there.
func TestVirtualConcurrentAppendsAndReconfigure(t *testing.T) {
	tests := []struct {
		name   string
		agents int
		trim   bool
	}{
		{"one agent", 1, false},
		{"three agents", 3, false},
		{"three agents trimming", 3, true},
	}
	const (
		appenders    = 6
		perAppender  = 150
		reconfigures = 24
		total        = appenders * perAppender
		// slack is how far past a reconfiguration's point appends go on
		// before they wait for its seal.
		slack = 2 * appenders
	)
	// due is the number of acknowledged appends after which
	// reconfiguration r starts.
	due := func(r int) int { return (r + 1) * total / (reconfigures + 2) }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			mem, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
			var (
				acks          = newProgress() // acknowledged appends
				sealed        = newProgress() // reconfigurations past their seal
				tickets       atomic.Int64
				current       atomic.Int64 // the reconfiguration under way
				sealedBase    atomic.Int64 // sealed appends before its seal
				baseFor       atomic.Int64 // 1 + the reconfiguration sealedBase is for
				appendersDone = make(chan struct{})
			)
			ms := &hookMetaStore{MetaStore: mem, beforeCAS: func(next sharedlog.Chain) {
				cur, err := mem.Get(ctx)
				if err != nil || cur.Empty() || cur.Contains(next.Active().URL) {
					return // bootstrap or trim (maybe from an old chain)
				}
				sealed.setMax(int(current.Load()) + 1)
				reg.sealedAppends.waitFor(ctx, int(sealedBase.Load())+1, appendersDone)
			}}
			agents := make([]*sharedlog.VirtualLog, tt.agents)
			for i := range agents {
				agents[i] = openVirtual(t, ms, reg, testOpts("mem://conc/init"))
				sharedlog.SetBeforeSealHook(agents[i], func() {
					// Only before the first seal: a retry after losing the
					// CAS to a trim comes after appenders met the seal.
					if r := current.Load(); baseFor.CompareAndSwap(r, r+1) {
						sealedBase.Store(int64(reg.sealedAppends.count()))
					}
				})
			}
			var (
				mu       sync.Mutex
				acked    = map[sharedlog.Pos]string{}
				wonURL   = map[string]bool{}
				wg       sync.WaitGroup
				appendWG sync.WaitGroup
			)
			for a := range appenders {
				v := agents[a%len(agents)]
				appendWG.Go(func() {
					for i := range perAppender {
						k := int(tickets.Add(1) - 1)
						r := 0
						for r < reconfigures && due(r)+slack <= k {
							r++
						}
						sealed.waitFor(ctx, r, nil)
						data := fmt.Sprintf("w%d-%d", a, i)
						p, err := v.Append(ctx, []byte(data))
						if err != nil {
							t.Errorf("Append(%s): %v", data, err)
							return
						}
						mu.Lock()
						if old, ok := acked[p]; ok {
							t.Errorf("position %d handed to %s and %s", p, old, data)
						}
						acked[p] = data
						mu.Unlock()
						acks.add()
					}
				})
			}
			wg.Go(func() {
				appendWG.Wait()
				close(appendersDone)
			})
			wg.Go(func() {
				for r := range reconfigures {
					acks.waitFor(ctx, due(r), nil)
					current.Store(int64(r))
					url := fmt.Sprintf("mem://conc/r%d", r)
					err := agents[r%len(agents)].Reconfigure(ctx, url)
					switch {
					case err == nil:
						mu.Lock()
						wonURL[url] = true
						mu.Unlock()
					case !errors.Is(err, sharedlog.ErrConflict):
						t.Errorf("Reconfigure(%s): %v", url, err)
						sealed.setMax(reconfigures) // free the appenders
						return
					}
				}
			})
			if tt.trim {
				wg.Go(func() {
					for r := range 10 {
						acks.waitFor(ctx, (r+1)*total/12, nil)
						v := agents[(r+1)%len(agents)]
						tail, _, err := v.CheckTail(ctx)
						if err == nil {
							err = v.PrefixTrim(ctx, tail/2)
						}
						if err != nil {
							t.Errorf("trim: %v", err)
							return
						}
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}

			check := openVirtual(t, ms, reg, testOpts(""))
			c := check.Chain()
			wantTail(t, ctx, check, total, false)
			if n := reg.sealedAppends.count(); n < reconfigures {
				t.Errorf("%d appends met a seal, want at least one per reconfiguration", n)
			}
			if !tt.trim {
				// One segment per winning Reconfigure, none stolen.
				if len(c.Segments) != len(wonURL)+1 {
					t.Errorf("chain has %d segments for %d reconfigurations: %+v", len(c.Segments), len(wonURL), c)
				}
				if len(wonURL) != reconfigures {
					t.Errorf("%d of %d reconfigurations won", len(wonURL), reconfigures)
				}
			}
			for _, s := range c.Segments[1:] {
				if !wonURL[s.URL] {
					t.Errorf("segment %q is in the chain but its Reconfigure did not win", s.URL)
				}
			}
			if tt.trim && c.TrimPoint == 0 {
				t.Errorf("nothing was trimmed: %+v", c)
			}
			for _, v := range append(agents, check) {
				got := readAll(t, ctx, v, c.TrimPoint)
				if len(got) != total-int(c.TrimPoint) {
					t.Fatalf("read %d entries from %d, want %d", len(got), c.TrimPoint, total-int(c.TrimPoint))
				}
				for _, e := range got {
					if want, ok := acked[e.Pos]; !ok || want != string(e.Data) {
						t.Fatalf("position %d holds %q, acknowledged %q", e.Pos, e.Data, want)
					}
				}
			}
		})
	}
}

// progress is a counter other goroutines can wait on.
type progress struct {
	mu   sync.Mutex
	n    int
	wake chan struct{}
}

func newProgress() *progress { return &progress{wake: make(chan struct{})} }

// setMax raises the count to n.
func (p *progress) setMax(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n > p.n {
		p.n = n
		close(p.wake)
		p.wake = make(chan struct{})
	}
}

func (p *progress) add() {
	p.mu.Lock()
	p.n++
	close(p.wake)
	p.wake = make(chan struct{})
	p.mu.Unlock()
}

func (p *progress) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// waitFor waits until the count reaches n, or stop or ctx is done.
func (p *progress) waitFor(ctx context.Context, n int, stop <-chan struct{}) {
	for {
		p.mu.Lock()
		done, wake := p.n >= n, p.wake
		p.mu.Unlock()
		if done {
			return
		}
		select {
		case <-wake:
		case <-stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// hookMetaStore calls beforeCAS before every CAS.
type hookMetaStore struct {
	sharedlog.MetaStore
	beforeCAS func(next sharedlog.Chain)
}

func (h *hookMetaStore) CAS(ctx context.Context, expect uint64, next sharedlog.Chain) error {
	h.beforeCAS(next)
	return h.MetaStore.CAS(ctx, expect, next)
}

func TestVirtualZombieAppends(t *testing.T) {
	tests := []struct {
		name  string
		leaky bool // the old loglet takes the zombie append
	}{
		{"sealed loglet refuses", false},
		{"leaky loglet takes it", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
			old := memlog.New()
			if tt.leaky {
				reg.set("mem://z/0", &leakyLoglet{Loglet: old})
			} else {
				reg.set("mem://z/0", old)
			}
			v := openVirtual(t, ms, reg, testOpts("mem://z/0"))
			for _, s := range []string{"a", "b", "c"} {
				mustAppend(t, ctx, v, s)
			}
			mustReconfigure(t, ctx, v, "mem://z/1")
			p, err := old.Append(ctx, []byte("zombie"))
			switch {
			case tt.leaky && (err != nil || p != 3):
				t.Fatalf("zombie append = (%d, %v), want it at 3", p, err)
			case !tt.leaky && !errors.Is(err, sharedlog.ErrSealed):
				t.Fatalf("append to the sealed loglet = (%d, %v), want ErrSealed", p, err)
			}
			if p := mustAppend(t, ctx, v, "d"); p != 3 {
				t.Fatalf("append after reconfigure at %d, want 3", p)
			}
			for _, l := range []*sharedlog.VirtualLog{v, openVirtual(t, ms, reg, testOpts(""))} {
				wantData(t, readAll(t, ctx, l, 0), "a", "b", "c", "d")
				es, err := l.ReadNext(ctx, 2, maxPos)
				if err != nil {
					t.Fatal(err)
				}
				wantData(t, es, "c")
			}
		})
	}
}

// TestVirtualRacingReconfigurations runs reconfigurations from two agents
// that read the same chain: exactly one wins, and both agents then agree
// on the chain and on every entry.
func TestVirtualRacingReconfigurations(t *testing.T) {
	ctx := testCtx(t)
	ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
	a := openVirtual(t, ms, reg, testOpts("mem://race/0"))
	b := openVirtual(t, ms, reg, testOpts(""))
	agents := []*sharedlog.VirtualLog{a, b}
	var want []string
	for round := range 8 {
		for i, v := range agents {
			s := fmt.Sprintf("r%d-%d", round, i)
			mustAppend(t, ctx, v, s)
			want = append(want, s)
		}
		// Both agents have read the chain when they reach the barrier, so
		// they race from the same version.
		var arrived sync.WaitGroup
		arrived.Add(len(agents))
		for _, v := range agents {
			var once sync.Once
			sharedlog.SetBeforeSealHook(v, func() {
				once.Do(func() { arrived.Done(); arrived.Wait() })
			})
		}
		errs := make([]error, len(agents))
		urls := make([]string, len(agents))
		var wg sync.WaitGroup
		for i, v := range agents {
			urls[i] = fmt.Sprintf("mem://race/%d-%d", round, i)
			wg.Go(func() { errs[i] = v.Reconfigure(ctx, urls[i]) })
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: both reconfigurations won", round)
			case err == nil:
				winner = i
			case !errors.Is(err, sharedlog.ErrConflict):
				t.Fatalf("round %d: agent %d: %v", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no reconfiguration won: %v", round, errs)
		}
		stored, err := ms.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Active().URL != urls[winner] || stored.Version != uint64(round+2) {
			t.Fatalf("round %d: stored chain %+v, want version %d with %q active", round, stored, round+2, urls[winner])
		}
		for i, v := range agents {
			if c := v.Chain(); fmt.Sprint(c) != fmt.Sprint(stored) {
				t.Fatalf("round %d: agent %d has chain %+v, stored %+v", round, i, c, stored)
			}
		}
	}
	for _, v := range agents {
		sharedlog.SetBeforeSealHook(v, nil)
		wantData(t, readAll(t, ctx, v, 0), want...)
	}
}

// gatedMetaStore holds CASes until released, telling entered when one
// arrives, and reports Gets, so a test can freeze a reconfiguration
// between its seal and its CAS and see who waits for it.
type gatedMetaStore struct {
	sharedlog.MetaStore
	release chan struct{}
	entered chan struct{}
	gets    chan struct{}
}

func newGatedMetaStore(ms sharedlog.MetaStore, open bool) *gatedMetaStore {
	g := &gatedMetaStore{MetaStore: ms, release: make(chan struct{}),
		entered: make(chan struct{}, 100), gets: make(chan struct{}, 100)}
	if open {
		close(g.release)
	}
	return g
}

func (g *gatedMetaStore) CAS(ctx context.Context, expect uint64, next sharedlog.Chain) error {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.MetaStore.CAS(ctx, expect, next)
}

func (g *gatedMetaStore) Get(ctx context.Context) (sharedlog.Chain, error) {
	select {
	case g.gets <- struct{}{}:
	default:
	}
	return g.MetaStore.Get(ctx)
}

func TestVirtualStalledReconfiguration(t *testing.T) {
	t.Run("finished by the next appender", func(t *testing.T) {
		ctx := testCtx(t)
		ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
		opts := testOpts("mem://stall/seg-00000000")
		opts.StallTimeout = -1
		v := openVirtual(t, ms, reg, opts)
		for i := range 5 {
			mustAppend(t, ctx, v, fmt.Sprint(i))
		}
		// The client that sealed died before writing the chain.
		if err := reg.get("mem://stall/seg-00000000").Seal(ctx); err != nil {
			t.Fatal(err)
		}
		wantTail(t, ctx, v, 5, false)
		if es, err := v.ReadNext(ctx, 5, maxPos); err != nil || len(es) != 0 {
			t.Fatalf("ReadNext at the sealed tail = (%d entries, %v)", len(es), err)
		}
		if p := mustAppend(t, ctx, v, "5"); p != 5 {
			t.Fatalf("append after the stall at %d, want 5", p)
		}
		c := v.Chain()
		wantSegs := []sharedlog.Segment{
			{Start: 0, End: 5, Sealed: true, URL: "mem://stall/seg-00000000"},
			{Start: 5, URL: "mem://stall/seg-00000002"},
		}
		if fmt.Sprint(c.Segments) != fmt.Sprint(wantSegs) {
			t.Fatalf("chain %+v, want %+v", c.Segments, wantSegs)
		}
		wantData(t, readAll(t, ctx, v, 0), "0", "1", "2", "3", "4", "5")
	})

	t.Run("finished by another agent after the stall timeout", func(t *testing.T) {
		ctx := testCtx(t)
		ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
		a := openVirtual(t, ms, reg, testOpts("mem://stall2/0"))
		// b waits on a clock the test moves: the stall timeout passes
		// when the test says, not a moment before.
		clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
		opts := testOpts("")
		opts.Clock, opts.StallTimeout, opts.PollInterval = clk, time.Minute, 10*time.Second
		b := openVirtual(t, ms, reg, opts)
		mustAppend(t, ctx, a, "a")
		if err := reg.get("mem://stall2/0").Seal(ctx); err != nil {
			t.Fatal(err)
		}
		// Readers are not held up by the stall.
		wantTail(t, ctx, a, 1, false)
		waited := make(chan sharedlog.Pos, 1)
		go func() {
			tail, err := a.WaitTail(ctx, 1)
			if err != nil {
				t.Errorf("WaitTail: %v", err)
			}
			waited <- tail
		}()
		appended := make(chan sharedlog.Pos, 1)
		go func() {
			p, err := b.Append(ctx, []byte("b"))
			if err != nil {
				t.Errorf("Append: %v", err)
			}
			appended <- p
		}()
		for start := clk.Now(); clk.Now().Sub(start) < opts.StallTimeout; {
			// b rereads the chain every PollInterval while it waits.
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatalf("the appender is not waiting on its clock: %v", err)
			}
			select {
			case p := <-appended:
				t.Fatalf("the appender finished the stall at %d after %v, before the stall timeout", p, clk.Now().Sub(start))
			default:
			}
			clk.Advance(opts.PollInterval)
		}
		if p := <-appended; p != 1 {
			t.Fatalf("append at %d, want 1", p)
		}
		if tail := <-waited; tail != 2 {
			t.Fatalf("WaitTail across the stall returned %d, want 2", tail)
		}
		if p := mustAppend(t, ctx, a, "c"); p != 2 {
			t.Fatalf("append at %d, want 2", p)
		}
		for _, v := range []*sharedlog.VirtualLog{a, b} {
			wantData(t, readAll(t, ctx, v, 0), "a", "b", "c")
		}
	})

	t.Run("appenders wait for the sealing agent", func(t *testing.T) {
		ctx := testCtx(t)
		mem, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
		aStore := newGatedMetaStore(mem, true)
		a := openVirtual(t, aStore, reg, testOpts("mem://slow/0"))
		bStore := newGatedMetaStore(mem, true)
		b := openVirtual(t, bStore, reg, testOpts(""))
		mustAppend(t, ctx, b, "a")
		aStore.release = make(chan struct{})
		<-aStore.entered // the bootstrap CAS
		reconfigured := make(chan error, 1)
		go func() { reconfigured <- a.Reconfigure(ctx, "mem://slow/1") }()
		<-aStore.entered // sealed, frozen before the CAS
		for len(bStore.gets) > 0 {
			<-bStore.gets
		}
		appended := make(chan sharedlog.Pos, 1)
		go func() {
			p, err := b.Append(ctx, []byte("b"))
			if err != nil {
				t.Errorf("Append: %v", err)
			}
			appended <- p
		}()
		// b met the seal and rereads the chain, waiting.
		for range 3 {
			select {
			case <-bStore.gets:
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
		select {
		case p := <-appended:
			t.Fatalf("append landed at %d while the reconfiguration was frozen", p)
		default:
		}
		close(aStore.release)
		if err := <-reconfigured; err != nil {
			t.Fatalf("Reconfigure: %v", err)
		}
		if p := <-appended; p != 1 {
			t.Fatalf("append at %d, want 1", p)
		}
		if c := b.Chain(); c.Active().URL != "mem://slow/1" || len(c.Segments) != 2 {
			t.Fatalf("chain %+v, want the sealing agent's segment active", c)
		}
	})
}

func TestVirtualTrim(t *testing.T) {
	ctx := testCtx(t)
	ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
	v := openVirtual(t, ms, reg, testOpts("mem://trim/0"))
	stale := openVirtual(t, ms, reg, testOpts(""))
	var want []string
	for seg := range 3 {
		if seg > 0 {
			mustReconfigure(t, ctx, v, fmt.Sprintf("mem://trim/%d", seg))
		}
		for range 10 {
			s := fmt.Sprint(len(want))
			mustAppend(t, ctx, v, s)
			want = append(want, s)
		}
	}
	wantTrimmed := func(l sharedlog.Log, p sharedlog.Pos) {
		t.Helper()
		if es, err := l.ReadNext(ctx, p, maxPos); !errors.Is(err, sharedlog.ErrTrimmed) {
			t.Fatalf("ReadNext(%d) = (%d entries, %v), want ErrTrimmed", p, len(es), err)
		}
	}
	if err := v.PrefixTrim(ctx, 15); err != nil {
		t.Fatal(err)
	}
	c := v.Chain()
	if c.TrimPoint != 15 || len(c.Segments) != 2 || c.Segments[0].URL != "mem://trim/1" {
		t.Fatalf("chain after trim %+v, want trim point 15 and segment 0 dropped", c)
	}
	wantTrimmed(v, 14)
	wantTrimmed(v, 0)
	wantData(t, readAll(t, ctx, v, 15), want[15:]...)
	// The loglets were trimmed at their own positions.
	wantTrimmed(reg.get("mem://trim/0"), 9)
	wantTrimmed(reg.get("mem://trim/1"), 4)
	if es, err := reg.get("mem://trim/1").ReadNext(ctx, 5, maxPos); err != nil || len(es) != 5 {
		t.Fatalf("segment 1 from its position 5 = (%d entries, %v), want 5", len(es), err)
	}
	// An agent still holding the old chain gets ErrTrimmed from the
	// loglet, never the trimmed entries.
	wantTrimmed(stale, 3)

	t.Run("backwards does nothing", func(t *testing.T) {
		if err := v.PrefixTrim(ctx, 5); err != nil {
			t.Fatal(err)
		}
		if c2 := v.Chain(); c2.Version != c.Version {
			t.Fatalf("a backwards trim wrote chain %+v", c2)
		}
	})
	t.Run("past the tail clamps", func(t *testing.T) {
		if err := v.PrefixTrim(ctx, 1000); err != nil {
			t.Fatal(err)
		}
		c := v.Chain()
		if c.TrimPoint != 30 || len(c.Segments) != 1 || c.Active().URL != "mem://trim/2" {
			t.Fatalf("chain after trimming everything %+v", c)
		}
		wantTrimmed(v, 29)
		wantTail(t, ctx, v, 30, false)
		if p := mustAppend(t, ctx, v, "30"); p != 30 {
			t.Fatalf("append after trimming everything at %d", p)
		}
		w := openVirtual(t, ms, reg, testOpts(""))
		wantTrimmed(w, 29)
		wantData(t, readAll(t, ctx, w, 30), "30")
	})
}

// TestVirtualAppendToDroppedSegment: an append that picked the active
// segment just before it was sealed, trimmed away and its loglet closed
// (by this same agent) retries on the new active segment.
func TestVirtualAppendToDroppedSegment(t *testing.T) {
	ctx := testCtx(t)
	ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
	v := openVirtual(t, ms, reg, testOpts("mem://drop/0"))
	mustAppend(t, ctx, v, "a")
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	reg.beforeAppend = func(url string) {
		if url == "mem://drop/0" {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
	}
	appended := make(chan error, 1)
	go func() {
		p, err := v.Append(ctx, []byte("b"))
		if err == nil && p != 2 {
			err = fmt.Errorf("append at %d, want 2", p)
		}
		appended <- err
	}()
	<-entered
	mustReconfigure(t, ctx, v, "mem://drop/1")
	mustAppend(t, ctx, v, "c")
	if err := v.PrefixTrim(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if c := v.Chain(); c.Segments[0].URL != "mem://drop/1" {
		t.Fatalf("segment 0 was not dropped: %+v", c)
	}
	close(release)
	if err := <-appended; err != nil {
		t.Fatalf("Append across the drop: %v", err)
	}
	wantData(t, readAll(t, ctx, v, 1), "c", "b")
}

// TestVirtualStaleAgent: an agent whose chain is old still finds the
// tail and the entries past its active segment.
func TestVirtualStaleAgent(t *testing.T) {
	ctx := testCtx(t)
	ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
	a := openVirtual(t, ms, reg, testOpts("mem://stale/0"))
	mustAppend(t, ctx, a, "a")
	readers := []*sharedlog.VirtualLog{openVirtual(t, ms, reg, testOpts("")), openVirtual(t, ms, reg, testOpts(""))}
	mustReconfigure(t, ctx, a, "mem://stale/1")
	mustAppend(t, ctx, a, "b")
	// One learns through ReadNext, the other through CheckTail.
	es, err := readers[0].ReadNext(ctx, 1, maxPos)
	if err != nil {
		t.Fatal(err)
	}
	wantData(t, es, "b")
	wantTail(t, ctx, readers[1], 2, false)
	for _, r := range readers {
		wantData(t, readAll(t, ctx, r, 0), "a", "b")
	}
	for i, r := range readers {
		if p := mustAppend(t, ctx, r, fmt.Sprint(i)); p != sharedlog.Pos(2+i) {
			t.Fatalf("stale agent appended at %d, want %d", p, 2+i)
		}
	}
}

func TestVirtualWaitTail(t *testing.T) {
	for _, noTailWaiter := range []bool{false, true} {
		t.Run(fmt.Sprintf("noTailWaiter=%v", noTailWaiter), func(t *testing.T) {
			ctx := testCtx(t)
			ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
			reg.noTailWaiter = noTailWaiter
			a := openVirtual(t, ms, reg, testOpts("mem://wait/0"))
			b := openVirtual(t, ms, reg, testOpts(""))
			wait := func(v *sharedlog.VirtualLog, ctx context.Context, after sharedlog.Pos) <-chan error {
				ch := make(chan error, 1)
				go func() {
					tail, err := v.WaitTail(ctx, after)
					if err == nil && tail <= after {
						err = fmt.Errorf("WaitTail(%d) returned tail %d", after, tail)
					}
					ch <- err
				}()
				return ch
			}
			mustAppend(t, ctx, a, "a")
			if tail, err := b.WaitTail(ctx, 0); err != nil || tail != 1 {
				t.Fatalf("WaitTail(0) = (%d, %v), want 1", tail, err)
			}
			// Woken by another agent's append.
			w := wait(b, ctx, 1)
			mustAppend(t, ctx, a, "b")
			if err := <-w; err != nil {
				t.Fatal(err)
			}
			// Woken across a reconfiguration: the waiter sits on the old
			// segment, the entry lands in the new one.
			w = wait(b, ctx, 2)
			mustReconfigure(t, ctx, a, "mem://wait/1")
			mustAppend(t, ctx, a, "c")
			if err := <-w; err != nil {
				t.Fatal(err)
			}
			// Honours ctx.
			cctx, cancel := context.WithCancel(ctx)
			w = wait(b, cctx, 3)
			cancel()
			if err := <-w; !errors.Is(err, context.Canceled) {
				t.Fatalf("WaitTail with a canceled ctx: %v", err)
			}
			// Woken by Close.
			w = wait(b, ctx, 3)
			b.Close()
			if err := <-w; !errors.Is(err, sharedlog.ErrClosed) {
				t.Fatalf("WaitTail across Close: %v, want ErrClosed", err)
			}
			// Returns on a sealed log.
			sealedTail := make(chan sharedlog.Pos, 1)
			go func() {
				tail, err := a.WaitTail(ctx, 3)
				if err != nil {
					t.Errorf("WaitTail woken by the seal: %v", err)
				}
				sealedTail <- tail
			}()
			if err := sharedlog.SealVirtual(ctx, a); err != nil {
				t.Fatal(err)
			}
			if tail := <-sealedTail; tail != 3 {
				t.Fatalf("WaitTail on a sealed log returned %d, want 3", tail)
			}
		})
	}
}

func TestVirtualClosed(t *testing.T) {
	ctx := testCtx(t)
	ms, reg := sharedlog.NewMemMetaStore(), newMemLoglets()
	v := openVirtual(t, ms, reg, testOpts("mem://closed/0"))
	mustAppend(t, ctx, v, "a")
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err := v.Append(ctx, []byte("x"))
	_, _, err2 := v.CheckTail(ctx)
	_, err3 := v.ReadNext(ctx, 0, maxPos)
	_, err4 := v.WaitTail(ctx, 0)
	for i, err := range []error{err, err2, err3, err4, v.PrefixTrim(ctx, 1), v.Reconfigure(ctx, "mem://closed/1")} {
		if !errors.Is(err, sharedlog.ErrClosed) {
			t.Errorf("op %d after Close: %v, want ErrClosed", i, err)
		}
	}
	// The shared loglet is untouched.
	if tail, sealed, err := reg.get("mem://closed/0").CheckTail(ctx); err != nil || tail != 1 || sealed {
		t.Fatalf("loglet after Close = (%d, %v, %v)", tail, sealed, err)
	}
}

// BenchmarkAppend compares an append through a VirtualLog with one
// straight to its memlog: the difference is the virtualization's cost.
func BenchmarkAppend(b *testing.B) {
	entry := make([]byte, 100)
	for _, bc := range []struct {
		name string
		open func(b *testing.B) sharedlog.Log
	}{
		{"memlog", func(*testing.B) sharedlog.Log { return memlog.New() }},
		{"virtual", func(b *testing.B) sharedlog.Log {
			// Plain memlogs, not test handles, so only the VirtualLog's
			// own cost shows.
			open := func(context.Context, string) (sharedlog.Loglet, error) { return memlog.New(), nil }
			v, err := sharedlog.OpenVirtual(b.Context(), sharedlog.NewMemMetaStore(), open, testOpts("mem://bench/0"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { v.Close() })
			return v
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := bc.open(b)
			ctx := b.Context()
			b.ReportAllocs()
			b.SetBytes(int64(len(entry)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := l.Append(ctx, entry); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkReadNext reads a log of 64 segments from start to end.
func BenchmarkReadNext(b *testing.B) {
	const (
		segments   = 64
		perSegment = 1000
	)
	ctx := b.Context()
	v, err := sharedlog.OpenVirtual(ctx, sharedlog.NewMemMetaStore(), newMemLoglets().open, testOpts("mem://benchread/0"))
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	entry := make([]byte, 100)
	for s := range segments {
		if s > 0 {
			if err := v.Reconfigure(ctx, fmt.Sprintf("mem://benchread/%d", s)); err != nil {
				b.Fatal(err)
			}
		}
		for range perSegment {
			if _, err := v.Append(ctx, entry); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	b.SetBytes(segments * perSegment * int64(len(entry)))
	for b.Loop() {
		for p := sharedlog.Pos(0); p < segments*perSegment; {
			es, err := v.ReadNext(ctx, p, maxPos)
			if err != nil || len(es) == 0 {
				b.Fatalf("ReadNext(%d) = (%d entries, %v)", p, len(es), err)
			}
			p += sharedlog.Pos(len(es))
		}
	}
}
