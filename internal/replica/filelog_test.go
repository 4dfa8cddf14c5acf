package replica

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sharedlog/filelog"
)

// TestReplicasOnFileLog runs concurrent proposers over the file loglet,
// then rebuilds a copy from the reopened log files alone.
func TestReplicasOnFileLog(t *testing.T) {
	logDir := t.TempDir()
	log, err := filelog.Open(logDir, filelog.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	a := openReplica(t, log, "", "a")
	b := openReplica(t, log, "", "b")
	id := mustOK(t, a, meta.CreateTopic{Name: "shared-0", Partitions: 8}).TopicID
	var shared []partRef
	for p := range int32(8) {
		shared = append(shared, partRef{id, p})
	}
	mustSync(t, b)

	var mu sync.Mutex
	var acked []ackedBatch
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for ri, r := range []*Replica{a, b} {
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(ri), uint64(w)))
				if err := runWorker(t, r, rng, fmt.Sprintf("own-%d-%d", ri, w), shared, 25, func() {}, &mu, &acked); err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mustSync(t, a)
	mustSync(t, b)
	want := mustDigest(t, a)
	if got := mustDigest(t, b); got != want {
		t.Fatalf("digests differ: %x, %x", got, want)
	}
	checkAcked(t, a, shared, acked)

	a.Close()
	b.Close()
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	log, err = filelog.Open(logDir, filelog.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	if got := mustDigest(t, openReplica(t, log, "", "c")); got != want {
		t.Fatalf("copy from the reopened log: %x, want %x", got, want)
	}
}
