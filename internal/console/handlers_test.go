package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/console"
)

// Record bytes, header keys and values are shown as text, never as
// markup.
func TestConsoleEscapes(t *testing.T) {
	a := startAgent(t, "")
	cl := kafkaClient(t, a)
	createTopic(t, kadm.NewClient(cl), 1, "esc")
	produce(t, cl, &kgo.Record{Topic: "esc", Key: []byte(`<img src=x onerror=alert(1)>`),
		Value:   []byte(`<script>alert("v")</script>`),
		Headers: []kgo.RecordHeader{{Key: `<b>h</b>`, Value: []byte(`"><script>alert("h")</script>`)}}})
	for _, format := range []string{"text", "json"} {
		code, body := get(t, a, "/console/topics/esc/records?partition=0&format="+format)
		if code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", format, code, body)
		}
		for _, raw := range []string{`<script>alert(`, `<img src=x`, `<b>h</b>`} {
			if strings.Contains(body, raw) {
				t.Errorf("%s: the page holds %q unescaped", format, raw)
			}
		}
		for _, escaped := range []string{`&lt;script&gt;alert(&#34;v&#34;)&lt;/script&gt;`, `&lt;img src=x onerror=alert(1)&gt;`, `&lt;b&gt;h&lt;/b&gt;`} {
			if !strings.Contains(body, escaped) {
				t.Errorf("%s: the page lacks %q", format, escaped)
			}
		}
	}
}

// With an admin token set, a form without it is refused and changes
// nothing; a wrong token is refused at login; the right one, kept in the
// login cookie, lets the form through.
func TestConsoleFormsNeedToken(t *testing.T) {
	const token = "s3cret-token"
	a := startAgent(t, token)
	adm := kadm.NewClient(kafkaClient(t, a))
	create := url.Values{"name": {"guarded"}, "partitions": {"1"}}

	resp, _ := post(t, a, "/console/topics", create)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("create without a token: status %d, want 401", resp.StatusCode)
	}
	resp, _ = post(t, a, "/console/topics", create, "Cookie", "strand_console_token=wrong")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("create with a wrong token: status %d, want 401", resp.StatusCode)
	}
	if topicExists(t, adm, "guarded") {
		t.Fatal("a refused form created the topic")
	}

	resp, _ = post(t, a, "/console/login", url.Values{"token": {"wrong"}})
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("login with a wrong token: status %d, cookies %v; want 401 and none", resp.StatusCode, resp.Cookies())
	}
	resp, _ = post(t, a, "/console/login", url.Values{"token": {token}, "next": {"//evil.example/console/"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: status %d, want 303", resp.StatusCode)
	}
	if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/console/") {
		t.Errorf("login redirects to %q, want a console path", loc)
	}
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "strand_console_token" {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Value != token {
		t.Fatalf("login cookie %+v: want the token, HttpOnly, SameSite=Strict", ck)
	}
	resp, body := post(t, a, "/console/topics", create, "Cookie", ck.Name+"="+ck.Value)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create with the login cookie: status %d: %s", resp.StatusCode, body)
	}
	if !topicExists(t, adm, "guarded") {
		t.Error("the authorized form did not create the topic")
	}
}

// Without a token a loopback agent takes forms, but only from its own
// pages: another origin, or none, is refused.
func TestConsoleFormsNeedSameOrigin(t *testing.T) {
	a := startAgent(t, "")
	adm := kadm.NewClient(kafkaClient(t, a))
	for _, tc := range []struct {
		name    string
		headers []string
	}{
		{"other origin", []string{"Origin", "http://evil.example"}},
		{"other port", []string{"Origin", "http://127.0.0.1:1"}},
		{"no origin or referer", []string{"Origin", ""}},
		{"other referer", []string{"Origin", "", "Referer", "http://evil.example/console/topics"}},
	} {
		resp, _ := post(t, a, "/console/topics", url.Values{"name": {"csrf"}}, tc.headers...)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", tc.name, resp.StatusCode)
		}
	}
	if topicExists(t, adm, "csrf") {
		t.Fatal("a cross-origin form created the topic")
	}
	if code, _ := get(t, a, "/console/topics/csrf"); code != http.StatusNotFound {
		t.Errorf("topic page before creating: status %d, want 404", code)
	}
	resp, _ := post(t, a, "/console/topics", url.Values{"name": {"csrf"}}, "Origin", "", "Referer", "http://"+a.HTTPAddr()+"/console/topics")
	if resp.StatusCode != http.StatusSeeOther || !topicExists(t, adm, "csrf") {
		t.Errorf("same-origin referer: status %d, want 303 and the topic", resp.StatusCode)
	}
	// The page the form redirects to shows the new topic at once, not
	// after a metadata cache expires.
	if code, body := get(t, a, "/console/topics/csrf"); code != http.StatusOK {
		t.Errorf("topic page after creating: status %d: %s", code, body)
	}
}

// Lists and record pages are bounded: 50 topics a page, at most 100
// records a page, and a larger count is refused.
func TestConsoleBounds(t *testing.T) {
	a := startAgent(t, "")
	cl := kafkaClient(t, a)
	adm := kadm.NewClient(cl)
	names := make([]string, 60)
	for i := range names {
		names[i] = fmt.Sprintf("t%02d", i)
	}
	createTopic(t, adm, 1, names...)
	// Sixty topics and __consumer_offsets.
	_, body := get(t, a, "/console/topics")
	if n := strings.Count(body, `<a href="/console/topics/`); n != 50 {
		t.Errorf("first topics page lists %d topics, want 50", n)
	}
	if !strings.Contains(body, "page 1 of 2") {
		t.Error("first topics page has no pager")
	}
	_, body = get(t, a, "/console/topics?page=2")
	if n := strings.Count(body, `<a href="/console/topics/`); n != 11 {
		t.Errorf("second topics page lists %d topics, want 11", n)
	}

	createTopic(t, adm, 120, "wide")
	_, body = get(t, a, "/console/topics/wide?page=3")
	if n := strings.Count(body, `/console/topics/wide/records?partition=`); n != 20 {
		t.Errorf("third partitions page of 120 lists %d partitions, want 20", n)
	}
	if !strings.Contains(body, "120 partitions") || !strings.Contains(body, "page 3 of 3") {
		t.Error("the topic page does not count all 120 partitions or lacks its pager")
	}

	recs := make([]*kgo.Record, 150)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "t00", Value: []byte(fmt.Sprint("v", i))}
	}
	produce(t, cl, recs...)
	// The stored size is the agent's (DescribeLogDirs), not zero.
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	dirs, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{"t00": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var stored int64
	for _, ds := range dirs {
		if dp, ok := ds.LookupPartition("t00", 0); ok {
			stored += dp.Size
		}
	}
	if stored == 0 {
		t.Fatal("DescribeLogDirs says t00 stores nothing")
	}
	_, body = get(t, a, "/console/topics/t00")
	if want := `<td class="n">` + console.FormatBytes(stored) + `</td>`; !strings.Contains(body, want) {
		t.Errorf("topic page does not show the stored size %s", want)
	}
	if code, _ := get(t, a, "/console/topics/t00/records?n=1000"); code != http.StatusBadRequest {
		t.Errorf("n=1000: status %d, want 400", code)
	}
	_, body = get(t, a, "/console/topics/t00/records?n=100&offset=0")
	if n := strings.Count(body, `<article class="record">`); n != 100 {
		t.Errorf("n=100 shows %d records, want 100", n)
	}
	if !strings.Contains(body, "offset=100&n=100") {
		t.Error("n=100 page has no link to the next page at offset 100")
	}
}
