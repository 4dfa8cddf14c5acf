package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/console"
)

// TestConsoleShareGroupInChromium opens the group pages of a share group
// served by kfake (Kafka 4.2's share groups): the list shows its type and
// member, the group page its member and assignment, the share-partition
// start offsets and lag after the member accepted some records, and the
// agent's strand_share_ series and no others.
func TestConsoleShareGroupInChromium(t *testing.T) {
	ctx := browser(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	testShareGroupPage(t, ctx, c.ListenAddrs())
}

// TestConsoleShareGroupStrandInChromium is the same against a Strand
// agent's share groups.
func TestConsoleShareGroupStrandInChromium(t *testing.T) {
	ctx := browser(t)
	testShareGroupPage(t, ctx, []string{startAgent(t, "").KafkaAddr()})
}

func testShareGroupPage(t *testing.T, ctx context.Context, seeds []string) {
	const topic, group = "jobs", "workers"
	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	createTopic(t, kadm.NewClient(admCl), 2, topic)
	// share.auto.offset.reset through the GROUP config resource.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(t.Context(), admCl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("set share.auto.offset.reset: %v", err)
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for p, n := range map[int32]int{0: 4, 1: 2} {
		for range n {
			if err := prod.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Partition: p, Value: []byte("job")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The member accepts every record, then stays in the group.
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ShareGroup(group),
		kgo.ClientID("share-console-worker"), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	defer cancel()
	for n := 0; n < 6; {
		fs := cl.PollFetches(pctx)
		if pctx.Err() != nil {
			t.Fatalf("share consumer got %d of 6 records", n)
		}
		for _, r := range fs.Records() {
			r.Ack(kgo.AckAccept)
			n++
		}
	}
	if err := cl.FlushAcks(pctx); err != nil {
		t.Fatal(err)
	}
	// Two more on partition 0, after the member's last poll: lag 2.
	for range 2 {
		if err := prod.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Partition: 0, Value: []byte("late")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	reg := prometheus.NewRegistry()
	acquired := prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_share_records_acquired_total", Help: "h"})
	acquired.Add(1234)
	inflight := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_share_inflight_records", Help: "h"}, []string{"state"})
	inflight.WithLabelValues("archived").Set(17)
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "strand_unrelated_total", Help: "h"})
	members := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strand_share_group_members", Help: "h"}, []string{"group"})
	members.WithLabelValues(group).Set(1)
	members.WithLabelValues("someone-else").Set(99)
	reg.MustRegister(acquired, inflight, other, members)

	con, err := console.New(console.Config{
		Cluster:    noCluster{},
		Kafka:      []kgo.Opt{kgo.SeedBrokers(seeds...)},
		Authorize:  allowAll,
		Throughput: func() (uint64, uint64) { return 0, 0 },
		Metrics:    reg,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(con.Close)
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)

	list := visibleText(t, ctx, srv.URL+"/console/groups")
	if !strings.Contains(list, group) || !strings.Contains(list, "share") {
		t.Fatalf("groups page does not list %s as a share group:\n%s", group, list)
	}
	text := visibleText(t, ctx, srv.URL+"/console/groups/"+group)
	wantText(t, "share group", text, "Share group "+group, "share-console-worker", topic+": 0, 1",
		"Share partitions", "Start offset", "strand_share_records_acquired_total", "1234", "state=archived", "17", "group="+group)
	if strings.Contains(text, "strand_unrelated_total") || strings.Contains(text, "someone-else") {
		t.Errorf("share group page shows a series that is not a share metric, or another group's:\n%s", text)
	}
	// The partitions table: partition 0 starts at 4 with 2 records after
	// it; partition 1 at 2 with none; total lag 2. This console has no
	// ShareCounts: the in-window columns are "–".
	body := read(t, ctx, "share partitions", chromedp.Text(chromedp.CSS(`#share-partitions tbody`)))
	if got, want := strings.Join(strings.Fields(body), " "), topic+" 0 4 2 – – – – "+topic+" 1 2 0 – – – –"; got != want {
		t.Errorf("share partitions rows %q, want %q", got, want)
	}
	if lag := read(t, ctx, "total lag", chromedp.Text(chromedp.CSS(`#total-lag`))); lag != "2" {
		t.Errorf("total lag %q, want 2", lag)
	}
}
