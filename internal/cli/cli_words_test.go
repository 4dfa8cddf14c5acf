package cli

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestErrorsInCLIWords: refusals read as the CLI's own words, not as
// Kafka's generic description of a code or the client library's
// internals: a partition count below 1 is a usage error that says what
// is wanted; a Kafka error with the agent's message shows the message
// instead of the code's description; a fetch error of the client as a
// whole does not print the fake "topic/-1" the library files it under;
// an empty topic name is a usage error.
func TestErrorsInCLIWords(t *testing.T) {
	a := startAgent(t)
	brokers := a.KafkaAddr()
	for _, p := range []string{"0", "-5"} {
		r := run(t, brokers, "", "topic", "create", "x", "-p", p)
		if !errors.Is(r.err, ErrUsage) || !strings.Contains(r.err.Error(), "a topic needs at least 1 partition") ||
			strings.Contains(r.err.Error()+r.stdout, "Number of partitions is below 1") {
			t.Errorf("topic create -p %s: err %v, stdout %q", p, r.err, r.stdout)
		}
	}
	r := run(t, brokers, "", "consume", "", "-n", "1")
	if !errors.Is(r.err, ErrUsage) || !strings.Contains(r.err.Error(), "a topic name is empty") {
		t.Errorf("consume '': %v", r.err)
	}

	if got, want := errText(kerr.InvalidPartitions, "at most 1000 partitions"), "INVALID_PARTITIONS: at most 1000 partitions"; got != want {
		t.Errorf("errText = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("create: %w", kerr.InvalidPartitions)
	if got := errText(wrapped, "why"); got != "create: "+kerr.InvalidPartitions.Error()+" (why)" {
		t.Errorf("errText of a wrapped error = %q", got)
	}

	for _, tc := range []struct {
		topic     string
		partition int32
		group     string
		want      string
	}{
		{"orders", 3, "", "reading orders partition 3: "},
		{"", -1, "", "consuming: "},
		{"", -1, "readers", "consuming as group readers: "},
		{"", 0, "", "consuming: "},
	} {
		got := consumeError(tc.topic, tc.partition, tc.group, kgo.ErrClientClosed).Error()
		if !strings.HasPrefix(got, tc.want) || strings.Contains(got, "/") {
			t.Errorf("consumeError(%q, %d, %q) = %q, want it to start %q and name no topic/partition pair", tc.topic, tc.partition, tc.group, got, tc.want)
		}
	}
}
