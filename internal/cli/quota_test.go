package cli

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestQuotaAlterDescribe: quotas set with `quota alter` are listed by
// `quota describe`, <default> names the default entity, a removal takes
// a key away, and --validate-only changes nothing.
func TestQuotaAlterDescribe(t *testing.T) {
	brokers := newCluster(t)
	mustRun(t, brokers, "", "quota", "alter", "--client-id", "ingest", "--set", "producer_byte_rate=1048576", "--set", "request_percentage=25")
	mustRun(t, brokers, "", "quota", "alter", "--user", "<default>", "--set", "consumer_byte_rate=2048")
	mustRun(t, brokers, "", "quota", "alter", "--user", "alice", "--client-id", "<default>", "--set", "producer_byte_rate=100")
	mustRun(t, brokers, "", "quota", "alter", "--client-id", "ingest", "--remove", "request_percentage")
	mustRun(t, brokers, "", "quota", "alter", "--validate-only", "--client-id", "ingest", "--remove", "producer_byte_rate")

	got := rows(mustRun(t, brokers, "", "quota", "describe").stdout)
	if len(got) == 0 || !slices.Equal(got[0], []string{"USER", "CLIENT-ID", "KEY", "VALUE"}) {
		t.Fatalf("header: %v", got)
	}
	var lines []string
	for _, r := range got[1:] {
		lines = append(lines, strings.Join(r, " "))
	}
	slices.Sort(lines)
	want := []string{
		"- ingest producer_byte_rate 1048576",
		"<default> - consumer_byte_rate 2048",
		"alice <default> producer_byte_rate 100",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("described:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	got = rows(mustRun(t, brokers, "", "quota", "describe", "--user", "<default>").stdout)
	if len(got) != 2 || strings.Join(got[1], " ") != want[1] {
		t.Fatalf("describe --user <default>: %v", got)
	}
}

// TestQuotaUsage: no entity, nothing to change, or a value that is not
// a number is a usage error, found before any request.
func TestQuotaUsage(t *testing.T) {
	brokers := newCluster(t)
	for _, args := range [][]string{
		{"quota", "alter", "--set", "producer_byte_rate=1"},
		{"quota", "alter", "--user", "u"},
		{"quota", "alter", "--user", "u", "--set", "producer_byte_rate=fast"},
	} {
		if r := run(t, brokers, "", args...); !errors.Is(r.err, ErrUsage) {
			t.Errorf("strand %s: %v, want a usage error", strings.Join(args, " "), r.err)
		}
	}
}
