package e2e

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumeLogCovers checks the cluster test's wait for the group: the
// channel covers returns is closed whether the records were read before
// or after the call, and stays open while one is unread. The group often
// reads the last acknowledged records before the producer's Flush
// returns, so "already read" is a common case, not a corner.
func TestConsumeLogCovers(t *testing.T) {
	a := ackedRecord{partition: 0, offset: 0, value: "a"}
	b := ackedRecord{partition: 1, offset: 0, value: "b"}
	tests := []struct {
		name          string
		want          []ackedRecord
		before, after []ackedRecord // read before and after covers is called
		covered       bool
	}{
		{name: "all read before", want: []ackedRecord{a, b}, before: []ackedRecord{a, b}, covered: true},
		{name: "all read after", want: []ackedRecord{a, b}, after: []ackedRecord{a, b}, covered: true},
		{name: "read before and after", want: []ackedRecord{a, b}, before: []ackedRecord{a}, after: []ackedRecord{b}, covered: true},
		{name: "one unread", want: []ackedRecord{a, b}, before: []ackedRecord{b}},
		{name: "nothing wanted", covered: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newConsumeLog()
			read := func(rs []ackedRecord) {
				for _, r := range rs {
					l.add("m", &kgo.Record{Partition: r.partition, Offset: r.offset, Value: []byte(r.value)})
				}
			}
			read(tc.before)
			ch := l.covers(tc.want)
			read(tc.after)
			// The reads ran synchronously, so the channel is closed
			// by now or not at all.
			select {
			case <-ch:
				if !tc.covered {
					t.Fatalf("covered with records unread:\n%s", l.diagnose(tc.want))
				}
			default:
				if tc.covered {
					t.Fatalf("not covered though every wanted record was read (channel %v):\n%s", ch, l.diagnose(tc.want))
				}
			}
		})
	}
}

// TestConsumeLogRunning checks the wait before the cluster test's kill:
// every member holds partitions and has committed since its assignment
// last changed.
func TestConsumeLogRunning(t *testing.T) {
	ok := &kmsg.OffsetCommitResponse{Topics: []kmsg.OffsetCommitResponseTopic{{
		Topic: "t", Partitions: []kmsg.OffsetCommitResponseTopicPartition{{Partition: 0}},
	}}}
	refused := &kmsg.OffsetCommitResponse{Topics: []kmsg.OffsetCommitResponseTopic{{
		Topic: "t", Partitions: []kmsg.OffsetCommitResponseTopicPartition{{Partition: 0, ErrorCode: kerr.IllegalGeneration.Code}},
	}}}
	assign := func(m string, ps ...int32) func(*consumeLog) { return func(l *consumeLog) { l.assigned(m, ps) } }
	revoke := func(m string, ps ...int32) func(*consumeLog) {
		return func(l *consumeLog) { l.dropped(m, "revoked", ps) }
	}
	commit := func(m string, resp *kmsg.OffsetCommitResponse, err error) func(*consumeLog) {
		return func(l *consumeLog) { l.commit(m, new(kmsg.OffsetCommitRequest), resp, err) }
	}
	// running is whether the steps end running; wasRunning whether they
	// were at some step, which closes a channel taken before them.
	tests := []struct {
		name                string
		steps               []func(*consumeLog)
		running, wasRunning bool
	}{
		{name: "both assigned and committed", running: true,
			steps: []func(*consumeLog){assign("a", 0), assign("b", 1), commit("a", ok, nil), commit("b", ok, nil)}},
		{name: "one never assigned",
			steps: []func(*consumeLog){assign("a", 0, 1), commit("a", ok, nil), commit("b", ok, nil)}},
		{name: "one assigned nothing",
			steps: []func(*consumeLog){assign("a", 0, 1), assign("b"), commit("a", ok, nil), commit("b", ok, nil)}},
		{name: "commit refused",
			steps: []func(*consumeLog){assign("a", 0), assign("b", 1), commit("a", ok, nil), commit("b", refused, nil)}},
		{name: "commit failed",
			steps: []func(*consumeLog){assign("a", 0), assign("b", 1), commit("a", ok, nil), commit("b", nil, kerr.NotCoordinator)}},
		{name: "committed before the assignment changed", wasRunning: true,
			steps: []func(*consumeLog){assign("a", 0, 1), assign("b", 2), commit("a", ok, nil), commit("b", ok, nil), revoke("a", 1), assign("b", 1)}},
		{name: "everything revoked", wasRunning: true, steps: []func(*consumeLog){assign("a", 0), assign("b", 1), commit("a", ok, nil), commit("b", ok, nil), revoke("b", 1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, callFirst := range []bool{true, false} {
				l := newConsumeLog()
				var ch <-chan struct{}
				if callFirst {
					ch = l.running([]string{"a", "b"})
				}
				for _, step := range tc.steps {
					step(l)
				}
				if !callFirst {
					ch = l.running([]string{"a", "b"})
				}
				want := tc.running || callFirst && tc.wasRunning
				select {
				case <-ch:
					if !want {
						t.Fatalf("running (called first: %v), want not", callFirst)
					}
				default:
					if want {
						t.Fatalf("not running (called first: %v):\n%s", callFirst, l.diagnose(nil))
					}
				}
			}
		})
	}
}
