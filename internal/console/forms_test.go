package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The config form sets a topic config and, with an empty value, removes
// it; the delete form needs the topic's name typed to confirm.
func TestConsoleAlterAndDeleteTopic(t *testing.T) {
	a := startAgent(t, "")
	adm := kadm.NewClient(kafkaClient(t, a))
	createTopic(t, adm, 1, "cfg")
	retention := func() (string, bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		rcs, err := adm.DescribeTopicConfigs(ctx, "cfg")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("cfg", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" {
				return c.MaybeValue(), c.Source.String() == "DYNAMIC_TOPIC_CONFIG"
			}
		}
		t.Fatal("no retention.ms described")
		return "", false
	}
	resp, body := post(t, a, "/console/topics/cfg/config", url.Values{"key": {"retention.ms"}, "value": {"3600000"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set: status %d: %s", resp.StatusCode, body)
	}
	if v, own := retention(); v != "3600000" || !own {
		t.Errorf("after setting: retention.ms %s (topic's own: %v), want 3600000 set on the topic", v, own)
	}
	if _, body := get(t, a, "/console/topics/cfg"); !strings.Contains(body, `<tr class="own"><td><code>retention.ms</code></td><td><code>3600000</code>`) {
		t.Error("topic page does not show retention.ms as the topic's own setting")
	}
	if resp, _ := post(t, a, "/console/topics/cfg/config", url.Values{"key": {"retention.ms"}, "value": {"soon"}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad value: status %d, want 400", resp.StatusCode)
	}
	post(t, a, "/console/topics/cfg/config", url.Values{"key": {"retention.ms"}, "value": {""}})
	if v, own := retention(); own {
		t.Errorf("after removing: retention.ms %s still set on the topic", v)
	}

	if resp, _ := post(t, a, "/console/topics/cfg/delete", url.Values{"confirm": {"cf"}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("delete with a wrong confirmation: status %d, want 400", resp.StatusCode)
	}
	if !topicExists(t, adm, "cfg") {
		t.Fatal("a wrong confirmation deleted the topic")
	}
	if resp, body := post(t, a, "/console/topics/cfg/delete", url.Values{"confirm": {"cfg"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete: status %d: %s", resp.StatusCode, body)
	}
	if topicExists(t, adm, "cfg") {
		t.Error("the delete form left the topic")
	}
}

// Records from a time start at the first record at or after it, also
// inside a batch: ListOffsets by timestamp names the batch (the five
// records are produced as one), the console skips its older records.
func TestConsoleRecordsByTimestamp(t *testing.T) {
	a := startAgent(t, "")
	cl := kafkaClient(t, a)
	createTopic(t, kadm.NewClient(cl), 1, "ts")
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, &kgo.Record{Topic: "ts", Timestamp: base.Add(time.Duration(i) * time.Minute), Value: []byte(fmt.Sprint("r", i))})
	}
	produce(t, cl, recs...)
	for _, tc := range []struct{ at, first string }{
		{fmt.Sprint(base.Add(90 * time.Second).UnixMilli()), "offset 2"},
		{"2026-03-01T12:03", "offset 3"},
		{"2026-03-01T11:00", "offset 0"},
	} {
		code, body := get(t, a, "/console/topics/ts/records?partition=0&timestamp="+url.QueryEscape(tc.at))
		if code != http.StatusOK {
			t.Fatalf("timestamp %s: status %d", tc.at, code)
		}
		i := strings.Index(body, "<b>offset ")
		if i < 0 || !strings.HasPrefix(body[i+3:], tc.first+"<") {
			t.Errorf("timestamp %s: the first record shown is not at %s", tc.at, tc.first)
		}
	}
	if _, body := get(t, a, "/console/topics/ts/records?partition=0&timestamp=2027-01-01T00:00"); !strings.Contains(body, "No records here.") {
		t.Error("a time after every record shows records")
	}
	if code, _ := get(t, a, "/console/topics/ts/records?timestamp=yesterday"); code != http.StatusBadRequest {
		t.Errorf("a bad time: status %d, want 400", code)
	}
}

// Offsets are reset only while the group is empty; a group with a
// member gets 409 and keeps its offsets.
func TestConsoleResetNeedsEmptyGroup(t *testing.T) {
	a := startAgent(t, "")
	cl := kafkaClient(t, a)
	createTopic(t, kadm.NewClient(cl), 1, "busy")
	produce(t, cl, &kgo.Record{Topic: "busy", Value: []byte("x")})
	member := kafkaClient(t, a, kgo.ConsumerGroup("live"), kgo.ConsumeTopics("busy"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := member.PollFetches(ctx).Err0(); err != nil { // joined and assigned once it fetched
		t.Fatal(err)
	}
	resp, body := post(t, a, "/console/groups/live/reset", url.Values{"topic": {"busy"}, "to": {"latest"}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "only while it is empty") {
		t.Errorf("reset of a group with a member: status %d, want 409", resp.StatusCode)
	}
	if _, body := get(t, a, "/console/groups/live"); strings.Contains(body, `action="/console/groups/live/reset"`) {
		t.Error("the group page offers the reset form for a group with a member")
	}
}

// A reset to an offset is clamped into the log, as the CLI's and Kafka's
// tool's are: past the end a consumer would reset by its own policy.
func TestConsoleResetClampsOffset(t *testing.T) {
	a := startAgent(t, "")
	cl := kafkaClient(t, a)
	adm := kadm.NewClient(cl)
	createTopic(t, adm, 1, "clamp")
	produce(t, cl, &kgo.Record{Topic: "clamp", Value: []byte("a")}, &kgo.Record{Topic: "clamp", Value: []byte("b")}, &kgo.Record{Topic: "clamp", Value: []byte("c")})
	for _, tt := range []struct {
		offset string
		want   int64
	}{{"100", 3}, {"1", 1}} {
		resp, body := post(t, a, "/console/groups/idle/reset", url.Values{"topic": {"clamp"}, "to": {"offset"}, "offset": {tt.offset}, "partition": {"0"}})
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("reset to %s: status %d: %s", tt.offset, resp.StatusCode, body)
		}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		committed, err := adm.FetchOffsets(ctx, "idle")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := committed.Lookup("clamp", 0); !ok || o.At != tt.want {
			t.Errorf("reset to %s: committed %+v, want %d", tt.offset, o, tt.want)
		}
	}
}

// The throughput endpoint's counters move with produced and fetched
// bytes.
func TestConsoleThroughputCounters(t *testing.T) {
	a := startAgent(t, "")
	cl := kafkaClient(t, a)
	createTopic(t, kadm.NewClient(cl), 1, "tp")
	read := func() (in, out uint64) {
		t.Helper()
		_, body := get(t, a, "/console/api/throughput")
		var v struct {
			In  uint64 `json:"bytes_in"`
			Out uint64 `json:"bytes_out"`
		}
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		return v.In, v.Out
	}
	in0, out0 := read()
	// Uncompressed, so the bytes on the wire are the record's.
	plain := kafkaClient(t, a, kgo.ProducerBatchCompression(kgo.NoCompression()))
	produce(t, plain, &kgo.Record{Topic: "tp", Value: make([]byte, 10_000)})
	consumer := kafkaClient(t, a, kgo.ConsumeTopics("tp"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := consumer.PollFetches(ctx).Err0(); err != nil {
		t.Fatal(err)
	}
	// The agent counts a response once written, after the client may
	// have read it; a second response on the same connection is written
	// after the first was counted.
	produce(t, plain, &kgo.Record{Topic: "tp", Value: []byte("y")})
	if err := consumer.PollFetches(ctx).Err0(); err != nil {
		t.Fatal(err)
	}
	in1, out1 := read()
	if in1-in0 < 10_000 || out1-out0 < 10_000 {
		t.Errorf("counters moved in %d, out %d; want at least the 10000-byte record each way", in1-in0, out1-out0)
	}
}
