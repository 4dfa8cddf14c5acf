package kafka

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/authzlog"
)

// lockedBuffer is a log sink handlers write to from their goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	b.buf.Reset()
	return s
}

// TestACLDenialLog: a refused request is written to the authorization
// log with who, from where, what, on which resource and listener, and
// the rule that refused it, and counted; a listing that only filters
// (Metadata of every topic, ListGroups) writes nothing.
func TestACLDenialLog(t *testing.T) {
	var out lockedBuffer
	var mu sync.Mutex
	var counted []authzlog.Decision
	log := authzlog.New(authzlog.Logger(slog.New(slog.NewTextHandler(&out, nil))), nil, func(d authzlog.Decision) {
		mu.Lock()
		defer mu.Unlock()
		counted = append(counted, d)
	})
	a := newACLAgent(t, withDeps(func(d *Deps) { d.ACL.Denials = log }))
	a.as(t, a.admin, createTopicsReq("secret", 1, false))
	deny := topicACL("secret", kmsg.ACLOperationAll)
	deny.Permission, deny.PatternType, deny.ResourceName = kmsg.ACLPermissionTypeDeny, kmsg.ACLResourcePatternTypePrefixed, "sec"
	a.grant(t, deny)
	out.take()

	// Listings filter silently.
	if got := a.visibleTopics(t, a.alice); len(got) != 0 {
		t.Fatalf("alice sees %v", got)
	}
	a.as(t, a.alice, kmsg.NewPtrListGroupsRequest())
	if got := out.take(); got != "" {
		t.Errorf("a listing wrote to the authorization log: %s", got)
	}

	resp := a.as(t, a.alice, metadataReq(12, []string{"secret"})).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("Metadata of secret: %+v", resp.Topics)
	}
	line := out.take()
	for _, want := range []string{"level=INFO", "component=kafka.authorizer.logger", "principal=User:alice", "host=127.0.0.1",
		"operation=DESCRIBE", "resource_type=TOPIC", "resource=secret", "listener=PLAINTEXT", "request=Metadata",
		`rule="denied by ACL (TOPIC:PREFIXED:sec, User:alice from * DENY ALL)"`} {
		if !strings.Contains(line, want) {
			t.Errorf("log line lacks %s:\n%s", want, line)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(counted) != 1 || counted[0].Operation != kmsg.ACLOperationDescribe || counted[0].ResourceType != acl.ResourceType(kmsg.ACLResourceTypeTopic) {
		t.Errorf("counted %+v, want the one DESCRIBE on a topic", counted)
	}
}

// BenchmarkAuthzDenied is a refused check with the authorization log
// on: after the first line of a window, the count and the limiter's
// lookup are all a repeated denial costs.
func BenchmarkAuthzDenied(b *testing.B) {
	log := authzlog.New(authzlog.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))), nil, func(authzlog.Decision) {})
	a := newACLAgent(b, withDeps(func(d *Deps) { d.ACL.Denials = log }))
	r := &Request{Deps: a.Deps, Conn: &Conn{}}
	r.Conn.mu.principal = auth.User("alice")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if r.authz().topic(kmsg.ACLOperationWrite, "t") {
			b.Fatal("allowed")
		}
	}
}
