package console_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/share"
)

// earliestShares serves every share group share.auto.offset.reset
// earliest.
type earliestShares struct{}

func (earliestShares) ShareConfig(string) (share.Config, error) {
	c := share.DefaultConfig()
	c.AutoOffsetReset = "earliest"
	return c, nil
}

// TestConsoleShareGroupCounts: on the agent's own console, a share
// partition whose member holds its records, having accepted three and
// rejected two that are not the first, shows its end offset and the
// records available, in flight and archived, read from the agent's copy.
func TestConsoleShareGroupCounts(t *testing.T) {
	a := startAgentWith(t, agent.Config{KafkaListen: "127.0.0.1:0", ShareConfigs: earliestShares{}})
	const topic, group, n = "counted", "counters", 10
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	createTopic(t, kadm.NewClient(cl), 1, topic)
	var rs []*kgo.Record
	for range n {
		rs = append(rs, &kgo.Record{Topic: topic, Value: []byte("job")})
	}
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	member, err := kgo.NewClient(kgo.SeedBrokers(a.KafkaAddr()), kgo.ConsumeTopics(topic), kgo.ShareGroup(group))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	// One poll only: the next would accept what this one left unacked.
	var got []*kgo.Record
	for len(got) == 0 && ctx.Err() == nil {
		got = member.PollFetches(ctx).Records()
	}
	if len(got) < 6 {
		t.Fatalf("the member got %d records in its first poll, want at least 6", len(got))
	}
	slices.SortFunc(got, func(x, y *kgo.Record) int { return int(x.Offset - y.Offset) })
	for _, r := range got[1:4] {
		r.Ack(kgo.AckAccept)
	}
	for _, r := range got[4:6] {
		r.Ack(kgo.AckReject)
	}
	if err := member.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}

	resp, err := http.Get("http://" + a.HTTPAddr() + "/console/groups/" + group)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("share group page: %s, %v", resp.Status, err)
	}
	table := regexp.MustCompile(`(?s)<table class="lag" id="share-partitions">.*?<tbody>(.*?)</tbody>`).FindSubmatch(b)
	if table == nil {
		t.Fatalf("no share partitions table in:\n%s", b)
	}
	cells := regexp.MustCompile(`<td[^>]*>([^<]*)</td>`).FindAllSubmatch(table[1], -1)
	var row []string
	for _, c := range cells {
		row = append(row, strings.TrimSpace(string(c[1])))
	}
	// Topic, partition, start offset, lag, end offset, available, in
	// flight, archived, error.
	end := got[len(got)-1].Offset + 1
	want := []string{topic, "0", "0", row[3], itoa(end), "0", itoa(int64(len(got) - 5)), "2", ""}
	if !slices.Equal(row, want) {
		t.Errorf("share partition row %q, want %q", row, want)
	}
	if strings.Contains(string(b), `id="counts-note"`) {
		t.Errorf("the page notes missing counts:\n%s", b)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
