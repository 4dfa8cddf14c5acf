package compat

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/testservers/testproc"
)

// quickTimeout bounds TestQuickMatrix: it takes about a minute and a
// half on two busy cores.
const quickTimeout = 8 * time.Minute

// TestQuickMatrix runs the quick subset (QuickClients, QuickCaps,
// QuickKgoRun) against a real agent and fails on any failing cell of an
// implemented capability. A client that is not installed is skipped,
// except under CI=true, where it fails: scripts/test installs them all.
func TestQuickMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an agent and real clients; not with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), quickTimeout)
	defer cancel()
	m, err := RunMatrix(ctx, Options{Quick: true, Logf: t.Logf})
	if m != nil {
		var b bytes.Buffer
		m.WriteTable(&b)
		t.Logf("matrix:\n%s", b.String())
	}
	if err != nil {
		t.Fatalf("RunMatrix: %v", err)
	}
	for _, name := range QuickClients {
		t.Run(name, func(t *testing.T) {
			r := m.Row(name)
			if name == "kgo" {
				r = m.Row("franz-go (kgo suite)")
			}
			if r == nil {
				t.Fatalf("no row for %s", name)
			}
			if name == "kgo" {
				checkQuickKgo(t, m.Kgo)
			}
			want := QuickCaps
			if name == "kgo" {
				// The quick kgo tests cover these columns (kgoCapTests).
				want = []Capability{Produce, Consume, Groups, Admin, ShareGroups, ScramSHA512}
			}
			for _, cp := range want {
				c, ok := r.Cells[cp]
				switch {
				case !ok:
					t.Errorf("%s: no %s cell", name, cp)
				case c.Status == NA && errors.Is(missingErr(c), ErrClientMissing):
					t.Skipf("%s: %s", name, c.Detail) // InCI turns these into Fail
				case c.Status == NA:
					t.Logf("%s %s: n/a: %s", name, cp, c.Detail) // the client lacks the capability
				case c.Status != Pass:
					t.Errorf("%s %s: %s: %s", name, cp, strings.ToUpper(string(c.Status)), c.Detail)
				}
			}
		})
	}
}

// missingErr recognizes a cell that reports a missing client.
func missingErr(c Cell) error {
	if strings.HasPrefix(c.Detail, ErrClientMissing.Error()) {
		return ErrClientMissing
	}
	return nil
}

func checkQuickKgo(t *testing.T, rep *KgoReport) {
	t.Helper()
	if rep == nil {
		t.Fatal("no kgo report")
	}
	if rep.All.Ran() == 0 || rep.All.Failed > 0 || rep.Broker.Ran() != rep.All.Ran() {
		var b bytes.Buffer
		rep.WriteSummary(&b)
		t.Errorf("kgo quick subset: want every test run against the broker and passing:\n%s", b.String())
	}
}

func TestParseScriptOutput(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    []scriptLine
		wantErr bool
	}{
		{
			name: "results and noise",
			out: "starting\n" +
				`COMPAT {"client":"kcat","version":"1.7.1"}` + "\n" +
				`COMPAT {"cap":"produce","status":"pass","detail":"ok","topic":"t","produced":10}` + "\n" +
				"librdkafka says hello\n" +
				`COMPAT {"cap":"zstd","status":"n/a","detail":"no codec"}` + "\n",
			want: []scriptLine{
				{Client: "kcat", Version: "1.7.1"},
				{Cap: Produce, Status: Pass, Detail: "ok", claim: claim{Topic: "t", Produced: 10}},
				{Cap: Zstd, Status: NA, Detail: "no codec"},
			},
		},
		{name: "malformed JSON", out: `COMPAT {"cap":"produce",` + "\n", wantErr: true},
		{name: "unknown status", out: `COMPAT {"cap":"produce","status":"ok"}` + "\n", wantErr: true},
		{name: "nothing", out: "no results at all\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseScriptOutput([]byte(tc.out))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestKgoResults(t *testing.T) {
	r := newKgoResults()
	events := []testEvent{
		{Action: "run", Test: "TestA"},
		{Action: "output", Test: "TestA", Output: "=== RUN   TestA\n"},
		{Action: "pass", Test: "TestA", Elapsed: 1.5},
		{Action: "run", Test: "TestB"},
		{Action: "run", Test: "TestB/sub1"},
		{Action: "output", Test: "TestB/sub1", Output: "    b_test.go:10: boom\n"},
		{Action: "fail", Test: "TestB/sub1"},
		{Action: "run", Test: "TestB/sub2"},
		{Action: "pass", Test: "TestB/sub2"},
		{Action: "output", Test: "TestB", Output: "--- FAIL: TestB (2.00s)\n"},
		{Action: "fail", Test: "TestB", Elapsed: 2},
		{Action: "cont", Test: "TestB"}, // after the end: must not revive it
		{Action: "run", Test: "TestC"},
		{Action: "output", Test: "TestC", Output: "    c_test.go:3: needs share groups\n"},
		{Action: "skip", Test: "TestC"},
		// TestD hangs; TestE paused by t.Parallel and never resumed.
		{Action: "run", Test: "TestD"},
		{Action: "run", Test: "TestE"},
		{Action: "pause", Test: "TestE"},
	}
	for i := range 50 {
		events = append(events, testEvent{Action: "output", Test: "TestD", Output: "line " + string(rune('a'+i%26)) + "\n"})
	}
	for _, ev := range events {
		r.add(1, ev)
	}
	// Another process, running TestF, ends first: TestD is not its.
	r.add(2, testEvent{Action: "run", Test: "TestF"})
	r.endProcess(2, "process 2 ended")
	if d := r.mu.running["TestD"]; !d.active {
		t.Fatal("the end of process 2 touched TestD of process 1")
	}
	r.endProcess(1, "did not finish")

	tests := []struct {
		name      string
		status    KgoTestStatus
		subFailed int
		subPassed int
		output    []string
		lines     int
	}{
		{name: "TestA", status: KgoPass},
		{name: "TestB", status: KgoFail, subFailed: 1, subPassed: 1, output: []string{"sub1: b_test.go:10: boom"}, lines: 1},
		{name: "TestC", status: KgoSkip, output: []string{"c_test.go:3: needs share groups"}, lines: 1},
		{name: "TestD", status: KgoFail, lines: 50},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := r.test(tc.name)
			if got.Status != tc.status || got.SubFailed != tc.subFailed || got.SubPassed != tc.subPassed || got.OutputLines != tc.lines {
				t.Errorf("got %+v, want status %s, %d/%d subtests failed/passed, %d output lines", got, tc.status, tc.subFailed, tc.subPassed, tc.lines)
			}
			if tc.output != nil && !slices.Equal(got.Output, tc.output) {
				t.Errorf("output %q, want %q", got.Output, tc.output)
			}
			if len(got.Output) > kgoOutputLines {
				t.Errorf("kept %d output lines, the bound is %d", len(got.Output), kgoOutputLines)
			}
		})
	}
	if b := r.test("TestB"); slices.Contains(b.Output, "did not finish") {
		t.Errorf("TestB ended before the process did, yet reads %q", b.Output)
	}
	if d := r.test("TestD"); len(d.Output) == 0 || d.Output[0] != "did not finish" {
		t.Errorf("TestD output %q: want the end-of-process reason first", d.Output)
	}
	if r.started("TestE") {
		t.Error("TestE never resumed from pause, yet counts as started: it would not be rerun")
	}
	if e := r.test("TestE"); e.Status != KgoFail {
		t.Errorf("TestE never ran: status %s, want fail", e.Status)
	}
	if f := r.test("TestF"); f.Status != KgoFail || len(f.Output) == 0 || f.Output[0] != "process 2 ended" {
		t.Errorf("TestF: %+v, want failed by the end of process 2", f)
	}
}

func TestBrokerTests(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"helpers_test.go": `package kgo
func getSeedBrokers() int { return 0 }
func newTestClient() int { return getSeedBrokers() }
var newAdmin = func() int { return newTestClient() }
type consumer struct{}
func (c *consumer) goRun() { newTestClient() }
func wait() {}
var scramSeeds string
`,
		"a_test.go": `package kgo
import "testing"
func TestDirect(t *testing.T) { newTestClient() }
func TestViaClosure(t *testing.T) { newAdmin() }
func TestViaMethod(t *testing.T) { var c consumer; c.goRun() }
func TestUnit(t *testing.T) { wait() }
func TestSCRAM(t *testing.T) { if scramSeeds == "" { t.Skip() } }
func helperNotATest() { getSeedBrokers() }
`,
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := brokerTests(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"TestDirect": true, "TestViaClosure": true, "TestViaMethod": true, "TestUnit": false, "TestSCRAM": true}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s: broker = %v, want %v", n, got[n], w)
		}
	}
}

// rawBatch encodes one magic-2 batch header (and records) as a fetch
// returns it.
func rawBatch(first int64, n int32, attrs int16, pid int64, records []byte) []byte {
	b := kmsg.RecordBatch{FirstOffset: first, Magic: 2, Attributes: attrs, LastOffsetDelta: n - 1,
		ProducerID: pid, NumRecords: n, Records: records}
	b.Length = int32(len(b.AppendTo(nil)) - 12)
	return b.AppendTo(nil)
}

func controlBatch(offset, pid int64, commit bool) []byte {
	key := kmsg.ControlRecordKey{Type: kmsg.ControlRecordKeyType(0)}
	if commit {
		key.Type = 1
	}
	rec := kmsg.Record{Key: key.AppendTo(nil)}
	return rawBatch(offset, 1, 0x10|0x20, pid, rec.AppendTo(nil))
}

func TestTopicScanConfirm(t *testing.T) {
	const gzip, txn = 1, 0x10
	tests := []struct {
		name    string
		batches [][]byte
		claim   claim
		wantErr bool
	}{
		{
			name:    "produced and gzip",
			batches: [][]byte{rawBatch(0, 5, gzip, -1, nil), rawBatch(5, 1, 0, -1, nil)},
			claim:   claim{Topic: "t", Produced: 6, Codec: "gzip"},
		},
		{
			name:    "fewer records than claimed",
			batches: [][]byte{rawBatch(0, 5, 0, -1, nil)},
			claim:   claim{Topic: "t", Produced: 6},
			wantErr: true,
		},
		{
			name:    "sent uncompressed",
			batches: [][]byte{rawBatch(0, 5, 0, -1, nil)},
			claim:   claim{Topic: "t", Produced: 5, Codec: "zstd"},
			wantErr: true,
		},
		{
			name:    "another codec",
			batches: [][]byte{rawBatch(0, 5, 4, -1, nil), rawBatch(5, 5, gzip, -1, nil)},
			claim:   claim{Topic: "t", Produced: 10, Codec: "zstd"},
			wantErr: true,
		},
		{
			name:    "idempotent",
			batches: [][]byte{rawBatch(0, 5, 0, 7, nil)},
			claim:   claim{Topic: "t", Produced: 5, Idempotent: true},
		},
		{
			name:    "not idempotent",
			batches: [][]byte{rawBatch(0, 5, 0, 7, nil), rawBatch(5, 5, 0, -1, nil)},
			claim:   claim{Topic: "t", Produced: 10, Idempotent: true},
			wantErr: true,
		},
		{
			name: "committed, aborted, committed",
			batches: [][]byte{
				rawBatch(0, 4, txn, 9, nil), controlBatch(4, 9, true),
				rawBatch(5, 3, txn, 9, nil), controlBatch(8, 9, false),
				rawBatch(9, 2, txn, 9, nil), controlBatch(11, 9, true),
			},
			claim: claim{Topic: "t", TxnCommitted: 6},
		},
		{
			name:    "transaction never committed",
			batches: [][]byte{rawBatch(0, 4, txn, 9, nil)},
			claim:   claim{Topic: "t", TxnCommitted: 4},
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &topicScan{codecBatches: make(map[int8]int)}
			open := make(map[int64]int64)
			raw := bytes.Join(tc.batches, nil)
			next, err := s.addBatches("t", 0, raw, 0, open)
			if err != nil {
				t.Fatal(err)
			}
			s.highWatermarks = next
			for _, n := range open {
				s.txnAborted += n
			}
			err = s.confirm(tc.claim)
			if (err != nil) != tc.wantErr {
				t.Fatalf("confirm: %v, want error %v (scan %+v)", err, tc.wantErr, s)
			}
			if err != nil && !errors.Is(err, ErrClaim) {
				t.Errorf("error %v does not wrap ErrClaim", err)
			}
		})
	}
}

func TestAddBatchesSkipsEarlierBatch(t *testing.T) {
	// A fetch at offset 5 may start with the batch holding offsets 0-9's
	// predecessor; it must not be counted twice.
	s := &topicScan{codecBatches: make(map[int8]int)}
	raw := append(rawBatch(0, 5, 0, -1, nil), rawBatch(5, 5, 0, -1, nil)...)
	next, err := s.addBatches("t", 0, raw, 5, map[int64]int64{})
	if err != nil {
		t.Fatal(err)
	}
	if next != 10 || s.dataRecords != 5 {
		t.Errorf("next %d, records %d; want 10 and 5", next, s.dataRecords)
	}
}

func TestMatrixOutput(t *testing.T) {
	m := &Matrix{Rows: []Row{
		{Client: "a", Cells: map[Capability]Cell{
			Produce:      {Status: Pass},
			Transactions: {Status: Fail, Detail: "INVALID_REQUEST"},
			Zstd:         {Status: NA, Detail: "no codec"},
		}},
		{Client: "b", Cells: map[Capability]Cell{Groups: {Status: Fail, Detail: "join timed out"}}},
	}}
	var b bytes.Buffer
	m.WriteTable(&b)
	out := b.String()
	for _, want := range []string{
		"client  produce  consume",
		"a       PASS     -",
		"FAIL a transactions: INVALID_REQUEST",
		"N/A a zstd: no codec",
		"FAIL b groups: join timed out",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Both failures are in implemented columns; n/a cells are not.
	if got, want := m.Regressions(), []string{"a transactions: INVALID_REQUEST", "b groups: join timed out"}; !slices.Equal(got, want) {
		t.Errorf("Regressions() = %q, want %q", got, want)
	}
	var j bytes.Buffer
	if err := m.WriteJSON(&j); err != nil || !strings.Contains(j.String(), `"transactions": {`) {
		t.Errorf("JSON (%v):\n%s", err, j.String())
	}
}

func TestRowSetKeepsFailure(t *testing.T) {
	var r Row
	r.set(Produce, Cell{Status: Fail, Detail: "first"})
	r.set(Produce, Cell{Status: Pass})
	if c := r.Cells[Produce]; c.Status != Fail || c.Detail != "first" {
		t.Errorf("cell %+v: a later pass hid a failure", c)
	}
}

func TestKgoReportRow(t *testing.T) {
	rep := &KgoReport{Version: "v1", Tests: []KgoTest{
		{Name: "TestClient_Produce", Status: KgoPass},
		{Name: "TestIssue769", Status: KgoFail},
		{Name: "TestTxnEtl", Status: KgoFail},
		{Name: "TestGroupSimple", Status: KgoSkip, Output: []string{"no groups"}},
		{Name: "TestPing", Status: KgoPass},
	}}
	row := rep.Row()
	tests := []struct {
		cp     Capability
		status Status
		has    bool
	}{
		{Produce, Fail, true},
		{Transactions, Fail, true},
		{Groups, NA, true},
		{Admin, Pass, true},
		{Zstd, "", false},
	}
	for _, tc := range tests {
		c, ok := row.Cells[tc.cp]
		if ok != tc.has || c.Status != tc.status {
			t.Errorf("%s: cell %+v (present %v), want %q (present %v)", tc.cp, c, ok, tc.status, tc.has)
		}
	}
}

func TestBurrowComplaint(t *testing.T) {
	logs := `{"level":"info","ts":1,"msg":"starting","type":"coordinator","name":"zookeeper"}
{"level":"error","ts":2,"msg":"cannot create root path","type":"coordinator","name":"zookeeper","error":"zk: could not connect to a server"}
Burrow failed at November 30, 2026`
	if got, want := burrowComplaint(logs), "cannot create root path: zk: could not connect to a server"; got != want {
		t.Errorf("burrowComplaint = %q, want %q", got, want)
	}
	if got := burrowComplaint(`{"level":"warn","msg":"unknown consumer"}`); got != "" {
		t.Errorf("burrowComplaint of a warning = %q, want none", got)
	}
}

func TestLineTail(t *testing.T) {
	lt := newLineTail(3)
	for _, l := range []string{"a", "b", "c", "d", "e"} {
		lt.add(l)
	}
	if got := lt.String(); got != "c\nd\ne" {
		t.Errorf("tail %q, want the last three lines", got)
	}
}

// TestKgoVariantCells: a variant's cell passes only if every one of its
// tests passed; a skip means the suite did not see the environment the
// runner set, and counts as a failure.
func TestKgoVariantCells(t *testing.T) {
	rep := &KgoReport{Version: "v1", Tests: []KgoTest{
		{Name: "TestSCRAMAuth", Status: KgoPass},
		{Name: "TestSCRAMAuthBadCredentials", Status: KgoPass},
	}, Variants: []KgoVariantReport{
		{Name: "sha256", Cap: ScramSHA256, Tests: []KgoTest{
			{Name: "TestSCRAMAuth", Status: KgoSkip, Output: []string{"KGO_TEST_SCRAM not set"}},
			{Name: "TestSCRAMAuthBadCredentials", Status: KgoPass},
		}},
		{Name: "tls", Cap: MTLS, Tests: []KgoTest{{Name: "TestPing", Status: KgoPass}}},
		{Name: "none", Cap: SASLPlain},
	}}
	row := rep.Row()
	for cp, want := range map[Capability]Status{ScramSHA512: Pass, ScramSHA256: Fail, MTLS: Pass, SASLPlain: Fail} {
		if c := row.Cells[cp]; c.Status != want {
			t.Errorf("%s: %+v, want %s", cp, c, want)
		}
	}
	if d := row.Cells[ScramSHA256].Detail; !strings.Contains(d, "TestSCRAMAuth skip: KGO_TEST_SCRAM not set") {
		t.Errorf("scram-sha-256 detail %q does not name the skipped test", d)
	}
}

func TestMaskedEnv(t *testing.T) {
	got := maskedEnv([]string{"KGO_TEST_SCRAM=compat:s3cret:512", "KGO_TEST_SCRAM_SEEDS=127.0.0.1:1"})
	if want := "KGO_TEST_SCRAM=compat:***:512 KGO_TEST_SCRAM_SEEDS=127.0.0.1:1 "; got != want {
		t.Errorf("maskedEnv = %q, want %q", got, want)
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"A=1", "AB=2", "C=3"}, []string{"A=9", "D=4"})
	if want := []string{"AB=2", "C=3", "A=9", "D=4"}; !slices.Equal(got, want) {
		t.Errorf("mergeEnv = %q, want %q", got, want)
	}
}

func TestListenerRE(t *testing.T) {
	line := `time=2026-12-02T07:10:00Z level=INFO msg="strand agent serving" kafka=127.0.0.1:40647 advertise=127.0.0.1:40647 ` +
		`listeners="PLAINTEXT(PLAINTEXT)=127.0.0.1:40647->127.0.0.1:40647,SASL_SSL(SASL_SSL)=127.0.0.1:40169->localhost:40169,` +
		`INTERNAL(SSL)=[::1]:46249->[::1]:46249" http=""`
	got := map[string]string{}
	for _, m := range listenerRE.FindAllStringSubmatch(line, -1) {
		got[m[1]] = m[2]
	}
	want := map[string]string{"PLAINTEXT": "127.0.0.1:40647", "SASL_SSL": "127.0.0.1:40169", "INTERNAL": "[::1]:46249"}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
}

// burrowTimeout bounds TestBurrowLag: building the agent, starting
// ZooKeeper and burrow, and burrow's first evaluations.
const burrowTimeout = 4 * time.Minute

// TestBurrowLag: Burrow (Debian's package, with a ZooKeeper the cell
// starts) reads the committed offsets from __consumer_offsets and
// reports the group's total lag as the cell knows it. Burrow and
// ZooKeeper missing skip, except under CI=true.
func TestBurrowLag(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an agent, ZooKeeper and burrow; not with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), burrowTimeout)
	defer cancel()
	m, err := RunMatrix(ctx, Options{Clients: []string{"burrow"}, Caps: []Capability{Lag}, Records: 200, StepTimeout: time.Minute, Logf: t.Logf})
	if err != nil {
		t.Fatalf("RunMatrix: %v", err)
	}
	r := m.Row("burrow")
	if r == nil {
		t.Fatal("no burrow row")
	}
	c, ok := r.Cells[Lag]
	switch {
	case !ok:
		t.Fatal("no lag cell")
	case c.Status == NA && errors.Is(missingErr(c), ErrClientMissing) && !testproc.InCI():
		t.Skip(c.Detail)
	case c.Status != Pass:
		t.Fatalf("burrow lag: %s: %s", strings.ToUpper(string(c.Status)), c.Detail)
	}
	t.Logf("%s (%v)", c.Detail, r.Elapsed.Round(time.Millisecond))
}
