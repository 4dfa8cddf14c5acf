package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchPaced checks that MaxFetchBytesPerSec paces Fetch answers by
// the record bytes they carry: with the pacer's clock stopped, an answer
// takes exactly its records from the bucket. (TestBytePacer checks that
// takers wait for what they take.)
func TestFetchPaced(t *testing.T) {
	a, _ := newDataAgent(t, nil, withDeps(func(d *Deps) { d.MaxFetchBytesPerSec = 64 << 20 }))
	a.createTopic(t, "t", 1, nil)
	produceBytes(t, a, "t", 10<<10, 100<<10)
	p := a.Deps.shared.fetchPacer()
	stopped := time.Now()
	p.mu.Lock()
	p.now = func() time.Time { return stopped }
	p.mu.at = stopped
	before := p.mu.tokens
	p.mu.Unlock()

	resp := a.rawRequest(t, fetchReq(11, 0, 1, 1<<20, fetchPartReq{topic: "t", maxBytes: 1 << 20})).(*kmsg.FetchResponse)
	n := len(fetchPartitions(resp)[0].RecordBatches)
	p.mu.Lock()
	took := before - p.mu.tokens
	p.mu.Unlock()
	if n < 100<<10 || took != float64(n) {
		t.Fatalf("an answer of %d record bytes took %.0f from the pace", n, took)
	}
}
