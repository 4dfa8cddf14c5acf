package agent_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// TestMetricsPromtool scrapes an agent that served produce, fetch and
// offset commit traffic and runs `promtool check metrics` (Debian's
// prometheus package) on the scrape: every complaint (naming, units,
// help text, counter suffixes) fails the test. A known-bad exposition
// is checked first, so a promtool that stopped complaining would fail
// the test too.
func TestMetricsPromtool(t *testing.T) {
	// Skips without promtool, except under CI=true, where scripts/test
	// installed it and its absence is a broken setup.
	promtool, err := testproc.FindBinary("promtool")
	if err != nil {
		testproc.SkipOrFail(t, fmt.Errorf("%w (Debian's prometheus package; scripts/test installs it)", err))
	}
	check := func(body string) string {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(body)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil && out.Len() == 0 {
			t.Fatalf("promtool: %v", err)
		}
		return out.String()
	}
	bad := "# HELP strand_bad_requests Requests.\n# TYPE strand_bad_requests counter\nstrand_bad_requests 1\n"
	if out := check(bad); !strings.Contains(out, "strand_bad_requests") {
		t.Fatalf("promtool passed a counter without _total: %q", out)
	}
	a := start(t, t.TempDir())
	if out := check(scrapeWithTraffic(t, a)); out != "" {
		t.Errorf("promtool check metrics:\n%s", out)
	}
}
