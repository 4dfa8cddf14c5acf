package console_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
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

// TestConsoleNewPagesKeepDefenses: the search, users, ACLs and quotas
// pages are refused without credentials like every page, and the
// produce, user, ACL and quota forms need the credentials and the
// console's own origin (a form posted from another site, or to a name
// that is not this agent's, changes nothing).
func TestConsoleNewPagesKeepDefenses(t *testing.T) {
	const token = "defense-token-4321"
	a := startAgent(t, token)
	admin := kafkaClient(t, a)
	adm := kadm.NewClient(admin)
	createTopic(t, adm, 1, "guarded")
	produce(t, admin, &kgo.Record{Topic: "guarded", Value: []byte("secret-value")})

	for _, path := range []string{"/console/topics/guarded/search?go=1&value=secret", "/console/users", "/console/acls", "/console/quotas"} {
		code, body := get(t, a, path)
		if code != http.StatusUnauthorized || strings.Contains(body, "secret-value") {
			t.Errorf("GET %s without the token: status %d (want 401), shows the record %v", path, code, strings.Contains(body, "secret-value"))
		}
	}
	cookie := []string{"Cookie", "strand_console_token=" + token}
	if code, body := get(t, a, "/console/topics/guarded/search?go=1&value=secret", cookie...); code != http.StatusOK || !strings.Contains(body, "secret-value") {
		t.Errorf("search with the token: status %d, found %v", code, strings.Contains(body, "secret-value"))
	}

	forms := []struct {
		path string
		form url.Values
	}{
		{"/console/topics/guarded/produce", url.Values{"value": {"forged"}, "partition": {"-1"}}},
		{"/console/users", url.Values{"user": {"mallory"}, "password": {"pw-123456"}, "mechanism": {"SCRAM-SHA-256"}}},
		{"/console/acls", url.Values{"principal": {"User:mallory"}, "operation": {"ALL"}, "resource_type": {"TOPIC"}, "resource_name": {"guarded"}, "permission": {"ALLOW"}}},
		{"/console/quotas", url.Values{"user": {"mallory"}, "key": {"producer_byte_rate"}, "value": {"1"}}},
	}
	for _, f := range forms {
		for _, tc := range []struct {
			name    string
			headers []string
			want    int
		}{
			{"no token", nil, http.StatusUnauthorized},
			{"another site", append(slices.Clone(cookie), "Origin", "http://evil.example"), http.StatusForbidden},
			{"no origin or referer", append(slices.Clone(cookie), "Origin", ""), http.StatusForbidden},
		} {
			resp, _ := post(t, a, f.path, f.form, tc.headers...)
			if resp.StatusCode != tc.want {
				t.Errorf("POST %s, %s: status %d, want %d", f.path, tc.name, resp.StatusCode, tc.want)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, "guarded")
	if e, _ := ends.Lookup("guarded", 0); err != nil || e.Offset != 1 {
		t.Errorf("guarded's end offset %d (%v): a refused form produced", e.Offset, err)
	}
	if users, _ := adm.DescribeUserSCRAMs(ctx); len(users["mallory"].CredInfos) > 0 {
		t.Error("a refused form created a user")
	}
	if quotas, _ := adm.DescribeClientQuotas(ctx, false, nil); len(quotas) > 0 {
		t.Errorf("a refused form set a quota: %+v", quotas)
	}
	// And the same forms go through with the token from the console's
	// own page.
	for _, f := range forms {
		if resp, body := post(t, a, f.path, f.form, cookie...); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("POST %s with the token: status %d: %s", f.path, resp.StatusCode, body)
		}
	}
	if users, _ := adm.DescribeUserSCRAMs(ctx); len(users["mallory"].CredInfos) != 1 {
		t.Errorf("the accepted user form created no user: %+v", users)
	}
}
