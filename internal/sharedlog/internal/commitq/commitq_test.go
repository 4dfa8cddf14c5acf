package commitq

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/strandkafka/strand/internal/sharedlog"
)

// gatedCommit is a Commit that records each batch's sizes and holds the
// writer until the test releases the batch, so a test decides what is
// queued when the next batch is cut.
type gatedCommit struct {
	q       *Queue
	release chan struct{}
	mu      struct {
		sync.Mutex
		next    sharedlog.Pos
		batches [][]int // entry sizes of each batch
	}
}

func startGated(t *testing.T, lim Limits, admit Admit) *gatedCommit {
	t.Helper()
	g := &gatedCommit{release: make(chan struct{})}
	g.q = Start(lim, admit, g.commit)
	t.Cleanup(func() { g.q.Close(func() { close(g.release) }) })
	return g
}

func (g *gatedCommit) commit(batch []*Request) {
	<-g.release
	g.mu.Lock()
	sizes := make([]int, len(batch))
	for i, r := range batch {
		sizes[i] = len(r.Data)
	}
	g.mu.batches = append(g.mu.batches, sizes)
	first := g.mu.next
	g.mu.next += sharedlog.Pos(len(batch))
	g.mu.Unlock()
	g.q.Ack(batch, first)
}

func (g *gatedCommit) batches() [][]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.mu.batches)
}

func admitAll() error { return nil }

func TestBatches(t *testing.T) {
	tests := []struct {
		name  string
		lim   Limits
		sizes []int // entries queued behind the first, which commits alone
		want  [][]int
	}{
		{"entries", Limits{MaxBatchEntries: 2, MaxBatchBytes: 1 << 20, MaxQueueBytes: 1 << 20},
			[]int{1, 1, 1, 1, 1}, [][]int{{1}, {1, 1}, {1, 1}, {1}}},
		{"bytes", Limits{MaxBatchEntries: 100, MaxBatchBytes: 10, MaxQueueBytes: 1 << 20},
			[]int{4, 4, 4, 6, 1}, [][]int{{1}, {4, 4}, {4, 6}, {1}}},
		{"large entry alone", Limits{MaxBatchEntries: 100, MaxBatchBytes: 10, MaxQueueBytes: 1 << 20},
			[]int{50, 1}, [][]int{{1}, {50}, {1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := startGated(t, tt.lim, admitAll)
				got := make(chan sharedlog.Pos, 1+len(tt.sizes))
				for _, size := range append([]int{1}, tt.sizes...) {
					go func() {
						p, err := g.q.Append(t.Context(), make([]byte, size))
						if err != nil {
							t.Errorf("Append = %v", err)
						}
						got <- p
					}()
					// Queue in this order: the first is taken alone.
					synctest.Wait()
				}
				for range len(tt.want) {
					g.release <- struct{}{}
				}
				var positions []sharedlog.Pos
				for range 1 + len(tt.sizes) {
					positions = append(positions, <-got)
				}
				slices.Sort(positions)
				for i, p := range positions {
					if p != sharedlog.Pos(i) {
						t.Fatalf("positions = %v, want 0..%d", positions, len(positions)-1)
					}
				}
				if b := g.batches(); !slices.EqualFunc(b, tt.want, slices.Equal) {
					t.Fatalf("batches = %v, want %v", b, tt.want)
				}
			})
		})
	}
}

func TestBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Room for one 100-byte entry and its overhead, not two: the
		// second waits for the first's commit, as does the third.
		g := startGated(t, Limits{MaxBatchEntries: 10, MaxBatchBytes: 1 << 20, MaxQueueBytes: 100 + requestOverheadBytes}, admitAll)
		done := make(chan error, 2)
		for range 2 {
			go func() {
				_, err := g.q.Append(t.Context(), make([]byte, 100))
				done <- err
			}()
			synctest.Wait()
		}
		ctx, cancel := context.WithCancel(t.Context())
		held := make(chan error, 1)
		go func() {
			_, err := g.q.Append(ctx, make([]byte, 100))
			held <- err
		}()
		synctest.Wait()
		select {
		case err := <-held:
			t.Fatalf("Append over MaxQueueBytes returned %v, want it held", err)
		default:
		}
		cancel()
		if err := <-held; !errors.Is(err, context.Canceled) {
			t.Fatalf("held Append after cancel = %v, want context.Canceled", err)
		}
		// The first commit frees room: the waiting second goes next.
		g.release <- struct{}{}
		g.release <- struct{}{}
		for range 2 {
			if err := <-done; err != nil {
				t.Fatalf("Append = %v", err)
			}
		}
		if b := g.batches(); len(b) != 2 {
			t.Fatalf("batches = %v, want two of one entry", b)
		}
	})
}

func TestAdmit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var refuse error
		g := startGated(t, Limits{MaxBatchEntries: 10, MaxBatchBytes: 1 << 20, MaxQueueBytes: 1}, func() error {
			mu.Lock()
			defer mu.Unlock()
			return refuse
		})
		first := make(chan error, 1)
		go func() {
			_, err := g.q.Append(t.Context(), []byte("a"))
			first <- err
		}()
		synctest.Wait()
		held := make(chan error, 1)
		go func() {
			_, err := g.q.Append(t.Context(), []byte("b"))
			held <- err
		}()
		synctest.Wait()
		mu.Lock()
		refuse = sharedlog.ErrSealed
		mu.Unlock()
		g.q.WakeAppenders()
		if err := <-held; !errors.Is(err, sharedlog.ErrSealed) {
			t.Fatalf("held Append after WakeAppenders = %v, want ErrSealed", err)
		}
		if _, err := g.q.Append(t.Context(), []byte("c")); !errors.Is(err, sharedlog.ErrSealed) {
			t.Fatalf("Append refused by admit = %v, want ErrSealed", err)
		}
		g.release <- struct{}{}
		if err := <-first; err != nil {
			t.Fatalf("first Append = %v", err)
		}
		if b := g.batches(); len(b) != 1 {
			t.Fatalf("batches = %v, want only the first", b)
		}
	})
}

func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var q *Queue
		q = Start(Limits{MaxBatchEntries: 1, MaxBatchBytes: 1 << 20, MaxQueueBytes: 1 << 20}, admitAll, func(batch []*Request) {
			<-release
			q.Fail(batch, sharedlog.ErrClosed)
		})
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				_, err := q.Append(t.Context(), []byte("x"))
				errs <- err
			}()
			synctest.Wait()
		}
		// The first is in flight, the second queued: Close cancels the
		// one (through cancelCommit) and fails the other.
		q.Close(func() { close(release) })
		for range 2 {
			if err := <-errs; !errors.Is(err, sharedlog.ErrClosed) {
				t.Fatalf("Append across Close = %v, want ErrClosed", err)
			}
		}
		if _, err := q.Append(t.Context(), []byte("y")); !errors.Is(err, sharedlog.ErrClosed) {
			t.Fatalf("Append after Close = %v, want ErrClosed", err)
		}
	})
}
