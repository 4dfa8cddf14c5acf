package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strandkafka/strand/internal/agent"
)

// kcatFormat is the consume output format the tests parse: partition,
// offset, key, value, timestamp (ms), headers (k=v,k=v).
const kcatFormat = `%p\t%o\t%k\t%s\t%T\t%h\n`

// kcatMsg is one line of kcatFormat output.
type kcatMsg struct {
	partition int32
	offset    int64
	key       string
	value     string
	timestamp int64
	headers   string
}

// keyValue is one produced message.
type keyValue struct{ key, value string }

// TestKcat drives the agent with kcat (librdkafka 2.0.2): metadata, a
// 100,000-message keyed produce read back whole, headers, explicit
// timestamps, and every compression codec.
func TestKcat(t *testing.T) {
	kcat := requireCommand(t, "kcat")
	a := startAgent(t, agent.Config{})
	addr := a.KafkaAddr()
	k := kcatRunner{t: t, path: kcat, addr: addr}

	// The topic is created through the strand CLI, the code path a user
	// of `strand topic create` takes.
	out := runStrand(t, "topic", "create", "t", "-p", "4", "--brokers", addr)
	if !strings.Contains(out, "OK") {
		t.Fatalf("strand topic create: %q", out)
	}

	t.Run("metadata", func(t *testing.T) {
		var md struct {
			Brokers []struct {
				ID   int32  `json:"id"`
				Name string `json:"name"`
			} `json:"brokers"`
			Topics []struct {
				Topic      string `json:"topic"`
				Error      string `json:"error"`
				Partitions []struct {
					Partition int32 `json:"partition"`
					Leader    int32 `json:"leader"`
				} `json:"partitions"`
			} `json:"topics"`
		}
		raw := k.run(t, nil, "-L", "-J", "-t", "t")
		if err := json.Unmarshal([]byte(raw), &md); err != nil {
			t.Fatalf("kcat -L -J: %v\n%s", err, raw)
		}
		if len(md.Brokers) != 1 || md.Brokers[0].Name != addr {
			t.Errorf("brokers %+v, want one at %s", md.Brokers, addr)
		}
		if len(md.Topics) != 1 || md.Topics[0].Topic != "t" || md.Topics[0].Error != "" || len(md.Topics[0].Partitions) != 4 {
			t.Fatalf("topics %+v, want t with 4 partitions", md.Topics)
		}
		for _, p := range md.Topics[0].Partitions {
			if p.Leader != md.Brokers[0].ID {
				t.Errorf("partition %d leader %d, want %d", p.Partition, p.Leader, md.Brokers[0].ID)
			}
		}
	})

	const (
		keyedCount  = 100_000
		headerCount = 1_000
	)
	var (
		produced  []keyValue
		tsBounds  [][2]int64 // per produced message: wall clock around its kcat run
		withHdr   = make(map[string]bool)
		headerCSV = "trace=abc-123,n=1"
	)
	t.Run("produce keyed", func(t *testing.T) {
		kvs := make([]keyValue, keyedCount)
		for i := range kvs {
			kvs[i] = keyValue{fmt.Sprintf("key-%04d", i%1000), fmt.Sprintf("val-%06d-%x", i, i*2654435761%1e9)}
		}
		lo, hi := k.produce(t, "t", kvs)
		produced = append(produced, kvs...)
		for range kvs {
			tsBounds = append(tsBounds, [2]int64{lo, hi})
		}
	})
	t.Run("produce with headers", func(t *testing.T) {
		kvs := make([]keyValue, headerCount)
		for i := range kvs {
			kvs[i] = keyValue{fmt.Sprintf("hkey-%03d", i%100), fmt.Sprintf("hdr-%05d", i)}
			withHdr[kvs[i].value] = true
		}
		lo, hi := k.produce(t, "t", kvs, "-H", "trace=abc-123", "-H", "n=1")
		produced = append(produced, kvs...)
		for range kvs {
			tsBounds = append(tsBounds, [2]int64{lo, hi})
		}
	})
	t.Run("consume all", func(t *testing.T) {
		if len(produced) != keyedCount+headerCount {
			t.Skip("produce failed")
		}
		got := k.consume(t, "t", len(produced))
		checkKeyed(t, produced, got)
		bounds := make(map[string][2]int64, len(produced))
		for i, kv := range produced {
			bounds[kv.value] = tsBounds[i]
		}
		bad := 0
		for _, m := range got {
			wantHdr := ""
			if withHdr[m.value] {
				wantHdr = headerCSV
			}
			b := bounds[m.value]
			switch {
			case m.headers != wantHdr:
				t.Errorf("%d/%d %s: headers %q, want %q", m.partition, m.offset, m.value, m.headers, wantHdr)
				bad++
			case m.timestamp < b[0] || m.timestamp > b[1]:
				// librdkafka stamps CreateTime when the message is
				// produced, so it falls within the kcat run.
				t.Errorf("%d/%d %s: timestamp %d outside the producing run [%d, %d]", m.partition, m.offset, m.value, m.timestamp, b[0], b[1])
				bad++
			}
			if bad >= 10 {
				t.Fatal("too many mismatches")
			}
		}
	})

	t.Run("explicit timestamps", func(t *testing.T) {
		// kcat cannot set a timestamp when producing, so franz-go sets
		// them and kcat reads them back, by offset and by time.
		createTopic(t, addr, "ts", 1)
		cl := newClient(t, addr, kgo.DefaultProduceTopic("ts"), kgo.DisableIdempotentWrite())
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		const n, base = 10, int64(1_000_000_000_000)
		for i := range int64(n) {
			// One batch per record, so a lookup by time is exact.
			r := &kgo.Record{Value: fmt.Appendf(nil, "ts-%d", i), Timestamp: time.UnixMilli(base + i*1000)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		got := k.consume(t, "ts", n)
		for i, m := range got {
			if m.offset != int64(i) || m.value != fmt.Sprintf("ts-%d", i) || m.timestamp != base+int64(i)*1000 {
				t.Errorf("message %d: %+v, want offset %d value ts-%d timestamp %d", i, m, i, i, base+int64(i)*1000)
			}
		}
		from := k.consumeFrom(t, "ts", "s@"+strconv.FormatInt(base+5000, 10), n-5)
		if len(from) == 0 || from[0].offset != 5 {
			t.Errorf("kcat -o s@%d started at %+v, want offset 5", base+5000, from)
		}
	})

	codecs := []struct {
		name  string
		attr  int8 // the batch attributes' codec bits
		codec kgo.CompressionCodec
	}{
		{"gzip", 1, kgo.GzipCompression()},
		{"snappy", 2, kgo.SnappyCompression()},
		{"lz4", 3, kgo.Lz4Compression()},
		{"zstd", 4, kgo.ZstdCompression()},
	}
	for _, codec := range codecs {
		t.Run("compression "+codec.name, func(t *testing.T) {
			topic := "z-" + codec.name
			createTopic(t, addr, topic, 4)
			kvs := make([]keyValue, 3000)
			for i := range kvs {
				// Repetitive values, so every codec shrinks them.
				kvs[i] = keyValue{fmt.Sprintf("k%02d", i%50), fmt.Sprintf("%s-%05d-%s", codec.name, i, strings.Repeat("x", i%40))}
			}
			k.produce(t, topic, kvs, "-z", codec.name, "-X", "compression.codec="+codec.name)
			checkKeyed(t, kvs, k.consume(t, topic, len(kvs)))
			want := codec.attr
			if why := librdkafkaSkipsCodec(t, addr, codec.name); why != "" {
				t.Logf("librdkafka 2.0.2 sends %s uncompressed to this agent: %s", codec.name, why)
				want = 0
			}
			checkStoredCodec(t, addr, topic, 4, want)
		})
		// librdkafka 2.0.2 may not compress for this agent (above),
		// so franz-go, which always does, produces the codec's batches
		// for librdkafka to decompress.
		t.Run("decompression "+codec.name, func(t *testing.T) {
			topic := "zk-" + codec.name
			createTopic(t, addr, topic, 4)
			cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.DisableIdempotentWrite(),
				kgo.ProducerBatchCompression(codec.codec))
			kvs := make([]keyValue, 2000)
			rs := make([]*kgo.Record, len(kvs))
			for i := range kvs {
				kvs[i] = keyValue{fmt.Sprintf("k%02d", i%50), fmt.Sprintf("kgo-%s-%05d-%s", codec.name, i, strings.Repeat("y", i%40))}
				rs[i] = &kgo.Record{Key: []byte(kvs[i].key), Value: []byte(kvs[i].value)}
			}
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			checkStoredCodec(t, addr, topic, 4, codec.attr)
			checkKeyed(t, kvs, k.consume(t, topic, len(kvs)))
		})
	}
}

// librdkafkaSkipsCodec says why librdkafka 2.0.2 would send batches of
// codec uncompressed to the agent at addr, or "" if it compresses them.
// It decides from the advertised ApiVersions (rdkafka_msgset_writer.c and
// rdkafka_feature.c): the broker must serve some Produce version in
// [0, 0] for gzip, snappy and lz4, in [0, 7] for zstd (a range check
// meant as a minimum, confluentinc/librdkafka#4956, fixed in later
// librdkafka); lz4 needs the LZ4 feature, which it infers from
// FindCoordinator v0; zstd needs Produce v7 and Fetch v10.
func librdkafkaSkipsCodec(t *testing.T, addr, codec string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, newClient(t, addr))
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	serves := func(key, lo, hi int16) bool {
		for _, k := range resp.ApiKeys {
			if k.ApiKey == key {
				return k.MinVersion <= hi && lo <= k.MaxVersion
			}
		}
		return false
	}
	const produce, fetch, findCoordinator = 0, 1, 10
	switch codec {
	case "gzip", "snappy", "lz4":
		if !serves(produce, 0, 0) {
			return "the agent does not advertise Produce v0"
		}
		if codec == "lz4" && !serves(findCoordinator, 0, 0) {
			return "the agent does not advertise FindCoordinator v0"
		}
	case "zstd":
		if !serves(produce, 0, 7) || !serves(produce, 7, 7) || !serves(fetch, 10, 10) {
			return "the agent does not advertise Produce v7 and Fetch v10"
		}
	}
	return ""
}

// checkStoredCodec fetches the first batch of each partition raw and
// checks it is still compressed with codec: the agent keeps the client's
// bytes as sent.
func checkStoredCodec(t *testing.T, addr, topic string, partitions int32, codec int8) {
	t.Helper()
	// kgo sends a request at the highest version both sides serve;
	// capping at 2.8 keeps Fetch below v13, which names topics by id.
	cl := newClient(t, addr, kgo.MaxVersions(kversion.V2_8_0()))
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 0
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("raw fetch: %v", err)
	}
	seen := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Errorf("raw fetch %s/%d: error %d", rt.Topic, rp.Partition, rp.ErrorCode)
				continue
			}
			if len(rp.RecordBatches) == 0 {
				continue
			}
			// librdkafka sends a batch uncompressed when compressing
			// does not make it smaller (a batch of one short message),
			// so only "some, and no other codec" can be asked, or
			// "none" when the client was expected not to compress.
			for rest := rp.RecordBatches; len(rest) > 0; {
				var b kmsg.RecordBatch
				if err := b.ReadFrom(rest); err != nil || 12+int(b.Length) > len(rest) {
					t.Errorf("raw fetch %s/%d: bad batch (length %d of %d bytes): %v", rt.Topic, rp.Partition, b.Length, len(rest), err)
					break
				}
				switch got := int8(b.Attributes & 0x07); got {
				case codec:
					seen++
				case 0:
				default:
					t.Errorf("%s/%d: stored batch codec %d, want %d", rt.Topic, rp.Partition, got, codec)
				}
				rest = rest[12+int(b.Length):]
			}
		}
	}
	if seen == 0 {
		t.Errorf("raw fetch of %s: no batch compressed with codec %d", topic, codec)
	}
}

// checkKeyed checks that got is exactly produced, as Kafka orders it:
// every message once, offsets dense from 0 in each partition, each key
// in one partition, and each partition's values in the order they were
// produced.
func checkKeyed(t *testing.T, produced []keyValue, got []kcatMsg) {
	t.Helper()
	if len(got) != len(produced) {
		t.Errorf("consumed %d messages, produced %d", len(got), len(produced))
	}
	byPart := make(map[int32][]kcatMsg)
	keyPart := make(map[string]int32)
	for _, m := range got {
		byPart[m.partition] = append(byPart[m.partition], m)
		if p, ok := keyPart[m.key]; ok && p != m.partition {
			t.Fatalf("key %q in partitions %d and %d", m.key, p, m.partition)
		}
		keyPart[m.key] = m.partition
	}
	want := make(map[int32][]string)
	for _, kv := range produced {
		p, ok := keyPart[kv.key]
		if !ok {
			t.Fatalf("key %q (value %q) never consumed", kv.key, kv.value)
		}
		want[p] = append(want[p], kv.value)
	}
	for p, ms := range byPart {
		slices.SortFunc(ms, func(a, b kcatMsg) int { return int(a.offset - b.offset) })
		for i, m := range ms {
			if m.offset != int64(i) {
				t.Fatalf("partition %d: message %d at offset %d: offsets not dense from 0", p, i, m.offset)
			}
			if i >= len(want[p]) || m.value != want[p][i] {
				w := "<none>"
				if i < len(want[p]) {
					w = want[p][i]
				}
				t.Fatalf("partition %d offset %d: value %q, want %q (produce order)", p, i, m.value, w)
			}
		}
		if len(ms) != len(want[p]) {
			t.Errorf("partition %d: %d messages, want %d", p, len(ms), len(want[p]))
		}
	}
}

// kcatRunner runs kcat against one agent.
type kcatRunner struct {
	t    *testing.T
	path string
	addr string
}

// run runs kcat with stdin and returns stdout. librdkafka logs protocol
// errors and retries forever; such a line fails the test at once, with
// the line, rather than after a timeout.
func (k kcatRunner) run(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	isProtoErr := func(line string) bool {
		return strings.Contains(line, "PROTOERR") || strings.Contains(line, "Protocol parse failure")
	}
	stdout, errLines, protoErr, err := k.exec(ctx, t, stdin, isProtoErr, append([]string{"-m", "10"}, args...)...)
	switch {
	case protoErr != "":
		t.Fatalf("kcat %s: librdkafka reported a protocol error from the agent:\n%s\nstderr:\n%s",
			strings.Join(args, " "), protoErr, tail(errLines, 20))
	case ctx.Err() != nil:
		t.Fatalf("kcat %s: not done after %v\nstderr:\n%s", strings.Join(args, " "), opTimeout, tail(errLines, 20))
	case err != nil:
		t.Fatalf("kcat %s: %v\nstderr:\n%s", strings.Join(args, " "), err, tail(errLines, 20))
	}
	return stdout
}

// exec runs kcat with stdin until it exits, ctx ends, or a line of its
// stderr satisfies stopAt, which kills it. It returns what kcat wrote to
// stdout, its stderr lines, the line that stopped it ("" if none), and
// the error of its exit.
func (k kcatRunner) exec(ctx context.Context, t *testing.T, stdin []byte, stopAt func(line string) bool, args ...string) (stdout string, errLines []string, stoppedAt string, err error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, k.path, append([]string{"-b", k.addr}, args...)...)
	if stdin != nil {
		cmd.Stdin = strings.NewReader(string(stdin))
	}
	var out strings.Builder
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("kcat: %v", err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		errLines = append(errLines, line)
		if stoppedAt == "" && stopAt(line) {
			stoppedAt = line
			cmd.Process.Kill()
		}
	}
	err = cmd.Wait()
	return out.String(), errLines, stoppedAt, err
}

func tail(lines []string, n int) string {
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// produce writes kvs as key:value lines to a file and produces it with
// kcat -K: -l, acks=all. It returns the wall clock (ms) around the run.
func (k kcatRunner) produce(t *testing.T, topic string, kvs []keyValue, extra ...string) (startMs, endMs int64) {
	t.Helper()
	var b strings.Builder
	for _, kv := range kvs {
		if strings.ContainsAny(kv.key, ":\n") || strings.ContainsAny(kv.value, "\t\n") {
			t.Fatalf("bad test message %q:%q", kv.key, kv.value)
		}
		b.WriteString(kv.key)
		b.WriteByte(':')
		b.WriteString(kv.value)
		b.WriteByte('\n')
	}
	file := filepath.Join(t.TempDir(), "messages")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	startMs = time.Now().UnixMilli()
	k.run(t, nil, append([]string{"-P", "-t", topic, "-K:", "-X", "acks=all", "-l", file}, extra...)...)
	endMs = time.Now().UnixMilli()
	return startMs, endMs
}

// consume reads topic from the beginning to its end and checks kcat
// printed want messages.
func (k kcatRunner) consume(t *testing.T, topic string, want int) []kcatMsg {
	t.Helper()
	return k.consumeFrom(t, topic, "beginning", want)
}

func (k kcatRunner) consumeFrom(t *testing.T, topic, from string, want int) []kcatMsg {
	t.Helper()
	// A short fetch wait: -e ends once every partition reported its
	// end, and an empty fetch otherwise waits 500 ms at each.
	out := k.run(t, nil, "-C", "-t", topic, "-o", from, "-e", "-X", "fetch.wait.max.ms=20", "-f", kcatFormat)
	var msgs []kcatMsg
	for line := range strings.Lines(out) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(f) != 6 {
			t.Fatalf("kcat line %q: %d fields, want 6", line, len(f))
		}
		p, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		ts, err3 := strconv.ParseInt(f[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("kcat line %q: bad number", line)
		}
		msgs = append(msgs, kcatMsg{partition: int32(p), offset: o, key: f[2], value: f[3], timestamp: ts, headers: f[5]})
	}
	if len(msgs) != want {
		t.Errorf("kcat consumed %d messages from %s (from %s), want %d", len(msgs), topic, from, want)
	}
	return msgs
}
