package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type noCluster struct{}

func (noCluster) ClusterStatus(context.Context) (ClusterStatus, error) { return ClusterStatus{}, nil }

// TestRecordPagesAreBounded: with maxRecordReaders records pages being
// read, one more waits its turn and then is refused, before it opens a
// client of its own; a free slot lets it through to Kafka.
func TestRecordPagesAreBounded(t *testing.T) {
	c, err := New(Config{
		Cluster: noCluster{},
		// Nothing listens there: a page that gets through fails at
		// Kafka (502), which tells it from a refused one (503).
		Kafka:      []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1"), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second)},
		Authorize:  func(*http.Request) (int, error) { return http.StatusOK, nil },
		Throughput: func() (uint64, uint64) { return 0, 0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.recordReaderWait = 50 * time.Millisecond
	for range maxRecordReaders {
		c.recordReaders <- struct{}{}
	}
	get := func() (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		w := httptest.NewRecorder()
		c.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodGet, Prefix+"topics/t/records?partition=0", nil))
		return w.Code, w.Body.String()
	}
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "too many record pages") {
		t.Errorf("records page with every slot taken: status %d, want 503 saying why", code)
	}
	<-c.recordReaders
	if code, _ := get(); code == http.StatusServiceUnavailable {
		t.Errorf("records page with a free slot: status %d, want it to reach Kafka", code)
	}
	if n := len(c.recordReaders); n != maxRecordReaders-1 {
		t.Errorf("%d slots taken after the page, want %d: the page kept its slot", n, maxRecordReaders-1)
	}
}
