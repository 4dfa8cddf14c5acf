package console_test

import (
	"context"
	"net"
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

// TestConsoleNewPagesRefuseRebinding: on a loopback-only agent without a
// token, where a browser on this machine needs no credential, the new
// pages and forms still refuse a request addressed to another name (a
// DNS-rebinding page), as every console page does.
func TestConsoleNewPagesRefuseRebinding(t *testing.T) {
	a := startAgent(t, "")
	createTopic(t, kadm.NewClient(kafkaClient(t, a)), 1, "local")
	_, port, _ := net.SplitHostPort(a.HTTPAddr())
	rebound := "rebind.example:" + port
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodGet, "/console/users", ""},
		{http.MethodGet, "/console/acls", ""},
		{http.MethodGet, "/console/quotas", ""},
		{http.MethodGet, "/console/topics/local/search?go=1", ""},
		{http.MethodPost, "/console/topics/local/produce", "value=rebound"},
		{http.MethodPost, "/console/users", "user=m&password=p-123456&mechanism=SCRAM-SHA-256"},
		{http.MethodPost, "/console/acls", "principal=User:m&operation=ALL&resource_type=TOPIC&resource_name=local&permission=ALLOW"},
		{http.MethodPost, "/console/quotas", "user=m&key=producer_byte_rate&value=1"},
	} {
		for _, host := range []string{a.HTTPAddr(), rebound} {
			req, err := http.NewRequest(tc.method, httpBase(a)+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			if tc.method == http.MethodPost {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Origin", "http://"+host)
			}
			resp, err := noRedirects.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			refused := resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized
			if host == rebound && !refused {
				t.Errorf("%s %s addressed to %s: status %d, want a refusal", tc.method, tc.path, host, resp.StatusCode)
			}
			if host != rebound && refused {
				t.Errorf("%s %s addressed to the agent's own address: status %d, want it served", tc.method, tc.path, resp.StatusCode)
			}
		}
	}
}
