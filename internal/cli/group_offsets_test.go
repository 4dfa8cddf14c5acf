package cli

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGroupSeek runs `group seek` against a real agent: refused while
// the group has a member, then each --to form, with and without
// --topics, and --dry-run committing nothing.
func TestGroupSeek(t *testing.T) {
	f := newGroupFixtureOn(t, startAgent(t).KafkaAddr())
	const group = "g"
	_, stop := f.startConsumer(t, group)

	r := run(t, f.brokers, "", "group", "seek", group, "--to", "start")
	if !errors.Is(r.err, ErrGroupActive) {
		t.Fatalf("seek of an active group: err = %v, want ErrGroupActive", r.err)
	}
	if got := f.committed(t, group); !maps.Equal(got, fixtureCommits) {
		t.Fatalf("a refused seek changed the offsets: %v", got)
	}
	stop()

	at := func(d time.Duration) time.Time { return f.base.Add(d) }
	ms := func(d time.Duration) string { return "@" + strconv.FormatInt(at(d).UnixMilli(), 10) }
	// Each plan row is partition, old offset, new offset.
	tests := []struct {
		name string
		args []string
		plan [][3]string
		want map[int32]int64
	}{
		// Without --topics: every partition of the topics the group
		// committed to, partition 2 (never committed) too, as rpk's.
		{"start", []string{"--to", "start"},
			[][3]string{{"0", "3", "0"}, {"1", "1", "0"}, {"2", "-", "0"}}, map[int32]int64{0: 0, 1: 0, 2: 0}},
		{"end", []string{"--to", "end"},
			[][3]string{{"0", "3", "5"}, {"1", "1", "3"}, {"2", "-", "2"}}, map[int32]int64{0: 5, 1: 3, 2: 2}},
		// With --topics: every partition, clamped into the log.
		{"offset", []string{"--to", "4", "--topics", fixtureTopic},
			[][3]string{{"0", "3", "4"}, {"1", "1", "3"}, {"2", "-", "2"}}, map[int32]int64{0: 4, 1: 3, 2: 2}},
		{"unix ms", []string{"--to", ms(time.Second), "--topics", fixtureTopic},
			[][3]string{{"0", "3", "1"}, {"1", "1", "1"}, {"2", "-", "1"}}, map[int32]int64{0: 1, 1: 1, 2: 1}},
		{"rfc3339", []string{"--to", at(2 * time.Second).Format(time.RFC3339)},
			[][3]string{{"0", "3", "2"}, {"1", "1", "2"}, {"2", "-", "2"}}, map[int32]int64{0: 2, 1: 2, 2: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.baseline(t, group)
			args := append([]string{"group", "seek", group}, tt.args...)
			plan := [][]string{{"TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET"}}
			done := [][]string{{"TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET", "STATUS"}}
			for _, p := range tt.plan {
				plan = append(plan, []string{fixtureTopic, p[0], p[1], p[2]})
				done = append(done, []string{fixtureTopic, p[0], p[1], p[2], "OK"})
			}
			r := mustRun(t, f.brokers, "", append(slices.Clone(args), "--dry-run")...)
			if !equalRows(rows(r.stdout), plan) {
				t.Fatalf("--dry-run printed:\n%s\nwant %v", r.stdout, plan)
			}
			if got := f.committed(t, group); !maps.Equal(got, fixtureCommits) {
				t.Fatalf("--dry-run changed the offsets: %v", got)
			}
			r = mustRun(t, f.brokers, "", args...)
			if !equalRows(rows(r.stdout), done) {
				t.Fatalf("seek printed:\n%s\nwant %v", r.stdout, done)
			}
			if got := f.committed(t, group); !maps.Equal(got, tt.want) {
				t.Fatalf("committed %v, want %v", got, tt.want)
			}
		})
	}

	for _, bad := range [][]string{{}, {"--to", "soon"}, {"--to", "-1"}, {"--to", "@-5"}, {"--to", "start", "--topics", "a,,b"}} {
		if r := run(t, f.brokers, "", append([]string{"group", "seek", group}, bad...)...); !errors.Is(r.err, ErrUsage) {
			t.Errorf("seek %v: err = %v, want ErrUsage", bad, r.err)
		}
	}
	if r := run(t, f.brokers, "", "group", "seek", group, "--to", "start", "--topics", "nope", "--allow-new-topics"); !errors.Is(r.err, ErrUnknownTopic) {
		t.Errorf("seek of an unknown topic: err = %v, want ErrUnknownTopic", r.err)
	}

	// A topic the group never committed to, as rpk's seek: refused
	// without --allow-new-topics, every partition set with it.
	mustRun(t, f.brokers, "", "topic", "create", "fresh", "-p", "2")
	r = run(t, f.brokers, "", "group", "seek", group, "--to", "start", "--topics", "fresh", "--dry-run")
	if !errors.Is(r.err, ErrUsage) || !strings.Contains(r.err.Error(), "--allow-new-topics") {
		t.Errorf("seek of a topic without commits: err = %v, want ErrUsage naming --allow-new-topics", r.err)
	}
	r = mustRun(t, f.brokers, "", "group", "seek", group, "--to", "start", "--topics", "fresh", "--allow-new-topics")
	want := [][]string{{"TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET", "STATUS"}, {"fresh", "0", "-", "0", "OK"}, {"fresh", "1", "-", "0", "OK"}}
	if !equalRows(rows(r.stdout), want) {
		t.Errorf("seek --allow-new-topics printed:\n%s\nwant %v", r.stdout, want)
	}
}

// TestGroupOffsetDelete runs `group offset-delete` against a real agent:
// a topic the live member subscribes to fails per partition with
// GROUP_SUBSCRIBED_TO_TOPIC; once the group is empty, the partitions
// named lose their offsets and the others keep theirs.
func TestGroupOffsetDelete(t *testing.T) {
	f := newGroupFixtureOn(t, startAgent(t).KafkaAddr())
	const group = "g"
	_, stop := f.startConsumer(t, group)

	r := run(t, f.brokers, "", "group", "offset-delete", group, "--topic", fixtureTopic)
	if !errors.Is(r.err, ErrPartialFailure) {
		t.Fatalf("offset-delete of a subscribed topic: err = %v, want ErrPartialFailure\n%s", r.err, r.stdout)
	}
	want := [][]string{{"TOPIC", "PARTITION", "STATUS"}}
	for p := range len(fixtureRecords) {
		want = append(want, []string{fixtureTopic, strconv.Itoa(p), "GROUP_SUBSCRIBED_TO_TOPIC:"})
	}
	if got := rows(r.stdout); len(got) != len(want) || !slices.EqualFunc(got, want, func(g, w []string) bool { return len(g) > 2 && slices.Equal(g[:3], w) }) {
		t.Fatalf("offset-delete printed:\n%s\nwant rows starting %v", r.stdout, want)
	}
	if got := f.committed(t, group); !maps.Equal(got, fixtureCommits) {
		t.Fatalf("a refused offset-delete changed the offsets: %v", got)
	}
	stop()

	r = mustRun(t, f.brokers, "", "group", "offset-delete", group, "--topic", fixtureTopic, "-p", "0", "--format", "json")
	var out []offsetDeleteRow
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("--format json: %v\n%s", err, r.stdout)
	}
	if want := []offsetDeleteRow{{Topic: fixtureTopic, Partition: 0, Status: "OK"}}; !slices.Equal(out, want) {
		t.Fatalf("--format json = %+v, want %+v", out, want)
	}
	if got, want := f.committed(t, group), map[int32]int64{1: fixtureCommits[1]}; !maps.Equal(got, want) {
		t.Fatalf("committed after deleting partition 0: %v, want %v", got, want)
	}

	r = mustRun(t, f.brokers, "", "group", "offset-delete", group, "--topic", fixtureTopic+":1,2")
	if want := [][]string{{"TOPIC", "PARTITION", "STATUS"}, {fixtureTopic, "1", "OK"}, {fixtureTopic, "2", "OK"}}; !equalRows(rows(r.stdout), want) {
		t.Fatalf("offset-delete t:1,2 printed:\n%s\nwant %v", r.stdout, want)
	}
	if got := f.committed(t, group); len(got) != 0 {
		t.Fatalf("committed after deleting every partition: %v", got)
	}

	r = run(t, f.brokers, "", "group", "offset-delete", group, "--topic", "nope")
	if !errors.Is(r.err, ErrUnknownTopic) {
		t.Errorf("unknown topic: err = %v, want ErrUnknownTopic", r.err)
	}
	r = run(t, f.brokers, "", "group", "offset-delete", "no-such-group", "--topic", fixtureTopic)
	if r.err == nil || !strings.Contains(r.err.Error(), "GROUP_ID_NOT_FOUND") {
		t.Errorf("unknown group: err = %v, want GROUP_ID_NOT_FOUND", r.err)
	}
	for _, bad := range [][]string{{}, {"--topic", "t:x"}, {"--topic", "t", "-p", "-1"}, {"--topic", "t", "--format", "xml"}} {
		if r := run(t, "127.0.0.1:1", "", append([]string{"group", "offset-delete", group}, bad...)...); !errors.Is(r.err, ErrUsage) {
			t.Errorf("offset-delete %v: err = %v, want ErrUsage", bad, r.err)
		}
	}
}
