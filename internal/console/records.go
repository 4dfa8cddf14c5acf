package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Record formats, chosen per page.
const (
	formatText = "text"
	formatJSON = "json"
	formatHex  = "hex"
)

// recordsReadTimeout bounds reading one page of records: a partition
// whose last offsets are transaction markers (which a consumer never
// sees) ends the page by this bound rather than by a record.
const recordsReadTimeout = 5 * time.Second

type recordsQuery struct {
	Partition int32
	// Offset is where the page starts; Timestamp, when set (unix ms),
	// chose it (ListOffsets by timestamp).
	Offset    int64
	Timestamp string
	N         int
	Format    string
}

type shownBytes struct {
	Text string
	// Null: the key or value is null, not empty.
	Null bool
	// Note says how the bytes were shown when not as asked (not valid
	// JSON, not UTF-8) and whether they were cut.
	Note string
}

type shownHeader struct {
	Key   string
	Value shownBytes
}

type recordRow struct {
	Offset    int64
	Timestamp time.Time
	Key       shownBytes
	Value     shownBytes
	Headers   []shownHeader
	Size      int64
}

type recordsData struct {
	Topic      string
	Partitions int32
	Q          recordsQuery
	Start, End int64
	Records    []recordRow
	// Next is the offset the next page starts at, -1 at the end.
	Next int64
	// Cut says the page stopped at its byte bound; Err is a read error
	// after the records shown.
	Cut bool
	Err string
	// fromMs, when not -1, is the time asked for: ListOffsets names the
	// batch that reaches it, whose first records may be older, so those
	// are skipped.
	fromMs int64
}

// errBusy refuses a records page when maxRecordReaders are being read.
var errBusy = errors.New("too many record pages are being read at once; try again in a moment")

func (c *Console) handleRecords(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	q, err := parseRecordsQuery(r)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	// Each page reads with a client of its own and its fetch buffers:
	// without a bound, many requests at once would hold as many.
	wait := time.NewTimer(c.recordReaderWait)
	defer wait.Stop()
	select {
	case c.recordReaders <- struct{}{}:
		defer func() { <-c.recordReaders }()
	case <-wait.C:
		w.Header().Set("Retry-After", "1")
		c.fail(w, r, http.StatusServiceUnavailable, errBusy)
		return
	case <-r.Context().Done():
		return
	}
	ctx, cancel := kafkaCtx(r)
	defer cancel()
	tds, err := c.adm.ListTopicsWithInternal(ctx, topic)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	td, ok := tds[topic]
	if !ok || td.Err != nil {
		c.fail(w, r, http.StatusNotFound, fmt.Errorf("topic %s: %v", topic, td.Err))
		return
	}
	d := recordsData{Topic: topic, Partitions: int32(len(td.Partitions)), Q: q, Next: -1, fromMs: -1}
	if q.Partition < 0 || q.Partition >= d.Partitions {
		c.fail(w, r, http.StatusBadRequest, fmt.Errorf("topic %s has partitions 0 to %d", topic, d.Partitions-1))
		return
	}
	starts, err := c.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	ends, err := c.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	s, _ := starts.Lookup(topic, q.Partition)
	e, _ := ends.Lookup(topic, q.Partition)
	if err := errors.Join(s.Err, e.Err); err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	d.Start, d.End = s.Offset, e.Offset
	if q.Timestamp != "" {
		ms, err := parseTimestamp(q.Timestamp)
		if err != nil {
			c.fail(w, r, http.StatusBadRequest, err)
			return
		}
		at, err := c.adm.ListOffsetsAfterMilli(ctx, ms, topic)
		if err != nil {
			c.fail(w, r, http.StatusBadGateway, err)
			return
		}
		o, _ := at.Lookup(topic, q.Partition)
		if o.Err != nil {
			c.fail(w, r, http.StatusBadGateway, o.Err)
			return
		}
		// No record at or after the time: the end.
		d.Q.Offset, d.fromMs = o.Offset, ms
		if o.Offset < 0 {
			d.Q.Offset = d.End
		}
	} else if q.Offset < 0 {
		d.Q.Offset = d.Start
	}
	d.Q.Offset = min(max(d.Q.Offset, d.Start), d.End)
	if d.Q.Offset < d.End {
		c.readRecords(r.Context(), &d)
	}
	c.render(w, r, http.StatusOK, "records", page{Title: "Records of " + topic, Nav: "topics", Data: d})
}

// readRecords fills d with up to d.Q.N records from d.Q.Offset, at most
// maxRecordPageBytes of them, with a client of its own: consuming is
// per client, and pages are read concurrently.
func (c *Console) readRecords(ctx context.Context, d *recordsData) {
	ctx, cancel := context.WithTimeout(ctx, recordsReadTimeout)
	defer cancel()
	opts := append(c.cfg.Kafka[:len(c.cfg.Kafka):len(c.cfg.Kafka)],
		kgo.ClientID("strand-console"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{d.Topic: {d.Q.Partition: kgo.NewOffset().At(d.Q.Offset)}}),
		kgo.FetchMaxBytes(maxRecordFetchBytes), kgo.FetchMaxPartitionBytes(maxRecordFetchBytes),
		kgo.MaxConcurrentFetches(1),
		kgo.FetchMaxWait(time.Second))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		d.Err = err.Error()
		return
	}
	defer cl.Close()
	next, total := d.Q.Offset, 0
	for len(d.Records) < d.Q.N && next < d.End {
		fs := cl.PollRecords(ctx, d.Q.N-len(d.Records))
		if ctx.Err() != nil {
			break
		}
		var errs []error
		fs.EachError(func(_ string, _ int32, err error) { errs = append(errs, err) })
		if len(errs) > 0 {
			d.Err = errors.Join(errs...).Error()
			break
		}
		for _, rec := range fs.Records() {
			if len(d.Records) == d.Q.N || rec.Offset >= d.End {
				break
			}
			if d.fromMs >= 0 && len(d.Records) == 0 && rec.Timestamp.UnixMilli() < d.fromMs {
				next = rec.Offset + 1
				continue
			}
			size := len(rec.Key) + len(rec.Value)
			for _, h := range rec.Headers {
				size += len(h.Key) + len(h.Value)
			}
			if total+size > maxRecordPageBytes && len(d.Records) > 0 {
				d.Cut = true
				break
			}
			total += size
			d.Records = append(d.Records, showRecord(rec, d.Q.Format))
			next = rec.Offset + 1
		}
		if d.Cut {
			break
		}
	}
	if next < d.End {
		d.Next = next
	}
	if len(d.Records) > 0 {
		d.Q.Offset = d.Records[0].Offset
	}
}

func showRecord(rec *kgo.Record, format string) recordRow {
	row := recordRow{Offset: rec.Offset, Timestamp: rec.Timestamp.UTC(),
		Key: show(rec.Key, format, false), Value: show(rec.Value, format, true), Size: int64(len(rec.Key) + len(rec.Value))}
	for _, h := range rec.Headers {
		row.Headers = append(row.Headers, shownHeader{Key: h.Key, Value: show(h.Value, format, false)})
		row.Size += int64(len(h.Key) + len(h.Value))
	}
	return row
}

// show renders b as format asks; html/template escapes the result.
// Keys and header values are often plain strings, so only a value that
// is not JSON when JSON was asked for gets a note saying so.
func show(b []byte, format string, value bool) shownBytes {
	if b == nil {
		return shownBytes{Null: true}
	}
	var s shownBytes
	if len(b) > maxShownBytes {
		b = b[:maxShownBytes]
		s.Note = fmt.Sprintf("first %s shown", FormatBytes(maxShownBytes))
	}
	note := func(n string) {
		if s.Note != "" {
			n += "; " + s.Note
		}
		s.Note = n
	}
	switch {
	case format == formatHex:
		s.Text = hex.Dump(b)
	case format == formatJSON && json.Valid(b):
		var out bytes.Buffer
		json.Indent(&out, b, "", "  ")
		s.Text = out.String()
	case !utf8.Valid(b):
		s.Text = hex.Dump(b)
		note("not UTF-8: shown as hex")
	default:
		s.Text = string(b)
		if format == formatJSON && value {
			note("not JSON: shown as text")
		}
	}
	return s
}

func parseRecordsQuery(r *http.Request) (recordsQuery, error) {
	q := recordsQuery{Offset: -1, N: 20, Format: formatText, Timestamp: strings.TrimSpace(r.FormValue("timestamp"))}
	p, err := formInt(r, "partition", 0, 0, 1<<16)
	if err != nil {
		return q, err
	}
	q.Partition = int32(p)
	if q.Offset, err = formInt(r, "offset", -1, -1, 1<<62); err != nil {
		return q, err
	}
	n, err := formInt(r, "n", 20, 1, maxRecordsPerPage)
	if err != nil {
		return q, err
	}
	q.N = int(n)
	switch f := r.FormValue("format"); f {
	case "", formatText:
	case formatJSON, formatHex:
		q.Format = f
	default:
		return q, fmt.Errorf("format %q: want text, json or hex", f)
	}
	return q, nil
}

// parseTimestamp takes unix milliseconds or an RFC 3339 time (the
// browser's datetime-local form, "2006-01-02T15:04", taken as UTC).
func parseTimestamp(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, fmt.Errorf("timestamp %q: want unix milliseconds or 2006-01-02T15:04:05 (UTC)", s)
}
