package cli

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConsumeRpkOffsets reads with rpk's --offset forms: ranges that stop
// by themselves (no -e), times in each accepted spelling, and durations.
func TestConsumeRpkOffsets(t *testing.T) {
	brokers := newCluster(t)
	mustRun(t, brokers, "", "topic", "create", "ts", "-p", "1")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// r0..r4 one second apart from 2023-11-14T22:13:20Z (Unix 1700000000).
	base := time.UnixMilli(1_700_000_000_000)
	for i, v := range []string{"r0", "r1", "r2", "r3", "r4"} {
		r := &kgo.Record{Topic: "ts", Value: []byte(v), Timestamp: base.Add(time.Duration(i) * time.Second)}
		if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"until end", []string{"-o", ":end"}, "r0\nr1\nr2\nr3\nr4\n"},
		{"until offset", []string{"-o", ":2"}, "r0\nr1\n"},
		{"offset range", []string{"-o", "1:3"}, "r1\nr2\n"},
		{"after start until end", []string{"-o", "+3:end"}, "r3\nr4\n"},
		{"from offset colon", []string{"-o", "3:", "-e"}, "r3\nr4\n"},
		{"time ms", []string{"-o", "@1700000002000", "-e"}, "r2\nr3\nr4\n"},
		{"time seconds", []string{"-o", "@1700000001", "-e"}, "r1\nr2\nr3\nr4\n"},
		{"time range", []string{"-o", "@1700000001000:1700000003000"}, "r1\nr2\n"},
		{"until time", []string{"-o", "@:1700000002000"}, "r0\nr1\n"},
		{"rfc3339 and duration after", []string{"-o", "@2023-11-14T22:13:21Z:2s"}, "r1\nr2\n"},
		{"rfc3339 range", []string{"-o", "@2023-11-14T22:13:22Z:2023-11-14T22:13:23.5Z"}, "r2\nr3\n"},
		{"day", []string{"-o", "@2023-11-14", "-e"}, "r0\nr1\nr2\nr3\nr4\n"},
		{"time after every record", []string{"-o", "@2030-01-01", "-e"}, ""},
		{"range cut by -e", []string{"-o", "3:99", "-e"}, "r3\nr4\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRun(t, brokers, "", append([]string{"consume", "ts", "-f", `%v\n`}, tt.args...)...)
			if r.stdout != tt.want {
				t.Fatalf("consume %v: %q, want %q", tt.args, r.stdout, tt.want)
			}
		})
	}
}

func TestParseOffsetRange(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	ms := func(t time.Time) int64 { return t.UnixMilli() }
	for _, tt := range []struct {
		in        string
		from      offsetSpec
		until     *offsetSpec
		wantUsage bool
	}{
		{in: "start", from: offsetSpec{kind: offsetStart}},
		{in: "-3", from: offsetSpec{kind: offsetBeforeEnd, n: 3}},
		{in: ":end", from: offsetSpec{kind: offsetStart}, until: &offsetSpec{kind: offsetEnd}},
		{in: "end:", from: offsetSpec{kind: offsetEnd}},
		{in: "@-1h", from: offsetSpec{kind: offsetTime, n: ms(now.Add(-time.Hour))}},
		{in: "@-2h:30m", from: offsetSpec{kind: offsetTime, n: ms(now.Add(-2 * time.Hour))},
			until: &offsetSpec{kind: offsetTime, n: ms(now.Add(-90 * time.Minute))}},
		{in: "@2026-12-07T10:00:00Z:", from: offsetSpec{kind: offsetTime, n: ms(now.Add(-2 * time.Hour))}},
		{in: "@", wantUsage: true},
		{in: "@soon", wantUsage: true},
		{in: "@12345678901", wantUsage: true}, // 11 digits: neither ms nor s
		{in: "@:1h", wantUsage: true},         // a duration after nothing
		{in: "1:x", wantUsage: true},
		{in: ":+3", wantUsage: true},
		{in: "x:3", wantUsage: true},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseOffsetRange(tt.in, now)
			if tt.wantUsage {
				if !errors.Is(err, ErrUsage) {
					t.Fatalf("parse %q: %+v, %v; want ErrUsage", tt.in, got, err)
				}
				return
			}
			if err != nil || got.from != tt.from || (got.until == nil) != (tt.until == nil) || (got.until != nil && *got.until != *tt.until) {
				t.Fatalf("parse %q: from %+v until %+v (%v); want %+v %+v", tt.in, got.from, got.until, err, tt.from, tt.until)
			}
		})
	}
}
