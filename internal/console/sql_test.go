package console_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
)

// sqlAgent starts an agent serving SQL, with token as its admin token.
func sqlAgent(t *testing.T, token string) *agent.Agent {
	t.Helper()
	return startAgentWith(t, agent.Config{KafkaListen: "127.0.0.1:0", SQLListen: "127.0.0.1:0", AdminToken: token})
}

// runSQL submits the SQL page's form and returns the page.
func runSQL(t *testing.T, a *agent.Agent, query string, headers ...string) (int, string) {
	t.Helper()
	resp, body := post(t, a, "/console/sql", url.Values{"q": {query}}, headers...)
	return resp.StatusCode, body
}

// TestConsoleSQL: the SQL page runs DDL and queries through the
// endpoint's catalog (the view it creates is maintained and read back),
// lists sources, views (with their state and lag) and sinks, cuts a
// result at 1000 rows with a notice, shows errors with their SQLSTATE,
// escapes values, and refuses SUBSCRIBE.
func TestConsoleSQL(t *testing.T) {
	a := sqlAgent(t, "")
	cl := kafkaClient(t, a)
	createTopic(t, kadm.NewClient(cl), 1, "clicks")
	produce(t, cl,
		&kgo.Record{Topic: "clicks", Value: []byte(`{"page": "home", "ms": 12}`)},
		&kgo.Record{Topic: "clicks", Value: []byte(`{"page": "<script>alert(1)</script>", "ms": 30}`)},
		&kgo.Record{Topic: "clicks", Value: []byte(`{"page": "home", "ms": 8}`)},
	)
	for _, ddl := range []string{
		"CREATE SOURCE clicks (page text, ms int8) WITH (topic = 'clicks', format = 'json')",
		"CREATE MATERIALIZED VIEW per_page AS SELECT page, count(*) AS n, sum(ms) AS ms FROM clicks GROUP BY page",
	} {
		code, body := runSQL(t, a, ddl)
		if code != http.StatusOK || strings.Contains(body, "ERROR") {
			t.Fatalf("%s: status %d:\n%s", ddl, code, body)
		}
		tag := strings.Fields(ddl)[0] + " " + strings.Fields(ddl)[1]
		if ddl[7] == 'M' {
			tag = "CREATE MATERIALIZED VIEW"
		}
		if !strings.Contains(body, tag) {
			t.Errorf("%s: the page does not show the tag %q", ddl, tag)
		}
	}
	// The view, read back through the page once it has caught up.
	deadline := time.Now().Add(opTimeout)
	for {
		_, body := runSQL(t, a, "SELECT page, n, ms FROM per_page ORDER BY page")
		if strings.Contains(body, "<td>home</td><td>2</td><td>20</td>") {
			if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") || strings.Contains(body, "<script>alert") {
				t.Errorf("a value's markup is not escaped:\n%s", body)
			}
			if !strings.Contains(body, "SELECT 2") {
				t.Errorf("no SELECT 2 tag:\n%s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the view never showed home's row:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, body := get(t, a, "/console/sql")
	if code != http.StatusOK {
		t.Fatalf("GET /console/sql: %d", code)
	}
	for _, want := range []string{
		`<td>clicks</td><td><a href="/console/topics/clicks">clicks</a></td><td>json</td>`,
		`<td>clicks</td><td>running</td>`,
		`<input type="hidden" name="q" value="EXPLAIN per_page">`,
		"No sinks.",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the SQL page does not show %q:\n%s", want, body)
		}
	}

	// A view's Explain button runs EXPLAIN of it.
	if _, body := runSQL(t, a, "EXPLAIN per_page"); !strings.Contains(body, "<th>QUERY PLAN</th>") || !strings.Contains(body, "Materialized View per_page") || !strings.Contains(body, "Source clicks (page, ms)") {
		t.Errorf("EXPLAIN per_page:\n%s", body)
	}

	// 32 x 32 = 1024 rows: the first 1000 are shown, with a notice.
	var vals []string
	for i := range 32 {
		vals = append(vals, fmt.Sprintf("(%d)", i))
	}
	v := "(VALUES " + strings.Join(vals, ", ") + ")"
	_, body = runSQL(t, a, "SELECT x.a * 32 + y.b AS n FROM "+v+" x(a), "+v+" y(b)")
	result, _, _ := strings.Cut(body, "</section>")
	if got := strings.Count(result, "<tr><td>"); got != 1000 {
		t.Errorf("%d rows shown, want 1000", got)
	}
	if !strings.Contains(body, "Only the first 1000 rows are shown") {
		t.Error("a cut result has no notice")
	}

	for query, want := range map[string]string{
		"SELECT 1/0":                     "ERROR: 22012: division by zero",
		"SELECT * FROM nowhere":          "ERROR: 42P01: relation &#34;nowhere&#34; does not exist",
		"SELEC 1":                        "ERROR: 42601:",
		"SUBSCRIBE per_page":             "ERROR: 0A000: SUBSCRIBE streams until cancelled",
		"SELECT 1 AS a; SELECT 2/0 AS b": "ERROR: 22012",
	} {
		code, body := runSQL(t, a, query)
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("%s: status %d; the page does not show %q:\n%s", query, code, want, body)
		}
	}
	// A failed statement keeps the results before it.
	if _, body := runSQL(t, a, "SELECT 'kept' AS a; SELECT 2/0 AS b"); !strings.Contains(body, "<td>kept</td>") {
		t.Errorf("the first statement's result is not shown:\n%s", body)
	}
	// The query stays in the form, escaped.
	if _, body := runSQL(t, a, "SELECT '</textarea><b>x</b>' AS t"); !strings.Contains(body, html.EscapeString("</textarea><b>x</b>")) {
		t.Errorf("the query is not kept escaped in the form:\n%s", body)
	}
}

// TestConsoleSQLNeedsTokenAndOrigin: running a query is a form: it
// needs the admin token and the console's own origin, as the others.
func TestConsoleSQLNeedsTokenAndOrigin(t *testing.T) {
	const token = "sql-token"
	a := sqlAgent(t, token)
	if code, _ := runSQL(t, a, "CREATE SOURCE x (v text) WITH (topic = 'x', format = 'text')"); code != http.StatusUnauthorized {
		t.Errorf("without the token: status %d, want 401", code)
	}
	if code, _ := get(t, a, "/console/sql"); code != http.StatusUnauthorized {
		t.Errorf("the page without the token: status %d, want 401", code)
	}
	ck := "strand_console_token=" + token
	if code, _ := runSQL(t, a, "SELECT 1", "Cookie", ck, "Origin", "http://evil.example"); code != http.StatusForbidden {
		t.Errorf("another origin: status %d, want 403", code)
	}
	code, body := runSQL(t, a, "SELECT 41 + 1 AS answer", "Cookie", ck)
	if code != http.StatusOK || !strings.Contains(body, "<td>42</td>") {
		t.Errorf("with the token: status %d:\n%s", code, body)
	}
}

// TestConsoleSQLOff: without --sql-listen the page says SQL is off.
func TestConsoleSQLOff(t *testing.T) {
	a := startAgent(t, "")
	code, body := get(t, a, "/console/sql")
	if code != http.StatusOK || !strings.Contains(body, "The SQL endpoint is off") {
		t.Errorf("status %d:\n%s", code, body)
	}
	if code, body := runSQL(t, a, "SELECT 1"); code != http.StatusOK || !strings.Contains(body, "The SQL endpoint is off") {
		t.Errorf("form: status %d:\n%s", code, body)
	}
}

// TestConsoleSQLInChromium: a user types a query into the SQL page and
// reads its rows; an error shows its SQLSTATE; values' markup does not
// run.
func TestConsoleSQLInChromium(t *testing.T) {
	ctx := browser(t)
	a := sqlAgent(t, "")
	base := httpBase(a) + "/console/"
	wantText(t, "sql", visibleText(t, ctx, base+"sql"), "Sources", "Materialized views", "Sinks", "No sources.")
	submit(t, ctx, "run a query",
		chromedp.SetValue(chromedp.CSS(`textarea[name=q]`), `SELECT n, '<img src=x onerror="window.pwned=1">' AS markup FROM (VALUES (1), (2), (3)) v(n) WHERE n > 1 ORDER BY n DESC`),
		chromedp.Click(chromedp.CSS(`form.sql button`)),
	)
	result := read(t, ctx, "result", chromedp.Text(chromedp.CSS(`#result`)))
	wantText(t, "result", result, "n", "markup", "3", "2", `<img src=x onerror="window.pwned=1">`, "SELECT 2")
	if strings.Contains(result, "1\t") {
		t.Errorf("the filtered row is shown:\n%s", result)
	}
	if got := read(t, ctx, "pwned", chromedp.Evaluate[string](`typeof window.pwned`)); got != "undefined" {
		t.Errorf("a value's markup ran: window.pwned is %s", got)
	}
	// The query stays in the form for the next run.
	if q := read(t, ctx, "query", chromedp.Value(chromedp.CSS(`textarea[name=q]`))); !strings.HasPrefix(q, "SELECT n,") {
		t.Errorf("the form holds %q after the run", q)
	}
	submit(t, ctx, "run a failing query",
		chromedp.SetValue(chromedp.CSS(`textarea[name=q]`), "SELECT 1/0"),
		chromedp.Click(chromedp.CSS(`form.sql button`)),
	)
	wantText(t, "error", read(t, ctx, "error", chromedp.Text(chromedp.CSS(`#sql-error`))), "ERROR: 22012: division by zero")

	// A view made through the form, then its Explain button.
	createTopic(t, kadm.NewClient(kafkaClient(t, a)), 1, "Events")
	for _, ddl := range []string{
		`CREATE SOURCE "Events" (kind text) WITH (topic = 'Events', format = 'json')`,
		`CREATE MATERIALIZED VIEW "By Kind" AS SELECT kind, count(*) AS n FROM "Events" GROUP BY kind`,
	} {
		submit(t, ctx, ddl,
			chromedp.SetValue(chromedp.CSS(`textarea[name=q]`), ddl),
			chromedp.Click(chromedp.CSS(`form.sql button`)),
		)
		wantText(t, ddl, read(t, ctx, "tag", chromedp.Text(chromedp.CSS(`#result`))), "CREATE")
	}
	run(t, ctx, "open the SQL page", chromedp.Navigate(base+"sql"), chromedp.WaitReady(chromedp.CSS("table.views")))
	submit(t, ctx, "explain the view", chromedp.Click(chromedp.CSS(`table.views form.inline button`)))
	wantText(t, "explain", read(t, ctx, "plan", chromedp.Text(chromedp.CSS(`#result`))), "QUERY PLAN", `Materialized View By Kind`, "Group Aggregate", "Source Events (kind)")
}
