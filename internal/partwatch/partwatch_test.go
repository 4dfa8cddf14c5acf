package partwatch

import (
	"slices"
	"testing"

	"github.com/strandkafka/strand/internal/meta"
)

var (
	topicA = meta.TopicID{0xA}
	topicB = meta.TopicID{0xB}
)

func ref(id meta.TopicID, p int32) meta.PartitionRef {
	return meta.PartitionRef{TopicID: id, Partition: p}
}

// signalled reports whether w has a signal waiting, without blocking.
func signalled(w *Watch) bool {
	select {
	case <-w.Ready():
		return true
	default:
		return false
	}
}

func take(t *testing.T, w *Watch) ([]int, bool) {
	t.Helper()
	got, all := w.Take(nil)
	slices.Sort(got)
	return got, all
}

func TestNotifyWakesOnlyItsPartitions(t *testing.T) {
	r := New()
	w1 := r.Watch([]meta.PartitionRef{ref(topicA, 0), ref(topicA, 1), ref(topicB, 0)})
	w2 := r.Watch([]meta.PartitionRef{ref(topicA, 2)})
	defer w1.Close()
	defer w2.Close()

	r.Notify(meta.Changes{Partitions: []meta.PartitionRef{ref(topicA, 3), ref(topicB, 1)}})
	if signalled(w1) || signalled(w2) {
		t.Fatal("a change to other partitions woke a watch")
	}
	r.Notify(meta.Changes{Partitions: []meta.PartitionRef{ref(topicA, 1), ref(topicB, 0)}})
	r.Notify(meta.Changes{Partitions: []meta.PartitionRef{ref(topicA, 1)}})
	if !signalled(w1) || signalled(w2) {
		t.Fatal("want w1 woken and w2 asleep")
	}
	if got, all := take(t, w1); all || !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("Take = %v, %v; want [1 2] (deduped), false", got, all)
	}
	if got, all := take(t, w1); all || len(got) != 0 {
		t.Fatalf("second Take = %v, %v; want nothing", got, all)
	}
}

func TestNotifyTopicAndAll(t *testing.T) {
	r := New()
	wa := r.Watch([]meta.PartitionRef{ref(topicA, 0), ref(topicB, 5)})
	wb := r.Watch([]meta.PartitionRef{ref(topicB, 1)})
	defer wa.Close()
	defer wb.Close()

	r.Notify(meta.Changes{Topics: []meta.TopicID{topicA}})
	if !signalled(wa) || signalled(wb) {
		t.Fatal("a topic change must wake the watches on that topic only")
	}
	if _, all := take(t, wa); !all {
		t.Fatal("a topic change must mark every partition")
	}
	r.Notify(meta.Changes{All: true})
	for _, w := range []*Watch{wa, wb} {
		if !signalled(w) {
			t.Fatal("All must wake every watch")
		}
		if _, all := take(t, w); !all {
			t.Fatal("All must mark every partition")
		}
	}
	// A partition change after an all is folded into it.
	r.NotifyAll()
	r.Notify(meta.Changes{Partitions: []meta.PartitionRef{ref(topicB, 1)}})
	if got, all := take(t, wb); !all || len(got) != 0 {
		t.Fatalf("Take = %v, %v; want all", got, all)
	}
}

func TestDuplicatePartitions(t *testing.T) {
	r := New()
	w := r.Watch([]meta.PartitionRef{ref(topicA, 0), ref(topicA, 0)})
	r.Notify(meta.Changes{Partitions: []meta.PartitionRef{ref(topicA, 0)}})
	if got, _ := take(t, w); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("Take = %v, want both entries", got)
	}
	w.Close()
	if n := r.Len(); n != 0 {
		t.Fatalf("%d slots after Close", n)
	}
}

// Close gives every slot back, and a closed watch is not notified.
func TestCloseBounds(t *testing.T) {
	r := New()
	var parts []meta.PartitionRef
	for p := range int32(1000) {
		parts = append(parts, ref(topicA, p))
	}
	ws := []*Watch{r.Watch(parts), r.Watch(parts[:10]), r.Watch(parts[500:])}
	if n := r.Len(); n != 1000+10+500 {
		t.Fatalf("%d slots, want 1510", n)
	}
	ws[0].Close()
	ws[0].Close()
	if n := r.Len(); n != 510 {
		t.Fatalf("%d slots after one Close, want 510", n)
	}
	r.Notify(meta.Changes{Partitions: parts[:1]})
	r.NotifyAll()
	if signalled(ws[0]) {
		t.Fatal("a closed watch was notified")
	}
	ws[1].Close()
	ws[2].Close()
	if n := r.Len(); n != 0 {
		t.Fatalf("%d slots after Close, want 0", n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.mu.watches) != 0 {
		t.Fatalf("%d watches left", len(r.mu.watches))
	}
}

// Watches come and go while changes are notified (run with -race).
func TestConcurrent(t *testing.T) {
	r := New()
	parts := []meta.PartitionRef{ref(topicA, 0), ref(topicA, 1), ref(topicB, 0)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			r.Notify(meta.Changes{Partitions: parts[i%3 : i%3+1]})
			if i%100 == 0 {
				r.Notify(meta.Changes{Topics: []meta.TopicID{topicB}})
			}
		}
	}()
	for range 200 {
		w := r.Watch(parts)
		w.Take(nil)
		w.Close()
	}
	<-done
	if n := r.Len(); n != 0 {
		t.Fatalf("%d slots left", n)
	}
}

// A topic's slots stay for the next watch until the whole topic changes
// (a deletion), then go with its last watch.
func TestTopicSlotsDropped(t *testing.T) {
	r := New()
	topics := func() int {
		n := 0
		for i := range r.shards {
			n += len(r.shards[i].topics)
		}
		return n
	}
	r.Watch([]meta.PartitionRef{ref(topicA, 3)}).Close()
	if topics() != 1 {
		t.Fatalf("%d topics kept, want 1", topics())
	}
	r.Notify(meta.Changes{Topics: []meta.TopicID{topicA}})
	if topics() != 0 {
		t.Fatalf("%d topics after a deletion with no watch, want 0", topics())
	}
	w := r.Watch([]meta.PartitionRef{ref(topicA, 3)})
	r.Notify(meta.Changes{Topics: []meta.TopicID{topicA}})
	if topics() != 1 {
		t.Fatal("a watched topic was dropped")
	}
	w.Close()
	if topics() != 0 {
		t.Fatalf("%d topics after the last Close of a deleted topic, want 0", topics())
	}
}

// Topics kept with no watch are bounded, however many come and go.
func TestIdleTopicsBounded(t *testing.T) {
	r := New()
	for i := range 10 * shards * maxIdleTopicsPerShard {
		var id meta.TopicID
		id[0], id[1], id[4] = byte(i), byte(i>>8), byte(i>>16)
		r.Watch([]meta.PartitionRef{ref(id, 0), ref(topicA, 1), ref(id, 1)}).Close()
	}
	n := 0
	for i := range r.shards {
		s := &r.shards[i]
		n += len(s.topics)
		if len(s.topics) != s.idle {
			t.Fatalf("shard %d: %d topics, %d counted idle", i, len(s.topics), s.idle)
		}
	}
	if n > shards*maxIdleTopicsPerShard {
		t.Fatalf("%d idle topics kept, at most %d", n, shards*maxIdleTopicsPerShard)
	}
}

// TestOnBusy: the hook hears the first registration and the last close,
// once each, however the watches overlap and however often one closes.
func TestOnBusy(t *testing.T) {
	r := New()
	var got []bool
	r.OnBusy(func(busy bool) { got = append(got, busy) })
	w1 := r.Watch(nil)
	w2 := r.Watch(nil)
	w1.Close()
	w1.Close()
	w3 := r.Watch(nil)
	w2.Close()
	w3.Close()
	w4 := r.Watch(nil)
	w4.Close()
	want := []bool{true, false, true, false}
	if !slices.Equal(got, want) {
		t.Fatalf("OnBusy calls = %v, want %v", got, want)
	}
}
