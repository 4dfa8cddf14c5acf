package kafka

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// TestFetchDamagedObjects fetches three partitions in one request: the
// first's object was deleted from the store, a value byte of the
// second's was flipped, the third is intact. Each damaged partition gets
// its own error, the intact one its records, and the long poll does not
// hold the answer back.
func TestFetchDamagedObjects(t *testing.T) {
	a, _ := newDataAgent(t, &dataPath{
		// No object goes to the read cache as it is written: reads
		// come from the store, where the test damages them.
		Tune: func(c *produce.Config) { c.Cache = nil },
	})
	a.createTopic(t, "t", 3, nil)
	opts := batchtest.Options{Records: 3, ValueBytes: 40, Seed: 7}
	for p := range int32(3) {
		a.produceRaw(t, "t", p, batchtest.Build(t, opts))
	}
	key := func(p int32) string {
		t.Helper()
		v := a.Replica.View()
		defer v.Close()
		topic, _, _ := v.Topic("t")
		it, err := v.Seek(topic.ID, p, 0)
		if err != nil || !it.Next() {
			t.Fatalf("partition %d: no index entry (%v)", p, err)
		}
		defer it.Close()
		return it.Entry().ObjectKey
	}
	ctx := a.ctx(t)
	if err := a.Store.Delete(ctx, key(0)); err != nil {
		t.Fatal(err)
	}
	obj, err := a.Store.Get(ctx, key(1), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	value := batchtest.Value(opts, 1)
	obj[bytes.Index(obj, value)+5] ^= 0x01
	if err := a.Store.Put(ctx, key(1), obj); err != nil {
		t.Fatal(err)
	}

	parts := []fetchPartReq{{topic: "t", partition: 0}, {topic: "t", partition: 1}, {topic: "t", partition: 2}}
	for i := range parts {
		parts[i].maxBytes = 1 << 20
	}
	// A long MaxWait and MinBytes beyond what is there: a failed
	// partition answers at once, as in Kafka.
	resp := a.rawRequest(t, fetchReq(12, int32(guard.Milliseconds()), 1<<20, 1<<20, parts...)).(*kmsg.FetchResponse)
	got := fetchPartitions(resp)
	want := []int16{kerr.UnknownServerError.Code, kerr.CorruptMessage.Code, 0}
	for i, sp := range got {
		if sp.ErrorCode != want[i] {
			t.Errorf("partition %d: %v, want %v", i, kerr.ErrorForCode(sp.ErrorCode), kerr.ErrorForCode(want[i]))
		}
		if n := len(batchesOf(t, sp.RecordBatches)); (i == 2) != (n == 1) {
			t.Errorf("partition %d: %d batches", i, n)
		}
	}
}
