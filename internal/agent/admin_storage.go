package agent

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/strandkafka/strand/internal/compact"
)

// PathTopicStorage is GET /v1/topics/{name}/storage: TopicStorage, what
// `strand topic describe --http` shows of each partition's index
// entries and objects by compaction level, from this agent's copy.
const PathTopicStorage = "/v1/topics/{name}/storage"

// TopicStorage is the answer of GET /v1/topics/{name}/storage.
type TopicStorage struct {
	Topic      string                    `json:"topic"`
	Partitions []compact.PartitionLevels `json:"partitions"`
}

func (a *Agent) handleTopicStorage(w http.ResponseWriter, r *http.Request) {
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
	// A walk of every entry of the topic: an admin's request, bounded by
	// the index, as DescribeLogDirs' sizes are not.
	levels, err := compact.Describe(v, t)
	if err != nil {
		writeError(w, http.StatusInternalServerError, errors.Join(errors.New("walking the index"), err))
		return
	}
	writeJSON(w, http.StatusOK, TopicStorage{Topic: t.Name, Partitions: levels})
}
