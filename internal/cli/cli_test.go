package cli

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// commandDeadline is a deadlock guard for one in-process command, not a
// performance bound.
const commandDeadline = 30 * time.Second

// newCluster starts an in-memory Kafka cluster and returns its seed list.
func newCluster(t *testing.T, opts ...kfake.Opt) string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return strings.Join(c.ListenAddrs(), ",")
}

type result struct {
	stdout, stderr string
	err            error
}

// run executes one strand command line in-process, as main would, with
// stdin as its standard input.
func run(t *testing.T, brokers, stdin string, args ...string) result {
	t.Helper()
	root := &cobra.Command{Use: "strand", SilenceUsage: true, SilenceErrors: true}
	AddCommands(root)
	var out, errOut bytes.Buffer
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append(args, "--brokers", brokers))
	ctx, cancel := context.WithTimeout(t.Context(), commandDeadline)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if ctx.Err() != nil {
		t.Fatalf("strand %s: hit the %v deadlock guard", strings.Join(args, " "), commandDeadline)
	}
	return result{stdout: out.String(), stderr: errOut.String(), err: err}
}

// mustRun is run for commands that must succeed.
func mustRun(t *testing.T, brokers, stdin string, args ...string) result {
	t.Helper()
	r := run(t, brokers, stdin, args...)
	if r.err != nil {
		t.Fatalf("strand %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.err, r.stdout, r.stderr)
	}
	return r
}

// rows splits table output into whitespace-separated cells per line.
func rows(out string) [][]string {
	var rs [][]string
	for line := range strings.SplitSeq(strings.TrimRight(out, "\n"), "\n") {
		rs = append(rs, strings.Fields(line))
	}
	return rs
}

// adminClient is an independent view of the cluster for assertions.
func adminClient(t *testing.T, brokers string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	t.Cleanup(adm.Close)
	return adm
}

func TestUsageErrors(t *testing.T) {
	// Nothing listens here: every case must fail before connecting.
	const deadBrokers = "127.0.0.1:1"
	tests := []struct {
		name string
		args []string
	}{
		{"bad acks", []string{"produce", "t", "--acks", "2"}},
		{"bad compression", []string{"produce", "t", "--compression", "brotli"}},
		{"header without =", []string{"produce", "t", "-H", "novalue"}},
		{"negative partition", []string{"produce", "t", "-p", "-2"}},
		{"zero max line", []string{"produce", "t", "--max-line-bytes", "0"}},
		{"bad format verb", []string{"consume", "t", "-f", "%q"}},
		{"unclosed brace", []string{"consume", "t", "-f", "%v{hex"}},
		{"headers without a spec", []string{"consume", "t", "-f", "%h"}},
		{"bad produce format", []string{"produce", "t", "-f", "%q"}},
		{"produce format unclosed", []string{"produce", "t", "-f", "%v{json"}},
		{"produce format and -k", []string{"produce", "t", "-f", `%k %v\n`, "-k", ":"}},
		{"produce format with %p and -p", []string{"produce", "t", "-f", `%p %v\n`, "-p", "0"}},
		{"bad offset", []string{"consume", "t", "--offset", "soon"}},
		{"double sign offset", []string{"consume", "t", "--offset", "+-1"}},
		{"negative count", []string{"consume", "t", "-n", "-1"}},
		{"group with partition", []string{"consume", "t", "-g", "g", "-p", "0"}},
		{"group with exact offset", []string{"consume", "t", "-g", "g", "--offset", "3"}},
		{"config without =", []string{"topic", "create", "t", "-c", "retention.ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, deadBrokers, "", tt.args...)
			if !errors.Is(r.err, ErrUsage) {
				t.Fatalf("err = %v, want ErrUsage", r.err)
			}
		})
	}
	t.Run("empty brokers", func(t *testing.T) {
		r := run(t, " , ", "", "topic", "list")
		if !errors.Is(r.err, ErrUsage) {
			t.Fatalf("err = %v, want ErrUsage", r.err)
		}
	})
}

func TestBrokersFromEnv(t *testing.T) {
	t.Setenv(EnvBrokers, "10.0.0.1:9092,10.0.0.2:9092")
	for _, cmd := range []*cobra.Command{NewProduceCommand(), NewConsumeCommand(), NewTopicCommand(), NewGroupCommand()} {
		f := cmd.Flags().Lookup("brokers")
		if f == nil {
			f = cmd.PersistentFlags().Lookup("brokers")
		}
		if f == nil || f.DefValue != "10.0.0.1:9092,10.0.0.2:9092" {
			t.Errorf("%s: --brokers default = %v, want the env value", cmd.Name(), f)
		}
	}
	t.Setenv(EnvBrokers, "")
	if got := NewProduceCommand().Flags().Lookup("brokers").DefValue; got != DefaultBrokers {
		t.Errorf("--brokers default with empty env = %q, want %q", got, DefaultBrokers)
	}
}

func TestTopicLifecycle(t *testing.T) {
	brokers := newCluster(t)

	r := mustRun(t, brokers, "", "topic", "create", "orders", "payments", "-p", "3", "-c", "cleanup.policy=compact")
	if want := [][]string{{"TOPIC", "STATUS"}, {"orders", "OK"}, {"payments", "OK"}}; !slices.EqualFunc(rows(r.stdout), want, slices.Equal) {
		t.Fatalf("create output:\n%s", r.stdout)
	}
	mustRun(t, brokers, "", "topic", "create", "audit", "-p", "1")

	r = run(t, brokers, "", "topic", "create", "orders", "fresh", "-p", "2")
	if !errors.Is(r.err, ErrPartialFailure) {
		t.Fatalf("re-create err = %v, want ErrPartialFailure", r.err)
	}
	got := rows(r.stdout)
	if len(got) != 3 || got[1][0] != "orders" || got[1][1] != "TOPIC_ALREADY_EXISTS:" || !slices.Equal(got[2], []string{"fresh", "OK"}) {
		t.Fatalf("re-create output:\n%s", r.stdout)
	}

	r = mustRun(t, brokers, "", "topic", "list")
	want := [][]string{{"NAME", "PARTITIONS", "SIZE"}, {"audit", "1", "0"}, {"fresh", "2", "0"}, {"orders", "3", "0"}, {"payments", "3", "0"}}
	if !slices.EqualFunc(rows(r.stdout), want, slices.Equal) {
		t.Fatalf("list output:\n%s\nwant %v", r.stdout, want)
	}

	r = mustRun(t, brokers, "", "topic", "describe", "payments")
	for _, line := range []string{"NAME        payments", "PARTITIONS  3"} {
		if !strings.Contains(r.stdout, line) {
			t.Errorf("describe output lacks %q:\n%s", line, r.stdout)
		}
	}
	if cfg := findRow(rows(r.stdout), "cleanup.policy"); len(cfg) < 3 || cfg[1] != "compact" || cfg[2] != "DYNAMIC_TOPIC_CONFIG" {
		t.Errorf("describe config row = %v, want cleanup.policy compact DYNAMIC_TOPIC_CONFIG:\n%s", cfg, r.stdout)
	}

	r = mustRun(t, brokers, "", "topic", "delete", "orders", "fresh")
	if want := [][]string{{"TOPIC", "STATUS"}, {"orders", "OK"}, {"fresh", "OK"}}; !slices.EqualFunc(rows(r.stdout), want, slices.Equal) {
		t.Fatalf("delete output:\n%s", r.stdout)
	}
	r = run(t, brokers, "", "topic", "delete", "orders")
	if !errors.Is(r.err, ErrPartialFailure) || !strings.Contains(r.stdout, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("delete of a deleted topic: err = %v, output:\n%s", r.err, r.stdout)
	}
	r = mustRun(t, brokers, "", "topic", "list")
	want = [][]string{{"NAME", "PARTITIONS", "SIZE"}, {"audit", "1", "0"}, {"payments", "3", "0"}}
	if !slices.EqualFunc(rows(r.stdout), want, slices.Equal) {
		t.Fatalf("list after delete:\n%s", r.stdout)
	}
	if r := run(t, brokers, "", "topic", "describe", "orders"); !errors.Is(r.err, ErrUnknownTopic) {
		t.Fatalf("describe of a deleted topic: err = %v, want ErrUnknownTopic", r.err)
	}
}

// findRow returns the first row whose first cell is key.
func findRow(rs [][]string, key string) []string {
	for _, r := range rs {
		if len(r) > 0 && r[0] == key {
			return r
		}
	}
	return nil
}

func TestDescribeShowsOffsets(t *testing.T) {
	brokers := newCluster(t)
	mustRun(t, brokers, "", "topic", "create", "t", "-p", "2")
	mustRun(t, brokers, "a\nb\nc\n", "produce", "t", "-p", "1")

	r := mustRun(t, brokers, "", "topic", "describe", "t")
	rs := rows(r.stdout)
	header := findRow(rs, "PARTITION")
	if header == nil {
		t.Fatalf("no partition table:\n%s", r.stdout)
	}
	startCol, endCol := slices.Index(header, "START"), slices.Index(header, "END")
	for _, tt := range []struct {
		partition  string
		start, end string
	}{{"0", "0", "0"}, {"1", "0", "3"}} {
		row := findRow(rs, tt.partition)
		if len(row) != len(header) || row[startCol] != tt.start || row[endCol] != tt.end {
			t.Errorf("partition %s row = %v, want start %s end %s\n%s", tt.partition, row, tt.start, tt.end, r.stdout)
		}
	}
}
