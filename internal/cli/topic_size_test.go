package cli

import (
	"slices"
	"strconv"
	"testing"
)

// TestTopicSizes: `topic list` and `topic describe` show the bytes each
// topic and partition stores, as DescribeLogDirs reports them across
// the brokers.
func TestTopicSizes(t *testing.T) {
	brokers := newCluster(t)
	mustRun(t, brokers, "", "topic", "create", "sized", "-p", "2")
	mustRun(t, brokers, "", "topic", "create", "empty", "-p", "1")
	mustRun(t, brokers, "a\nb\nc\n", "produce", "sized", "-p", "1")

	dirs, err := adminClient(t, brokers).DescribeAllLogDirs(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, d := range dirs {
		if p, ok := d.LookupPartition("sized", 1); ok {
			want += p.Size
		}
	}
	if want <= 0 {
		t.Fatalf("the cluster reports %d bytes for sized/1", want)
	}
	size := strconv.FormatInt(want, 10)

	r := mustRun(t, brokers, "", "topic", "list")
	wantRows := [][]string{{"NAME", "PARTITIONS", "SIZE"}, {"empty", "1", "0"}, {"sized", "2", size}}
	if !slices.EqualFunc(rows(r.stdout), wantRows, slices.Equal) {
		t.Fatalf("list output:\n%s\nwant %v", r.stdout, wantRows)
	}

	r = mustRun(t, brokers, "", "topic", "describe", "sized")
	rs := rows(r.stdout)
	if got := findRow(rs, "SIZE"); !slices.Equal(got, []string{"SIZE", size}) {
		t.Errorf("summary size row %v, want %s:\n%s", got, size, r.stdout)
	}
	header := findRow(rs, "PARTITION")
	col := slices.Index(header, "SIZE")
	if col < 0 {
		t.Fatalf("no SIZE column:\n%s", r.stdout)
	}
	for p, want := range []string{"0", size} {
		if row := findRow(rs, strconv.Itoa(p)); len(row) != len(header) || row[col] != want {
			t.Errorf("partition %d row %v, want size %s:\n%s", p, row, want, r.stdout)
		}
	}
}
