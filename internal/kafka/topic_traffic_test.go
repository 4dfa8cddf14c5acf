package kafka

import (
	"maps"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// trafficObserver sums what a TopicObserver is told, per topic, and
// counts connections opened.
type trafficObserver struct {
	nopObserver
	mu       sync.Mutex
	produced map[meta.TopicID][2]int64 // bytes, records
	fetched  map[meta.TopicID][2]int64
	opened   int
}

func newTrafficObserver() *trafficObserver {
	return &trafficObserver{produced: map[meta.TopicID][2]int64{}, fetched: map[meta.TopicID][2]int64{}}
}

func (o *trafficObserver) TopicProduced(id meta.TopicID, bytes, records int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := o.produced[id]
	o.produced[id] = [2]int64{v[0] + bytes, v[1] + records}
}

func (o *trafficObserver) TopicFetched(id meta.TopicID, bytes, records int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := o.fetched[id]
	o.fetched[id] = [2]int64{v[0] + bytes, v[1] + records}
}

func (o *trafficObserver) ConnOpened(*Conn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.opened++
}

func (o *trafficObserver) totals() (produced, fetched map[meta.TopicID][2]int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.produced), maps.Clone(o.fetched)
}

// TestTopicTraffic checks what the TopicObserver hears: the batch bytes
// and records a Produce wrote, per topic, not those it refused; and
// those a Fetch answer carries.
func TestTopicTraffic(t *testing.T) {
	obs := newTrafficObserver()
	a, _ := newDataAgent(t, nil, func(c *agentConfig) { c.Server.Observer = obs })
	idA := a.createTopic(t, "a", 2, nil)
	idB := a.createTopic(t, "b", 1, nil)
	b1 := batchtest.Build(t, batchtest.Options{Records: 3, ValueBytes: 100})
	b2 := batchtest.Build(t, batchtest.Options{Records: 5, ValueBytes: 10})
	b3 := batchtest.Build(t, batchtest.Options{Records: 2, ValueBytes: 50})
	resp := a.request(t, produceReq(9, -1, nil,
		rawPart{"a", 0, b1}, rawPart{"a", 1, b2}, rawPart{"a", 7, b1}, // partition 7: refused
		rawPart{"b", 0, b3})).(*kmsg.ProduceResponse)
	for i, p := range producePartitions(resp) {
		if wantErr := i == 2; (p.ErrorCode != 0) != wantErr {
			t.Fatalf("partition %d: code %d", p.Partition, p.ErrorCode)
		}
	}
	produced, _ := obs.totals()
	want := map[meta.TopicID][2]int64{idA: {int64(len(b1) + len(b2)), 8}, idB: {int64(len(b3)), 2}}
	if !equalTraffic(produced, want) {
		t.Errorf("produced %v, want %v", produced, want)
	}

	fresp := a.request(t, fetchReq(16, 0, 1, 1<<20,
		fetchPartReq{id: idA, partition: 0, maxBytes: 1 << 20},
		fetchPartReq{id: idA, partition: 1, maxBytes: 1 << 20},
		fetchPartReq{id: idB, partition: 0, maxBytes: 1 << 20})).(*kmsg.FetchResponse)
	var gotBytes int
	for _, p := range fetchPartitions(fresp) {
		gotBytes += len(p.RecordBatches)
	}
	if gotBytes != len(b1)+len(b2)+len(b3) {
		t.Fatalf("fetch returned %d record bytes, want all %d", gotBytes, len(b1)+len(b2)+len(b3))
	}
	_, fetched := obs.totals()
	if !equalTraffic(fetched, want) {
		t.Errorf("fetched %v, want %v", fetched, want)
	}
	if obs.opened == 0 {
		t.Error("no connection opened reported")
	}
}

func equalTraffic(got, want map[meta.TopicID][2]int64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// TestCountRecords checks the fetch side's record count: whole batches
// only, a partial last batch left out.
func TestCountRecords(t *testing.T) {
	b1 := batchtest.Build(t, batchtest.Options{Records: 3, ValueBytes: 10})
	b2 := batchtest.Build(t, batchtest.Options{Records: 4, ValueBytes: 10})
	both := append(append([]byte{}, b1...), b2...)
	for _, tc := range []struct {
		name    string
		records []byte
		want    int64
	}{
		{"empty", nil, 0},
		{"one", b1, 3},
		{"two", both, 7},
		{"partial last", both[:len(both)-1], 3},
		{"partial header", both[:len(b1)+20], 3},
	} {
		if got := countRecords(tc.records); got != tc.want {
			t.Errorf("%s: %d records, want %d", tc.name, got, tc.want)
		}
	}
}
