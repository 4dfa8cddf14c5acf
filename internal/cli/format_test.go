package cli

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func recordAt(topic string, partition int32, offset int64) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: partition, Offset: offset}
}

func sampleRecord() *kgo.Record {
	return &kgo.Record{
		Topic:     "orders",
		Partition: 3,
		Offset:    42,
		Key:       []byte("k"),
		Value:     []byte("v"),
		Timestamp: time.UnixMilli(1700000000123),
		Headers:   []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}},
	}
}

// TestLayoutFormat: --format layouts are franz-go's RecordFormatter
// language (rpk's), checked on a record whose every field is set.
func TestLayoutFormat(t *testing.T) {
	tests := []struct {
		layout string
		want   string
	}{
		{DefaultFormat, "v\n"},
		{`%t %p %o %k %v %d %H %h{%k=%v,}\n`, "orders 3 42 k v 1700000000123 2 a=1,b=2,\n"},
		{`%k\t%v\r\n`, "k\tv\r\n"},
		{`%K %V %v{hex}`, "1 1 76"},
		{`%d{go#RFC3339Nano#}`, "2023-11-14T22:13:20.123Z"},
		{`%[ %]`, "40 50"},
		{`100%% \\ %v`, `100% \ v`},
		{"no verbs", "no verbs"},
	}
	for _, tt := range tests {
		t.Run(tt.layout, func(t *testing.T) {
			f, err := parseFormat(tt.layout)
			if err != nil {
				t.Fatal(err)
			}
			p := &kgo.FetchPartition{Partition: 3, LogStartOffset: 40, HighWatermark: 50}
			got, err := f.appendRecord([]byte("prefix:"), p, sampleRecord())
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "prefix:"+tt.want {
				t.Fatalf("got %q, want %q", got, "prefix:"+tt.want)
			}
		})
	}
}

func TestLayoutErrors(t *testing.T) {
	for _, layout := range []string{"%q", "%v{nope}", "%h", "%d{go#", "%a"} {
		t.Run(layout, func(t *testing.T) {
			if _, err := parseFormat(layout); !errors.Is(err, ErrUsage) {
				t.Fatalf("err = %v, want ErrUsage", err)
			}
		})
	}
}

func TestJSONFormatNulls(t *testing.T) {
	tests := []struct {
		name       string
		key, value []byte
		want       string
	}{
		{"null key and value", nil, nil, `"key":null,"value":null`},
		{"empty key and value", []byte{}, []byte{}, `"key":"","value":""`},
		{"invalid utf8", []byte{0xff}, []byte("ok"), `"key":"\ufffd","value":"ok"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sampleRecord()
			r.Key, r.Value, r.Headers = tt.key, tt.value, nil
			got, err := jsonFormat{}.appendRecord(nil, nil, r)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(got), tt.want) || !strings.HasSuffix(string(got), "}\n") {
				t.Fatalf("got %s, want it to contain %s", got, tt.want)
			}
			if !strings.Contains(string(got), `"headers":[]`) {
				t.Fatalf("got %s, want an empty headers list, not null", got)
			}
		})
	}
}

func TestParseOffset(t *testing.T) {
	tests := []struct {
		in         string
		start, end int64
		want       int64
	}{
		{"start", 5, 10, 5},
		{"oldest", 5, 10, 5},
		{"end", 5, 10, 10},
		{"7", 5, 10, 7},
		{"3", 5, 10, 5},
		{"12", 5, 10, 10},
		{"+2", 5, 10, 7},
		{"+20", 5, 10, 10},
		{"-2", 5, 10, 8},
		{"-20", 5, 10, 5},
		{"+0", 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			spec, err := parseOffset(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := spec.resolve(tt.start, tt.end, -1); got != tt.want {
				t.Fatalf("resolve(%d, %d) = %d, want %d", tt.start, tt.end, got, tt.want)
			}
		})
	}
	for _, bad := range []string{"", "+", "-", "x", "1.5", "+-3", "--3", "++3"} {
		t.Run("bad "+bad, func(t *testing.T) {
			if _, err := parseOffset(bad); !errors.Is(err, ErrUsage) {
				t.Fatalf("err = %v, want ErrUsage", err)
			}
		})
	}
}

func TestEndTracker(t *testing.T) {
	a0, a1, b0 := topicPartition{"a", 0}, topicPartition{"a", 1}, topicPartition{"b", 0}
	bounds := partitionBounds{a0: {0, 2}, a1: {0, 0}, b0: {5, 6}}

	t.Run("records up to the end", func(t *testing.T) {
		done := 0
		tr := newEndTracker(bounds, func() { done++ })
		tr.assign(map[topicPartition]int64{a0: 0, a1: 0, b0: 5})
		steps := []struct {
			r        *kgo.Record
			show     bool
			finished bool
		}{
			{recordAt("a", 0, 0), true, false},
			{recordAt("b", 0, 5), true, false},
			{recordAt("a", 0, 1), true, true},
			// Produced after the start: past the end, not shown.
			{recordAt("a", 0, 2), false, true},
			{recordAt("a", 1, 0), false, true},
		}
		for i, s := range steps {
			if got := tr.observe(s.r); got != s.show {
				t.Errorf("step %d: observe = %v, want %v", i, got, s.show)
			}
			if got := tr.finished(); got != s.finished {
				t.Errorf("step %d: finished = %v, want %v", i, got, s.finished)
			}
		}
		if done != 1 {
			t.Fatalf("done called %d times, want 1", done)
		}
	})
	t.Run("starting at the end", func(t *testing.T) {
		tr := newEndTracker(bounds, func() {})
		tr.assign(map[topicPartition]int64{a0: 2, a1: 0, b0: 6})
		if !tr.finished() {
			t.Fatal("not finished with every partition at its end")
		}
	})
	t.Run("nothing before assignment", func(t *testing.T) {
		tr := newEndTracker(bounds, func() {})
		if tr.finished() {
			t.Fatal("finished before any assignment: a group consumer would exit before joining")
		}
	})
	t.Run("revoked partitions are not waited for", func(t *testing.T) {
		tr := newEndTracker(bounds, func() {})
		tr.assign(map[topicPartition]int64{a0: 0, b0: 5})
		tr.drop(map[string][]int32{"a": {0}})
		if tr.finished() {
			t.Fatal("finished with b/0 still pending")
		}
		if !tr.observe(recordAt("b", 0, 5)) || !tr.finished() {
			t.Fatal("not finished after b/0 reached its end with a/0 revoked")
		}
	})
	t.Run("revoke of everything waits for the next assignment", func(t *testing.T) {
		tr := newEndTracker(bounds, func() {})
		tr.assign(map[topicPartition]int64{a0: 0, b0: 5})
		tr.drop(map[string][]int32{"a": {0}, "b": {0}})
		if tr.finished() {
			t.Fatal("finished while owning nothing, as an eager rebalance leaves a member")
		}
		tr.assign(map[topicPartition]int64{a0: 2, b0: 6})
		if !tr.finished() {
			t.Fatal("not finished when reassigned at the end")
		}
	})
	t.Run("partition created after the start", func(t *testing.T) {
		tr := newEndTracker(bounds, func() {})
		tr.assign(map[topicPartition]int64{{"c", 0}: 0})
		if !tr.finished() {
			t.Fatal("waiting for a partition that had no end offset at the start")
		}
	})
}

func TestJSONRecordShape(t *testing.T) {
	got, err := jsonFormat{}.appendRecord(nil, nil, sampleRecord())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"topic", "partition", "offset", "timestamp", "key", "value", "headers"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON record lacks %q: %s", k, got)
		}
	}
	if m["timestamp"] != float64(1700000000123) {
		t.Errorf("timestamp = %v, want Unix milliseconds", m["timestamp"])
	}
}
