package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/topicconfig"
)

// printCompaction prints a compacted topic's clean and dirty bytes and
// dirty ratio per partition, as the agent at o.HTTP plans them (GET
// /v1/topics/{name}/compaction): Kafka's cleaner state has no Kafka
// API. A topic whose cleanup.policy does not hold compact prints
// nothing; an agent that cannot answer prints why.
func printCompaction(ctx context.Context, w io.Writer, o *adminOptions, rcs kadm.ResourceConfigs, topic string) error {
	tc, err := fetchCompaction(ctx, o, rcs, topic)
	if err != nil {
		_, werr := fmt.Fprintf(w, "\nCOMPACTION  error: %v\n", err)
		return werr
	}
	if tc == nil {
		return nil
	}
	fmt.Fprintln(w)
	t := newTable(w, "PARTITION", "CLEAN", "DIRTY", "DIRTY-RATIO", "FIRST-DIRTY", "DUE")
	for _, p := range tc.Partitions {
		t.row(p.Partition, p.CleanBytes, p.DirtyBytes, strconv.FormatFloat(p.DirtyRatio, 'f', 3, 64), p.FirstDirty, p.Due)
	}
	return t.flush()
}

// fetchCompaction asks the agent at o.HTTP for a compacted topic's
// compaction state; nil, nil for a topic that is not compacted or whose
// configs are unknown (printConfigs says why).
func fetchCompaction(ctx context.Context, o *adminOptions, rcs kadm.ResourceConfigs, topic string) (*agent.TopicCompaction, error) {
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		return nil, nil
	}
	compact := false
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			for _, it := range topicconfig.SplitList(c.MaybeValue()) {
				compact = compact || strings.EqualFold(it, "compact")
			}
		}
	}
	if !compact {
		return nil, nil
	}
	var tc agent.TopicCompaction
	path := strings.Replace(agent.PathTopicCompaction, "{name}", url.PathEscape(topic), 1)
	if err := o.do(ctx, http.MethodGet, path, nil, &tc); err != nil {
		return nil, err
	}
	return &tc, nil
}
