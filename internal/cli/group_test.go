package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The fixture topic: partition -> records. Each partition's record i has
// the timestamp base + i seconds, so --to-timestamp has exact answers.
var fixtureRecords = map[int32]int{0: 5, 1: 3, 2: 2}

// fixtureCommits is what the fixture consumer commits: part of partitions
// 0 and 1, nothing of partition 2. Lags are then 2, 2 and unknown ("-").
var fixtureCommits = map[int32]int64{0: 3, 1: 1}

const fixtureTopic = "t"

type groupFixture struct {
	brokers string
	adm     *kadm.Client
	base    time.Time // timestamp of each partition's first record
}

// newGroupFixture starts a cluster holding fixtureTopic with
// fixtureRecords.
func newGroupFixture(t *testing.T) *groupFixture {
	t.Helper()
	return newGroupFixtureOn(t, newCluster(t))
}

// newGroupFixtureOn is newGroupFixture on a cluster the caller started.
func newGroupFixtureOn(t *testing.T, brokers string) *groupFixture {
	t.Helper()
	f := &groupFixture{
		brokers: brokers,
		// Recent, so no retention rule of the broker could touch it.
		base: time.Now().Add(-time.Hour).Truncate(time.Second),
	}
	f.adm = adminClient(t, f.brokers)
	mustRun(t, f.brokers, "", "topic", "create", fixtureTopic, "-p", strconv.Itoa(len(fixtureRecords)))

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(f.brokers, ",")...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), commandDeadline)
	defer cancel()
	for p, n := range fixtureRecords {
		for i := range n {
			// One record per produce, so each is its own batch with its
			// own timestamp.
			r := &kgo.Record{Topic: fixtureTopic, Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i),
				Timestamp: f.base.Add(time.Duration(i) * time.Second)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	return f
}

// startConsumer joins group with a kgo consumer, reads every fixture
// record and commits fixtureCommits. It returns the member id and a stop
// function that leaves the group (also run at cleanup).
func (f *groupFixture) startConsumer(t *testing.T, group string) (memberID string, stop func()) {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(f.brokers, ",")...),
		kgo.ClientID("group-test"),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(fixtureTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitMarks(),
	)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(cl.Close) } // Close waits until the group is left
	t.Cleanup(stop)

	ctx, cancel := context.WithTimeout(t.Context(), commandDeadline)
	defer cancel()
	total := 0
	for _, n := range fixtureRecords {
		total += n
	}
	for seen := 0; seen < total; {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadlock guard", seen, total)
		}
		if err := fetches.Err(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			seen++
			if r.Offset < fixtureCommits[r.Partition] {
				cl.MarkCommitRecords(r)
			}
		})
	}
	if err := cl.CommitMarkedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	memberID, _ = cl.GroupMetadata()
	return memberID, stop
}

// committed returns the group's committed offsets of fixtureTopic.
func (f *groupFixture) committed(t *testing.T, group string) map[int32]int64 {
	t.Helper()
	offs, err := f.adm.FetchOffsets(t.Context(), group)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	got := make(map[int32]int64)
	for _, o := range offs.Sorted() {
		if o.Err != nil {
			t.Fatalf("fetch offsets of %s: %s/%d: %v", group, o.Topic, o.Partition, o.Err)
		}
		if o.Topic == fixtureTopic && o.At >= 0 {
			got[o.Partition] = o.At
		}
	}
	return got
}

// baseline puts group's offsets back to what the fixture consumer
// commits.
func (f *groupFixture) baseline(t *testing.T, group string) {
	t.Helper()
	os := make(kadm.Offsets)
	for p, at := range fixtureCommits {
		os.Add(kadm.Offset{Topic: fixtureTopic, Partition: p, At: at, LeaderEpoch: -1})
	}
	if err := f.adm.CommitAllOffsets(t.Context(), group, os); err != nil {
		t.Fatal(err)
	}
	del, err := f.adm.DeleteOffsets(t.Context(), group, kadm.TopicsSet{fixtureTopic: {2: {}}})
	if err == nil {
		err = del.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := f.committed(t, group); !maps.Equal(got, fixtureCommits) {
		t.Fatalf("baseline: committed %v, want %v", got, fixtureCommits)
	}
}

// section returns the rows of the table whose header starts with first,
// up to the next blank line.
func section(out, first string) [][]string {
	rs := rows(out)
	for i, r := range rs {
		if len(r) > 0 && r[0] == first {
			end := i + 1
			for end < len(rs) && len(rs[end]) > 0 {
				end++
			}
			return rs[i:end]
		}
	}
	return nil
}

func equalRows(a, b [][]string) bool { return slices.EqualFunc(a, b, slices.Equal) }

func TestGroupUsageErrors(t *testing.T) {
	// Nothing listens here: every case must fail before connecting.
	const deadBrokers = "127.0.0.1:1"
	reset := func(args ...string) []string { return append([]string{"group", "reset-offsets", "g"}, args...) }
	tests := []struct {
		name string
		args []string
	}{
		{"list bad state", []string{"group", "list", "--state", "Sleeping"}},
		{"describe bad format", []string{"group", "describe", "g", "--format", "xml"}},
		{"reset without target", reset("--topic", "t")},
		{"reset two targets", reset("--topic", "t", "--to-earliest", "--to-latest")},
		{"reset offset and shift", reset("--topic", "t", "--to-offset", "1", "--shift-by", "1")},
		{"reset negative offset", reset("--topic", "t", "--to-offset", "-1")},
		{"reset bad timestamp", reset("--topic", "t", "--to-timestamp", "yesterday")},
		{"reset negative timestamp", reset("--topic", "t", "--to-timestamp", "-5")},
		{"reset no topics", reset("--to-earliest")},
		{"reset topic and all topics", reset("--topic", "t", "--all-topics", "--to-earliest")},
		{"reset dry run and execute", reset("--topic", "t", "--to-earliest", "--dry-run", "--execute")},
		{"reset empty partition list", reset("--topic", "t:", "--to-earliest")},
		{"reset bad partition", reset("--topic", "t:x", "--to-earliest")},
		{"reset negative partition", reset("--topic", "t:0,-1", "--to-earliest")},
		{"reset empty topic", reset("--topic", ":1", "--to-earliest")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := run(t, deadBrokers, "", tt.args...); !errors.Is(r.err, ErrUsage) {
				t.Fatalf("err = %v, want ErrUsage", r.err)
			}
		})
	}
}

func TestParseTopicSpecs(t *testing.T) {
	tests := []struct {
		flags []string
		want  []topicSpec
	}{
		{[]string{"a"}, []topicSpec{{"a", nil}}},
		{[]string{"a:2,0", "b", "a:1,2"}, []topicSpec{{"a", []int32{0, 1, 2}}, {"b", nil}}},
		{[]string{"a:1", "a"}, []topicSpec{{"a", nil}}},
		{[]string{"a", "a:1"}, []topicSpec{{"a", nil}}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.flags, " "), func(t *testing.T) {
			got, err := parseTopicSpecs(tt.flags)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, tt.want, func(a, b topicSpec) bool {
				return a.topic == b.topic && slices.Equal(a.partitions, b.partitions) && (a.partitions == nil) == (b.partitions == nil)
			}) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestGroupLifecycle follows one group from active to deleted through
// list, describe, reset-offsets (refused) and delete.
func TestGroupLifecycle(t *testing.T) {
	f := newGroupFixture(t)
	const group = "g"
	member, stop := f.startConsumer(t, group)
	// A group that only ever had offsets committed by an admin: Empty,
	// with no protocol type.
	if err := f.adm.CommitAllOffsets(t.Context(), "h", kadm.OffsetsFromRecords(kgo.Record{Topic: fixtureTopic, Partition: 0, Offset: 0})); err != nil {
		t.Fatal(err)
	}

	wantParts := func(member string) [][]string {
		return [][]string{
			{"TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-START-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID"},
			{"t", "0", "3", "0", "5", "2", member},
			{"t", "1", "1", "0", "3", "2", member},
			// No committed offset: "-", as kafka-consumer-groups prints it.
			{"t", "2", "-", "0", "2", "-", member},
		}
	}

	t.Run("active", func(t *testing.T) {
		r := mustRun(t, f.brokers, "", "group", "list")
		if want := [][]string{{"GROUP", "STATE", "PROTOCOL-TYPE", "TYPE"}, {"g", "Stable", "consumer", "classic"}, {"h", "Empty", "-", "classic"}}; !equalRows(rows(r.stdout), want) {
			t.Fatalf("list:\n%s\nwant %v", r.stdout, want)
		}

		r = mustRun(t, f.brokers, "", "group", "describe", group)
		rs := rows(r.stdout)
		for _, want := range [][]string{{"GROUP", "g"}, {"STATE", "Stable"}, {"PROTOCOL-TYPE", "consumer"}, {"MEMBERS", "1"}, {"TOTAL-LAG", "4"}} {
			if got := findRow(rs, want[0]); !slices.Equal(got, want) {
				t.Errorf("describe row %v, want %v", got, want)
			}
		}
		if p := findRow(rs, "PROTOCOL"); len(p) != 2 || p[1] == "-" {
			t.Errorf("describe PROTOCOL row %v, want the balancer of a stable group", p)
		}
		members := section(r.stdout, "MEMBER-ID")
		if len(members) != 2 || len(members[1]) != 5 || members[1][0] != member || members[1][1] != "-" ||
			members[1][2] != "group-test" || members[1][4] != "t:0,1,2" {
			t.Errorf("members table %v, want one row for %s with client group-test assigned t:0,1,2", members, member)
		}
		if got := section(r.stdout, "TOPIC"); !equalRows(got, wantParts(member)) {
			t.Errorf("partitions table:\n%s\nwant %v", r.stdout, wantParts(member))
		}

		for _, args := range [][]string{
			{"--to-earliest", "--execute"},
			{"--to-earliest"}, // Kafka refuses even to plan for an active group
		} {
			r = run(t, f.brokers, "", append([]string{"group", "reset-offsets", group, "--topic", "t"}, args...)...)
			if !errors.Is(r.err, ErrGroupActive) {
				t.Fatalf("reset %v of an active group: err = %v, want ErrGroupActive", args, r.err)
			}
		}
		if got := f.committed(t, group); !maps.Equal(got, fixtureCommits) {
			t.Fatalf("after refused reset: committed %v, want %v", got, fixtureCommits)
		}

		r = run(t, f.brokers, "", "group", "delete", group)
		if !errors.Is(r.err, ErrPartialFailure) {
			t.Fatalf("delete of an active group: err = %v, want ErrPartialFailure", r.err)
		}
		if got := rows(r.stdout); len(got) != 2 || got[1][0] != group || got[1][1] != "NON_EMPTY_GROUP:" {
			t.Fatalf("delete of an active group printed:\n%s", r.stdout)
		}
	})

	stop()

	t.Run("empty", func(t *testing.T) {
		r := mustRun(t, f.brokers, "", "group", "list", "--state", "empty")
		if want := [][]string{{"GROUP", "STATE", "PROTOCOL-TYPE", "TYPE"}, {"g", "Empty", "consumer", "classic"}, {"h", "Empty", "-", "classic"}}; !equalRows(rows(r.stdout), want) {
			t.Fatalf("list --state empty:\n%s\nwant %v", r.stdout, want)
		}
		r = mustRun(t, f.brokers, "", "group", "list", "--state", "Stable,PreparingRebalance")
		if want := [][]string{{"GROUP", "STATE", "PROTOCOL-TYPE", "TYPE"}}; !equalRows(rows(r.stdout), want) {
			t.Fatalf("list --state Stable:\n%s", r.stdout)
		}

		r = mustRun(t, f.brokers, "", "group", "describe", group)
		rs := rows(r.stdout)
		for _, want := range [][]string{{"STATE", "Empty"}, {"MEMBERS", "0"}, {"TOTAL-LAG", "4"}} {
			if got := findRow(rs, want[0]); !slices.Equal(got, want) {
				t.Errorf("describe row %v, want %v", got, want)
			}
		}
		if section(r.stdout, "MEMBER-ID") != nil {
			t.Errorf("describe of an empty group shows a members table:\n%s", r.stdout)
		}
		if got := section(r.stdout, "TOPIC"); !equalRows(got, wantParts("-")) {
			t.Errorf("partitions table:\n%s\nwant %v", r.stdout, wantParts("-"))
		}
	})

	t.Run("describe json", func(t *testing.T) {
		r := mustRun(t, f.brokers, "", "group", "describe", group, "h", "--format", "json")
		var groups []JSONGroup
		if err := json.Unmarshal([]byte(r.stdout), &groups); err != nil || len(groups) != 2 {
			t.Fatalf("want a list of two groups, got %v:\n%s", err, r.stdout)
		}
		g := groups[0]
		if g.Group != group || g.State != "Empty" || g.ProtocolType != "consumer" || len(g.Members) != 0 || g.TotalLag != 4 {
			t.Errorf("group %+v", g)
		}
		if len(g.Partitions) != len(fixtureRecords) {
			t.Fatalf("partitions %+v, want %d", g.Partitions, len(fixtureRecords))
		}
		for _, p := range g.Partitions {
			end := int64(fixtureRecords[p.Partition])
			commit, hasCommit := fixtureCommits[p.Partition]
			lag := end - commit
			if p.Topic != fixtureTopic || p.LogEndOffset == nil || *p.LogEndOffset != end ||
				p.LogStartOffset == nil || *p.LogStartOffset != 0 || (p.Lag != nil) != hasCommit || (hasCommit && *p.Lag != lag) ||
				(p.CurrentOffset != nil) != hasCommit || (hasCommit && *p.CurrentOffset != commit) || p.Error != "" {
				t.Errorf("partition %d: %s, want end %d commit %d (%v) lag %d", p.Partition, mustJSON(p), end, commit, hasCommit, lag)
			}
		}
		h := groups[1]
		// h committed 1 on partition 0 only (lag 4); its other partitions have
		// no lag to count (null, as Kafka's tool prints "-").
		if h.Group != "h" || h.TotalLag != 4 || len(h.Partitions) != 3 || h.Partitions[1].Lag != nil || h.Partitions[2].Lag != nil {
			t.Errorf("group h %s, want total lag 4 and null lag without a commit", mustJSON(h))
		}
	})

	t.Run("describe unknown", func(t *testing.T) {
		r := run(t, f.brokers, "", "group", "describe", "nope", group)
		if !errors.Is(r.err, ErrUnknownGroup) {
			t.Fatalf("err = %v, want ErrUnknownGroup", r.err)
		}
		if got := findRow(rows(r.stdout), "GROUP"); !slices.Equal(got, []string{"GROUP", group}) {
			t.Fatalf("the known group was not described:\n%s", r.stdout)
		}
	})

	t.Run("delete", func(t *testing.T) {
		r := run(t, f.brokers, "", "group", "delete", group, "nope")
		if !errors.Is(r.err, ErrPartialFailure) {
			t.Fatalf("err = %v, want ErrPartialFailure", r.err)
		}
		got := rows(r.stdout)
		if len(got) != 3 || !slices.Equal(got[1], []string{group, "OK"}) || got[2][0] != "nope" || got[2][1] != "GROUP_ID_NOT_FOUND:" {
			t.Fatalf("delete printed:\n%s", r.stdout)
		}
		r = mustRun(t, f.brokers, "", "group", "list")
		if want := [][]string{{"GROUP", "STATE", "PROTOCOL-TYPE", "TYPE"}, {"h", "Empty", "-", "classic"}}; !equalRows(rows(r.stdout), want) {
			t.Fatalf("list after delete:\n%s", r.stdout)
		}
		mustRun(t, f.brokers, "", "group", "delete", "h")
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestGroupResetOffsets(t *testing.T) {
	f := newGroupFixture(t)
	const group = "g"
	_, stop := f.startConsumer(t, group)
	stop()

	baseline := func(t *testing.T) { t.Helper(); f.baseline(t, group) }
	ms := func(d time.Duration) string { return strconv.FormatInt(f.base.Add(d).UnixMilli(), 10) }

	// Each plan row is partition, old offset, new offset.
	tests := []struct {
		name string
		args []string
		plan [][3]string
		want map[int32]int64 // committed after --execute
	}{
		{"earliest", []string{"--topic", "t", "--to-earliest"},
			[][3]string{{"0", "3", "0"}, {"1", "1", "0"}, {"2", "-", "0"}}, map[int32]int64{0: 0, 1: 0, 2: 0}},
		{"latest", []string{"--topic", "t", "--to-latest"},
			[][3]string{{"0", "3", "5"}, {"1", "1", "3"}, {"2", "-", "2"}}, map[int32]int64{0: 5, 1: 3, 2: 2}},
		{"offset clamps to end", []string{"--topic", "t", "--to-offset", "4"},
			[][3]string{{"0", "3", "4"}, {"1", "1", "3"}, {"2", "-", "2"}}, map[int32]int64{0: 4, 1: 3, 2: 2}},
		{"one partition", []string{"--topic", "t:0", "--to-offset", "1"},
			[][3]string{{"0", "3", "1"}}, map[int32]int64{0: 1, 1: 1}},
		{"shift back clamps to start", []string{"--topic", "t:0,1", "--shift-by", "-2"},
			[][3]string{{"0", "3", "1"}, {"1", "1", "0"}}, map[int32]int64{0: 1, 1: 0}},
		{"shift forward clamps to end", []string{"--topic", "t:1", "--topic", "t:0", "--shift-by", "5"},
			[][3]string{{"0", "3", "5"}, {"1", "1", "3"}}, map[int32]int64{0: 5, 1: 3}},
		{"shift without overflow", []string{"--topic", "t:0", "--shift-by", "9223372036854775807"},
			[][3]string{{"0", "3", "5"}}, map[int32]int64{0: 5, 1: 1}},
		{"all topics", []string{"--all-topics", "--to-earliest"},
			[][3]string{{"0", "3", "0"}, {"1", "1", "0"}}, map[int32]int64{0: 0, 1: 0}},
		// Partition 2 has no record at or after base+2s: the log end.
		{"timestamp ms", []string{"--topic", "t", "--to-timestamp", ms(2 * time.Second)},
			[][3]string{{"0", "3", "2"}, {"1", "1", "2"}, {"2", "-", "2"}}, map[int32]int64{0: 2, 1: 2, 2: 2}},
		{"timestamp between records", []string{"--topic", "t", "--to-timestamp", ms(500 * time.Millisecond)},
			[][3]string{{"0", "3", "1"}, {"1", "1", "1"}, {"2", "-", "1"}}, map[int32]int64{0: 1, 1: 1, 2: 1}},
		{"timestamp rfc3339", []string{"--topic", "t", "--to-timestamp", f.base.Add(3 * time.Second).Format(time.RFC3339)},
			[][3]string{{"0", "3", "3"}, {"1", "1", "3"}, {"2", "-", "2"}}, map[int32]int64{0: 3, 1: 3, 2: 2}},
		{"timestamp before everything", []string{"--topic", "t", "--to-timestamp", ms(-time.Hour)},
			[][3]string{{"0", "3", "0"}, {"1", "1", "0"}, {"2", "-", "0"}}, map[int32]int64{0: 0, 1: 0, 2: 0}},
		{"timestamp in the future", []string{"--topic", "t", "--to-timestamp", ms(48 * time.Hour)},
			[][3]string{{"0", "3", "5"}, {"1", "1", "3"}, {"2", "-", "2"}}, map[int32]int64{0: 5, 1: 3, 2: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			baseline(t)
			args := append([]string{"group", "reset-offsets", group}, tt.args...)
			plan := [][]string{{"TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET"}}
			done := [][]string{{"TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET", "STATUS"}}
			for _, p := range tt.plan {
				plan = append(plan, []string{fixtureTopic, p[0], p[1], p[2]})
				done = append(done, []string{fixtureTopic, p[0], p[1], p[2], "OK"})
			}

			for _, dry := range [][]string{nil, {"--dry-run"}} {
				r := mustRun(t, f.brokers, "", append(slices.Clone(args), dry...)...)
				if !equalRows(rows(r.stdout), plan) {
					t.Fatalf("%v plan:\n%s\nwant %v", dry, r.stdout, plan)
				}
				if warned := strings.Contains(r.stderr, "--execute"); warned != (dry == nil) {
					t.Errorf("%v stderr %q: the dry-run notice is for the implicit dry run only", dry, r.stderr)
				}
				if got := f.committed(t, group); !maps.Equal(got, fixtureCommits) {
					t.Fatalf("%v dry run changed the offsets: %v", dry, got)
				}
			}

			r := mustRun(t, f.brokers, "", append(args, "--execute")...)
			if !equalRows(rows(r.stdout), done) {
				t.Fatalf("execute output:\n%s\nwant %v", r.stdout, done)
			}
			if got := f.committed(t, group); !maps.Equal(got, tt.want) {
				t.Fatalf("committed %v, want %v", got, tt.want)
			}
		})
	}

	failures := []struct {
		name  string
		group string
		args  []string
		want  error
	}{
		{"shift without commit", group, []string{"--topic", "t", "--shift-by", "1"}, ErrNoCommit},
		{"all topics without commits", "fresh", []string{"--all-topics", "--to-earliest"}, ErrNoCommit},
		{"unknown topic", group, []string{"--topic", "nope", "--to-earliest"}, ErrUnknownTopic},
		{"missing partition", group, []string{"--topic", "t:7", "--to-earliest"}, ErrUsage},
	}
	for _, tt := range failures {
		t.Run(tt.name, func(t *testing.T) {
			baseline(t)
			r := run(t, f.brokers, "", append([]string{"group", "reset-offsets", tt.group, "--execute"}, tt.args...)...)
			if !errors.Is(r.err, tt.want) {
				t.Fatalf("err = %v, want %v", r.err, tt.want)
			}
			if got := f.committed(t, group); !maps.Equal(got, fixtureCommits) {
				t.Fatalf("a failed reset changed the offsets: %v", got)
			}
		})
	}

	t.Run("shift from offset zero", func(t *testing.T) {
		// A commit of 0 is a commit, not "none".
		if err := f.adm.CommitAllOffsets(t.Context(), "zero", kadm.Offsets{fixtureTopic: {0: {Topic: fixtureTopic, Partition: 0, At: 0, LeaderEpoch: -1}}}); err != nil {
			t.Fatal(err)
		}
		r := mustRun(t, f.brokers, "", "group", "reset-offsets", "zero", "--topic", "t:0", "--shift-by", "1", "--execute")
		if want := [][]string{{"TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET", "STATUS"}, {"t", "0", "0", "1", "OK"}}; !equalRows(rows(r.stdout), want) {
			t.Fatalf("output:\n%s\nwant %v", r.stdout, want)
		}
	})

	t.Run("new group", func(t *testing.T) {
		mustRun(t, f.brokers, "", "group", "reset-offsets", "fresh", "--topic", "t:1,2", "--to-latest", "--execute")
		if got, want := f.committed(t, "fresh"), map[int32]int64{1: 3, 2: 2}; !maps.Equal(got, want) {
			t.Fatalf("committed %v, want %v", got, want)
		}
	})

	t.Run("clamps to log start", func(t *testing.T) {
		const logStart = 2
		del, err := f.adm.DeleteRecords(t.Context(), kadm.OffsetsFromRecords(kgo.Record{Topic: fixtureTopic, Partition: 0, Offset: logStart - 1}))
		if err == nil {
			err = del.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"--to-offset", "0"},
			{"--to-earliest"},
			{"--shift-by", "-3"},
			{"--to-timestamp", ms(0)},
		} {
			baseline(t)
			r := mustRun(t, f.brokers, "", append([]string{"group", "reset-offsets", group, "--topic", "t:0", "--execute"}, args...)...)
			if want := []string{"t", "0", "3", strconv.Itoa(logStart), "OK"}; len(rows(r.stdout)) != 2 || !slices.Equal(rows(r.stdout)[1], want) {
				t.Fatalf("%v: output\n%s\nwant row %v", args, r.stdout, want)
			}
			if got := f.committed(t, group)[0]; got != logStart {
				t.Fatalf("%v: committed %d, want the log start %d", args, got, logStart)
			}
		}
	})
}
