package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

// completions runs cobra's hidden __complete command, as a shell's Tab
// does, and returns the candidates it prints (its last line is the
// directive).
func completions(t *testing.T, args ...string) []string {
	t.Helper()
	r := runAdmin(t, "__complete", args...)
	if r.err != nil {
		t.Fatalf("__complete %s: %v", strings.Join(args, " "), r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], ":") {
		t.Fatalf("__complete %s printed:\n%s", strings.Join(args, " "), r.stdout)
	}
	return lines[:len(lines)-1]
}

// TestCompletion: topic and group names come from the cluster, filtered
// by the typed prefix, for positional arguments and flags; a dead
// cluster completes nothing and no error.
func TestCompletion(t *testing.T) {
	useConfigDir(t)
	brokers := startAgent(t).KafkaAddr()
	for _, topic := range []string{"orders", "other", "payments"} {
		mustRun(t, brokers, "", "topic", "create", topic, "-p", "1")
	}
	adm := adminClient(t, brokers)
	for _, g := range []string{"billing", "bulk", "audit"} {
		if err := adm.CommitAllOffsets(t.Context(), g, kadm.Offsets{"orders": {0: {Topic: "orders", Partition: 0, At: 0, LeaderEpoch: -1}}}); err != nil {
			t.Fatal(err)
		}
	}
	b := "--brokers=" + brokers
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"topic", "describe", b, "o"}, []string{"orders", "other"}},
		{[]string{"topic", "delete", b, "orders", ""}, []string{"other", "payments"}},
		{[]string{"consume", b, "p"}, []string{"payments"}},
		{[]string{"consume", b, "orders", ""}, nil},
		{[]string{"consume", b, "orders", "--group", "b"}, []string{"billing", "bulk"}},
		{[]string{"group", "describe", b, ""}, []string{"audit", "billing", "bulk"}},
		{[]string{"group", "seek", b, "audit", "--topics", "pay"}, []string{"payments"}},
		{[]string{"group", "offset-delete", b, "bu"}, []string{"bulk"}},
		{[]string{"share-group", "seek", b, "a"}, []string{"audit"}},
		{[]string{"share-group", "delete-offsets", b, "audit", "--topic", "o"}, []string{"orders", "other"}},
		{[]string{"share-group", "delete", b, "bulk", "b"}, []string{"billing"}},
		// -X reaches the completion's client too.
		{[]string{"topic", "describe", "-X", "brokers=" + brokers, "pa"}, []string{"payments"}},
		// Nothing listens: silence, not an error.
		{[]string{"topic", "describe", "--brokers=127.0.0.1:1", ""}, nil},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			if got := completions(t, tt.args...); !slices.Equal(got, tt.want) {
				t.Fatalf("candidates %q, want %q", got, tt.want)
			}
		})
	}
}
