package jdbcsink

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
)

// TestOwnerMayNotRead: the sink reads only what its owner may READ
// (connect.Env.Authorize): a named topic it may not read fails the task
// with an error naming it; one matching topics.regex is left out while
// the others are written.
func TestOwnerMayNotRead(t *testing.T) {
	targets(t, func(t *testing.T, d *db) {
		open, closed := uniq("open"), uniq("closed")
		kafka := cluster(t, 1, open, closed)
		p := newProducer(t, kafka)
		for i := range 3 {
			p.send(open, "", fmt.Sprintf(`{"id": %d}`, i))
		}
		p.send(closed, "", `{"id": 100}`)
		deny := func(op acl.Operation, topic string) error {
			if topic == closed && op == kmsg.ACLOperationRead {
				return fmt.Errorf("User:bob may not READ topic %q", topic)
			}
			return nil
		}
		named := startEnv(t, uniq("named"), d.config(open+","+closed, "auto.create", "true"), kafka, NewMetrics(), deny)
		select {
		case err := <-named.done:
			named.done <- err
			if err == nil || !strings.Contains(err.Error(), closed) {
				t.Fatalf("the task over a topic its owner may not read ended with %v, want an error naming %s", err, closed)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the task over a topic its owner may not read still runs after 30s")
		}

		cfg := d.config("", "auto.create", "true")
		delete(cfg, "topics")
		cfg["topics.regex"] = "(" + open + "|" + closed + ")"
		name := uniq("regex")
		r := startEnv(t, name, cfg, kafka, NewMetrics(), deny)
		p.mu.Lock()
		delete(p.ends, tp{closed, 0})
		p.mu.Unlock()
		waitCaughtUp(t, d, name, p, r)
		if got := d.rows(t, open, d.text("id")); !slices.Equal(got, []string{"0", "1", "2"}) {
			t.Fatalf("rows of %s: %q", open, got)
		}
		offs, err := offsetsOf(d, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := offs[tp{closed, 0}]; ok {
			t.Fatalf("offsets of the topic its owner may not read were written: %v", offs)
		}
	})
}
