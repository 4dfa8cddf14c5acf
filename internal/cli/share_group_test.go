package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareFixture is a kfake cluster (it serves Kafka 4.2's share groups)
// with topic "t": 5 records in partition 0 and 3 in partition 1, topic
// "u" with one record (so the group keeps state when t's is deleted),
// and share group "sg" reading from the earliest offset.
type shareFixture struct {
	brokers string
}

const (
	shareGroup = "sg"
	otherTopic = "u"
)

func newShareFixture(t *testing.T) *shareFixture {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return newShareFixtureOn(t, strings.Join(c.ListenAddrs(), ","))
}

// newShareFixtureOn is newShareFixture on a cluster the caller started.
func newShareFixtureOn(t *testing.T, brokers string) *shareFixture {
	t.Helper()
	f := &shareFixture{brokers: brokers}
	mustRun(t, f.brokers, "", "topic", "create", fixtureTopic, otherTopic, "-p", "2")
	// The group config Kafka reads share.auto.offset.reset from
	// (IncrementalAlterConfigs of a GROUP resource).
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, shareGroup
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("set share.auto.offset.reset: %v", err)
	}
	f.produce(t, fixtureTopic, map[int32]int{0: 5, 1: 3})
	f.produce(t, otherTopic, map[int32]int{0: 1})
	return f
}

func (f *shareFixture) produce(t *testing.T, topic string, n map[int32]int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p, k := range n {
		for i := range k {
			r := &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i)}
			if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// consume joins the share group as client "share-test", accepts records
// until it has want of them, and returns the client (still a member)
// and the offsets it got per "topic/partition".
func (f *shareFixture) consume(t *testing.T, want int) (*kgo.Client, map[string][]int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers), kgo.ConsumeTopics(fixtureTopic, otherTopic), kgo.ShareGroup(shareGroup),
		kgo.ClientID("share-test"), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(t.Context(), commandDeadline)
	defer cancel()
	got := map[string][]int64{}
	for n := 0; n < want; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("share consumer got %d of %d records: %v", n, want, got)
		}
		for _, r := range fs.Records() {
			r.Ack(kgo.AckAccept)
			tp := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
			got[tp] = append(got[tp], r.Offset)
			n++
		}
	}
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	return cl, got
}

func (f *shareFixture) describeJSON(t *testing.T) JSONShareGroup {
	t.Helper()
	r := mustRun(t, f.brokers, "", "group", "describe", shareGroup, "--format", "json")
	var out []JSONShareGroup
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out) != 1 {
		t.Fatalf("describe --format json: %v\n%s", err, r.stdout)
	}
	return out[0]
}

// startOffsets reads topic t's share-partition start offsets as
// describe's JSON shows them; -1 for a partition without one.
func startOffsets(j JSONShareGroup) map[int32]int64 {
	out := map[int32]int64{}
	for _, p := range j.Partitions {
		if p.Topic != fixtureTopic {
			continue
		}
		out[p.Partition] = -1
		if p.StartOffset != nil {
			out[p.Partition] = *p.StartOffset
		}
	}
	return out
}

// TestShareGroupCLI runs group list/describe and share-group
// seek/delete-offsets/delete against kfake's share groups: the member
// table while a consumer is in the group, seeks refused then, and each
// change visible in what the broker describes afterwards.
func TestShareGroupCLI(t *testing.T) {
	testShareGroupCLI(t, newShareFixture(t))
}

// TestShareGroupCLIStrand runs the same against a Strand agent.
func TestShareGroupCLIStrand(t *testing.T) {
	testShareGroupCLI(t, newShareFixtureOn(t, startAgent(t).KafkaAddr()))
}

func testShareGroupCLI(t *testing.T, f *shareFixture) {
	cl, got := f.consume(t, 9)
	if !slices.Equal(got["t/0"], []int64{0, 1, 2, 3, 4}) || !slices.Equal(got["t/1"], []int64{0, 1, 2}) || !slices.Equal(got["u/0"], []int64{0}) {
		t.Fatalf("share consumer got %v", got)
	}

	t.Run("active", func(t *testing.T) {
		r := mustRun(t, f.brokers, "", "group", "list")
		if want := [][]string{{"GROUP", "STATE", "PROTOCOL-TYPE", "TYPE"}, {shareGroup, "Stable", "share", "share"}}; !equalRows(rows(r.stdout), want) {
			t.Fatalf("list:\n%s\nwant %v", r.stdout, want)
		}
		r = mustRun(t, f.brokers, "", "group", "describe", shareGroup)
		rs := rows(r.stdout)
		for _, want := range [][]string{{"GROUP", shareGroup}, {"TYPE", "share"}, {"STATE", "Stable"}, {"MEMBERS", "1"}, {"TOTAL-LAG", "0"}} {
			if got := findRow(rs, want[0]); !slices.Equal(got, want) {
				t.Errorf("describe row %v, want %v\n%s", got, want, r.stdout)
			}
		}
		members := section(r.stdout, "MEMBER-ID")
		if len(members) != 2 || len(members[1]) != 4 || members[1][1] != "share-test" || members[1][3] != "t:0,1;u:0,1" {
			t.Errorf("members table %v, want one row of client share-test assigned t:0,1;u:0,1", members)
		}
		// Without --http the in-flight columns are "-" and stderr says
		// why; the describe succeeds all the same.
		if want := [][]string{{"TOPIC", "PARTITION", "START-OFFSET", "LAG", "AVAILABLE", "IN-FLIGHT", "ARCHIVED"},
			{"t", "0", "5", "0", "-", "-", "-"}, {"t", "1", "3", "0", "-", "-", "-"}, {"u", "0", "1", "0", "-", "-", "-"}, {"u", "1", "0", "0", "-", "-", "-"}}; !equalRows(section(r.stdout, "TOPIC"), want) {
			t.Errorf("partitions table:\n%s\nwant %v", r.stdout, want)
		}
		if !strings.Contains(r.stderr, "--http") {
			t.Errorf("describe without --http: stderr %q, want a note naming --http", r.stderr)
		}
		for _, args := range [][]string{{"share-group", "seek", shareGroup, "--to", "start"}, {"share-group", "delete-offsets", shareGroup, "--topic", "t"}} {
			if r := run(t, f.brokers, "", args...); !errors.Is(r.err, ErrGroupActive) {
				t.Errorf("%v with a member: err = %v, want ErrGroupActive", args, r.err)
			}
		}
		if got := startOffsets(f.describeJSON(t)); got[0] != 5 || got[1] != 3 {
			t.Fatalf("refused changes moved the start offsets: %v", got)
		}
	})

	cl.Close()
	f.produce(t, fixtureTopic, map[int32]int{0: 2})

	t.Run("seek", func(t *testing.T) {
		j := f.describeJSON(t)
		if j.State != "Empty" || len(j.Members) != 0 || j.TotalLag != 2 || j.GroupType != "share" {
			t.Fatalf("after the consumer left: %+v, want Empty, no members, lag 2", j)
		}
		r := mustRun(t, f.brokers, "", "share-group", "seek", shareGroup, "--to", "start", "--dry-run")
		if want := [][]string{{"TOPIC", "PARTITION", "OLD-START-OFFSET", "NEW-START-OFFSET"},
			{"t", "0", "5", "0"}, {"t", "1", "3", "0"}, {"u", "0", "1", "0"}, {"u", "1", "0", "0"}}; !equalRows(rows(r.stdout), want) {
			t.Fatalf("--dry-run printed:\n%s\nwant %v", r.stdout, want)
		}
		if got := startOffsets(f.describeJSON(t)); got[0] != 5 || got[1] != 3 {
			t.Fatalf("--dry-run moved the start offsets: %v", got)
		}
		r = mustRun(t, f.brokers, "", "share-group", "seek", shareGroup, "--to", "1", "--topic", "t", "-p", "0")
		if want := [][]string{{"TOPIC", "PARTITION", "OLD-START-OFFSET", "NEW-START-OFFSET", "STATUS"}, {"t", "0", "5", "1", "OK"}}; !equalRows(rows(r.stdout), want) {
			t.Fatalf("seek printed:\n%s\nwant %v", r.stdout, want)
		}
		if got := startOffsets(f.describeJSON(t)); got[0] != 1 || got[1] != 3 {
			t.Fatalf("after seek --to 1 -p 0: start offsets %v, want 0:1 1:3", got)
		}
		// Clamped into the log: partition 1 ends at 3.
		r = mustRun(t, f.brokers, "", "share-group", "seek", shareGroup, "--to", "6", "--topic", "t", "--format", "json")
		var out []shareSeekRow
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("seek --format json: %v\n%s", err, r.stdout)
		}
		if len(out) != 2 || out[0].NewStartOffset != 6 || out[1].NewStartOffset != 3 || out[0].Status != "OK" ||
			out[0].OldStartOffset == nil || *out[0].OldStartOffset != 1 {
			t.Fatalf("seek --to 6 --format json: %s", r.stdout)
		}
		// The broker now delivers partition 0 from offset 6 on.
		cl, got := f.consume(t, 1)
		cl.Close()
		if !slices.Equal(got["t/0"], []int64{6}) || len(got) != 1 {
			t.Fatalf("after seek --to 6 a consumer got %v, want offset 6 of partition 0 only", got)
		}
	})

	t.Run("delete", func(t *testing.T) {
		r := mustRun(t, f.brokers, "", "share-group", "delete-offsets", shareGroup, "--topic", "t")
		if want := [][]string{{"TOPIC", "STATUS"}, {"t", "OK"}}; !equalRows(rows(r.stdout), want) {
			t.Fatalf("delete-offsets printed:\n%s\nwant %v", r.stdout, want)
		}
		if j := f.describeJSON(t); len(j.Partitions) != 2 || slices.ContainsFunc(j.Partitions, func(p JSONShareGroupPartition) bool { return p.Topic != otherTopic }) {
			t.Fatalf("after delete-offsets of t: partitions %+v, want u's only", j.Partitions)
		}
		r = mustRun(t, f.brokers, "", "share-group", "delete", shareGroup)
		if want := [][]string{{"GROUP", "STATUS"}, {shareGroup, "OK"}}; !equalRows(rows(r.stdout), want) {
			t.Fatalf("delete printed:\n%s\nwant %v", r.stdout, want)
		}
		r = mustRun(t, f.brokers, "", "group", "list")
		if want := [][]string{{"GROUP", "STATE", "PROTOCOL-TYPE", "TYPE"}}; !equalRows(rows(r.stdout), want) {
			t.Fatalf("list after delete:\n%s\nwant %v", r.stdout, want)
		}
		if r := run(t, f.brokers, "", "group", "describe", shareGroup); !errors.Is(r.err, ErrUnknownGroup) {
			t.Fatalf("describe of the deleted group: err = %v, want ErrUnknownGroup", r.err)
		}
	})

	for _, bad := range [][]string{
		{"share-group", "seek", shareGroup},
		{"share-group", "seek", shareGroup, "--to", "soon"},
		{"share-group", "seek", shareGroup, "--to", "start", "-p", "0"},
		{"share-group", "delete-offsets", shareGroup},
	} {
		if r := run(t, f.brokers, "", bad...); !errors.Is(r.err, ErrUsage) {
			t.Errorf("%v: err = %v, want ErrUsage", bad, r.err)
		}
	}
}

// TestShareGroupDescribeInFlight: against a Strand agent, a member holds
// partition 0's records and acknowledges three (accepts offset 1, rejects
// offsets 2 and 3): `group describe --http` shows per partition the records
// available, in flight and archived, and its JSON the end offset and the
// acknowledged too. An agent that cannot be reached leaves the columns
// "-", a note on stderr, and the describe succeeding.
func TestShareGroupDescribeInFlight(t *testing.T) {
	a := startAgent(t)
	f := newShareFixtureOn(t, a.KafkaAddr())
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers), kgo.ConsumeTopics(fixtureTopic), kgo.ShareGroup(shareGroup),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), commandDeadline)
	defer cancel()
	// One poll only: the next would accept what this one left unacked.
	var got []*kgo.Record
	for len(got) == 0 && ctx.Err() == nil {
		got = cl.PollFetches(ctx).Records()
	}
	held := map[int32]int64{} // records held per partition of t
	var p0 []int64
	for _, r := range got {
		switch {
		case r.Partition == 0 && r.Offset == 1:
			r.Ack(kgo.AckAccept)
		case r.Partition == 0 && (r.Offset == 2 || r.Offset == 3):
			r.Ack(kgo.AckReject)
		default:
			held[r.Partition]++
		}
		if r.Partition == 0 {
			p0 = append(p0, r.Offset)
		}
	}
	slices.Sort(p0)
	if !slices.Equal(p0, []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("the first poll got partition 0's offsets %v, want 0-4", p0)
	}
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}

	r := mustRun(t, f.brokers, "", "group", "describe", shareGroup, "--http", a.HTTPAddr())
	parts := section(r.stdout, "TOPIC")
	if len(parts) < 2 || !slices.Equal(parts[1][:3], []string{"t", "0", "0"}) || !slices.Equal(parts[1][4:], []string{"0", "2", "2"}) {
		t.Errorf("partition 0 row of:\n%s\nwant start offset 0, 0 available, 2 in flight, 2 archived", r.stdout)
	}
	if r.stderr != "" {
		t.Errorf("describe --http: stderr %q, want none", r.stderr)
	}
	r = mustRun(t, f.brokers, "", "group", "describe", shareGroup, "--http", a.HTTPAddr(), "--format", "json")
	var out []JSONShareGroup
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out) != 1 {
		t.Fatalf("describe --format json: %v\n%s", err, r.stdout)
	}
	for _, p := range out[0].Partitions {
		if p.Topic != fixtureTopic || (p.Partition == 1 && held[1] == 0) {
			continue // not fetched in the one poll: no window to count
		}
		want := map[string]int64{"end_offset": 5, "available": 0, "in_flight": held[p.Partition], "acknowledged": 1, "archived": 2}
		if p.Partition == 1 {
			want = map[string]int64{"end_offset": 3, "available": 0, "in_flight": held[1], "acknowledged": 0, "archived": 0}
		}
		gotCounts := map[string]int64{}
		for k, v := range map[string]*int64{"end_offset": p.EndOffset, "available": p.Available, "in_flight": p.InFlight, "acknowledged": p.Acknowledged, "archived": p.Archived} {
			gotCounts[k] = -1
			if v != nil {
				gotCounts[k] = *v
			}
		}
		if fmt.Sprint(gotCounts) != fmt.Sprint(want) {
			t.Errorf("JSON of t/%d: %v, want %v", p.Partition, gotCounts, want)
		}
	}
	if out[0].InFlightError != "" {
		t.Errorf("in_flight_error %q, want none", out[0].InFlightError)
	}

	// Nothing listens there: the counts are missing, not the describe.
	r = mustRun(t, f.brokers, "", "group", "describe", shareGroup, "--http", "127.0.0.1:1", "--http-timeout", "2s")
	if parts := section(r.stdout, "TOPIC"); len(parts) < 2 || !slices.Equal(parts[1][4:], []string{"-", "-", "-"}) {
		t.Errorf("describe with an unreachable agent:\n%s\nwant - in the in-flight columns", r.stdout)
	}
	if !strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Errorf("describe with an unreachable agent: stderr %q, want a note naming the address", r.stderr)
	}
}
