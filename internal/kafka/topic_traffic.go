package kafka

import (
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch"
)

// topicObserver is the server's TopicObserver, or nil: a handler run
// without a server (tests, benchmarks) or an observer that does not
// count topics.
func (r *Request) topicObserver() TopicObserver {
	if r.Conn == nil || r.Conn.srv == nil {
		return nil
	}
	o, _ := r.Conn.srv.obs.(TopicObserver)
	return o
}

// topicSum adds up one topic's traffic over adjacent partitions, so the
// observer is called once per topic of a request, not per partition.
type topicSum struct {
	id             meta.TopicID
	bytes, records int64
	started        bool
}

// add counts a partition of topic id, first passing the sum so far to
// flush when id starts a new run.
func (s *topicSum) add(id meta.TopicID, bytes, records int64, flush func(meta.TopicID, int64, int64)) {
	if s.started && id != s.id {
		s.done(flush)
	}
	s.id, s.started = id, true
	s.bytes += bytes
	s.records += records
}

func (s *topicSum) done(flush func(meta.TopicID, int64, int64)) {
	if s.started && (s.bytes > 0 || s.records > 0) {
		flush(s.id, s.bytes, s.records)
	}
	*s = topicSum{}
}

// reportProduced tells the observer of the batches written (written(i)
// for batches[i]), per topic. Batches follow the request's order, so a
// topic's are adjacent.
func (r *Request) reportProduced(batches []produce.Batch, written func(i int) bool) {
	o := r.topicObserver()
	if o == nil {
		return
	}
	var sum topicSum
	for i := range batches {
		if written(i) {
			b := &batches[i]
			sum.add(b.TopicID, int64(len(b.Data)), int64(b.Records), o.TopicProduced)
		}
	}
	sum.done(o.TopicProduced)
}

// reportFetched tells the observer of the record bytes and records of
// the answer f is about to send, per topic.
func (f *fetchAnswer) reportFetched() {
	o := f.r.topicObserver()
	if o == nil {
		return
	}
	var sum topicSum
	for i := range f.parts {
		p := &f.parts[i]
		if n := len(p.sp.RecordBatches); n > 0 {
			sum.add(p.id, int64(n), countRecords(p.sp.RecordBatches), o.TopicFetched)
		}
	}
	sum.done(o.TopicFetched)
}

// countRecords counts the records of the whole batches in records from
// their headers, never reading the records themselves. A fetch answer
// may end in a partial batch, which the client drops: it is not counted.
func countRecords(records []byte) int64 {
	var n int64
	for len(records) > 0 {
		entry, rest, err := recordbatch.Next(records)
		if err != nil {
			break
		}
		if h, err := recordbatch.ParseHeader(entry); err == nil {
			n += int64(h.NumRecords)
		}
		records = rest
	}
	return n
}
