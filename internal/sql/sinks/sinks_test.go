package sinks

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/strandkafka/strand/internal/sql/exec"
	"github.com/strandkafka/strand/internal/sql/flow"
	"github.com/strandkafka/strand/internal/sql/source"
	"github.com/strandkafka/strand/internal/sql/types"
	"github.com/strandkafka/strand/internal/testservers/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// TestAppendJSONAgainstPostgres: each value's JSON is what
// PostgreSQL's to_json writes for it, byte for byte.
func TestAppendJSONAgainstPostgres(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	cases := []struct{ typ, text string }{
		{"bool", "true"}, {"bool", "false"},
		{"int2", "-32768"}, {"int4", "42"}, {"int8", "9223372036854775807"},
		{"float4", "1.5"}, {"float4", "3.4e38"}, {"float8", "0.1"}, {"float8", "1e300"}, {"float8", "-1.25e-7"},
		{"float8", "NaN"}, {"float8", "Infinity"}, {"float8", "-Infinity"}, {"float8", "-0"},
		{"numeric", "12.30"}, {"numeric", "-0.000001"}, {"numeric", "123456789012345678901234567890.5"},
		{"numeric", "NaN"}, {"numeric", "Infinity"},
		{"text", "plain"}, {"text", "quote \" backslash \\ tab \t newline \n bell \a é ✓"}, {"text", ""},
		{"varchar(5)", "abc"},
		{"bytea", "\\xdeadbeef"}, {"bytea", "\\x"},
		{"date", "2024-02-29"}, {"date", "0001-01-01"},
		{"timestamp", "2024-05-01 10:00:00"}, {"timestamp", "2024-05-01 10:00:00.5"}, {"timestamp", "1999-12-31 23:59:59.123456"},
		{"timestamptz", "2024-05-01 10:00:00+00"}, {"timestamptz", "2024-05-01 10:00:00.25+02"},
		{"interval", "1 year 2 mons 3 days 04:05:06.5"}, {"interval", "-1 days +02:00:00"}, {"interval", "00:00:00"},
		{"jsonb", `{"b": [1, 2.50, null], "a": "x"}`}, {"jsonb", `"s"`}, {"jsonb", `null`},
	}
	if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		typ, ok := types.ByName(strings.TrimSuffix(c.typ, "(5)"))
		if !ok {
			t.Fatalf("type %s", c.typ)
		}
		v, err := types.Parse(typ, c.text)
		if err != nil {
			t.Fatalf("%s %q: %v", c.typ, c.text, err)
		}
		var want string
		if err := conn.QueryRow(ctx, "SELECT to_json($1::"+c.typ+")::text", c.text).Scan(&want); err != nil {
			t.Fatalf("%s %q: %v", c.typ, c.text, err)
		}
		if got := string(AppendJSON(nil, typ, v)); got != want {
			t.Errorf("%s %q: got %s, PostgreSQL's to_json %s", c.typ, c.text, got, want)
		}
	}
	// NULL is null whatever the type.
	if got := string(AppendJSON(nil, types.Int4, nil)); got != "null" {
		t.Errorf("NULL: %s", got)
	}
}

// TestEncoder: what each envelope writes for an epoch's output, read
// against the view's contents with the epoch applied.
func TestEncoder(t *testing.T) {
	cols := []exec.Column{{Name: "k", Type: types.Text}, {Name: "n", Type: types.Int8}}
	row := func(k string, n int64) types.Row { return types.Row{k, n} }
	type step struct {
		in   []types.Change
		want []string // key => value ("null" a tombstone)
	}
	tests := []struct {
		name     string
		idx      flow.IndexSpec
		envelope string
		steps    []step
	}{
		{name: "upsert by a unique key", idx: flow.IndexSpec{KeyCols: []int{0}, Unique: true}, envelope: EnvelopeUpsert, steps: []step{
			{in: []types.Change{{Row: row("a", 1), Diff: 1}, {Row: row("b", 2), Diff: 1}},
				want: []string{`{"k":"a"} => {"k":"a","n":1}`, `{"k":"b"} => {"k":"b","n":2}`}},
			{in: []types.Change{{Row: row("a", 1), Diff: -1}, {Row: row("a", 5), Diff: 1}, {Row: row("b", 2), Diff: -1}},
				want: []string{`{"k":"a"} => {"k":"a","n":5}`, `{"k":"b"} => null`}},
		}},
		{name: "upsert by the whole row", envelope: EnvelopeUpsert, steps: []step{
			{in: []types.Change{{Row: row("a", 1), Diff: 2}},
				want: []string{`{"k":"a","n":1} => {"k":"a","n":1}`}},
			// One copy of two removed: the row is still there.
			{in: []types.Change{{Row: row("a", 1), Diff: -1}},
				want: []string{`{"k":"a","n":1} => {"k":"a","n":1}`}},
			{in: []types.Change{{Row: row("a", 1), Diff: -1}},
				want: []string{`{"k":"a","n":1} => null`}},
		}},
		{name: "changelog by a unique key", idx: flow.IndexSpec{KeyCols: []int{0}, Unique: true}, envelope: EnvelopeChangelog, steps: []step{
			{in: []types.Change{{Row: row("a", 1), Diff: 1}},
				want: []string{`{"k":"a"} => {"before":null,"after":{"k":"a","n":1},"op":"c"}`}},
			{in: []types.Change{{Row: row("a", 1), Diff: -1}, {Row: row("a", 2), Diff: 1}},
				want: []string{`{"k":"a"} => {"before":{"k":"a","n":1},"after":{"k":"a","n":2},"op":"u"}`}},
			{in: []types.Change{{Row: row("a", 2), Diff: -1}},
				want: []string{`{"k":"a"} => {"before":{"k":"a","n":2},"after":null,"op":"d"}`}},
		}},
		{name: "changelog of a multiset", envelope: EnvelopeChangelog, steps: []step{
			{in: []types.Change{{Row: row("a", 1), Diff: 2}},
				want: []string{`{"k":"a","n":1} => {"before":null,"after":{"k":"a","n":1},"op":"c"}`,
					`{"k":"a","n":1} => {"before":null,"after":{"k":"a","n":1},"op":"c"}`}},
			{in: []types.Change{{Row: row("a", 1), Diff: -1}},
				want: []string{`{"k":"a","n":1} => {"before":{"k":"a","n":1},"after":null,"op":"d"}`}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := new(flow.Graph)
			g.SetOutput(g.Input("in"))
			drv, err := flow.NewDriver(g, flow.NewMemStore(), flow.Options{Index: &tc.idx})
			if err != nil {
				t.Fatal(err)
			}
			enc := newEncoder(cols, tc.idx, tc.envelope)
			for i, s := range tc.steps {
				var got []string
				_, err := drv.Step(flow.Epoch{Inputs: [][]types.Change{s.in}, BeforeCommit: func(out []types.Change, pending *flow.View) error {
					recs, err := enc.encode(out, pending)
					for _, r := range recs {
						v := "null"
						if r.value != nil {
							v = string(r.value)
						}
						got = append(got, string(r.key)+" => "+v)
					}
					return err
				}})
				if err != nil {
					t.Fatal(err)
				}
				if strings.Join(got, "\n") != strings.Join(s.want, "\n") {
					t.Fatalf("step %d:\ngot  %s\nwant %s", i, strings.Join(got, "\n     "), strings.Join(s.want, "\n     "))
				}
			}
		})
	}
}

func TestBehindOrEqual(t *testing.T) {
	at := func(offs ...int64) []map[int32]source.Position {
		m := map[int32]source.Position{}
		for p, o := range offs {
			if o >= 0 {
				m[int32(p)] = source.Position{Offset: o}
			}
		}
		return []map[int32]source.Position{m}
	}
	tests := []struct {
		name             string
		local, committed []map[int32]source.Position
		behind, equal    bool
	}{
		{"equal", at(3, 4), at(3, 4), true, true},
		{"behind", at(1, 4), at(3, 4), true, false},
		{"a partition not read yet", at(3, -1), at(3, 2), true, false},
		{"ahead", at(5, 4), at(3, 4), false, false},
		{"a partition the progress lacks", at(3, 1), at(3, -1), false, false},
		{"inputs differ", at(1), append(at(1), at(1)...), false, false},
	}
	for _, tc := range tests {
		if got := behindOrEqual(tc.local, tc.committed); got != tc.behind {
			t.Errorf("%s: behindOrEqual %v, want %v", tc.name, got, tc.behind)
		}
		if got := equalOffsets(tc.local, tc.committed); got != tc.equal {
			t.Errorf("%s: equalOffsets %v, want %v", tc.name, got, tc.equal)
		}
	}
}

// TestDroppedProgressTopic: the sweep deletes only progress topics of
// sinks created and since dropped.
func TestDroppedProgressTopic(t *testing.T) {
	live := map[uint64]bool{5: true}
	tests := []struct {
		name string
		want bool
	}{
		{ProgressTopic(3), true},   // dropped
		{ProgressTopic(5), false},  // live
		{ProgressTopic(9), false},  // not created yet (being created)
		{ProgressTopic(10), false}, // likewise
		{"__strand_sink_progress_03", false},
		{"__strand_sink_progress_", false},
		{"__strand_sink_progress_x", false},
		{"orders", false},
	}
	for _, tc := range tests {
		if _, got := droppedProgressTopic(tc.name, live, 9); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
