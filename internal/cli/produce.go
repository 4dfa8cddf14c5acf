package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	defaultMaxLineBytes = 1 << 20
	// kgo's default batch limit (1000012 bytes) is below a 1 MiB line, so
	// the batch limit grows with --max-line-bytes; this leaves room for the
	// key, headers and batch framing.
	batchOverheadBytes = 64 << 10
	defaultBatchBytes  = 1000012
	// maxReportedErrors bounds how many delivery errors are printed; the
	// rest are only counted, so a dead topic does not flood the terminal.
	maxReportedErrors = 10
	// flushGrace is how long a flush outlives --timeout.
	flushGrace = 2 * time.Second
	// lineQueueLen bounds the lines read ahead of the producer.
	lineQueueLen = 64
)

type produceOptions struct {
	client       ClientOptions
	keySep       string
	headers      []string
	partition    int32
	acks         string
	compression  string
	maxLineBytes int
}

// NewProduceCommand returns `produce TOPIC`: one record per stdin line.
func NewProduceCommand() *cobra.Command {
	var o produceOptions
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce one record per line of stdin",
		Long: "Produce one record per line of stdin (without the newline). With -k SEP, the text\n" +
			"before the first SEP is the key and the rest the value; a line without SEP has no key.\n" +
			"Records are sent asynchronously and flushed at EOF; a summary goes to stderr and the\n" +
			"command fails if any record failed.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), args[0], cmd.InOrStdin(), cmd.ErrOrStderr())
		},
	}
	o.client.Register(cmd.Flags())
	f := cmd.Flags()
	f.StringVarP(&o.keySep, "key-separator", "k", "", "split each line at the first SEP into key and value")
	f.StringArrayVarP(&o.headers, "header", "H", nil, "header key=value added to every record (repeatable)")
	f.Int32VarP(&o.partition, "partition", "p", -1, "partition to produce to (-1: hash the key, or spread keyless records)")
	f.StringVar(&o.acks, "acks", "all", "acks: all, 1 or 0 (anything but all disables idempotence)")
	f.StringVarP(&o.compression, "compression", "z", "none", "batch compression: none, gzip, snappy, lz4, zstd")
	f.IntVar(&o.maxLineBytes, "max-line-bytes", defaultMaxLineBytes, "longest accepted line, in bytes")
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
	if o.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	} else if o.partition != -1 {
		return nil, nil, fmt.Errorf("%w: --partition %d", ErrUsage, o.partition)
	}
	if o.maxLineBytes <= 0 {
		return nil, nil, fmt.Errorf("%w: --max-line-bytes must be positive", ErrUsage)
	}
	if batch := o.maxLineBytes + batchOverheadBytes; batch > defaultBatchBytes {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(min(batch, 1<<30))))
	}
	if o.client.Timeout > 0 {
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
type produceTally struct {
	mu struct {
		sync.Mutex
		ok, failed int
		firstErr   error
	}
	stderr io.Writer // written under mu, so error lines do not interleave
}

func (t *produceTally) promise(r *kgo.Record, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		t.mu.ok++
		return
	}
	t.mu.failed++
	if t.mu.firstErr == nil {
		t.mu.firstErr = err
	}
	if t.mu.failed <= maxReportedErrors {
		fmt.Fprintf(t.stderr, "produce: record %q: %v\n", truncate(r.Value, 40), err)
	}
}

// summarize prints the one-line summary and returns the failures. It
// writes under mu because, after a flush that timed out, late promises
// may still be writing errors.
func (t *produceTally) summarize(topic string, sent int) (failed int, firstErr error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.stderr, "produced %d records to %s", t.mu.ok, topic)
	if t.mu.failed > 0 {
		fmt.Fprintf(t.stderr, ", %d failed", t.mu.failed)
	}
	if pending := sent - t.mu.ok - t.mu.failed; pending > 0 {
		fmt.Fprintf(t.stderr, ", %d unconfirmed", pending)
	}
	fmt.Fprintln(t.stderr)
	return t.mu.failed, t.mu.firstErr
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

// run produces every line of in to topic. It stops reading at EOF or when
// ctx is cancelled; either way the records already handed to the client
// are flushed (bounded by --timeout) and counted before it returns.
func (o *produceOptions) run(ctx context.Context, topic string, in io.Reader, stderr io.Writer) error {
	opts, headers, err := o.kgoOpts()
	if err != nil {
		return err
	}
	cl, err := o.client.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	tally := &produceTally{stderr: stderr}
	// Records must outlive a SIGINT so the flush below can deliver them:
	// kgo fails a buffered record whose context is cancelled.
	produceCtx := context.WithoutCancel(ctx)
	sep := []byte(o.keySep)
	sent := 0
	produce := func(line []byte) {
		r := &kgo.Record{Topic: topic, Value: line, Headers: headers}
		if o.keySep != "" {
			// Subslices of line: a key or value that is empty stays
			// non-nil, so neither becomes null.
			if k, v, found := bytes.Cut(line, sep); found {
				r.Key, r.Value = k, v
			}
		}
		if o.partition >= 0 {
			r.Partition = o.partition
		}
		// Produce blocks once kgo's bounded buffer (MaxBufferedRecords) is
		// full, which is the backpressure on a fast stdin.
		cl.Produce(produceCtx, r, tally.promise)
		sent++
	}

	lines, readErr := readLines(ctx, in, o.maxLineBytes)
	interrupted := false
loop:
	for {
		select {
		case <-ctx.Done():
			interrupted = true
			// Lines already read are produced too, so "what was read is
			// sent" holds; the bound keeps a fast stdin from delaying exit.
			for range lineQueueLen {
				select {
				case line, ok := <-lines:
					if !ok {
						break loop
					}
					produce(line)
				default:
					break loop
				}
			}
			break loop
		case line, ok := <-lines:
			if !ok {
				break loop
			}
			produce(line)
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

	failed, firstErr := tally.summarize(topic, sent)

	switch {
	case interrupted:
		return ctx.Err()
	case *readErr != nil:
		return fmt.Errorf("read stdin: %w", *readErr)
	case failed > 0:
		return fmt.Errorf("%w: %d of %d records failed, first: %w", ErrPartialFailure, failed, sent, firstErr)
	case flushErr != nil:
		return fmt.Errorf("flush: %w", flushErr)
	}
	return nil
}

// readLines reads in on its own goroutine so that a cancelled ctx stops
// the producer even while stdin blocks. The returned channel is closed at
// EOF, on a read error (then stored in *err, safe to read after the close)
// or when ctx is done. A Read blocked on a terminal outlives the call;
// the process is about to exit then.
func readLines(ctx context.Context, in io.Reader, maxLineBytes int) (<-chan []byte, *error) {
	lines := make(chan []byte, lineQueueLen)
	var err error
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		// +1: the scanner needs room for the newline after a line of
		// exactly maxLineBytes.
		sc.Buffer(make([]byte, 0, min(maxLineBytes+1, 64<<10)), maxLineBytes+1)
		for sc.Scan() {
			// The scanner reuses its buffer; the record keeps its bytes
			// until delivery.
			// make, not nil: an empty line is an empty value, not a
			// null one (a tombstone).
			line := append(make([]byte, 0, len(sc.Bytes())), sc.Bytes()...)
			select {
			case lines <- line:
			case <-ctx.Done():
				return
			}
		}
		err = sc.Err()
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("%w (raise --max-line-bytes, now %d)", err, maxLineBytes)
		}
	}()
	return lines, &err
}
