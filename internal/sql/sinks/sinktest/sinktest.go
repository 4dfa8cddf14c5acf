// Package sinktest reads what a SQL sink wrote, for tests: a topic
// read to its end read_committed, folded as an upsert stream (the last
// value per key) or summed as a changelog (each row's copies), rows as
// canonical JSON to compare with PostgreSQL's to_json of the same
// query. Test-only: nothing here is linked into the binary.
package sinktest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadCommitted reads topic from its start to its last stable offset,
// committed records only, partition by partition in offset order.
func ReadCommitted(ctx context.Context, opts []kgo.Opt, topic string) ([]*kgo.Record, error) {
	adm, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...), kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	adm.Close()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, err
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	byPart := map[int32][]*kgo.Record{}
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range want {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w (at %v, ends %v)", topic, err, next, want)
		}
		if err := fs.Err(); err != nil {
			return nil, err
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() && r.Offset < want[r.Partition] {
				byPart[r.Partition] = append(byPart[r.Partition], r)
			}
		})
	}
	var out []*kgo.Record
	for _, p := range slices.Sorted(func(yield func(int32) bool) {
		for p := range byPart {
			if !yield(p) {
				return
			}
		}
	}) {
		out = append(out, byPart[p]...)
	}
	return out, nil
}

// Canonical is a JSON text with its objects' keys sorted and numbers as
// written (12.30 stays 12.30): two texts are equal values iff their
// canonical forms are equal.
func Canonical(text []byte) (string, error) {
	d := json.NewDecoder(bytes.NewReader(text))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", fmt.Errorf("%w: %s", err, text)
	}
	b, err := json.Marshal(v) // maps marshal with sorted keys
	return string(b), err
}

// Upserted folds an upsert stream: each key's last value, a tombstone
// deleting it. It returns the rows (values) as a multiset, and checks
// that every key is the JSON object of the named columns of its value.
func Upserted(recs []*kgo.Record, keyCols []string) (map[string]int64, error) {
	last := map[string][]byte{}
	for _, r := range recs {
		k, err := Canonical(r.Key)
		if err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
		if r.Value == nil {
			delete(last, k)
			continue
		}
		last[k] = r.Value
	}
	out := map[string]int64{}
	for k, v := range last {
		row, err := Canonical(v)
		if err != nil {
			return nil, err
		}
		if keyCols != nil {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(v, &m); err != nil {
				return nil, err
			}
			km := map[string]json.RawMessage{}
			for _, c := range keyCols {
				km[c] = m[c]
			}
			kb, _ := json.Marshal(km)
			if ck, _ := Canonical(kb); ck != k {
				return nil, fmt.Errorf("key %s does not match its value %s", k, row)
			}
		}
		out[row]++
	}
	return out, nil
}

// ChangelogSum sums a Debezium-style changelog: each "before" removes a
// copy of its row, each "after" adds one. A row whose copies go below
// zero is an error (a delete of what was never there).
func ChangelogSum(recs []*kgo.Record) (map[string]int64, error) {
	out := map[string]int64{}
	for _, r := range recs {
		var ev struct {
			Before json.RawMessage `json:"before"`
			After  json.RawMessage `json:"after"`
			Op     string          `json:"op"`
		}
		if err := json.Unmarshal(r.Value, &ev); err != nil {
			return nil, fmt.Errorf("%w: %s", err, r.Value)
		}
		isNull := func(m json.RawMessage) bool { return len(m) == 0 || string(m) == "null" }
		want := map[string]bool{"c": isNull(ev.Before) && !isNull(ev.After), "u": !isNull(ev.Before) && !isNull(ev.After),
			"d": !isNull(ev.Before) && isNull(ev.After)}
		if !want[ev.Op] {
			return nil, fmt.Errorf("op %q with before %s and after %s", ev.Op, ev.Before, ev.After)
		}
		if !isNull(ev.Before) {
			c, err := Canonical(ev.Before)
			if err != nil {
				return nil, err
			}
			out[c]--
			if out[c] < 0 {
				return nil, fmt.Errorf("offset %d/%d deletes %s, which is not there", r.Partition, r.Offset, c)
			}
			if out[c] == 0 {
				delete(out, c)
			}
		}
		if !isNull(ev.After) {
			c, err := Canonical(ev.After)
			if err != nil {
				return nil, err
			}
			out[c]++
		}
	}
	return out, nil
}

// Diff describes how got differs from want, "" if it does not.
func Diff(want, got map[string]int64) string {
	var b strings.Builder
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	}) {
		if want[k] != got[k] {
			fmt.Fprintf(&b, "  %s: want %d, got %d\n", k, want[k], got[k])
		}
	}
	return b.String()
}
