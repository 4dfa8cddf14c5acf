package replica

import (
	"errors"
	"slices"
	"testing"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/partwatch"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// signalled reports whether w has a signal waiting, without blocking.
func signalled(w *partwatch.Watch) bool {
	select {
	case <-w.Ready():
		return true
	default:
		return false
	}
}

// A watch wakes after the batches that change its partitions, on the
// copy that proposed them (before Propose returns) and on another copy
// that applies them, and wakes with everything on a topic deletion and on
// Close.
func TestWatch(t *testing.T) {
	log := memlog.New()
	a := openReplica(t, log, "", "a")
	b := openReplica(t, log, "", "b")
	tp := mustOK(t, a, meta.CreateTopic{Name: "t", Partitions: 3}).TopicID
	u := mustOK(t, a, meta.CreateTopic{Name: "u", Partitions: 1}).TopicID
	mustSync(t, b)
	parts := []meta.PartitionRef{{TopicID: tp, Partition: 0}, {TopicID: tp, Partition: 2}, {TopicID: u, Partition: 0}}
	wa, wb := a.Watch(parts), b.Watch(parts)
	defer wa.Close()
	defer wb.Close()

	mustOK(t, a, commitTo(1, partRef{tp, 1}))
	mustSync(t, b)
	if signalled(wa) || signalled(wb) {
		t.Fatal("a commit to a partition not watched woke a watch")
	}
	mustOK(t, a, commitTo(1, partRef{tp, 2}, partRef{u, 0}))
	if !signalled(wa) {
		t.Fatal("the proposing copy's watch was not woken before Propose returned")
	}
	recv(t, wb.Ready(), "b's watch to wake")
	for _, w := range []*partwatch.Watch{wa, wb} {
		got, all := w.Take(nil)
		if slices.Sort(got); all || !slices.Equal(got, []int{1, 2}) {
			t.Fatalf("Take = %v, %v; want [1 2]", got, all)
		}
	}
	mustOK(t, a, meta.DeleteTopic{Name: "u"})
	if !signalled(wa) {
		t.Fatal("deleting a watched topic did not wake the watch")
	}
	if _, all := wa.Take(nil); !all {
		t.Fatal("a deleted topic must mark every partition")
	}
	wb.Take(nil)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	recv(t, wb.Ready(), "Close to wake the watch")
	if _, all := wb.Take(nil); !all {
		t.Fatal("Close must mark every partition")
	}
}

// A halt wakes every watch, and the copy reports why.
func TestWatchHalt(t *testing.T) {
	log := memlog.New()
	r := openReplica(t, log, "", "a")
	id := mustOK(t, r, meta.CreateTopic{Name: "t", Partitions: 1}).TopicID
	w := r.Watch([]meta.PartitionRef{{TopicID: id, Partition: 0}})
	defer w.Close()
	if _, err := log.Append(testCtx(t), []byte("not an entry")); err != nil {
		t.Fatal(err)
	}
	recv(t, w.Ready(), "the halt to wake the watch")
	if _, all := w.Take(nil); !all {
		t.Fatal("a halt must mark every partition")
	}
	if err := r.Err(); !errors.Is(err, ErrHalted) {
		t.Fatalf("Err = %v, want ErrHalted", err)
	}
}
