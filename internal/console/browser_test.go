package console_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/schemareg"
)

var screenshotDir = flag.String("screenshots", "", "TestConsoleScreenshots writes docs/console.md's screenshots (PNG) into this directory")

// browser starts headless Chromium for the test. Without Chromium the
// test is skipped, except in CI (CI=true), where it fails: CI installs
// it (scripts/test).
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed; CI must have it (scripts/test installs it)")
		}
		t.Skip("chromium is not installed")
	}
	// Flags that work as root in a container: no sandbox, no GPU, no
	// /dev/shm (small in containers).
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.Flag("headless", "new"),
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1200, 800),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	// Start the browser now, so its start-up is not charged to a step.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// run runs browser steps with a step timeout.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// submit runs steps that end in submitting a form, and waits for the
// page the form leads to.
func submit(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, steps...)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if resp.Status != 200 {
		t.Fatalf("%s: status %d", what, resp.Status)
	}
}

// read runs a browser action that reads a value, with a step timeout.
func read[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// visibleText opens url and returns the page's visible text.
func visibleText(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	run(t, ctx, "open "+url, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("main")))
	return read(t, ctx, "text of "+url, chromedp.Text(chromedp.CSS("main")))
}

func wantText(t *testing.T, page, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s page does not show %q; it shows:\n%s", page, w, text)
		}
	}
}

// TestConsoleInChromium drives the console as a user would: every page
// renders, a topic created through the form appears, a produced record
// is shown as JSON and as hex, a group's lag shows once its consumer
// committed part way, and an offset reset moves the committed offsets.
func TestConsoleInChromium(t *testing.T) {
	ctx := browser(t)
	a := startAgent(t, "")
	base := "http://" + a.HTTPAddr() + "/console/"
	cl := kafkaClient(t, a)
	adm := kadm.NewClient(cl)

	text := visibleText(t, ctx, "http://"+a.HTTPAddr()+"/") // redirects to the console
	wantText(t, "cluster", text, "Agents", "live", "Shared log chain", "active", "Throughput")

	// Create a topic through the form.
	run(t, ctx, "open topics", chromedp.Navigate(base+"topics"))
	submit(t, ctx, "create topic",
		chromedp.SetValue(chromedp.CSS(`input[name=name]`), "orders"),
		chromedp.SetValue(chromedp.CSS(`input[name=partitions]`), "3"),
		chromedp.SetValue(chromedp.CSS(`textarea[name=configs]`), "retention.ms=3600000"),
		chromedp.Click(chromedp.CSS(`form[action="/console/topics"] button`)),
	)
	msg := read(t, ctx, "new topic page", chromedp.Text(chromedp.CSS(`main`)))
	wantText(t, "new topic", msg, "topic created", "Topic orders", "3 partitions", "retention.ms", "3600000")
	if !topicExists(t, adm, "orders") {
		t.Fatal("the form did not create the topic")
	}
	wantText(t, "topics", visibleText(t, ctx, base+"topics"), "orders", "retention.ms=3600000", "__consumer_offsets")

	// A record with a header and a JSON value, browsed by offset.
	manual := kafkaClient(t, a, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, manual, &kgo.Record{Topic: "orders", Partition: 1, Key: []byte("order-1"),
		Value:   []byte(`{"id":1,"item":"tea","qty":2}`),
		Headers: []kgo.RecordHeader{{Key: "trace-id", Value: []byte("abc123")}}})
	text = visibleText(t, ctx, base+"topics/orders/records?partition=1&offset=0&format=json")
	wantText(t, "records as JSON", text, "offset 0", "order-1", "trace-id", "abc123", `"item": "tea"`, `"qty": 2`)
	submit(t, ctx, "switch to hex",
		chromedp.SetValue(chromedp.CSS(`select[name=format]`), "hex"),
		chromedp.Click(chromedp.CSS(`main form button`)),
	)
	msg = read(t, ctx, "location", chromedp.Location())
	hexText := read(t, ctx, "hex page", chromedp.Text(chromedp.CSS(`main`)))
	if !strings.Contains(msg, "format=hex") {
		t.Errorf("the format form led to %s", msg)
	}
	// `{"id":1,` in hex, as hex.Dump spaces it.
	wantText(t, "records as hex", hexText, "7b 22 69 64 22 3a 31 2c", "61 62 63 31 32 33")

	// A group that committed 4 of 10 records of partition 0.
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte{byte('0' + i)}})
	}
	produce(t, manual, recs...)
	consumeAndCommit(t, a, "billing", "orders", 4)
	wantText(t, "groups", visibleText(t, ctx, base+"groups"), "billing", "Empty")
	text = visibleText(t, ctx, base+"groups/billing")
	wantText(t, "group", text, "Empty", "Reset offsets")
	// The rows go by partition: orders/0 first.
	row := read(t, ctx, "lag row", chromedp.Text(chromedp.CSS(`table.lag tbody tr`)))
	if f := strings.Fields(row); len(f) < 6 || f[0] != "orders" || f[1] != "0" || f[2] != "4" || f[5] != "6" {
		t.Errorf("lag row of orders/0 %q, want committed 4 and lag 6 (10 records)", row)
	}
	// And the one uncommitted record of orders/1.
	lag := read(t, ctx, "lag", chromedp.Text(chromedp.CSS(`#total-lag`)))
	if lag != "7" {
		t.Errorf("total lag %q, want 7", lag)
	}

	// Reset to the earliest offsets: the lag becomes the whole topic.
	submit(t, ctx, "reset offsets",
		chromedp.SetValue(chromedp.CSS(`form[action$="/reset"] select[name=to]`), "earliest"),
		chromedp.Click(chromedp.CSS(`form[action$="/reset"] button`)),
	)
	msg = read(t, ctx, "notice", chromedp.Text(chromedp.CSS(`p.msg`)))
	lag = read(t, ctx, "lag", chromedp.Text(chromedp.CSS(`#total-lag`)))
	wantText(t, "reset", msg, "reset to earliest")
	if lag != "11" {
		t.Errorf("total lag after the reset %q, want 11 (every record of orders)", lag)
	}
	octx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	offs, err := adm.FetchOffsets(octx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("orders", 0); o.At != 0 {
		t.Errorf("committed offset of orders/0 after the reset: %d, want 0", o.At)
	}
}

// With an admin token, every page is refused until the user logs in
// (the refusal links to the login page); the login page's cookie then
// carries the token, leads back to the page, and its forms go through.
func TestConsoleLoginInChromium(t *testing.T) {
	ctx := browser(t)
	const token = "browser-token-99"
	a := startAgent(t, token)
	createTopic(t, kadm.NewClient(kafkaClient(t, a)), 1, "hidden")
	base := "http://" + a.HTTPAddr() + "/console/"
	// 401: RunResponse wants 200, so wait for the refusal's link.
	run(t, ctx, "open topics without logging in", chromedp.Navigate(base+"topics"),
		chromedp.WaitVisible(chromedp.CSS(`main a[href^="/console/login?"]`)))
	refusal := read(t, ctx, "refusal", chromedp.Text(chromedp.CSS("main")))
	wantText(t, "refusal", refusal, "Log in needed", "bearer token")
	if strings.Contains(refusal, "hidden") {
		t.Errorf("the refusal shows the topic list:\n%s", refusal)
	}
	submit(t, ctx, "follow the login link", chromedp.Click(chromedp.CSS(`main a[href^="/console/login?"]`)))
	submit(t, ctx, "log in",
		chromedp.SetValue(chromedp.CSS(`input[name=token]`), token),
		chromedp.Click(chromedp.CSS(`form[action="/console/login"] button`)),
	)
	if loc := read(t, ctx, "location", chromedp.Location()); !strings.HasPrefix(loc, base+"topics?") {
		t.Errorf("the login led to %s, want back to the topics page", loc)
	}
	wantText(t, "topics logged in", read(t, ctx, "topics", chromedp.Text(chromedp.CSS("main"))), "hidden")
	submit(t, ctx, "create logged in",
		chromedp.SetValue(chromedp.CSS(`input[name=name]`), "guarded"),
		chromedp.Click(chromedp.CSS(`form[action="/console/topics"] button`)),
	)
	wantText(t, "created", read(t, ctx, "created", chromedp.Text(chromedp.CSS("main"))), "topic created", "Topic guarded")
}

// consumeAndCommit has group consume topic's partition 0 and commit
// offset n, then leave: the group is then empty with that commit.
func consumeAndCommit(t *testing.T, a *agent.Agent, group, topic string, n int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.KafkaAddr()), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for got := int64(0); got < n; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Partition == 0 {
				got++
			}
		})
	}
	var commitErr error
	cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: n}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
			for _, tp := range resp.Topics {
				for _, p := range tp.Partitions {
					commitErr = errors.Join(commitErr, kerr.ErrorForCode(p.ErrorCode))
				}
			}
		})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}
}

// TestConsoleScreenshots writes docs/console.md's screenshots of the console
// when -screenshots DIR is given:
//
//	go test ./internal/console -run TestConsoleScreenshots -screenshots $PWD/docs/console
//
// (go test runs in the package's directory: give an absolute path.)
func TestConsoleScreenshots(t *testing.T) {
	if *screenshotDir == "" {
		t.Skip("no -screenshots DIR")
	}
	ctx := browser(t)
	a := sqlAgent(t, "")
	base := "http://" + a.HTTPAddr() + "/console/"
	cl := kafkaClient(t, a)
	adm := kadm.NewClient(cl)
	createTopic(t, adm, 6, "orders", "payments")
	createTopic(t, adm, 3, "audit-log")
	var recs []*kgo.Record
	for i := range 300 {
		recs = append(recs, &kgo.Record{Topic: "orders", Key: []byte("order-" + string(rune('a'+i%26))),
			Value:   []byte(`{"id":` + strconv.Itoa(i) + `,"item":"tea","qty":2,"customer":{"name":"Ada","tier":"gold"}}`),
			Headers: []kgo.RecordHeader{{Key: "trace-id", Value: []byte("4bf92f3577b34da6")}, {Key: "content-type", Value: []byte("application/json")}}})
	}
	produce(t, cl, recs...)
	consumeAndCommit(t, a, "billing", "orders", 20)

	// Traffic while the cluster page draws its chart.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			var batch []*kgo.Record
			for j := range 20 + (i%7)*10 {
				batch = append(batch, &kgo.Record{Topic: "payments", Value: []byte(strings.Repeat("x", 512+j))})
			}
			cl.ProduceSync(ctx, batch...)
			cancel()
		}
	}()
	// And a consumer reading it, for the outgoing bytes.
	go func() {
		reader := kafkaClient(t, a, kgo.ConsumeTopics("payments"))
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			reader.PollFetches(ctx)
			cancel()
		}
	}()
	shoot := func(name, url string, wait time.Duration) {
		run(t, ctx, "open "+name,
			chromedp.EmulateViewport(1200, 760),
			chromedp.Navigate(url),
			chromedp.WaitReady(chromedp.CSS("main")),
			chromedp.Sleep(wait), // only for the picture: the chart's polls
		)
		png := read(t, ctx, "screenshot "+name, chromedp.CaptureScreenshot())
		if err := os.WriteFile(filepath.Join(*screenshotDir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(*screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	shoot("cluster", base, 30*time.Second)
	close(stop)
	<-done
	shoot("topic", base+"topics/orders", 0)
	shoot("records", base+"topics/orders/records?partition=0&offset=0&n=5&format=json", 0)
	shoot("group", base+"groups/billing", 0)

	// The SQL page: a source over orders, two views, a query's rows.
	for _, ddl := range []string{
		"CREATE SOURCE orders (id int8, item text, qty int4, customer jsonb) WITH (topic = 'orders', format = 'json')",
		"CREATE MATERIALIZED VIEW per_tier AS SELECT customer->>'tier' AS tier, count(*) AS orders, sum(qty) AS items FROM orders GROUP BY 1",
		"CREATE MATERIALIZED VIEW big_orders AS SELECT id, item, qty FROM orders WHERE qty > 1",
	} {
		if code, body := runSQL(t, a, ddl); code != 200 || strings.Contains(body, "ERROR") {
			t.Fatalf("%s: %d\n%s", ddl, code, body)
		}
	}
	deadline := time.Now().Add(opTimeout)
	for {
		if _, body := runSQL(t, a, "SELECT orders FROM per_tier"); strings.Contains(body, "<td>300</td>") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("per_tier did not catch up")
		}
		time.Sleep(50 * time.Millisecond)
	}
	run(t, ctx, "open sql", chromedp.EmulateViewport(1200, 760), chromedp.Navigate(base+"sql"), chromedp.WaitReady(chromedp.CSS("main")))
	submit(t, ctx, "run the query",
		chromedp.SetValue(chromedp.CSS(`textarea[name=q]`), "SELECT tier, orders, items FROM per_tier ORDER BY items DESC"),
		chromedp.Click(chromedp.CSS(`form.sql button`)),
	)
	png := read(t, ctx, "screenshot sql", chromedp.CaptureScreenshot())
	if err := os.WriteFile(filepath.Join(*screenshotDir, "sql.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleSchemasInChromium: a schema whose doc holds a script is
// shown as text and the script does not run; the subject page's diff
// form leads to the diff of the two versions chosen.
func TestConsoleSchemasInChromium(t *testing.T) {
	ctx := browser(t)
	reg := newRegistry(t)
	const pwn = `<script>window.pwned=1</script><img src=x onerror="window.pwned=2">`
	inJSON := strings.ReplaceAll(pwn, `"`, `\"`)
	v1 := strings.Replace(orderV1, `<script>alert('v1')</script>`, inJSON, 1)
	v2 := strings.Replace(orderV2, `<script>alert('v1')</script>`, inJSON, 1)
	register(t, reg, "orders-value", schemareg.RegisterRequest{Schema: v1})
	register(t, reg, "orders-value", schemareg.RegisterRequest{Schema: v2})
	base := schemaConsole(t, reg, allowAll) + "/console/"

	wantText(t, "schemas", visibleText(t, ctx, base+"schemas"), "orders-value", "AVRO", "BACKWARD")
	submit(t, ctx, "open the subject", chromedp.Click(chromedp.CSS(`main a[href="/console/schemas/orders-value"]`)))
	shown := read(t, ctx, "schema text", chromedp.Text(chromedp.CSS(`#schema`)))
	if !strings.Contains(shown, inJSON) {
		t.Errorf("the schema is not shown as text; it shows:\n%s", shown)
	}
	if got := read(t, ctx, "pwned", chromedp.Evaluate[string](`typeof window.pwned`)); got != "undefined" {
		t.Errorf("the schema's markup ran: window.pwned is %s", got)
	}
	submit(t, ctx, "diff",
		chromedp.SetValue(chromedp.CSS(`input[name=from]`), "1"),
		chromedp.SetValue(chromedp.CSS(`input[name=to]`), "2"),
		chromedp.Click(chromedp.CSS(`form[action$="/diff"] button`)),
	)
	wantText(t, "diff", read(t, ctx, "diff", chromedp.Text(chromedp.CSS("main"))), "version 1 → 2", "+3", "−3", `"name": "note"`, `"name": "old"`)
	added := read(t, ctx, "added lines", chromedp.Text(chromedp.CSS(`table.diff tr.add`)))
	if !strings.Contains(added, `"name": "note"`) {
		t.Errorf("the first added line is %q, want note's", added)
	}
	if got := read(t, ctx, "pwned", chromedp.Evaluate[string](`typeof window.pwned`)); got != "undefined" {
		t.Errorf("the diff page's markup ran: window.pwned is %s", got)
	}
}
