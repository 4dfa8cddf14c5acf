package console_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/strandkafka/strand/internal/agent"
)

// The console works on an agent whose only listener needs SASL and whose
// authorizer denies what no ACL allows: its Kafka client is served in
// process as a super user, with no credentials configured. A client on
// the network without an ACL still sees nothing.
func TestConsoleWithSASLAndACLs(t *testing.T) {
	const password = "admin-pw-1234"
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startAgentWith(t, agent.Config{
		Listeners:         "SASL_PLAINTEXT://127.0.0.1:0",
		SASLBootstrapUser: "admin", SASLBootstrapPasswordFile: pwFile,
		Authorizer: "standard", SuperUsers: "User:admin",
	})

	resp, body := post(t, a, "/console/topics", url.Values{"name": {"secure"}, "partitions": {"2"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create through the console: status %d: %s", resp.StatusCode, body)
	}
	admin := kafkaClient(t, a, kgo.SASL(plain.Auth{User: "admin", Pass: password}.AsMechanism()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, admin, &kgo.Record{Topic: "secure", Partition: 0, Value: []byte("classified")})

	_, body = get(t, a, "/console/topics")
	if !strings.Contains(body, `href="/console/topics/secure"`) {
		t.Error("the topics page does not list the topic")
	}
	code, body := get(t, a, "/console/topics/secure/records?partition=0")
	if code != http.StatusOK || !strings.Contains(body, "classified") {
		t.Errorf("records page: status %d, record shown %v", code, strings.Contains(body, "classified"))
	}

	// Bob authenticates but has no ACL: the authorizer is on.
	bob := kafkaClient(t, a, kgo.SASL(plain.Auth{User: "bob", Pass: "x"}.AsMechanism()))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	tds, err := kadm.NewClient(bob).ListTopics(ctx, "secure")
	if err == nil && tds["secure"].Err == nil {
		t.Error("a client without an ACL (or a valid password) described the topic")
	}
}
