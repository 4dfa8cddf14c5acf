package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// TestTrimmedOutAgentExits: an agent stopped (SIGSTOP, as a long GC pause
// or a hung VM would) past its lease, while another agent snapshots and
// trims the shared log past it, wakes below the trim point, where no
// replay can catch it up. It must not limp on (up, never ready again,
// failing every request): it exits saying why, and started again it
// restores the newest snapshot and serves. The history tests' agent
// pauses found it.
func TestTrimmedOutAgentExits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strand binary and starts PostgreSQL")
	}
	log := startHistLog(t, "postgres")
	c := startHistCluster(t, log, histClusterOpts{bin: strandBinary(t), agents: 2, seed: 1})
	const topic = "trimmed"
	createTopic(t, c.seeds()[0], topic, 1)
	checkRoundTrip(t, c.agents[0].proxy.Addr(), topic)

	a, b := c.agents[0], c.agents[1]
	b.pause()
	// Agent a's lease renewals move the log clock past b's lease; a's
	// snapshots trim below b's applied position until then, and up to
	// the snapshot once b no longer counts.
	deadline := time.Now().Add(opTimeout)
	for {
		var st agent.SnapshotTakenStatus
		postJSON(t, "http://"+a.http+agent.PathSnapshot, &st)
		if st.TrimHeldBy == nil && st.TrimPoint > 0 {
			t.Logf("log trimmed to %d with agent 2 paused", st.TrimPoint)
			break
		}
		if time.Now().After(deadline) {
			b.resume()
			t.Fatalf("trim still held by %+v after %v", st.TrimHeldBy, opTimeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.resume()
	select {
	case <-b.proc.Exited():
	case <-time.After(opTimeout):
		_, ready := httpGet(t, "http://"+b.http+"/readyz")
		t.Fatalf("agent 2 still running %v after waking below the trim point; /readyz: %s", opTimeout, strings.TrimSpace(ready))
	}
	logPath := filepath.Join(c.logDir, b.lastLogTag)
	if tail := testproc.Tail(logPath, 4000); !strings.Contains(tail, "trim point") {
		t.Errorf("agent 2 exited without saying it was trimmed out:\n%s", tail)
	}
	if err := b.start(); err != nil {
		t.Fatalf("restarting agent 2: %v", err)
	}
	checkRoundTrip(t, b.proxy.Addr(), topic)
}

// postJSON POSTs to url and decodes the JSON answer into v.
func postJSON(t *testing.T, url string, v any) {
	t.Helper()
	c := http.Client{Timeout: opTimeout}
	resp, err := c.Post(url, "application/json", nil)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
}
