package cli

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	defaultMaxLineBytes = 1 << 20
	// kgo's default batch limit (1000012 bytes) is below a 1 MiB line, so
	// the batch limit grows with --max-line-bytes; this leaves room for the
	// key, headers and batch framing.
	batchOverheadBytes = 64 << 10
	defaultBatchBytes  = 1000012
	// flushGrace is how long a flush outlives --timeout.
	flushGrace = 2 * time.Second
	// recordQueueLen bounds the records read ahead of the producer.
	recordQueueLen = 64
)

type produceOptions struct {
	client       ClientOptions
	keySep       string
	format       string
	headers      []string
	partition    int32
	acks         string
	compression  string
	maxLineBytes int
	// autoCreate is rpk's --allow-auto-topic-creation: ask the cluster
	// to create a missing topic (its auto.create.topics.enable decides).
	autoCreate bool
}

// produceFormatHelp documents --format of produce: the reading side of
// consume's language (franz-go's RecordReader, rpk's -f).
const produceFormatHelp = `read records from stdin in this rpk-style layout (franz-go's RecordReader) ` +
	`instead of one value per line: %t topic, %p partition, %k key, %v value, %d timestamp (Unix ms), ` +
	`%H header count then %h{%k=%v } headers, %K/%V sizes, %v{json} a JSON value, %v{hex|base64}, \n \t escapes`

// NewProduceCommand returns `produce TOPIC`: one record per stdin line,
// or records in a --format layout.
func NewProduceCommand() *cobra.Command {
	var o produceOptions
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce one record per line of stdin, or records in a --format layout",
		Long: "Produce one record per line of stdin (without the newline). With -k SEP, the text\n" +
			"before the first SEP is the key and the rest the value; a line without SEP has no key.\n" +
			"With -f LAYOUT, stdin is read as records in rpk's format language instead, e.g.\n" +
			"  -f '%k %v\\n'                   key, space, value, newline\n" +
			"  -f '%d %k %H %h{%k=%v }%v\\n'   timestamp, key, headers, value\n" +
			"  -f '%v{json}'                  one JSON value after another\n" +
			"A record that names its topic (%t) or partition (%p) goes there.\n\n" +
			"A missing topic is an error before anything is read, as the producer would only\n" +
			"retry until --timeout: create it with `strand topic create`, or pass\n" +
			"--allow-auto-topic-creation (as rpk's) to have the cluster create it, which it does\n" +
			"only when its auto.create.topics.enable is on; the command says which happened.\n\n" +
			"Records are sent\n" +
			"asynchronously and flushed at EOF; a summary goes to stderr, and if any record failed\n" +
			"the command fails with one line: how many failed and the first error.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), args[0], cmd.InOrStdin(), cmd.ErrOrStderr())
		},
	}
	o.client.Register(cmd.Flags())
	f := cmd.Flags()
	f.StringVarP(&o.keySep, "key-separator", "k", "", "split each line at the first SEP into key and value")
	f.StringVarP(&o.format, "format", "f", "", produceFormatHelp)
	f.StringArrayVarP(&o.headers, "header", "H", nil, "header key=value added to every record (repeatable)")
	f.Int32VarP(&o.partition, "partition", "p", -1, "partition to produce to (-1: hash the key, or spread keyless records)")
	f.StringVar(&o.acks, "acks", "all", "acks: all, 1 or 0 (anything but all disables idempotence)")
	f.StringVarP(&o.compression, "compression", "z", "none", "batch compression: none, gzip, snappy, lz4, zstd")
	f.IntVar(&o.maxLineBytes, "max-line-bytes", defaultMaxLineBytes, "longest accepted line (or --format record), in bytes")
	f.BoolVar(&o.autoCreate, "allow-auto-topic-creation", false, "have the cluster create a missing topic (needs its auto.create.topics.enable)")
	return cmd
}

// kgoOpts validates the flags and turns them into producer options.
func (o *produceOptions) kgoOpts() ([]kgo.Opt, []kgo.RecordHeader, error) {
	var opts []kgo.Opt
	switch o.acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, nil, fmt.Errorf("%w: --acks %q: want all, 1 or 0", ErrUsage, o.acks)
	}
	codec, err := parseCompression(o.compression)
	if err != nil {
		return nil, nil, err
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	switch {
	case o.partition < -1:
		return nil, nil, fmt.Errorf("%w: --partition %d", ErrUsage, o.partition)
	case o.format != "" && o.keySep != "":
		return nil, nil, fmt.Errorf("%w: -k splits lines; with --format, read the key with %%k", ErrUsage)
	case readsVerb(o.format, 'p') && o.partition >= 0:
		return nil, nil, fmt.Errorf("%w: --partition and a --format that reads %%p", ErrUsage)
	case o.partition >= 0 || readsVerb(o.format, 'p'):
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	if o.autoCreate {
		// For topics named by %t, which ensureTopic does not see.
		opts = append(opts, kgo.AllowAutoTopicCreation())
	}
	if o.maxLineBytes <= 0 {
		return nil, nil, fmt.Errorf("%w: --max-line-bytes must be positive", ErrUsage)
	}
	if batch := o.maxLineBytes + batchOverheadBytes; batch > defaultBatchBytes {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(min(batch, 1<<30))))
	}
	// kgo counts a record's delivery timeout from its timestamp, so a
	// record read with its own (older) timestamp would time out before
	// it is sent; those are bounded by the flush instead.
	if o.client.Timeout > 0 && !readsVerb(o.format, 'd') {
		opts = append(opts, kgo.RecordDeliveryTimeout(o.client.Timeout))
	}
	var headers []kgo.RecordHeader
	for _, kv := range o.headers {
		k, v, err := splitKeyValue("-H", kv)
		if err != nil {
			return nil, nil, err
		}
		headers = append(headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return opts, headers, nil
}

func parseCompression(name string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(name) {
	case "none", "":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("%w: --compression %q: want none, gzip, snappy, lz4 or zstd", ErrUsage, name)
}

// produceTally counts delivery results, which arrive on kgo's goroutines.
// Failures are only counted, with the first error kept: a dead agent
// fails every record the same way, and one line says so.
type produceTally struct {
	mu struct {
		sync.Mutex
		ok, failed int
		firstErr   error
		// keylessInvalid counts records without a key refused with
		// INVALID_RECORD: on a compacted topic, for want of the key
		// (explainKeyless).
		keylessInvalid int
		// keylessTopics are their topics, at most maxExplainedTopics.
		keylessTopics []string
	}
}

// maxExplainedTopics bounds the topics explainKeyless describes.
const maxExplainedTopics = 10

func (t *produceTally) promise(r *kgo.Record, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		t.mu.ok++
		return
	}
	t.mu.failed++
	if r != nil && r.Key == nil && errors.Is(err, kerr.InvalidRecord) {
		t.mu.keylessInvalid++
		if !slices.Contains(t.mu.keylessTopics, r.Topic) && len(t.mu.keylessTopics) < maxExplainedTopics {
			t.mu.keylessTopics = append(t.mu.keylessTopics, r.Topic)
		}
	}
	if t.mu.firstErr == nil {
		t.mu.firstErr = err
	}
}

func (t *produceTally) counts() (ok, failed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.ok, t.mu.failed
}

// summarize returns the failures as one error, or with none prints the
// one-line summary to stderr.
func (t *produceTally) summarize(stderr io.Writer, topic string, sent int, flushErr error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	pending := sent - t.mu.ok - t.mu.failed
	if t.mu.failed > 0 {
		return &recordsFailedError{failed: t.mu.failed, produced: t.mu.ok, unconfirmed: pending, first: t.mu.firstErr}
	}
	if pending > 0 && flushErr != nil {
		// Records without a delivery timeout of their own (read with
		// %d) that the flush bound cut off.
		return &recordsFailedError{failed: pending, produced: t.mu.ok,
			first: fmt.Errorf("not delivered within --timeout: %w", flushErr)}
	}
	fmt.Fprintf(stderr, "produced %d records to %s", t.mu.ok, topic)
	if pending > 0 {
		fmt.Fprintf(stderr, ", %d unconfirmed", pending)
	}
	fmt.Fprintln(stderr)
	return nil
}

// recordsFailedError is a produce's failed records in one line: how
// many, and the first error (the others are usually the same).
type recordsFailedError struct {
	failed, produced, unconfirmed int
	first                         error
}

func (e *recordsFailedError) Error() string {
	s := fmt.Sprintf("%d records failed", e.failed)
	if e.produced > 0 || e.unconfirmed > 0 {
		s += fmt.Sprintf(" (%d produced, %d unconfirmed)", e.produced, e.unconfirmed)
	}
	return fmt.Sprintf("%s: %v (first error)", s, e.first)
}

func (e *recordsFailedError) Is(target error) bool { return target == ErrPartialFailure }

func (e *recordsFailedError) Unwrap() error { return e.first }

// run produces every record of in to topic. It stops reading at EOF or
// when ctx is cancelled; either way the records already handed to the
// client are flushed (bounded by --timeout) and counted before it
// returns.
func (o *produceOptions) run(ctx context.Context, topic string, in io.Reader, stderr io.Writer) error {
	opts, headers, err := o.kgoOpts()
	if err != nil {
		return err
	}
	next, err := o.source(in)
	if err != nil {
		return err
	}
	cl, err := o.client.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if !readsVerb(o.format, 't') { // records naming their topic may not use TOPIC at all
		if err := o.ensureTopic(ctx, cl, topic, stderr); err != nil {
			return err
		}
	}

	tally := &produceTally{}
	prog := newProgress(stderr, nil)
	// Records must outlive a SIGINT so the flush below can deliver them:
	// kgo fails a buffered record whose context is cancelled.
	produceCtx := context.WithoutCancel(ctx)
	sent := 0
	produce := func(r *kgo.Record) {
		if r.Topic == "" {
			r.Topic = topic
		}
		r.Headers = append(r.Headers, headers...)
		if o.partition >= 0 {
			r.Partition = o.partition
		}
		// Produce blocks once kgo's bounded buffer (MaxBufferedRecords) is
		// full, which is the backpressure on a fast stdin.
		cl.Produce(produceCtx, r, tally.promise)
		sent++
		if prog != nil {
			ok, failed := tally.counts()
			prog.update(fmt.Sprintf("%s, %d failed", countLine("produced", ok, 0), failed))
		}
	}

	records, readErr := readRecords(ctx, next)
	interrupted := false
loop:
	for {
		select {
		case <-ctx.Done():
			interrupted = true
			// Records already read are produced too, so "what was read is
			// sent" holds; the bound keeps a fast stdin from delaying exit.
			for range recordQueueLen {
				select {
				case r, ok := <-records:
					if !ok {
						break loop
					}
					produce(r)
				default:
					break loop
				}
			}
			break loop
		case r, ok := <-records:
			if !ok {
				break loop
			}
			produce(r)
		}
	}

	// Flush on a fresh context: after SIGINT the records already accepted
	// should still be delivered. Each record fails on its own within
	// --timeout (RecordDeliveryTimeout), so the flush bound only adds a
	// grace period for those failures to be reported rather than cut off.
	flushCtx, cancel := context.WithCancel(produceCtx)
	if o.client.Timeout > 0 {
		cancel()
		flushCtx, cancel = context.WithTimeout(produceCtx, o.client.Timeout+flushGrace)
	}
	defer cancel()
	flushErr := cl.Flush(flushCtx)
	prog.clear()

	failedErr := tally.summarize(stderr, topic, sent, flushErr)
	if failedErr != nil {
		failedErr = tally.explainKeyless(ctx, cl, failedErr)
	}
	switch {
	case interrupted:
		return ctx.Err()
	case *readErr != nil:
		return fmt.Errorf("read stdin: %w", *readErr)
	case failedErr != nil:
		return failedErr
	case flushErr != nil:
		return fmt.Errorf("flush: %w", flushErr)
	}
	return nil
}

// recordSource returns stdin's next record, io.EOF after the last.
type recordSource func() (*kgo.Record, error)

// source reads in as lines (split at -k) or, with --format, through a
// kgo.RecordReader; a bad layout is a usage error found before any
// connection.
func (o *produceOptions) source(in io.Reader) (recordSource, error) {
	if o.format == "" {
		return o.lineSource(in), nil
	}
	// The bound counts what the reader takes from stdin since the last
	// whole record; its read-ahead buffer is the slack.
	bounded := &boundedReader{r: in, max: int64(o.maxLineBytes) + batchOverheadBytes}
	rr, err := kgo.NewRecordReader(bounded, o.format)
	if err != nil {
		return nil, fmt.Errorf("%w: --format %q: %v", ErrUsage, o.format, err)
	}
	n := 0
	return func() (*kgo.Record, error) {
		r, err := rr.ReadRecord()
		switch {
		case err == io.EOF:
			return nil, io.EOF
		case err != nil:
			return nil, fmt.Errorf("record %d: %w", n+1, err)
		}
		n++
		bounded.n = 0
		return r, nil
	}, nil
}

// lineSource is one record per line: the default input, bounded by
// --max-line-bytes.
func (o *produceOptions) lineSource(in io.Reader) recordSource {
	sc := bufio.NewScanner(in)
	// +1: the scanner needs room for the newline after a line of exactly
	// maxLineBytes.
	sc.Buffer(make([]byte, 0, min(o.maxLineBytes+1, 64<<10)), o.maxLineBytes+1)
	sep := []byte(o.keySep)
	return func() (*kgo.Record, error) {
		if !sc.Scan() {
			err := sc.Err()
			if errors.Is(err, bufio.ErrTooLong) {
				return nil, fmt.Errorf("%w (raise --max-line-bytes, now %d)", err, o.maxLineBytes)
			}
			return nil, cmp.Or(err, io.EOF)
		}
		// The scanner reuses its buffer; the record keeps its bytes until
		// delivery. make, not nil: an empty line is an empty value, not a
		// null one (a tombstone).
		line := append(make([]byte, 0, len(sc.Bytes())), sc.Bytes()...)
		r := &kgo.Record{Value: line}
		if o.keySep != "" {
			// Subslices of line: a key or value that is empty stays
			// non-nil, so neither becomes null.
			if k, v, found := bytes.Cut(line, sep); found {
				r.Key, r.Value = k, v
			}
		}
		return r, nil
	}
}

// errRecordTooLong reports a --format record longer than --max-line-bytes.
var errRecordTooLong = errors.New("record too long")

// boundedReader fails once more than max bytes are read without the
// caller resetting n, so a --format layout that never matches cannot
// buffer all of stdin.
type boundedReader struct {
	r      io.Reader
	n, max int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n >= b.max {
		return 0, fmt.Errorf("%w: more than %d bytes (raise --max-line-bytes)", errRecordTooLong, b.max)
	}
	p = p[:min(int64(len(p)), b.max-b.n)]
	n, err := b.r.Read(p)
	b.n += int64(n)
	return n, err
}

// readsVerb reports whether a --format layout reads the field of verb,
// e.g. 'p' for %p (a %% is a literal percent).
func readsVerb(layout string, verb byte) bool {
	for i := 0; i+1 < len(layout); i++ {
		if layout[i] == '%' {
			if layout[i+1] == verb {
				return true
			}
			i++
		}
	}
	return false
}

// readRecords reads stdin on its own goroutine so that a cancelled ctx
// stops the producer even while stdin blocks. The returned channel is
// closed at EOF, on a read error (then stored in *err, safe to read after
// the close) or when ctx is done. A Read blocked on a terminal outlives
// the call; the process is about to exit then.
func readRecords(ctx context.Context, next recordSource) (<-chan *kgo.Record, *error) {
	records := make(chan *kgo.Record, recordQueueLen)
	var err error
	go func() {
		defer close(records)
		for {
			r, rerr := next()
			if rerr != nil {
				if rerr != io.EOF {
					err = rerr
				}
				return
			}
			select {
			case records <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	return records, &err
}

// ensureTopic fails early, saying why and what to do, when topic is
// missing: kgo would otherwise retry UNKNOWN_TOPIC_OR_PARTITION until
// --timeout and fail every record with it. With --allow-auto-topic-creation
// it asks the cluster to create the topic (a Metadata request allowing
// auto-creation, as rpk's flag makes kgo send) and says whether it did. An
// unreachable cluster is left to the producer, which reports it per record.
func (o *produceOptions) ensureTopic(ctx context.Context, cl *kgo.Client, topic string, stderr io.Writer) error {
	ctx, cancel := o.client.requestContext(ctx)
	defer cancel()
	lookup := func(create bool) (int16, error) {
		req := kmsg.NewPtrMetadataRequest()
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, t)
		req.AllowAutoTopicCreation = create
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, err
		}
		for _, rt := range resp.Topics {
			if rt.Topic != nil && *rt.Topic == topic {
				return rt.ErrorCode, nil
			}
		}
		return 0, fmt.Errorf("topic %s missing from the metadata response", topic)
	}
	code, err := lookup(false)
	switch {
	case err != nil:
		return nil // unreachable: the producer reports it
	case code == kerr.UnknownTopicOrPartition.Code && !o.autoCreate:
		return fmt.Errorf("%w: %s does not exist; create it with `strand topic create %s`, or pass --allow-auto-topic-creation "+
			"to have the cluster create it (if its auto.create.topics.enable is on)", ErrUnknownTopic, topic, topic)
	case code == kerr.UnknownTopicOrPartition.Code:
		if code, err = lookup(true); err != nil {
			return fmt.Errorf("auto-create topic %s: %w", topic, err)
		}
		switch code {
		case 0, kerr.LeaderNotAvailable.Code: // Kafka's answer while a new topic gets its leaders
			fmt.Fprintf(stderr, "topic %s did not exist: the cluster created it (auto.create.topics.enable)\n", topic)
			return nil
		case kerr.UnknownTopicOrPartition.Code:
			return fmt.Errorf("%w: %s does not exist and the cluster did not create it: its auto.create.topics.enable is off; "+
				"create it with `strand topic create %s`", ErrUnknownTopic, topic, topic)
		}
		return fmt.Errorf("auto-create topic %s: %w", topic, kerr.ErrorForCode(code))
	case code != 0 && code != kerr.LeaderNotAvailable.Code:
		return fmt.Errorf("topic %s: %w", topic, kerr.ErrorForCode(code))
	}
	return nil
}

// explainKeyless says why records failed with INVALID_RECORD when they
// had no key and went to a compacted topic: Kafka's client error names
// only the code ("This record has failed the validation on broker"),
// and the agent's message (a key is needed) does not reach the client
// library's error, so the CLI looks at the topics' cleanup.policy and
// says it in its own words. err is returned as it was otherwise.
func (t *produceTally) explainKeyless(ctx context.Context, cl *kgo.Client, err error) error {
	t.mu.Lock()
	keyless, topics := t.mu.keylessInvalid, slices.Clone(t.mu.keylessTopics)
	t.mu.Unlock()
	if keyless == 0 {
		return err
	}
	var compacted []string
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if rcs, derr := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topics...); derr == nil {
		for _, rc := range rcs {
			for _, c := range rc.Configs {
				if c.Key == "cleanup.policy" && c.Value != nil && strings.Contains(*c.Value, "compact") {
					compacted = append(compacted, fmt.Sprintf("%s (cleanup.policy=%s)", rc.Name, *c.Value))
				}
			}
		}
	}
	if len(compacted) == 0 {
		return err
	}
	return fmt.Errorf("%w\n%d records had no key, and a compacted topic keeps records by key, so it refuses one without: %s; "+
		"give each record a key (-k SEP splits each line into key and value, or -f '%%k %%v\\n')", err, keyless, strings.Join(compacted, ", "))
}
