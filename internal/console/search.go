package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Search bounds. A search reads records, so it is bounded by what it
// reads (the scan budget, which the form may lower or raise up to
// maxSearchBudget), what it keeps (maxSearchMatches), and time.
const (
	defaultSearchBudget = 10_000
	maxSearchBudget     = 200_000
	maxSearchMatches    = 100
	searchReadTimeout   = 15 * time.Second
)

// searchQuery is a search form: records of every partition (or one)
// from an offset or a time, matching a key exactly and/or holding a
// value substring.
type searchQuery struct {
	Key, Value string
	// HasKey: match the key (an empty key is a real key, not "any").
	HasKey bool
	// Partition is -1 for every partition.
	Partition int32
	Offset    int64 // -1: each partition's log start
	Timestamp string
	Budget    int
	Format    string
}

type searchMatch struct {
	Partition int32
	recordRow
}

type searchData struct {
	Topic      string
	Partitions int32
	Q          searchQuery
	// Asked: the form was submitted (the page was not just opened).
	Asked   bool
	Matches []searchMatch
	// Scanned counts the records read; Stopped says why the scan ended
	// before every partition's end, as the page says it.
	Scanned int
	Stopped string
	Err     string
}

func parseSearchQuery(r *http.Request) (searchQuery, error) {
	q := searchQuery{Partition: -1, Offset: -1, Budget: defaultSearchBudget, Format: formatText,
		Key: r.FormValue("key"), Value: r.FormValue("value"), Timestamp: strings.TrimSpace(r.FormValue("timestamp"))}
	q.HasKey = r.FormValue("match_key") == "on" || q.Key != ""
	p, err := formInt(r, "partition", -1, -1, 1<<16)
	if err != nil {
		return q, err
	}
	q.Partition = int32(p)
	if q.Offset, err = formInt(r, "offset", -1, -1, 1<<62); err != nil {
		return q, err
	}
	b, err := formInt(r, "budget", defaultSearchBudget, 1, maxSearchBudget)
	if err != nil {
		return q, err
	}
	q.Budget = int(b)
	switch f := r.FormValue("format"); f {
	case "", formatText:
	case formatJSON, formatHex:
		q.Format = f
	default:
		return q, fmt.Errorf("format %q: want text, json or hex", f)
	}
	return q, nil
}

// handleSearch scans a topic's partitions for records by key, value
// substring, from an offset or a time, up to the scan budget, and says
// where and why it stopped.
func (c *Console) handleSearch(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	q, err := parseSearchQuery(r)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
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
	d := searchData{Topic: topic, Partitions: int32(len(td.Partitions)), Q: q, Asked: r.URL.Query().Has("go")}
	if q.Partition >= d.Partitions {
		c.fail(w, r, http.StatusBadRequest, fmt.Errorf("topic %s has partitions 0 to %d", topic, d.Partitions-1))
		return
	}
	if d.Asked {
		// The same bound as records pages: each search reads with a
		// client and fetch buffers of its own.
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
		if err := c.search(r.Context(), &d); err != nil {
			c.fail(w, r, http.StatusBadGateway, err)
			return
		}
	}
	c.render(w, r, http.StatusOK, "search", page{Title: "Search " + topic, Nav: "topics", Data: d})
}

// search fills d: it lists where each partition starts (the log start,
// the offset asked, or the first offset at the time asked) and ends (the
// high watermark as of now), then reads them all with one client until
// every partition reached its end, the budget is spent, maxSearchMatches
// matched, or searchReadTimeout passed.
func (c *Console) search(ctx context.Context, d *searchData) error {
	lctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	starts, err := c.adm.ListStartOffsets(lctx, d.Topic)
	if err != nil {
		return err
	}
	ends, err := c.adm.ListEndOffsets(lctx, d.Topic)
	if err != nil {
		return err
	}
	var fromMs int64 = -1
	var atTime kadm.ListedOffsets
	if d.Q.Timestamp != "" {
		if fromMs, err = parseTimestamp(d.Q.Timestamp); err != nil {
			return err
		}
		if atTime, err = c.adm.ListOffsetsAfterMilli(lctx, fromMs, d.Topic); err != nil {
			return err
		}
	}
	from := map[int32]kgo.Offset{}
	pending := map[int32]int64{} // partition -> its end, not reached yet
	for p := range d.Partitions {
		if d.Q.Partition >= 0 && p != d.Q.Partition {
			continue
		}
		s, _ := starts.Lookup(d.Topic, p)
		e, _ := ends.Lookup(d.Topic, p)
		if err := errors.Join(s.Err, e.Err); err != nil {
			return fmt.Errorf("partition %d: %w", p, err)
		}
		at := s.Offset
		switch {
		case atTime != nil:
			at = e.Offset
			if o, ok := atTime.Lookup(d.Topic, p); ok && o.Err == nil && o.Offset >= 0 {
				at = o.Offset
			}
		case d.Q.Offset >= 0:
			at = d.Q.Offset
		}
		at = min(max(at, s.Offset), e.Offset)
		if at < e.Offset {
			from[p] = kgo.NewOffset().At(at)
			pending[p] = e.Offset
		}
	}
	if len(pending) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, searchReadTimeout)
	defer cancel()
	cl, err := kgo.NewClient(append(c.cfg.Kafka[:len(c.cfg.Kafka):len(c.cfg.Kafka)],
		kgo.ClientID("strand-console"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{d.Topic: from}),
		// Transaction markers occupy offsets: seeing them is how a
		// partition that ends in one reaches its end.
		kgo.KeepControlRecords(),
		kgo.FetchMaxBytes(maxRecordFetchBytes), kgo.FetchMaxPartitionBytes(maxRecordFetchBytes),
		kgo.MaxConcurrentFetches(1), kgo.FetchMaxWait(time.Second))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for len(pending) > 0 {
		if d.Scanned >= d.Q.Budget {
			d.Stopped = fmt.Sprintf("stopped after %d records: the scan budget; search again from a later offset or with a larger budget", d.Scanned)
			return nil
		}
		fs := cl.PollRecords(rctx, d.Q.Budget-d.Scanned)
		if rctx.Err() != nil {
			d.Stopped = fmt.Sprintf("stopped after %d records: the time bound (%s)", d.Scanned, searchReadTimeout)
			return nil
		}
		var errs []error
		fs.EachError(func(_ string, _ int32, err error) { errs = append(errs, err) })
		if len(errs) > 0 {
			d.Err = errors.Join(errs...).Error()
			return nil
		}
		for _, rec := range fs.Records() {
			end, ok := pending[rec.Partition]
			if !ok || rec.Offset >= end {
				continue
			}
			if rec.Offset+1 >= end {
				delete(pending, rec.Partition)
			}
			if rec.Attrs.IsControl() {
				continue // a marker, not a record
			}
			d.Scanned++
			if fromMs >= 0 && rec.Timestamp.UnixMilli() < fromMs {
				continue // before the time, in the batch that reaches it
			}
			if d.Q.HasKey && string(rec.Key) != d.Q.Key {
				continue
			}
			if d.Q.Value != "" && !bytes.Contains(rec.Value, []byte(d.Q.Value)) {
				continue
			}
			d.Matches = append(d.Matches, searchMatch{Partition: rec.Partition, recordRow: showRecord(rec, d.Q.Format)})
			if len(d.Matches) == maxSearchMatches {
				d.Stopped = fmt.Sprintf("stopped after %d records: %d matches shown, the most one search shows", d.Scanned, maxSearchMatches)
				return nil
			}
		}
	}
	return nil
}
