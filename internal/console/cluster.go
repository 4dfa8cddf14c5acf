package console

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/strandkafka/strand/internal/clock"
)

func (c *Console) handleCluster(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	st, err := c.cfg.Cluster.ClusterStatus(ctx)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	c.render(w, r, http.StatusOK, "cluster", page{Title: "Cluster", Nav: "cluster", Data: st})
}

// throughput is the answer of GET /console/api/throughput: counters, not
// rates, so the page computes the rate between two samples whatever their
// spacing. History holds the console's own samples of the last
// throughputHistoryLen*throughputSampleEvery, oldest first, so the chart
// has a past the moment the page opens.
type throughput struct {
	// TimeMs is when the counters were read, unix milliseconds.
	TimeMs   int64            `json:"time_ms"`
	BytesIn  uint64           `json:"bytes_in"`
	BytesOut uint64           `json:"bytes_out"`
	History  []throughputTick `json:"history"`
}

type throughputTick struct {
	TimeMs   int64  `json:"time_ms"`
	BytesIn  uint64 `json:"bytes_in"`
	BytesOut uint64 `json:"bytes_out"`
}

// Throughput history: a sample every throughputSampleEvery, the last
// throughputHistoryLen of them (30 minutes), in a ring.
const (
	throughputSampleEvery = 10 * time.Second
	throughputHistoryLen  = 180
)

// throughputHistory is a ring of counter samples, taken on the console's
// clock and read by every throughput request.
type throughputHistory struct {
	mu struct {
		sync.Mutex
		ring   [throughputHistoryLen]throughputTick
		next   int // where the next sample goes
		n      int // samples held, at most throughputHistoryLen
		timer  clock.Timer
		closed bool
	}
}

// sample records the counters now and schedules the next sample.
func (c *Console) sample() {
	in, out := c.cfg.Throughput()
	h := &c.history
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		return
	}
	h.mu.ring[h.mu.next] = throughputTick{TimeMs: c.clock.Now().UnixMilli(), BytesIn: in, BytesOut: out}
	h.mu.next = (h.mu.next + 1) % throughputHistoryLen
	h.mu.n = min(h.mu.n+1, throughputHistoryLen)
	h.mu.timer = c.clock.AfterFunc(c.sampleEvery, c.sample)
}

// stop ends the sampling (Close).
func (h *throughputHistory) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.closed = true
	if h.mu.timer != nil {
		h.mu.timer.Stop()
	}
}

// ticks returns the samples, oldest first. The caller owns the slice.
func (h *throughputHistory) ticks() []throughputTick {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]throughputTick, 0, h.mu.n)
	for i := range h.mu.n {
		out = append(out, h.mu.ring[(h.mu.next-h.mu.n+i+throughputHistoryLen)%throughputHistoryLen])
	}
	return out
}

func (c *Console) handleThroughput(w http.ResponseWriter, r *http.Request) {
	in, out := c.cfg.Throughput()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(throughput{TimeMs: c.clock.Now().UnixMilli(), BytesIn: in, BytesOut: out, History: c.history.ticks()})
}
