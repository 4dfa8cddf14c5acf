package source_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/sql/source"
	"github.com/strandkafka/strand/internal/sql/sqlerr"
	"github.com/strandkafka/strand/internal/sql/types"
)

const opTimeout = 60 * time.Second

// startAgent starts an in-process agent and returns its Kafka address.
func startAgent(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	a, err := agent.Start(ctx, agent.Config{DataDir: t.TempDir(), KafkaListen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0"},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("agent: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		_ = a.Stop(ctx)
	})
	return a.KafkaAddr()
}

func kclient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopics(t *testing.T, addr string, partitions int32, topics ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	res, err := kadm.NewClient(kclient(t, addr)).CreateTopics(ctx, partitions, 1, nil, topics...)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// produceTx produces rs in one transaction, committed or aborted.
func produceTx(t *testing.T, cl *kgo.Client, commit bool, rs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

func produce(t *testing.T, cl *kgo.Client, rs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func rec(p int32, key, value string) *kgo.Record {
	r := &kgo.Record{Partition: p, Value: []byte(value)}
	if key != "" {
		r.Key = []byte(key)
	}
	if value == "" {
		r.Value = nil
	}
	return r
}

// highWatermarks are where each partition's log ends, markers included.
func highWatermarks(t *testing.T, addr, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	ends, err := kadm.NewClient(kclient(t, addr)).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// readAll polls r until every partition's Next reaches ends, and
// returns the batches' parts per partition, concatenated.
func readAll(t *testing.T, r *source.Reader, ends map[int32]int64) map[int32]*source.PartitionBatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	out := map[int32]*source.PartitionBatch{}
	for {
		done := true
		for p, end := range ends {
			if pb := out[p]; end > 0 && (pb == nil || pb.Next.Offset < end) {
				done = false
			}
		}
		if done {
			return out
		}
		b, err := r.Poll(ctx)
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		for _, pb := range b.Partitions {
			acc := out[pb.Partition]
			if acc == nil {
				acc = &source.PartitionBatch{Partition: pb.Partition}
				out[pb.Partition] = acc
			}
			for _, l := range pb.Late {
				acc.Late = append(acc.Late, len(acc.Changes)+l)
			}
			acc.Changes = append(acc.Changes, pb.Changes...)
			acc.Bad += pb.Bad
			acc.Next, acc.Watermark = pb.Next, pb.Watermark
		}
	}
}

func kafkaOpts(addr string) []kgo.Opt { return []kgo.Opt{kgo.SeedBrokers(addr)} }

func newReader(t *testing.T, def *source.Def, addr string, m *source.Metrics, start map[int32]source.Position, dir string) *source.Reader {
	t.Helper()
	dec, err := source.NewDecoder(def, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	r, err := source.NewReader(ctx, source.ReaderConfig{Def: def, Decoder: dec, Kafka: kafkaOpts(addr), Metrics: m, Start: start, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func jsonDef(t *testing.T, topic, decl string, opts ...string) *source.Def {
	t.Helper()
	var o []meta.RelationOption
	for i := 0; i < len(opts); i += 2 {
		o = append(o, meta.RelationOption{Key: opts[i], Value: opts[i+1]})
	}
	slices.SortFunc(o, func(a, b meta.RelationOption) int { return strings.Compare(a.Key, b.Key) })
	d, err := source.DefOf(meta.Relation{ID: 1, Kind: meta.RelationSource, Name: "src_" + topic, Topic: topic, Format: "json", Columns: columnsOf(t, decl), Options: o})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// counter is a registered metric's value, by its labels.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestReaderAppendReadCommitted: an append source over a topic written
// plainly and in transactions, one aborted, with records that do not
// decode: the Reader emits +1 for every committed good record of each
// partition in offset order, none of the aborted ones, and sends each
// bad one to the dead-letter topic with why, counted by reason.
func TestReaderAppendReadCommitted(t *testing.T) {
	addr := startAgent(t)
	createTopics(t, addr, 2, "orders", "orders_dlq")
	plain := kclient(t, addr, kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	tx := kclient(t, addr, kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("writer"))

	// want are the ids the reader must emit per partition, in order:
	// what was produced outside transactions or committed.
	want := map[int32][]int64{}
	id := int64(0)
	order := func(p int32) *kgo.Record {
		id++
		return rec(p, "", fmt.Sprintf(`{"id": %d, "note": "n%d"}`, id, id))
	}
	keep := func(rs ...*kgo.Record) []*kgo.Record {
		for _, r := range rs {
			var v struct{ ID int64 }
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Fatal(err)
			}
			want[r.Partition] = append(want[r.Partition], v.ID)
		}
		return rs
	}
	produce(t, plain, keep(order(0), order(1), order(0))...)
	produceTx(t, tx, true, keep(order(0), order(1), order(1))...)
	produceTx(t, tx, false, order(0), order(1), order(0))
	produce(t, plain, rec(0, "", `{"id": "not a number"}`), rec(1, "", `{"id": 1`), rec(1, "", `[1]`))
	produceTx(t, tx, true, keep(order(0), order(1))...)
	produceTx(t, tx, false, order(1))

	reg := prometheus.NewRegistry()
	m := source.NewMetrics()
	for _, c := range m.Collectors() {
		reg.MustRegister(c)
	}
	def := jsonDef(t, "orders", "id int8, note text, _partition int4, _offset int8", "bad.records", "dead-letter", "deadletter.topic", "orders_dlq")
	r := newReader(t, def, addr, m, nil, "")
	got := readAll(t, r, highWatermarks(t, addr, "orders"))
	for p := range int32(2) {
		var ids []int64
		last := int64(-1)
		for _, c := range got[p].Changes {
			if c.Diff != 1 {
				t.Fatalf("partition %d: diff %d in an append source", p, c.Diff)
			}
			if c.Row[2] != p || c.Row[3].(int64) <= last {
				t.Fatalf("partition %d: row %v out of partition or offset order", p, c.Row)
			}
			last = c.Row[3].(int64)
			ids = append(ids, c.Row[0].(int64))
		}
		if !slices.Equal(ids, want[p]) {
			t.Errorf("partition %d: ids %v, want %v", p, ids, want[p])
		}
	}
	if bad := got[0].Bad + got[1].Bad; bad != 3 {
		t.Errorf("%d bad records, want 3", bad)
	}
	if n := counter(t, reg, "strand_sql_source_bad_records_total", map[string]string{"reason": "column"}); n != 1 {
		t.Errorf("bad records by column: %v, want 1", n)
	}
	if n := counter(t, reg, "strand_sql_source_bad_records_total", map[string]string{"reason": "payload"}); n != 2 {
		t.Errorf("bad records by payload: %v, want 2", n)
	}
	if n := counter(t, reg, "strand_sql_source_records_total", nil); int(n) != len(want[0])+len(want[1])+3 {
		t.Errorf("records read: %v, want %d", n, len(want[0])+len(want[1])+3)
	}

	// The dead letters: each bad record's bytes, where it was, and why.
	dl := kclient(t, addr, kgo.ConsumeTopics("orders_dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var letters []string
	for len(letters) < 3 {
		fs := dl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			letters = append(letters, fmt.Sprintf("%s p%s %s %s", r.Value, h[source.HeaderPartition], h[source.HeaderReason], h[source.HeaderSQLState]))
			if h[source.HeaderSource] != def.Name || h[source.HeaderTopic] != "orders" || h[source.HeaderMessage] == "" {
				t.Errorf("dead letter headers %v", h)
			}
		})
	}
	slices.Sort(letters)
	wantLetters := []string{`[1] p1 payload 22023`, `{"id": "not a number"} p0 column 22P02`, `{"id": 1 p1 payload 22P02`}
	if !slices.Equal(letters, wantLetters) {
		t.Errorf("dead letters:\n%s\nwant\n%s", strings.Join(letters, "\n"), strings.Join(wantLetters, "\n"))
	}
}

// upsertModel is the oracle of an upsert source: a map of each key's
// row, and the changes replacing one makes.
type upsertModel map[string]string

func (m upsertModel) apply(key, value string) []string {
	var out []string
	prev, had := m[key]
	switch {
	case value == "" && had:
		out = append(out, "-"+prev)
		delete(m, key)
	case value == "" || (had && prev == value):
	default:
		if had {
			out = append(out, "-"+prev)
		}
		out = append(out, "+"+value)
		m[key] = value
	}
	return out
}

func changeStrings(cs []types.Change) []string {
	var out []string
	for _, c := range cs {
		sign := "+"
		if c.Diff < 0 {
			sign = "-"
		}
		out = append(out, fmt.Sprintf("%s%v:%v", sign, c.Row[0], c.Row[1]))
	}
	return out
}

// TestReaderUpsert: updates retract the key's previous row, tombstones
// delete it, an unchanged value changes nothing, a record without a key
// is bad; the key store survives a restart, and a restart from an
// offset behind the store rebuilds it so the changes after that offset
// are the same as a fresh run's.
func TestReaderUpsert(t *testing.T) {
	addr := startAgent(t)
	createTopics(t, addr, 1, "users")
	plain := kclient(t, addr, kgo.DefaultProduceTopic("users"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	type kv struct{ k, v string }
	input := []kv{{"a", "1"}, {"b", "1"}, {"a", "2"}, {"b", ""}, {"c", "1"}, {"a", "2"}, {"d", ""}, {"", "9"}, {"c", "3"}, {"a", ""}, {"a", "4"}}
	var rs []*kgo.Record
	model := upsertModel{}
	var want []string
	for _, x := range input {
		v := ""
		if x.v != "" {
			v = fmt.Sprintf(`{"v": %s}`, x.v)
		}
		rs = append(rs, rec(0, x.k, v))
		if x.k != "" {
			for _, c := range model.apply(x.k, x.v) {
				want = append(want, c[:1]+x.k+":"+c[1:])
			}
		}
	}
	produce(t, plain, rs...)
	def := jsonDef(t, "users", "_key text, v int4", "envelope", "upsert")
	dir := t.TempDir()
	ends := highWatermarks(t, addr, "users")

	r := newReader(t, def, addr, nil, nil, dir)
	got := readAll(t, r, ends)[0]
	if g := changeStrings(got.Changes); !slices.Equal(g, want) {
		t.Fatalf("changes\n%v\nwant\n%v", g, want)
	}
	if got.Bad != 1 {
		t.Fatalf("%d bad records, want the one without a key", got.Bad)
	}
	r.Close()

	// Resume where the first reader stopped, with more records: the
	// store knows a's and c's rows.
	produce(t, plain, rec(0, "c", ""), rec(0, "a", `{"v": 5}`))
	wantMore := append(model.apply("c", ""), model.apply("a", "5")...)
	for i, c := range wantMore {
		wantMore[i] = c[:1] + []string{"c", "a", "a"}[i] + ":" + c[1:]
	}
	r = newReader(t, def, addr, nil, map[int32]source.Position{0: got.Next}, dir)
	more := readAll(t, r, highWatermarks(t, addr, "users"))[0]
	if g := changeStrings(more.Changes); !slices.Equal(g, wantMore) {
		t.Fatalf("resumed changes %v, want %v", g, wantMore)
	}
	r.Close()

	// From offset 3 (as if the view's last commit was there), with a
	// store that is ahead: what comes after offset 3 is what a fresh
	// run emitted after it.
	fresh := newReader(t, def, addr, nil, nil, t.TempDir())
	all := readAll(t, fresh, highWatermarks(t, addr, "users"))[0]
	fresh.Close()
	r = newReader(t, def, addr, nil, map[int32]source.Position{0: {Offset: 3}}, dir)
	tail := readAll(t, r, highWatermarks(t, addr, "users"))[0]
	// Offsets 0-2 made 4 changes in the fresh run: +a, +b, -a, +a.
	if g, w := changeStrings(tail.Changes), changeStrings(all.Changes[4:]); !slices.Equal(g, w) {
		t.Fatalf("from offset 3 over a store ahead: %v, want %v", g, w)
	}
}

// TestReaderWatermarks: each partition's watermark is its greatest
// event time minus the delay, the source's the least of them; a record
// earlier than its partition's watermark is marked late and counted.
func TestReaderWatermarks(t *testing.T) {
	addr := startAgent(t)
	createTopics(t, addr, 2, "clicks")
	plain := kclient(t, addr, kgo.DefaultProduceTopic("clicks"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	base := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	const delay = 5 * time.Second
	events := map[int32][]int{0: {10, 20, 12, 16, 30, 24, 26}, 1: {8, 7, 2, 9}}
	var rs []*kgo.Record
	for p, secs := range events {
		for _, s := range secs {
			rs = append(rs, rec(p, "", fmt.Sprintf(`{"at": "%s", "n": %d}`, base.Add(time.Duration(s)*time.Second).Format(time.RFC3339), s)))
		}
	}
	rs = append(rs, rec(1, "", `{"n": 0}`)) // no event time: neither late nor a say
	produce(t, plain, rs...)

	// The oracle: late when earlier than (max so far - delay).
	wantLate := map[int32][]int{}
	wantWM := map[int32]time.Time{}
	for p, secs := range events {
		maxSeen := -1
		for i, s := range secs {
			if maxSeen >= 0 && time.Duration(s)*time.Second < time.Duration(maxSeen)*time.Second-delay {
				wantLate[p] = append(wantLate[p], i)
			}
			maxSeen = max(maxSeen, s)
		}
		wantWM[p] = base.Add(time.Duration(maxSeen)*time.Second - delay)
	}
	reg := prometheus.NewRegistry()
	m := source.NewMetrics()
	for _, c := range m.Collectors() {
		reg.MustRegister(c)
	}
	def := jsonDef(t, "clicks", "at timestamptz, n int4", "watermark.column", "at", "watermark.delay", "5 seconds")
	r := newReader(t, def, addr, m, nil, "")
	got := readAll(t, r, highWatermarks(t, addr, "clicks"))
	lateCount := 0
	for p := range int32(2) {
		if !slices.Equal(got[p].Late, wantLate[p]) {
			t.Errorf("partition %d: late %v, want %v", p, got[p].Late, wantLate[p])
		}
		if !got[p].Watermark.Equal(wantWM[p]) || !got[p].Next.MaxEventTime.Equal(wantWM[p].Add(delay)) {
			t.Errorf("partition %d: watermark %v (max %v), want %v", p, got[p].Watermark, got[p].Next.MaxEventTime, wantWM[p])
		}
		lateCount += len(wantLate[p])
	}
	if wm := r.Watermark(); !wm.Equal(wantWM[1]) {
		t.Errorf("source watermark %v, want the least partition's %v", wm, wantWM[1])
	}
	if n := counter(t, reg, "strand_sql_source_late_records_total", nil); int(n) != lateCount {
		t.Errorf("late records counted %v, want %d", n, lateCount)
	}
}

// TestScan: a bounded scan reads a source's committed contents up to
// the end offsets at the call, the newest row per key for upsert, and
// fails with 53400 past its limits instead of reading on.
func TestScan(t *testing.T) {
	addr := startAgent(t)
	createTopics(t, addr, 2, "events", "kv")
	ev := kclient(t, addr, kgo.DefaultProduceTopic("events"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	tx := kclient(t, addr, kgo.DefaultProduceTopic("events"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("scan-writer"))
	var want []string
	for i := range 40 {
		p := int32(i % 2)
		produce(t, ev, rec(p, "", fmt.Sprintf(`{"n": %d}`, i)))
		want = append(want, fmt.Sprint(i))
	}
	produceTx(t, tx, false, rec(0, "", `{"n": 1000}`))
	produceTx(t, tx, true, rec(1, "", `{"n": 41}`))
	want = append(want, "41")
	scan := func(def *source.Def, maxRows int) ([]string, error) {
		dec, err := source.NewDecoder(def, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		s, err := source.NewScan(ctx, source.ScanConfig{Def: def, Decoder: dec, Kafka: kafkaOpts(addr), MaxRows: maxRows})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var out []string
		for row, ok := s.Next(ctx); ok; row, ok = s.Next(ctx) {
			out = append(out, fmt.Sprint(row[len(row)-1]))
		}
		return out, s.Err()
	}
	def := jsonDef(t, "events", "n int4")
	got, err := scan(def, 100)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("scan %v\nwant %v", got, want)
	}
	_, err = scan(def, 20)
	var se *sqlerr.Error
	if !errors.As(err, &se) || se.Code != sqlerr.ConfigurationLimitExceeded {
		t.Fatalf("scan over 20 rows: %v, want SQLSTATE 53400", err)
	}

	kv := kclient(t, addr, kgo.DefaultProduceTopic("kv"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	model := upsertModel{}
	for i := range 30 {
		k := fmt.Sprintf("k%d", i%7)
		v := fmt.Sprint(i)
		if i%5 == 4 {
			v = ""
		}
		value := ""
		if v != "" {
			value = fmt.Sprintf(`{"v": %s}`, v)
		}
		produce(t, kv, rec(int32(i%7%2), k, value))
		model.apply(k, v)
	}
	var wantKV []string
	for k, v := range model {
		wantKV = append(wantKV, k+"="+v)
	}
	slices.Sort(wantKV)
	udef := jsonDef(t, "kv", "_key text, v int4", "envelope", "upsert")
	dec, err := source.NewDecoder(udef, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := source.NewScan(ctx, source.ScanConfig{Def: udef, Decoder: dec, Kafka: kafkaOpts(addr), MaxRows: 7}) // the keys held at most at once
	if err != nil {
		t.Fatal(err)
	}
	var gotKV []string
	for row, ok := s.Next(ctx); ok; row, ok = s.Next(ctx) {
		gotKV = append(gotKV, fmt.Sprintf("%v=%v", row[0], row[1]))
	}
	s.Close()
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(gotKV)
	if !slices.Equal(gotKV, wantKV) {
		t.Fatalf("upsert scan %v\nwant %v", gotKV, wantKV)
	}
}

// TestReaderUntil: a reader given Until reads each partition up to
// that offset and not one record past it, however many the log holds,
// and a partition already there reads nothing.
func TestReaderUntil(t *testing.T) {
	addr := startAgent(t)
	createTopics(t, addr, 2, "until")
	cl := kclient(t, addr, kgo.DefaultProduceTopic("until"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		produce(t, cl, rec(0, "", fmt.Sprintf(`{"id": %d}`, i)), rec(1, "", fmt.Sprintf(`{"id": %d}`, 100+i)))
	}
	def := jsonDef(t, "until", "id int8")
	dec, err := source.NewDecoder(def, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	r, err := source.NewReader(ctx, source.ReaderConfig{Def: def, Decoder: dec, Kafka: kafkaOpts(addr),
		Start: map[int32]source.Position{0: {Offset: 2}, 1: {Offset: 4}}, Until: map[int32]int64{0: 7, 1: 4}, MaxPollRecords: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := readAll(t, r, map[int32]int64{0: 7})
	var ids []string
	for _, c := range got[0].Changes {
		ids = append(ids, types.Format(c.Row[0]))
	}
	if strings.Join(ids, ",") != "2,3,4,5,6" || got[0].Next.Offset != 7 {
		t.Fatalf("partition 0: read %v up to %d, want 2..6 up to 7", ids, got[0].Next.Offset)
	}
	if pb := got[1]; pb != nil && len(pb.Changes) > 0 {
		t.Fatalf("partition 1, at its Until already, read %d changes", len(pb.Changes))
	}
	// Nothing more comes, though the log has more.
	pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer pcancel()
	if b, err := r.Poll(pctx); err == nil {
		for _, pb := range b.Partitions {
			if len(pb.Changes) > 0 || pb.Next.Offset > 7 {
				t.Fatalf("past Until: partition %d read %d changes, next %d", pb.Partition, len(pb.Changes), pb.Next.Offset)
			}
		}
	}
}
