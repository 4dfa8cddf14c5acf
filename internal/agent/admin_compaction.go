package agent

import (
	"fmt"
	"net/http"

	"github.com/strandkafka/strand/internal/cleaner"
	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
)

// Key compaction on the admin API:
//
//	GET /v1/topics/{name}/compaction  TopicCompaction out
//
// The agent plans every partition of the topic from its local copy of
// the index, as its cleaner would now (cleaner.PlanPartition): where the
// clean section ends, what is cleanable, and the dirty ratio compared
// with min.cleanable.dirty.ratio. Every agent answers the same (up to
// how far it has applied the log), not only the one that cleans.
const PathTopicCompaction = "/v1/topics/{name}/compaction"

// TopicCompaction is the answer of GET /v1/topics/{name}/compaction.
type TopicCompaction struct {
	Topic string `json:"topic"`
	// Compacted: cleanup.policy holds compact. The partitions are
	// planned either way.
	Compacted  bool                  `json:"compacted"`
	Partitions []PartitionCompaction `json:"partitions"`
}

// PartitionCompaction is one partition's cleaner.Plan.
type PartitionCompaction struct {
	Partition        int32   `json:"partition"`
	LogStart         int64   `json:"log_start"`
	FirstDirty       int64   `json:"first_dirty"`
	FirstUncleanable int64   `json:"first_uncleanable"`
	CleanBytes       int64   `json:"clean_bytes"`
	DirtyBytes       int64   `json:"dirty_bytes"`
	DirtyRatio       float64 `json:"dirty_ratio"`
	Due              bool    `json:"due"`
}

func (a *Agent) handleTopicCompaction(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	v := a.replica.View()
	defer v.Close()
	t, ok, err := v.Topic(name)
	switch {
	case err != nil:
		writeError(w, http.StatusInternalServerError, err)
		return
	case !ok:
		writeError(w, http.StatusNotFound, fmt.Errorf("no topic %q", name))
		return
	}
	now, err := v.LogClock()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	now = max(now, clock.OrReal(a.cfg.testing.clock).Now().UnixMilli())
	out := TopicCompaction{Topic: name, Compacted: meta.CompactPolicy(t.Configs)}
	for p := range t.Partitions {
		plan, err := cleaner.PlanPartition(v, t, p, now)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return
		}
		out.Partitions = append(out.Partitions, PartitionCompaction{
			Partition: p, LogStart: plan.LogStart, FirstDirty: plan.FirstDirty, FirstUncleanable: plan.FirstUncleanable,
			CleanBytes: plan.CleanBytes, DirtyBytes: plan.DirtyBytes, DirtyRatio: plan.Ratio, Due: plan.Due,
		})
	}
	writeJSON(w, http.StatusOK, out)
}
