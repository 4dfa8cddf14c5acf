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

// TestConsoleWithSASLAndACLs: on an agent whose only listener needs
// SASL, whose authorizer denies what no ACL allows, and whose HTTP port
// listens on every interface (as the image, the chart and the systemd
// example have it), the console shows nothing to a caller without
// credentials: not a page, not a record. With the admin token it works,
// though it has no Kafka credentials of its own: its Kafka client is
// served in process as a super user. A Kafka client without an ACL
// still sees nothing.
func TestConsoleWithSASLAndACLs(t *testing.T) {
	const password, token = "admin-pw-1234", "console-token-5678"
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startAgentWith(t, agent.Config{
		Listeners:         "SASL_PLAINTEXT://127.0.0.1:0",
		SASLBootstrapUser: "admin", SASLBootstrapPasswordFile: pwFile,
		Authorizer: "standard", SuperUsers: "User:admin",
		HTTPListen: "0.0.0.0:0", AdminToken: token,
	})
	admin := kafkaClient(t, a, kgo.SASL(plain.Auth{User: "admin", Pass: password}.AsMechanism()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, kadm.NewClient(admin), 2, "secure")
	produce(t, admin, &kgo.Record{Topic: "secure", Partition: 0, Value: []byte("classified")})

	for _, path := range []string{"/console/", "/console/topics", "/console/topics/secure",
		"/console/topics/secure/records?partition=0", "/console/groups", "/console/groups/g", "/console/api/throughput"} {
		for _, cred := range [][]string{nil, {"Cookie", "strand_console_token=wrong"}, {"Authorization", "Bearer wrong"}} {
			code, body := get(t, a, path, cred...)
			if code != http.StatusUnauthorized {
				t.Errorf("GET %s %v: status %d, want 401", path, cred, code)
			}
			if strings.Contains(body, "classified") || strings.Contains(body, "/console/topics/secure") {
				t.Errorf("GET %s %v: the refusal shows the topic or its record", path, cred)
			}
		}
	}
	resp, _ := post(t, a, "/console/topics", url.Values{"name": {"sneaky"}, "partitions": {"1"}})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("create without credentials: status %d, want 401", resp.StatusCode)
	}

	cookie := []string{"Cookie", "strand_console_token=" + token}
	if code, body := get(t, a, "/console/topics", cookie...); code != http.StatusOK || !strings.Contains(body, `href="/console/topics/secure"`) {
		t.Errorf("topics page with the token: status %d, lists the topic %v", code, strings.Contains(body, `href="/console/topics/secure"`))
	}
	code, body := get(t, a, "/console/topics/secure/records?partition=0", cookie...)
	if code != http.StatusOK || !strings.Contains(body, "classified") {
		t.Errorf("records page with the token: status %d, record shown %v", code, strings.Contains(body, "classified"))
	}
	resp, body = post(t, a, "/console/topics", url.Values{"name": {"made-here"}, "partitions": {"1"}}, cookie...)
	if resp.StatusCode != http.StatusSeeOther || !topicExists(t, kadm.NewClient(admin), "made-here") {
		t.Errorf("create with the token: status %d: %s", resp.StatusCode, body)
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
