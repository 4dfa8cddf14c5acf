package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/strandkafka/strand/internal/agent"
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
	// The cluster's supervisor restarts an agent that exits, as a
	// process supervisor would, and notes why it exited.
	deadline = time.Now().Add(opTimeout)
	for {
		if exits := c.exits(); len(exits) > 0 {
			if !strings.Contains(exits[0], "agent 2 exited") || !strings.Contains(exits[0], "trim point") || strings.Contains(exits[0], "restart failed") {
				t.Fatalf("want agent 2 to exit for being trimmed out, got: %s", exits[0])
			}
			t.Log(exits[0])
			break
		}
		if time.Now().After(deadline) {
			_, ready := httpGet(t, "http://"+b.http+"/readyz")
			t.Fatalf("agent 2 still running %v after waking below the trim point; /readyz: %s", opTimeout, strings.TrimSpace(ready))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Restarted, it restored the newest snapshot: it serves.
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
