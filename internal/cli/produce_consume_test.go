package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestProduceConsumeRoundTrip(t *testing.T) {
	brokers := newCluster(t)
	mustRun(t, brokers, "", "topic", "create", "t", "-p", "1")

	r := mustRun(t, brokers, "k1:v1\nk2:v:2\nnokey\n\n:emptykey\n",
		"produce", "t", "-k", ":", "-H", "src=test", "-H", "eq=a=b")
	if !strings.Contains(r.stderr, "produced 5 records to t") {
		t.Fatalf("produce summary = %q", r.stderr)
	}

	const format = `%t/%p/%o %k=%v [%h{%k=%v,}]\n`
	want := "t/0/0 k1=v1 [src=test,eq=a=b,]\n" +
		"t/0/1 k2=v:2 [src=test,eq=a=b,]\n" +
		"t/0/2 =nokey [src=test,eq=a=b,]\n" +
		"t/0/3 = [src=test,eq=a=b,]\n" +
		"t/0/4 =emptykey [src=test,eq=a=b,]\n"
	t.Run("exit at end", func(t *testing.T) {
		r := mustRun(t, brokers, "", "consume", "t", "--from-beginning", "-e", "-f", format)
		if r.stdout != want {
			t.Fatalf("consume output:\n%s\nwant:\n%s", r.stdout, want)
		}
	})
	t.Run("count", func(t *testing.T) {
		r := mustRun(t, brokers, "", "consume", "t", "--from-beginning", "-n", "2", "-f", `%o:%v\n`)
		if r.stdout != "0:v1\n1:v:2\n" {
			t.Fatalf("consume -n 2 output:\n%q", r.stdout)
		}
	})
	t.Run("default format", func(t *testing.T) {
		r := mustRun(t, brokers, "", "consume", "t", "--offset", "start", "-e")
		if r.stdout != "v1\nv:2\nnokey\n\nemptykey\n" {
			t.Fatalf("consume output:\n%q", r.stdout)
		}
	})
	t.Run("json", func(t *testing.T) {
		r := mustRun(t, brokers, "", "consume", "t", "--from-beginning", "-e", "-f", "json")
		var got []JSONRecord
		sc := bufio.NewScanner(strings.NewReader(r.stdout))
		for sc.Scan() {
			var jr JSONRecord
			if err := json.Unmarshal(sc.Bytes(), &jr); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			got = append(got, jr)
		}
		if len(got) != 5 {
			t.Fatalf("got %d JSON records, want 5:\n%s", len(got), r.stdout)
		}
		hdrs := []JSONHeader{{"src", "test"}, {"eq", "a=b"}}
		for i, tt := range []struct {
			key   *string
			value string
		}{{ptr("k1"), "v1"}, {ptr("k2"), "v:2"}, {nil, "nokey"}, {nil, ""}, {ptr(""), "emptykey"}} {
			jr := got[i]
			if jr.Topic != "t" || jr.Partition != 0 || jr.Offset != int64(i) || jr.Timestamp <= 0 {
				t.Errorf("record %d position = %+v", i, jr)
			}
			if !equalPtr(jr.Key, tt.key) || jr.Value == nil || *jr.Value != tt.value {
				t.Errorf("record %d key/value = %v/%v, want %v/%q", i, show(jr.Key), show(jr.Value), show(tt.key), tt.value)
			}
			if !slices.Equal(jr.Headers, hdrs) {
				t.Errorf("record %d headers = %v, want %v", i, jr.Headers, hdrs)
			}
		}
	})
}

func ptr(s string) *string { return &s }

func equalPtr(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(p *string) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprintf("%q", *p)
}

func TestConsumeOffsets(t *testing.T) {
	brokers := newCluster(t)
	mustRun(t, brokers, "", "topic", "create", "t", "-p", "2")
	mustRun(t, brokers, "r0\nr1\nr2\nr3\nr4\n", "produce", "t", "-p", "1")

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"start", []string{"-p", "1", "--offset", "start"}, "r0\nr1\nr2\nr3\nr4\n"},
		{"all partitions", []string{"--from-beginning"}, "r0\nr1\nr2\nr3\nr4\n"},
		{"end", []string{"-p", "1", "--offset", "end"}, ""},
		{"default is start, as rpk's", []string{"-p", "1"}, "r0\nr1\nr2\nr3\nr4\n"},
		{"exact", []string{"-p", "1", "--offset", "2"}, "r2\nr3\nr4\n"},
		{"after start", []string{"-p", "1", "--offset", "+1"}, "r1\nr2\nr3\nr4\n"},
		{"before end", []string{"-p", "1", "--offset", "-2"}, "r3\nr4\n"},
		{"past end clamps", []string{"-p", "1", "--offset", "99"}, ""},
		{"before start clamps", []string{"-p", "1", "--offset", "-99"}, "r0\nr1\nr2\nr3\nr4\n"},
		{"empty partition", []string{"-p", "0", "--from-beginning"}, ""},
		{"both partitions", []string{"-p", "0,1", "--offset", "-1"}, "r4\n"},
		{"count within exit at end", []string{"--from-beginning", "-n", "2"}, "r0\nr1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRun(t, brokers, "", append([]string{"consume", "t", "-e"}, tt.args...)...)
			if r.stdout != tt.want {
				t.Fatalf("output %q, want %q", r.stdout, tt.want)
			}
		})
	}
	t.Run("missing partition", func(t *testing.T) {
		if r := run(t, brokers, "", "consume", "t", "-e", "-p", "7"); !errors.Is(r.err, ErrUsage) {
			t.Fatalf("err = %v, want ErrUsage", r.err)
		}
	})
	t.Run("unknown topic", func(t *testing.T) {
		if r := run(t, brokers, "", "consume", "nope", "-e"); !errors.Is(r.err, ErrUnknownTopic) {
			t.Fatalf("err = %v, want ErrUnknownTopic", r.err)
		}
	})
}

// TestConsumeExitAtEndStopsAtListedEnd checks that -e stops at the end
// offsets listed when it started, even when the partition has grown since:
// the cluster answers the end-offset listing with an older high watermark.
func TestConsumeExitAtEndStopsAtListedEnd(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := strings.Join(c.ListenAddrs(), ",")
	mustRun(t, brokers, "", "topic", "create", "t", "-p", "1")
	mustRun(t, brokers, "a\nb\nc\n", "produce", "t")

	const staleEnd = 2
	c.ControlKey(int16(kmsg.ListOffsets), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.ListOffsetsRequest)
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				if rp.Timestamp != -1 {
					return nil, nil, false // only end offsets are faked
				}
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition, sp.Offset, sp.Timestamp, sp.LeaderEpoch = rp.Partition, staleEnd, -1, 0
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	for _, args := range [][]string{
		{"--from-beginning"},
		{"-g", "g", "--from-beginning"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := mustRun(t, brokers, "", append([]string{"consume", "t", "-e"}, args...)...)
			if r.stdout != "a\nb\n" {
				t.Fatalf("consumed %q, want the records before the listed end", r.stdout)
			}
		})
	}
}

func TestGroupConsumeCommits(t *testing.T) {
	brokers := newCluster(t)
	adm := adminClient(t, brokers)
	mustRun(t, brokers, "", "topic", "create", "t", "-p", "3")
	mustRun(t, brokers, "k0 v0\nk1 v1\nk2 v2\nk3 v3\nk4 v4\nk5 v5\n", "produce", "t", "-k", " ")

	committed := func(t *testing.T, group string) int64 {
		t.Helper()
		offs, err := adm.FetchOffsets(t.Context(), group)
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Err != nil {
				t.Fatalf("%s/%d: %v", o.Topic, o.Partition, o.Err)
			}
			sum += o.At
		})
		return sum
	}
	r := mustRun(t, brokers, "", "consume", "t", "-g", "g1", "--from-beginning", "-e")
	if got, want := sortedLines(r.stdout), []string{"v0", "v1", "v2", "v3", "v4", "v5"}; !slices.Equal(got, want) {
		t.Fatalf("first group consume = %v, want %v", got, want)
	}
	if got := committed(t, "g1"); got != 6 {
		t.Fatalf("committed offsets sum to %d, want 6", got)
	}

	r = mustRun(t, brokers, "", "consume", "t", "-g", "g1", "--from-beginning", "-e")
	if r.stdout != "" {
		t.Fatalf("second group consume printed %q, want nothing: offsets were committed", r.stdout)
	}

	mustRun(t, brokers, "late\n", "produce", "t")
	r = mustRun(t, brokers, "", "consume", "t", "-g", "g1", "-e")
	if r.stdout != "late\n" {
		t.Fatalf("third group consume = %q, want the one new record", r.stdout)
	}
	if got := committed(t, "g1"); got != 7 {
		t.Fatalf("committed offsets sum to %d, want 7", got)
	}

	t.Run("count commits only printed records", func(t *testing.T) {
		r := mustRun(t, brokers, "", "consume", "t", "-g", "g2", "--from-beginning", "-n", "2")
		if n := len(sortedLines(r.stdout)); n != 2 {
			t.Fatalf("printed %d records, want 2:\n%s", n, r.stdout)
		}
		if got := committed(t, "g2"); got != 2 {
			t.Fatalf("committed offsets sum to %d, want 2", got)
		}
	})
	t.Run("new group at end", func(t *testing.T) {
		r := mustRun(t, brokers, "", "consume", "t", "-g", "g3", "-e", "-o", "end")
		if r.stdout != "" {
			t.Fatalf("new group with -o end printed %q", r.stdout)
		}
	})
	t.Run("new group from the start by default, as rpk's", func(t *testing.T) {
		r := mustRun(t, brokers, "", "consume", "t", "-g", "g4", "-e")
		if n := len(sortedLines(r.stdout)); n != 7 {
			t.Fatalf("new group without -o printed %d records, want all 7:\n%s", n, r.stdout)
		}
	})
}

func TestProduceOptions(t *testing.T) {
	brokers := newCluster(t)
	mustRun(t, brokers, "", "topic", "create", "t", "-p", "1")
	var want strings.Builder
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		for _, acks := range []string{"all", "1", "0"} {
			t.Run(codec+"/acks="+acks, func(t *testing.T) {
				line := codec + "-" + acks
				r := mustRun(t, brokers, line+"\n", "produce", "t", "--compression", codec, "--acks", acks)
				if !strings.Contains(r.stderr, "produced 1 records") {
					t.Fatalf("summary %q", r.stderr)
				}
				want.WriteString(line + "\n")
			})
		}
	}
	// acks=0 has no response, so delivery is only checked here. Each
	// produce ran on its own connection and an acks=0 request may still
	// be in flight when the next one is answered, so neither the order
	// nor "everything is there by the time -e reads the end offsets" is
	// promised: wait for the count and compare as sets.
	wantLines := sortedLines(want.String())
	r := mustRun(t, brokers, "", "consume", "t", "--from-beginning", "-n", strconv.Itoa(len(wantLines)))
	if got := sortedLines(r.stdout); !slices.Equal(got, wantLines) {
		t.Fatalf("consumed:\n%s\nwant (any order):\n%s", r.stdout, want.String())
	}
}

func TestProduceFailures(t *testing.T) {
	brokers := newCluster(t)
	mustRun(t, brokers, "", "topic", "create", "t", "-p", "1")

	t.Run("line too long", func(t *testing.T) {
		r := run(t, brokers, "abcd\nabcde\n", "produce", "t", "--max-line-bytes", "4")
		if !errors.Is(r.err, bufio.ErrTooLong) {
			t.Fatalf("err = %v, want bufio.ErrTooLong", r.err)
		}
		if !strings.Contains(r.stderr, "produced 1 records") {
			t.Fatalf("the line before the long one was not produced: %q", r.stderr)
		}
	})
	t.Run("unknown topic", func(t *testing.T) {
		// Said at once, not after --timeout of retries (TestProduceMissingTopic).
		r := run(t, brokers, "x\ny\n", "produce", "nope", "--timeout", "3s")
		if !errors.Is(r.err, ErrUnknownTopic) || r.stderr != "" {
			t.Fatalf("err = %v, stderr %q: want ErrUnknownTopic and nothing else", r.err, r.stderr)
		}
	})
	t.Run("partition out of range", func(t *testing.T) {
		r := run(t, brokers, "x\n", "produce", "t", "-p", "5", "--timeout", "3s")
		if !errors.Is(r.err, ErrPartialFailure) {
			t.Fatalf("err = %v, want ErrPartialFailure", r.err)
		}
	})
}

// blockingStdin yields its text, then signals and blocks, like a terminal
// that stops typing.
type blockingStdin struct {
	text    io.Reader
	blocked chan struct{}
	release chan struct{}
}

func (b *blockingStdin) Read(p []byte) (int, error) {
	n, err := b.text.Read(p)
	if err == io.EOF {
		close(b.blocked)
		<-b.release
		return 0, io.EOF
	}
	return n, err
}

// TestProduceInterrupted checks that SIGINT (ctx cancellation) while stdin
// blocks still delivers the lines already read, and reports the interrupt.
func TestProduceInterrupted(t *testing.T) {
	brokers := newCluster(t)
	mustRun(t, brokers, "", "topic", "create", "t", "-p", "1")

	in := &blockingStdin{text: strings.NewReader("one\ntwo\n"), blocked: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(in.release) })
	root := &cobra.Command{Use: "strand", SilenceUsage: true, SilenceErrors: true}
	AddCommands(root)
	var errOut strings.Builder
	root.SetIn(in)
	root.SetOut(io.Discard)
	root.SetErr(&errOut)
	root.SetArgs([]string{"produce", "t", "--brokers", brokers})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-in.blocked
		cancel()
	}()
	if err := root.ExecuteContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if !strings.Contains(errOut.String(), "produced 2 records") {
		t.Fatalf("summary %q", errOut.String())
	}
	if r := mustRun(t, brokers, "", "consume", "t", "--from-beginning", "-e"); r.stdout != "one\ntwo\n" {
		t.Fatalf("consumed %q", r.stdout)
	}
}

// sortedLines splits output into lines and sorts them, for comparisons
// where the order is not promised.
func sortedLines(s string) []string {
	ls := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if s == "" {
		ls = nil
	}
	slices.Sort(ls)
	return ls
}
