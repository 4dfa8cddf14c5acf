package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/topicconfig"
)

// printCompaction prints a compacted topic's clean and dirty bytes and
// dirty ratio per partition, as the agent at httpAddr plans them (GET
// /v1/topics/compaction): Kafka's cleaner state has no Kafka API. A
// topic whose cleanup.policy does not hold compact prints nothing; an
// agent that cannot answer prints why.
func printCompaction(ctx context.Context, w io.Writer, httpAddr string, timeout time.Duration, rcs kadm.ResourceConfigs, topic string) error {
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		return nil // printConfigs says why
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
		return nil
	}
	o := adminOptions{HTTP: httpAddr, Timeout: timeout}
	var tc agent.TopicCompaction
	if err := o.do(ctx, http.MethodGet, agent.PathTopicCompaction+"?topic="+url.QueryEscape(topic), nil, &tc); err != nil {
		_, werr := fmt.Fprintf(w, "COMPACTION unavailable: %v\n\n", err)
		return werr
	}
	t := newTable(w, "PARTITION", "CLEAN", "DIRTY", "DIRTY-RATIO", "FIRST-DIRTY", "DUE")
	for _, p := range tc.Partitions {
		t.row(p.Partition, p.CleanBytes, p.DirtyBytes, strconv.FormatFloat(p.DirtyRatio, 'f', 3, 64), p.FirstDirty, p.Due)
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintln(w)
	return err
}
