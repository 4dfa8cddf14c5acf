package console

import (
	"encoding/json"
	"net/http"
	"time"
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
// rates, so the page computes the rate between two polls whatever their
// spacing, and the server keeps no history.
type throughput struct {
	// TimeMs is when the counters were read, unix milliseconds.
	TimeMs   int64  `json:"time_ms"`
	BytesIn  uint64 `json:"bytes_in"`
	BytesOut uint64 `json:"bytes_out"`
}

func (c *Console) handleThroughput(w http.ResponseWriter, r *http.Request) {
	in, out := c.cfg.Throughput()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(throughput{TimeMs: time.Now().UnixMilli(), BytesIn: in, BytesOut: out})
}
