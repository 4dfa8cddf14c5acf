package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/console"
)

// TestConsoleProduceAndSearchInChromium: a record produced through the
// topic page's form (key, headers, partition) is found by the search
// page by key, by value substring, from an offset and from a time; a
// scan budget stops a search with a note saying so.
func TestConsoleProduceAndSearchInChromium(t *testing.T) {
	ctx := browser(t)
	a := startAgent(t, "")
	base := "http://" + a.HTTPAddr() + "/console/"
	cl := kafkaClient(t, a)
	adm := kadm.NewClient(cl)
	createTopic(t, adm, 3, "events")

	run(t, ctx, "open topic", chromedp.Navigate(base+"topics/events"))
	submit(t, ctx, "produce through the form",
		chromedp.SetValue(chromedp.CSS(`form.produce input[name=key]`), "user-7"),
		chromedp.SetValue(chromedp.CSS(`form.produce input[name=partition]`), "2"),
		chromedp.SetValue(chromedp.CSS(`form.produce textarea[name=value]`), "hello from the form"),
		chromedp.SetValue(chromedp.CSS(`form.produce textarea[name=headers]`), "trace-id=t-1\nsrc=form"),
		chromedp.Click(chromedp.CSS(`form.produce button`)),
	)
	wantText(t, "produced", read(t, ctx, "notice", chromedp.Text(chromedp.CSS(`p.msg`))), "record produced to partition 2 at offset 0")
	// What the form sent, read back with a plain consumer.
	reader := kafkaClient(t, a, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"events": {2: kgo.NewOffset().AtStart()}}))
	rctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	fs := reader.PollRecords(rctx, 1)
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Key) != "user-7" || string(recs[0].Value) != "hello from the form" ||
		len(recs[0].Headers) != 2 || recs[0].Headers[0].Key != "trace-id" || string(recs[0].Headers[0].Value) != "t-1" || recs[0].Headers[1].Key != "src" {
		t.Fatalf("the form produced %+v (%v)", recs, fs.Err0())
	}

	// 60 more records over the three partitions, keys user-0..user-9.
	var recs []*kgo.Record
	for i := range 60 {
		recs = append(recs, &kgo.Record{Topic: "events", Key: []byte("user-" + string(rune('0'+i%10))), Value: []byte("event " + string(rune('a'+i%26)))})
	}
	produce(t, cl, recs...)

	search := func(what string, fields map[string]string) string {
		t.Helper()
		run(t, ctx, "open search", chromedp.Navigate(base+"topics/events/search"))
		steps := []chromedp.Action[chromedp.Void]{}
		for name, v := range fields {
			steps = append(steps, chromedp.SetValue(chromedp.CSS(`form.search input[name=`+name+`]`), v))
		}
		steps = append(steps, chromedp.Click(chromedp.CSS(`form.search button`)))
		submit(t, ctx, what, steps...)
		return read(t, ctx, what+" results", chromedp.Text(chromedp.CSS("main")))
	}
	// user-7: the form's record and six of the sixty.
	text := search("by key", map[string]string{"key": "user-7"})
	wantText(t, "search by key", text, "7 matching records, 61 records scanned", "partition 2 offset 0", "trace-id", "hello from the form")
	if strings.Contains(text, "stopped after") {
		t.Errorf("a search that read everything says it stopped:\n%s", text)
	}
	text = search("by value", map[string]string{"value": "from the form"})
	wantText(t, "search by value", text, "1 matching records, 61 records scanned", "partition 2 offset 0")
	// From offset 1 of every partition: the form's record is skipped.
	text = search("from an offset", map[string]string{"key": "user-7", "offset": "1"})
	wantText(t, "search from an offset", text, "6 matching records, 58 records scanned")
	text = search("from a time", map[string]string{"timestamp": "2099-01-01T00:00"})
	wantText(t, "search from a time after every record", text, "0 matching records, 0 records scanned")
	text = search("with a small budget", map[string]string{"value": "event", "budget": "10"})
	wantText(t, "bounded search", text, "10 records scanned", "stopped after 10 records: the scan budget")
}

// TestConsoleCompactedCountInChromium: a compacted topic's record count
// is the records read, not the offset span: a committed transaction's
// marker occupies an offset but is no record.
func TestConsoleCompactedCountInChromium(t *testing.T) {
	ctx := browser(t)
	a := startAgent(t, "")
	base := "http://" + a.HTTPAddr() + "/console/"
	adm := kadm.NewClient(kafkaClient(t, a))
	actx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := adm.CreateTopic(actx, 1, -1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}, "latest"); err != nil {
		t.Fatal(err)
	}
	tx := kafkaClient(t, a, kgo.TransactionalID("console-count"))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if err := tx.ProduceSync(actx, &kgo.Record{Topic: "latest", Key: []byte(k), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.EndTransaction(actx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(actx, "latest")
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := ends.Lookup("latest", 0); e.Offset != 4 {
		t.Fatalf("high watermark %d, want 4 (three records and the commit marker)", e.Offset)
	}
	text := visibleText(t, ctx, base+"topics/latest")
	wantText(t, "compacted topic", text, "3 records (counted: compacted)")
	if got := read(t, ctx, "count", chromedp.Text(chromedp.CSS(`#record-count`))); got != "3 records (counted: compacted)" {
		t.Errorf("record count %q, want the 3 records, not the offset span 4", got)
	}
	wantText(t, "topics", visibleText(t, ctx, base+"topics"), "≤ 4")
	// A search reaches the end of a partition that ends in a marker at
	// once, not by its time bound.
	text = visibleText(t, ctx, base+"topics/latest/search?go=1&value=v")
	wantText(t, "search of a transactional topic", text, "3 matching records, 3 records scanned")
	if strings.Contains(text, "stopped after") {
		t.Errorf("the search stopped early:\n%s", text)
	}
}

// TestConsoleSecurityPagesInChromium: the users, ACLs and quotas pages
// list what the cluster holds, and their forms create and delete a SCRAM
// credential, an ACL and a quota, checked through Kafka's own API.
func TestConsoleSecurityPagesInChromium(t *testing.T) {
	ctx := browser(t)
	a := startAgent(t, "")
	base := "http://" + a.HTTPAddr() + "/console/"
	adm := kadm.NewClient(kafkaClient(t, a))
	actx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()

	// Users.
	run(t, ctx, "open users", chromedp.Navigate(base+"users"))
	submit(t, ctx, "create a user",
		chromedp.SetValue(chromedp.CSS(`form.user input[name=user]`), "alice"),
		chromedp.SetValue(chromedp.CSS(`form.user input[name=password]`), "alice-secret"),
		chromedp.SetValue(chromedp.CSS(`form.user select[name=mechanism]`), "SCRAM-SHA-512"),
		chromedp.SetValue(chromedp.CSS(`form.user input[name=iterations]`), "4096"),
		chromedp.Click(chromedp.CSS(`form.user button`)),
	)
	text := read(t, ctx, "users", chromedp.Text(chromedp.CSS("main")))
	wantText(t, "users", text, "user alice: SCRAM-SHA-512 password set", "alice", "SCRAM-SHA-512", "4096")
	if strings.Contains(text, "alice-secret") {
		t.Errorf("the users page shows the password:\n%s", text)
	}
	users, err := adm.DescribeUserSCRAMs(actx, "alice")
	if err != nil || len(users["alice"].CredInfos) != 1 || users["alice"].CredInfos[0].Iterations != 4096 {
		t.Fatalf("alice after the form: %+v, %v", users, err)
	}
	submit(t, ctx, "delete the user", chromedp.Click(chromedp.CSS(`table.users form button`)))
	wantText(t, "user deleted", read(t, ctx, "notice", chromedp.Text(chromedp.CSS(`p.msg`))), "SCRAM-SHA-512 credential deleted")
	if users, _ := adm.DescribeUserSCRAMs(actx); len(users["alice"].CredInfos) != 0 {
		t.Fatalf("alice after the delete: %+v", users)
	}

	// ACLs.
	run(t, ctx, "open acls", chromedp.Navigate(base+"acls"))
	submit(t, ctx, "create an acl",
		chromedp.SetValue(chromedp.CSS(`form.acl input[name=principal]`), "User:bob"),
		chromedp.SetValue(chromedp.CSS(`form.acl select[name=operation]`), "READ"),
		chromedp.SetValue(chromedp.CSS(`form.acl select[name=resource_type]`), "TOPIC"),
		chromedp.SetValue(chromedp.CSS(`form.acl input[name=resource_name]`), "orders-"),
		chromedp.SetValue(chromedp.CSS(`form.acl select[name=pattern_type]`), "PREFIXED"),
		chromedp.Click(chromedp.CSS(`form.acl button`)),
	)
	wantText(t, "acl created", read(t, ctx, "notice", chromedp.Text(chromedp.CSS(`p.msg`))), "ACL created: User:bob ALLOW READ on TOPIC orders-")
	row := read(t, ctx, "acl row", chromedp.Text(chromedp.CSS(`table.acls tbody tr`)))
	if f := strings.Fields(row); len(f) < 7 || f[0] != "User:bob" || f[1] != "*" || f[2] != "ALLOW" || f[3] != "READ" || f[4] != "TOPIC" || f[5] != "orders-" || f[6] != "PREFIXED" {
		t.Errorf("acl row %q", row)
	}
	// Kafka's own view: a prefixed READ binding for bob on orders-.
	describe := kmsg.NewPtrDescribeACLsRequest()
	describe.ResourceType = kmsg.ACLResourceTypeTopic
	describe.ResourcePatternType = kmsg.ACLResourcePatternTypePrefixed
	describe.Operation = kmsg.ACLOperationRead
	describe.PermissionType = kmsg.ACLPermissionTypeAllow
	described, err := describe.RequestWith(actx, kafkaClient(t, a))
	if err != nil || len(described.Resources) != 1 || described.Resources[0].ResourceName != "orders-" ||
		len(described.Resources[0].ACLs) != 1 || described.Resources[0].ACLs[0].Principal != "User:bob" {
		t.Fatalf("ACLs after the form: %+v, %v", described, err)
	}
	submit(t, ctx, "delete the acl", chromedp.Click(chromedp.CSS(`table.acls form button`)))
	wantText(t, "acl deleted", read(t, ctx, "page", chromedp.Text(chromedp.CSS(`main`))), "1 ACL deleted", "No ACLs.")

	// Quotas.
	run(t, ctx, "open quotas", chromedp.Navigate(base+"quotas"))
	submit(t, ctx, "set a quota",
		chromedp.SetValue(chromedp.CSS(`form.quota input[name=user]`), "carol"),
		chromedp.SetValue(chromedp.CSS(`form.quota select[name=key]`), "producer_byte_rate"),
		chromedp.SetValue(chromedp.CSS(`form.quota input[name=value]`), "1048576"),
		chromedp.Click(chromedp.CSS(`form.quota button`)),
	)
	wantText(t, "quota set", read(t, ctx, "page", chromedp.Text(chromedp.CSS(`main`))), "producer_byte_rate of {user=carol} set", "{user=carol}", "producer_byte_rate=1048576")
	quotas, err := adm.DescribeClientQuotas(actx, false, nil)
	if err != nil || len(quotas) != 1 || len(quotas[0].Values) != 1 || quotas[0].Values[0].Value != 1048576 {
		t.Fatalf("quotas after the form: %+v, %v", quotas, err)
	}
	run(t, ctx, "reopen quotas", chromedp.Navigate(base+"quotas"))
	submit(t, ctx, "remove the quota",
		chromedp.SetValue(chromedp.CSS(`form.quota input[name=user]`), "carol"),
		chromedp.SetValue(chromedp.CSS(`form.quota select[name=key]`), "producer_byte_rate"),
		chromedp.Click(chromedp.CSS(`form.quota input[name=remove]`)),
		chromedp.Click(chromedp.CSS(`form.quota button`)),
	)
	wantText(t, "quota removed", read(t, ctx, "page", chromedp.Text(chromedp.CSS(`main`))), "producer_byte_rate of {user=carol} removed", "No quotas.")
}

// TestConsoleThroughputHistoryInChromium: the cluster page's chart shows
// the agent's past samples the moment it opens, in and out each on a
// chart of its own with a y axis scaled to its own peak and a time axis.
func TestConsoleThroughputHistoryInChromium(t *testing.T) {
	ctx := browser(t)
	fake := clock.NewFake(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	var in, out atomic.Uint64
	c, err := console.New(console.Config{
		Cluster:               noCluster{},
		Kafka:                 []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")},
		Authorize:             allowAll,
		Throughput:            func() (uint64, uint64) { return in.Load(), out.Load() },
		Logger:                slog.New(slog.NewTextHandler(io.Discard, nil)),
		Clock:                 fake,
		ThroughputSampleEvery: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	// 30 samples after the first: in grows by 100*i B/s, out stays at
	// 2 KiB/s, so their peaks (2.9 KiB/s and 2.0 KiB/s) differ.
	for i := 1; i <= 30; i++ {
		in.Add(uint64(1000 * i))
		out.Add(20480)
		fake.Advance(10 * time.Second)
	}
	run(t, ctx, "open cluster", chromedp.Navigate(srv.URL+"/console/"),
		chromedp.WaitVisible(chromedp.CSS(`#throughput[data-points]`)))
	if n := read(t, ctx, "points", chromedp.AttributeValue(chromedp.CSS(`#throughput`), "data-points")).Value; n != "30" {
		t.Errorf("the chart drew %s rates at once, want the 30 of the history", n)
	}
	for _, tc := range []struct{ id, peak string }{{"chart-in", "2.9 KiB/s"}, {"chart-out", "2.0 KiB/s"}} {
		pts := read(t, ctx, tc.id+" points", chromedp.AttributeValue(chromedp.CSS(`#`+tc.id+` polyline`), "points")).Value
		if got := len(strings.Fields(pts)); got != 30 {
			t.Errorf("%s: %d points, want 30", tc.id, got)
		}
		ys := read(t, ctx, tc.id+" y axis", chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll("#`+tc.id+` text.y")).map(e => e.textContent)`))
		if len(ys) != 3 || ys[0] != "0 B/s" || ys[2] != tc.peak {
			t.Errorf("%s y axis %q, want 0 B/s up to %s", tc.id, ys, tc.peak)
		}
		xs := read(t, ctx, tc.id+" x axis", chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll("#`+tc.id+` text.x")).map(e => e.textContent)`))
		if len(xs) != 3 || xs[0] == xs[2] {
			t.Errorf("%s time axis %q, want three distinct times", tc.id, xs)
		}
	}
}

// BenchmarkConsoleSearch measures how fast a search scans: 100,000
// records of 100 bytes over 4 partitions, a value no record holds, so
// every record is read and none kept. It is what the default and maximum
// scan budgets (10,000 and 200,000 records in at most 15 s) rest on.
//
//	go test ./internal/console -run '^$' -bench ConsoleSearch -benchtime 5x
func BenchmarkConsoleSearch(b *testing.B) {
	a := startAgentB(b)
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.KafkaAddr()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 4, -1, nil, "scan"); err != nil {
		b.Fatal(err)
	}
	const n = 100_000
	value := []byte(strings.Repeat("v", 100))
	for i := 0; i < n; i += 1000 {
		var batch []*kgo.Record
		for range 1000 {
			batch = append(batch, &kgo.Record{Topic: "scan", Value: value})
		}
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	url := httpBase(a) + "/console/topics/scan/search?go=1&value=absent&budget=" + strconv.Itoa(n)
	b.ReportAllocs()
	b.SetBytes(n * 100)
	for b.Loop() {
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "0 matching records, 100000 records scanned") {
			b.Fatalf("search: %d\n%s", resp.StatusCode, body)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// startAgentB starts an agent for a benchmark, stopped at cleanup.
func startAgentB(b *testing.B) *agent.Agent {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a, err := agent.Start(ctx, agent.Config{KafkaListen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", DataDir: b.TempDir()},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatalf("Start: %v", err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		a.Stop(ctx)
	})
	return a
}
