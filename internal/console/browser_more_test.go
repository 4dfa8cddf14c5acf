package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
}
