package cli

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// sizedLayout reads and prints keys, values and headers by their sizes.
const sizedLayout = `%d %K %k %V %v %H%h{ %K %k %V %v}\n`

// formatted is records in layout, as consume -f prints them.
func formatted(t *testing.T, layout string, rs ...*kgo.Record) string {
	t.Helper()
	f, err := kgo.NewRecordFormatter(layout)
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, r := range rs {
		b = f.AppendRecord(b, r)
	}
	return string(b)
}

// TestProduceConsumeFormatRoundTrip: records read by `produce -f` with
// keys, headers and timestamps print back identically through `consume
// -f` with the same layout, since both speak franz-go's format language.
func TestProduceConsumeFormatRoundTrip(t *testing.T) {
	brokers := newCluster(t)
	mustRun(t, brokers, "", "topic", "create", "t", "-p", "1")
	mustRun(t, brokers, "", "topic", "create", "u", "-p", "2")

	for _, tt := range []struct{ name, layout, in string }{
		{"delimited", `%d %k %H %h{%k:%v }%v\n`,
			"1700000000000 k1 2 a:1 b:2 hello world\n1700000000001 k2 0 bye\n"},
		// Sized fields may hold the delimiters, newlines included.
		{"sized", sizedLayout, formatted(t, sizedLayout,
			&kgo.Record{Key: []byte("k y"), Value: []byte("a\nb"), Timestamp: time.UnixMilli(1700000000002),
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x ")}}},
			&kgo.Record{Key: []byte{}, Value: []byte{}, Timestamp: time.UnixMilli(1700000000003)})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := strconv.Itoa(strings.Count(tt.in, "17000000000"))
			r := mustRun(t, brokers, tt.in, "produce", "t", "-f", tt.layout)
			if !strings.Contains(r.stderr, "produced "+n+" records to t") {
				t.Fatalf("produce summary %q, want %s records", r.stderr, n)
			}
			r = mustRun(t, brokers, "", "consume", "t", "--offset", "-"+n, "-e", "-f", tt.layout)
			if r.stdout != tt.in {
				t.Fatalf("consumed:\n%q\nwant what was produced:\n%q", r.stdout, tt.in)
			}
		})
	}

	t.Run("json values", func(t *testing.T) {
		mustRun(t, brokers, "{\"a\":\n  1}\n[1, 2]\n", "produce", "t", "-f", "%v{json}")
		r := mustRun(t, brokers, "", "consume", "t", "--offset", "-2", "-e", "-f", "json")
		var vals []string
		for line := range strings.SplitSeq(strings.TrimSpace(r.stdout), "\n") {
			var jr JSONRecord
			if err := json.Unmarshal([]byte(line), &jr); err != nil || jr.Value == nil {
				t.Fatalf("line %q: %v", line, err)
			}
			vals = append(vals, *jr.Value)
		}
		if strings.Join(vals, "|") != `{"a":1}|[1,2]` {
			t.Fatalf("values %q, want the JSON values compacted", vals)
		}
	})

	t.Run("topic and partition from the input", func(t *testing.T) {
		mustRun(t, brokers, "u 1 x\nu 0 y\n", "produce", "t", "-f", `%t %p %v\n`)
		for p, want := range []string{"y\n", "x\n"} {
			r := mustRun(t, brokers, "", "consume", "u", "--from-beginning", "-e", "-p", strconv.Itoa(p), "-f", `%v\n`)
			if r.stdout != want {
				t.Errorf("u/%d holds %q, want %q", p, r.stdout, want)
			}
		}
	})

	t.Run("record too long", func(t *testing.T) {
		long := strings.Repeat("x", 200<<10) + "\n"
		r := run(t, brokers, "ok\n"+long, "produce", "t", "-f", `%v\n`, "--max-line-bytes", "16")
		if !errors.Is(r.err, errRecordTooLong) || !strings.Contains(r.stderr, "produced 1 records") {
			t.Fatalf("err %v, stderr %q: want errRecordTooLong after the first record", r.err, r.stderr)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		r := run(t, brokers, "notanumber v\n", "produce", "t", "-f", `%d %v\n`)
		if r.err == nil || !strings.Contains(r.err.Error(), "record 1") {
			t.Fatalf("err %v: want the unparsable record named", r.err)
		}
	})
}
