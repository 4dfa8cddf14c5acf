package cli

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// wantRun runs a command line against brokers and checks its outcome:
// wantErr (nil for success) and every string of wantOut in stdout.
func wantRun(t *testing.T, brokers string, wantErr error, wantOut []string, args ...string) result {
	t.Helper()
	r := run(t, brokers, "", args...)
	switch {
	case wantErr == nil && r.err != nil:
		t.Fatalf("strand %s: %v\nstdout:\n%s", strings.Join(args, " "), r.err, r.stdout)
	case wantErr != nil && !errors.Is(r.err, wantErr):
		t.Fatalf("strand %s: error %v, want %v\nstdout:\n%s", strings.Join(args, " "), r.err, wantErr, r.stdout)
	}
	for _, w := range wantOut {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("strand %s: stdout lacks %q:\n%s", strings.Join(args, " "), w, r.stdout)
		}
	}
	return r
}

// topicConfig returns a topic's config key as DescribeConfigs reports it.
func topicConfig(t *testing.T, adm *kadm.Client, topic, key string) kadm.Config {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("topic %s has no config %s", topic, key)
	return kadm.Config{}
}

// TestTopicAlterConfig sets and deletes topic configs through
// IncrementalAlterConfigs on a real agent, and reports Kafka's error
// names for an unknown topic and invalid configs.
func TestTopicAlterConfig(t *testing.T) {
	brokers := startAgent(t).KafkaAddr()
	adm := adminClient(t, brokers)
	mustRun(t, brokers, "", "topic", "create", "cfg", "-p", "1")

	r := wantRun(t, brokers, nil, nil, "topic", "alter-config", "cfg", "--set", "retention.ms=60000", "--set", "cleanup.policy=delete")
	if got, want := rows(r.stdout), [][]string{{"TOPIC", "STATUS"}, {"cfg", "OK"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("alter-config output %q, want %q", got, want)
	}
	if c := topicConfig(t, adm, "cfg", "retention.ms"); c.MaybeValue() != "60000" || c.Source.String() != "DYNAMIC_TOPIC_CONFIG" {
		t.Fatalf("retention.ms after --set: %q from %s", c.MaybeValue(), c.Source)
	}
	wantRun(t, brokers, nil, []string{"OK"}, "topic", "alter-config", "cfg", "--delete", "retention.ms")
	if c := topicConfig(t, adm, "cfg", "retention.ms"); c.Source.String() == "DYNAMIC_TOPIC_CONFIG" {
		t.Fatalf("retention.ms still set by the topic after --delete: %q", c.MaybeValue())
	}

	for _, tc := range []struct {
		name    string
		args    []string
		wantErr error
		wantOut []string
	}{
		{"unknown topic", []string{"nope", "--set", "retention.ms=1"}, ErrPartialFailure, []string{"nope", "UNKNOWN_TOPIC_OR_PARTITION"}},
		{"not a number", []string{"cfg", "--set", "retention.ms=soon"}, ErrPartialFailure, []string{"cfg", "INVALID_CONFIG"}},
		{"unknown config", []string{"cfg", "--set", "no.such.config=1"}, ErrPartialFailure, []string{"INVALID_CONFIG"}},
		{"nothing to do", []string{"cfg"}, ErrUsage, nil},
		{"set and delete one key", []string{"cfg", "--set", "retention.ms=1", "--delete", "retention.ms"}, ErrUsage, nil},
		{"not key=value", []string{"cfg", "--set", "retention.ms"}, ErrUsage, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRun(t, brokers, tc.wantErr, tc.wantOut, append([]string{"topic", "alter-config"}, tc.args...)...)
		})
	}
	if c := topicConfig(t, adm, "cfg", "retention.ms"); c.Source.String() == "DYNAMIC_TOPIC_CONFIG" {
		t.Fatalf("a failed alter changed retention.ms to %q", c.MaybeValue())
	}
}

// TestTopicAddPartitions adds partitions as rpk does (-n is the number
// to add), sets a total as kafka-topics does (--total), and refuses to
// shrink a topic.
func TestTopicAddPartitions(t *testing.T) {
	brokers := startAgent(t).KafkaAddr()
	mustRun(t, brokers, "", "topic", "create", "grow", "other", "-p", "2")

	// A client per look: kgo answers a metadata request from its cache
	// for a few seconds, which would show the count before a change.
	partitions := func(topic string) int {
		d, err := adminClient(t, brokers).ListTopics(t.Context(), topic)
		if err != nil || d[topic].Err != nil {
			t.Fatalf("list: %v %v", err, d[topic].Err)
		}
		return len(d[topic].Partitions)
	}
	r := wantRun(t, brokers, nil, nil, "topic", "add-partitions", "grow", "other", "-n", "3")
	if got, want := rows(r.stdout), [][]string{{"TOPIC", "STATUS"}, {"grow", "OK"}, {"other", "OK"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("add-partitions output %q, want %q", got, want)
	}
	if n, m := partitions("grow"), partitions("other"); n != 5 || m != 5 {
		t.Fatalf("%d and %d partitions after adding 3 to 2, want 5", n, m)
	}
	wantRun(t, brokers, nil, []string{"grow", "OK"}, "topic", "add-partitions", "grow", "--num", "1")
	if n := partitions("grow"); n != 6 {
		t.Fatalf("%d partitions after adding 1 to 5, want 6", n)
	}
	wantRun(t, brokers, nil, []string{"grow", "OK"}, "topic", "add-partitions", "grow", "--total", "8")
	if n := partitions("grow"); n != 8 {
		t.Fatalf("%d partitions after --total 8, want 8", n)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr error
		wantOut []string
	}{
		{"shrink", []string{"grow", "--total", "3"}, ErrPartialFailure, []string{"grow", "INVALID_PARTITIONS"}},
		{"same count", []string{"grow", "--total", "8"}, ErrPartialFailure, []string{"INVALID_PARTITIONS"}},
		{"unknown topic", []string{"nope", "--total", "3"}, ErrPartialFailure, []string{"nope", "UNKNOWN_TOPIC_OR_PARTITION"}},
		{"add zero", []string{"grow", "-n", "0"}, ErrUsage, nil},
		{"both", []string{"grow", "-n", "1", "--total", "9"}, ErrUsage, nil},
		{"no count", []string{"grow"}, ErrUsage, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRun(t, brokers, tc.wantErr, tc.wantOut, append([]string{"topic", "add-partitions"}, tc.args...)...)
		})
	}
	if n := partitions("grow"); n != 8 {
		t.Fatalf("%d partitions after the failed changes, want 8", n)
	}
}

// TestTopicTrimPrefix deletes records below an offset (DeleteRecords) in
// the partitions given, or in all of them.
func TestTopicTrimPrefix(t *testing.T) {
	brokers := startAgent(t).KafkaAddr()
	adm := adminClient(t, brokers)
	mustRun(t, brokers, "", "topic", "create", "trim", "-p", "3")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := range int32(3) {
		for range 10 {
			if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: "trim", Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	starts := func() []int64 {
		l, err := adm.ListStartOffsets(t.Context(), "trim")
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for p := range int32(3) {
			o, _ := l.Lookup("trim", p)
			out = append(out, o.Offset)
		}
		return out
	}

	r := wantRun(t, brokers, nil, nil, "topic", "trim-prefix", "trim", "-p", "0", "-o", "5")
	if got, want := rows(r.stdout), [][]string{{"TOPIC", "PARTITION", "NEW-START-OFFSET", "STATUS"}, {"trim", "0", "5", "OK"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("trim-prefix output %q, want %q", got, want)
	}
	if got := starts(); !slices.Equal(got, []int64{5, 0, 0}) {
		t.Fatalf("start offsets %v after trimming partition 0 to 5", got)
	}
	// Every partition when -p is omitted; below the start is no change.
	r = wantRun(t, brokers, nil, nil, "topic", "trim-prefix", "trim", "-o", "3")
	if got, want := rows(r.stdout), [][]string{
		{"TOPIC", "PARTITION", "NEW-START-OFFSET", "STATUS"},
		{"trim", "0", "5", "OK"}, {"trim", "1", "3", "OK"}, {"trim", "2", "3", "OK"},
	}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("trim-prefix of all partitions: output %q, want %q", got, want)
	}
	// -1 is the high watermark, as in Kafka's DeleteRecords.
	wantRun(t, brokers, nil, []string{"10"}, "topic", "trim-prefix", "trim", "-p", "2", "-o", "-1")
	if got := starts(); !slices.Equal(got, []int64{5, 3, 10}) {
		t.Fatalf("start offsets %v, want [5 3 10]", got)
	}

	for _, tc := range []struct {
		name    string
		args    []string
		wantErr error
		wantOut []string
	}{
		{"past the end", []string{"trim", "-p", "1", "-o", "11"}, ErrPartialFailure, []string{"OFFSET_OUT_OF_RANGE"}},
		{"unknown partition", []string{"trim", "-p", "7", "-o", "1"}, ErrPartialFailure, []string{"UNKNOWN_TOPIC_OR_PARTITION"}},
		{"unknown topic, all partitions", []string{"nope", "-o", "1"}, ErrUnknownTopic, nil},
		{"unknown topic", []string{"nope", "-p", "0", "-o", "1"}, ErrPartialFailure, []string{"UNKNOWN_TOPIC_OR_PARTITION"}},
		{"no offset", []string{"trim", "-p", "0"}, ErrUsage, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRun(t, brokers, tc.wantErr, tc.wantOut, append([]string{"topic", "trim-prefix"}, tc.args...)...)
		})
	}
	if got := starts(); !slices.Equal(got, []int64{5, 3, 10}) {
		t.Fatalf("start offsets %v after the failed trims, want [5 3 10]", got)
	}
}
