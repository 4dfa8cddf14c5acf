package agent_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// getShareGroupState reads GET /v1/share-groups/{group}/state of a.
func getShareGroupState(t *testing.T, a *agent.Agent, group string) agent.ShareGroupState {
	t.Helper()
	resp, err := http.Get("http://" + a.HTTPAddr() + "/v1/share-groups/" + url.PathEscape(group) + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET share group state: %s", resp.Status)
	}
	var st agent.ShareGroupState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestShareGroupStateCounts: a kgo share consumer acquires a
// partition's records and acknowledges part of them (accepts three,
// rejects two, leaves the first and the rest held): the agent's answer
// counts each state within [SPSO, SPEO), the SPSO held at the first,
// unacknowledged, record.
func TestShareGroupStateCounts(t *testing.T) {
	a := startWith(t, agent.Config{DataDir: t.TempDir(), ShareConfigs: earliestShares{}}, nil)
	const topic, group, n = "counted", "counters", 10
	createTopic(t, a.KafkaAddr(), topic, 1)
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: topic, Value: []byte{byte('0' + i)}})
	}
	produce(t, a.KafkaAddr(), rs)
	if st := getShareGroupState(t, a, group); len(st.Partitions) != 0 || st.Group != group {
		t.Fatalf("before any fetch: %+v, want the group with no partitions", st)
	}

	cl := client(t, a.KafkaAddr(), kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var got []*kgo.Record
	for len(got) == 0 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		got = fs.Records()
	}
	if len(got) < 6 {
		t.Fatalf("the share consumer got %d records in its first poll, want at least 6 (produced %d in one batch)", len(got), n)
	}
	slices.SortFunc(got, func(x, y *kgo.Record) int { return int(x.Offset - y.Offset) })
	for _, r := range got[1:4] {
		r.Ack(kgo.AckAccept)
	}
	for _, r := range got[4:6] {
		r.Ack(kgo.AckReject)
	}
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatalf("FlushAcks: %v", err)
	}

	st := getShareGroupState(t, a, group)
	if len(st.Partitions) != 1 {
		t.Fatalf("share partitions: %+v, want one", st.Partitions)
	}
	p := st.Partitions[0]
	want := agent.SharePartitionState{
		Topic: topic, TopicID: p.TopicID, Partition: 0,
		StartOffset: got[0].Offset, EndOffset: got[len(got)-1].Offset + 1,
		Acquired: int64(len(got) - 5), Acknowledged: 3, Archived: 2,
	}
	if p != want || p.TopicID == "" {
		t.Errorf("share partition: %+v, want %+v", p, want)
	}
	// A group id may hold a slash: escaped, it stays one path segment.
	if other := getShareGroupState(t, a, "a/b"); other.Group != "a/b" || len(other.Partitions) != 0 {
		t.Errorf("state of group a/b: %+v, want the group, no partitions", other)
	}
	if st.LogClockMs <= 0 || st.Truncated {
		t.Errorf("log clock %d, truncated %v: want a positive clock, not truncated", st.LogClockMs, st.Truncated)
	}
}

// TestShareGroupStateNeedsGroupDescribe: a principal may read a share
// group's state only with DESCRIBE on the group, as Kafka's
// DescribeShareGroupOffsets requires; DESCRIBE on another group does
// not do.
func TestShareGroupStateNeedsGroupDescribe(t *testing.T) {
	pki := newTestPKI(t)
	cfg := pki.serve(agent.Config{DataDir: t.TempDir(), HTTPTLS: true, Authorizer: "standard", SuperUsers: "User:ANONYMOUS"}, true)
	cfg.TLSClientAuth = "" // the Kafka listener is PLAINTEXT: its ANONYMOUS is the super user
	a := startWith(t, cfg, nil)
	adm := kadm.NewClient(client(t, a.KafkaAddr()))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	created, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:CN=client").Groups("seen").Operations(kadm.OpDescribe))
	if err != nil || len(created) != 1 || created[0].Err != nil {
		t.Fatalf("CreateACLs: %+v, %v", created, err)
	}
	base := "https://" + a.HTTPAddr()
	nobody := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.clientTLS(t, true)}} // CN=client
	if got := call(t, nobody, http.MethodGet, base, "/v1/share-groups/hidden/state", nil); got != http.StatusForbidden {
		t.Errorf("state of a group User:CN=client may not describe: %d, want 403", got)
	}
	if got := call(t, nobody, http.MethodGet, base, "/v1/share-groups/seen/state", nil); got != http.StatusOK {
		t.Errorf("state of a group User:CN=client may describe: %d, want 200", got)
	}
}
