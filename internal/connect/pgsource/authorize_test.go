package pgsource_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
)

// TestOwnerMayNotWrite: the source writes a table's topic only if its
// owner may WRITE and CREATE it (connect.Env.Authorize): otherwise the
// task fails with an error naming the topic, and writes nothing there.
func TestOwnerMayNotWrite(t *testing.T) {
	f := newFixture(t, "authz")
	f.exec("CREATE TABLE secret (id int PRIMARY KEY, v text)", "INSERT INTO secret VALUES (1, 'x')")
	topic := f.prefix + ".public.secret"
	f.authorize = func(op acl.Operation, tp string) error {
		if tp == topic && op == kmsg.ACLOperationWrite {
			return fmt.Errorf("User:bob may not WRITE topic %q", tp)
		}
		return nil
	}
	r := f.start()
	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		r.stop()
		t.Fatal("the task over a table whose topic its owner may not write still runs after 60s")
	}
	if r.err == nil || !strings.Contains(r.err.Error(), topic) {
		t.Fatalf("the task ended with %v, want an error naming %s", r.err, topic)
	}
	if n := f.endOffsets(topic, false); n > 0 {
		t.Fatalf("%d records written to %s", n, topic)
	}
}
