// Produce: v0-13
//   - v0-2 carry message format v0/v1 (magic 0 and 1), which Strand does
//     not store: every partition of such a request is answered
//     UNSUPPORTED_FOR_MESSAGE_FORMAT. They are advertised anyway because
//     librdkafka 2.0 (Debian's kcat) only compresses with gzip and snappy
//     when the broker lists Produce v0 (rdkafka_feature.c), and sends
//     everything uncompressed otherwise; it then produces at v7.
//   - Each partition's records must be one magic-2 batch that passes
//     recordbatch.ValidateProduce against the topic's max.message.bytes,
//     else the partition gets the batch's Kafka code (CORRUPT_MESSAGE,
//     MESSAGE_TOO_LARGE, INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE,
//     INVALID_TIMESTAMP) and the others of the request still commit, as
//     with Kafka.
//   - CreateTime topics: a batch whose first timestamp is more than
//     message.timestamp.before.max.ms behind the agent's clock, or whose
//     max timestamp is more than message.timestamp.after.max.ms ahead, is
//     INVALID_TIMESTAMP. Kafka checks every record; the batch header
//     bounds only those two (a compressed batch is never decompressed), so
//     a middle record out of bounds gets through.
//   - LogAppendTime topics: each batch is stamped with the agent's clock
//     (recordbatch.SetLogAppendTime, which rewrites the CRC) before it is
//     stored, and the response carries that time; CreateTime answers -1.
//   - Every stored batch carries partition leader epoch 0, the epoch
//     Metadata and OffsetForLeaderEpoch report.
//   - Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION. With
//     Deps.AutoCreateTopics an unknown topic is created first, as Metadata
//     creates it (Deps.DefaultPartitions, default configs), or answered
//     POLICY_VIOLATION when the partition limits leave no room; Kafka
//     itself leaves that to the Metadata request that precedes a produce.
//   - Acks other than -1, 0 and 1 is INVALID_REQUIRED_ACKS. 1 and -1 mean
//     the same: the answer comes once the data object is durable and its
//     commit applied. With acks=0 nothing is answered; if a partition
//     failed, the connection is closed instead, as Kafka does, so the
//     client notices.
//   - The valid partitions of a request go to the pipeline in one Submit,
//     made inside Request.InOrder: requests pipelined on a connection
//     enter the pipeline in the order they were sent, which idempotent
//     producers rely on. The wait for the commit runs outside it, so later
//     requests do not queue behind it. TimeoutMillis > 0 bounds both; past
//     it the answer is REQUEST_TIMED_OUT and the batches may still commit,
//     as with Kafka.
//   - Pipeline failures: upload KAFKA_STORAGE_ERROR, commit
//     REQUEST_TIMED_OUT, a stopping pipeline NOT_LEADER_OR_FOLLOWER (the
//     client goes to another agent); all retriable.
//   - Idempotent batches (producer id >= 0) are checked by apply
//     (meta.CommitObject): a retry of one of the producer's latest 5
//     batches in the partition is answered with its original base offset
//     and stores nothing; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER,
//     a fenced epoch INVALID_PRODUCER_EPOCH (Kafka's answer since 2.7 for
//     both idempotent and transactional producers), as Kafka. Each
//     partition's records are one batch, so each CommitBatch holds one
//     sequence range.
//   - Transactional batches: a request holding one without a
//     TransactionalID is TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the
//     whole request (Kafka's check in handleProduceRequest). Apply
//     accepts a transactional batch only into a partition its producer's
//     ongoing transaction added with AddPartitionsToTxn, in that
//     transaction's epoch (KIP-890 part 1, meta/txn.go): otherwise
//     INVALID_TXN_STATE, or INVALID_PRODUCER_EPOCH for a fenced epoch.
//     A batch mixing transactional and plain batches, or a control
//     batch from a client, is INVALID_RECORD.
//   - v12 (KIP-890 part 2): the client sends no AddPartitionsToTxn; the
//     handler has the transaction coordinator add the partitions of
//     transactional batches to the producer's transaction (one proposal
//     per request, skipped when this copy already shows them added at
//     the batch's epoch).
//   - Compacted topics (cleanup.policy holds compact): a batch holding a
//     record without a key is INVALID_RECORD, with Kafka's message and,
//     from v8, an ErrorRecords entry per keyless record (compacted.go).
//   - Topics with confluent.key.schema.validation or
//     confluent.value.schema.validation: each key (value) must be in the
//     schema registry's wire format, with a schema id registered under
//     the subject confluent.*.subject.name.strategy names, and decode
//     with it; else INVALID_RECORD with an ErrorRecords entry per refused
//     record (schema_validation.go).
//   - Internal topics (__consumer_offsets) take no client writes:
//     INVALID_TOPIC_EXCEPTION, as Kafka.
//   - v13 (KIP-516): topics by id, answered by id. An id that names no
//     topic is UNKNOWN_TOPIC_ID for each of its partitions, never
//     auto-created (there is no name to create).
//   - ACLs (authz.go): Write on each topic, else TOPIC_AUTHORIZATION_FAILED
//     (checked before existence; no auto-creation without Create on the
//     cluster or topic); a request with transactional batches needs Write on
//     its transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for all.
//   - Left out: v13 (topic ids); ErrorRecords (v8+) stay empty but for
//     keyless records on compacted topics and records refused by schema
//     validation; ErrorMessage (v8+) explains validation failures.

package kafka

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/produce"
	"github.com/strandkafka/strand/internal/recordbatch"
	"github.com/strandkafka/strand/internal/topicconfig"
	"github.com/strandkafka/strand/internal/txn"
)

const produceKey = 0

func init() { regKey(produceKey, 0, 13, handleProduce) }

// errAcksZeroFailed closes the connection of an acks=0 request that
// failed, the only way such a producer learns of it.
var errAcksZeroFailed = errors.New("kafka: produce with acks=0 failed")

// producePart is one partition of a Produce request on its way through
// the handler.
type producePart struct {
	sp *kmsg.ProduceResponseTopicPartition
	// batch is the index of its batch in the Submit, -1 if the partition
	// was answered without one.
	batch int
}

func handleProduce(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	pipe, err := r.Deps.producer()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if req.Version >= 13 {
		// Names from ids, in place: the request is the handler's. An
		// unknown id keeps the empty name, which no topic has.
		if err := produceTopicNames(db, req); err != nil {
			return nil, err
		}
	}

	// The response mirrors the request; parts point into it, so its
	// slices are never appended to after this.
	var parts []producePart
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rt.Partitions[j].Partition
			sp.BaseOffset = -1
			parts = append(parts, producePart{sp: sp, batch: -1})
		}
	}
	failAll := func(e *kerr.Error) (kmsg.Response, error) {
		for _, p := range parts {
			p.sp.ErrorCode = e.Code
		}
		if req.Acks == 0 {
			return nil, fmt.Errorf("%w: %s", errAcksZeroFailed, e.Message)
		}
		return resp, nil
	}
	switch req.Acks {
	case -1, 0, 1:
	default:
		return failAll(kerr.InvalidRequiredAcks)
	}
	z := r.authz()
	if hasTransactionalBatch(req) && (req.TransactionID == nil || !z.txnID(kmsg.ACLOperationWrite, *req.TransactionID)) {
		return failAll(kerr.TransactionalIDAuthorizationFailed)
	}

	topics, err := produceTopics(ctx, r.Deps, z, db, req)
	if err != nil {
		return nil, err
	}
	nowMs := r.Deps.now().UnixMilli()
	var batches []produce.Batch
	failed := false
	fail := func(sp *kmsg.ProduceResponseTopicPartition, e *kerr.Error, msg string) {
		failed = true
		sp.ErrorCode = e.Code
		if req.Version >= 8 && msg != "" {
			sp.ErrorMessage = &msg
		}
	}
	k := 0
	for i := range req.Topics {
		rt := &req.Topics[i]
		tt := topics[rt.Topic]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			part := &parts[k]
			k++
			if tt.code != nil {
				fail(part.sp, tt.code, "")
				continue
			}
			if isInternalTopic(rt.Topic) {
				fail(part.sp, kerr.InvalidTopicException, "clients cannot write to internal topics")
				continue
			}
			if rp.Partition < 0 || rp.Partition >= tt.t.Partitions {
				fail(part.sp, kerr.UnknownTopicOrPartition, "")
				continue
			}
			b, e, msg := produceBatch(rp.Records, req.Version, tt, rp.Partition, nowMs)
			if e == nil && tt.cfg.CleanupPolicy.Compact {
				var keyless []int32
				if keyless, e, msg = keylessRecords(rp.Records); len(keyless) > 0 {
					e, msg = kerr.InvalidRecord, refuseKeyless(part.sp, req.Version, keyless, rt.Topic, rp.Partition)
				}
			}
			if e == nil {
				if e, msg, err = checkSchemas(ctx, r.Deps, part.sp, req.Version, rt.Topic, tt, rp.Records); err != nil {
					return nil, err
				}
			}
			if e != nil {
				fail(part.sp, e, msg)
				continue
			}
			part.batch = len(batches)
			batches = append(batches, b)
			if tt.cfg.MessageTimestampType == topicconfig.LogAppendTime {
				part.sp.LogAppendTime = nowMs
			}
		}
	}
	if req.Version >= 12 && req.TransactionID != nil && len(batches) > 0 {
		txns, err := r.Deps.txns()
		if err != nil {
			return nil, err
		}
		var dropped bool
		batches, dropped = addToTxnV12(ctx, txns, *req.TransactionID, req, parts, batches, fail)
		failed = failed || dropped
	}
	if len(batches) == 0 {
		switch {
		case req.Acks != 0:
			return resp, nil
		case failed:
			return nil, errAcksZeroFailed
		}
		return nil, nil
	}

	tctx, cancel := withTimeoutMillis(ctx, req.TimeoutMillis)
	defer cancel()
	var subs []submitted
	if err := r.InOrder(tctx, func() { subs = submitAll(tctx, pipe, batches) }); err != nil {
		subs = []submitted{{n: len(batches), err: err}}
	}
	if req.Acks == 0 {
		// Handed to the pipeline is all an acks=0 producer is told;
		// the batches after a failed submit were not submitted.
		submittedOK := 0
		for _, s := range subs {
			if s.err != nil {
				break
			}
			submittedOK += s.n
		}
		r.reportProduced(batches, func(i int) bool { return i < submittedOK })
		for _, s := range subs {
			if s.err != nil {
				return nil, fmt.Errorf("%w: %w", errAcksZeroFailed, s.err)
			}
		}
		if failed {
			return nil, errAcksZeroFailed
		}
		return nil, nil
	}

	// One result per batch, in Submit order.
	type outcome struct {
		res meta.BatchResult
		e   *kerr.Error
	}
	outs := make([]outcome, 0, len(batches))
	for _, s := range subs {
		var res []meta.BatchResult
		err := s.err
		if err == nil {
			waitStart := time.Now()
			res, err = s.ack.Wait(tctx)
			r.waitedSince(waitStart)
			if err == nil && len(res) != s.n {
				err = fmt.Errorf("produce: %d results for %d batches", len(res), s.n)
			}
		}
		for i := range s.n {
			if err != nil {
				outs = append(outs, outcome{e: produceErrCode(err)})
				continue
			}
			o := outcome{res: res[i]}
			if res[i].Code != 0 {
				if o.e, _ = kerr.ErrorForCode(res[i].Code).(*kerr.Error); o.e == nil {
					o.e = kerr.UnknownServerError
				}
			}
			outs = append(outs, o)
		}
	}
	r.reportProduced(batches, func(i int) bool { return outs[i].e == nil })
	for _, p := range parts {
		if p.batch < 0 {
			continue
		}
		o := outs[p.batch]
		if o.e != nil {
			p.sp.ErrorCode = o.e.Code
			p.sp.LogAppendTime = -1
			if msg := applyErrMessage(o.e); msg != "" && req.Version >= 8 {
				p.sp.ErrorMessage = &msg
			}
			continue
		}
		p.sp.BaseOffset = o.res.BaseOffset
		p.sp.LogStartOffset = o.res.LogStartOffset
	}
	return resp, nil
}

// addToTxnV12 adds the partitions of a v12 request's transactional
// batches to the producer's transaction (KIP-890 part 2: the client sends
// no AddPartitionsToTxn; txn.Coordinator.AddProduced skips those this
// copy already shows in the transaction at the batches' epoch), and drops
// the batches of partitions it could not add, answering them with the
// reason. parts and batches are in the same order; the kept batches are
// renumbered.
func addToTxnV12(ctx context.Context, txns TxnCoordinator, txnID string, req *kmsg.ProduceRequest, parts []producePart, batches []produce.Batch,
	fail func(*kmsg.ProduceResponseTopicPartition, *kerr.Error, string)) ([]produce.Batch, bool) {
	transactional := func(p producePart) bool { return p.batch >= 0 && batches[p.batch].Transactional }
	n := 0
	for _, p := range parts {
		if transactional(p) {
			n++
		}
	}
	if n == 0 {
		return batches, false
	}
	adds := make([]txn.ProducedPartition, 0, n)
	k := 0
	for i := range req.Topics {
		for range req.Topics[i].Partitions {
			p := parts[k]
			k++
			if !transactional(p) {
				continue
			}
			b := &batches[p.batch]
			adds = append(adds, txn.ProducedPartition{
				Topic: req.Topics[i].Topic, TopicID: b.TopicID, Partition: b.Partition,
				ProducerID: b.ProducerID, ProducerEpoch: b.ProducerEpoch,
			})
		}
	}
	txns.AddProduced(ctx, txnID, adds)
	dropped := false
	n = 0 // index into adds
	for i := range parts {
		if !transactional(parts[i]) {
			continue
		}
		code := adds[n].Code
		n++
		if code == 0 {
			continue
		}
		// In Produce's terms: a fenced producer is an old epoch, and a
		// transaction that is not there one that is not ongoing.
		switch code {
		case kerr.ProducerFenced.Code:
			code = kerr.InvalidProducerEpoch.Code
		case kerr.TransactionalIDNotFound.Code:
			code = kerr.InvalidTxnState.Code
		}
		fail(parts[i].sp, codeOf(code), "could not add the partition to the transaction")
		parts[i].batch = -2
		dropped = true
	}
	if !dropped {
		return batches, false
	}
	var kept []produce.Batch
	for i := range parts {
		switch b := parts[i].batch; {
		case b == -2:
			parts[i].batch = -1
		case b >= 0:
			parts[i].batch = len(kept)
			kept = append(kept, batches[b])
		}
	}
	return kept, true
}

// applyErrMessage explains the codes apply gives a batch, for Produce v8+
// ErrorMessage.
func applyErrMessage(e *kerr.Error) string {
	switch e {
	case kerr.InvalidTxnState:
		return "the partition is not in the producer's ongoing transaction (AddPartitionsToTxn first)"
	case kerr.InvalidProducerEpoch:
		return "the producer epoch is fenced by a newer one"
	case kerr.OutOfOrderSequenceNumber:
		return "the batch does not continue the producer's sequence in this partition"
	}
	return ""
}

// hasTransactionalBatch reports whether any partition's batch has the
// transactional attribute.
func hasTransactionalBatch(req *kmsg.ProduceRequest) bool {
	for i := range req.Topics {
		for _, rp := range req.Topics[i].Partitions {
			if h, err := recordbatch.ParseHeader(rp.Records); err == nil && h.IsTransactional() {
				return true
			}
		}
	}
	return false
}

// produceTopic is a topic named in a Produce request: its metadata and
// effective config, or the error every partition of it gets.
type produceTopic struct {
	t    meta.Topic
	cfg  topicconfig.Config
	code *kerr.Error
}

// produceTopics resolves the request's topics from the local copy,
// auto-creating unknown ones when Deps allows. An error is a local fault
// that closes the connection.
func produceTopics(ctx context.Context, d *Deps, z authz, db MetaDB, req *kmsg.ProduceRequest) (map[string]produceTopic, error) {
	out := make(map[string]produceTopic, len(req.Topics))
	view := db.View()
	defer func() { view.Close() }() // replaced after auto-creation
	// message.max.bytes and the other broker-level defaults, read per
	// request so a dynamic change applies at once.
	layers := d.liveLayers(view)
	var missing []string
	resolve := func(name string) {
		t, ok, err := view.Topic(name)
		switch {
		case err != nil:
			out[name] = produceTopic{code: kerr.UnknownServerError}
		case !ok:
			out[name] = produceTopic{code: kerr.UnknownTopicOrPartition}
		default:
			out[name] = produceTopic{t: t, cfg: topicconfig.Effective(withBrokerDefaults(t.Configs, layers))}
		}
	}
	for i := range req.Topics {
		name := req.Topics[i].Topic
		if _, done := out[name]; done {
			continue
		}
		if req.Version >= 13 && name == "" { // an id that names no topic
			out[name] = produceTopic{code: kerr.UnknownTopicID}
			continue
		}
		if !z.topic(kmsg.ACLOperationWrite, name) {
			out[name] = produceTopic{code: kerr.TopicAuthorizationFailed}
			continue
		}
		resolve(name)
		if out[name].code == kerr.UnknownTopicOrPartition && z.mayCreateTopic(name) {
			missing = append(missing, name)
		}
	}
	if !d.AutoCreateTopics || len(missing) == 0 {
		return out, nil
	}

	collisions, err := collisionIndex(view)
	if err != nil {
		return nil, fmt.Errorf("kafka: produce: listing topics: %w", err)
	}
	var cmds []meta.Command
	var names []string
	for _, name := range missing {
		if !meta.ValidTopicName(name) {
			out[name] = produceTopic{code: kerr.InvalidTopicException}
			continue
		}
		if _, taken := collisions[collisionName(name)]; taken {
			out[name] = produceTopic{code: kerr.InvalidTopicException}
			continue
		}
		collisions[collisionName(name)] = name
		cmds = append(cmds, meta.CreateTopic{Name: name, Partitions: d.defaultPartitions()})
		names = append(names, name)
	}
	if len(cmds) == 0 {
		return out, nil
	}
	outs := d.proposeCreations(ctx, db, cmds)
	view.Close()
	view = db.View()
	for i, name := range names {
		// TOPIC_ALREADY_EXISTS: another request created it first.
		if e, _ := outs[i].code(); e != nil && e != kerr.TopicAlreadyExists {
			out[name] = produceTopic{code: e}
			continue
		}
		resolve(name)
	}
	return out, nil
}

// produceBatch validates one partition's records for topic tt and
// prepares them for the pipeline, or returns the partition's error with a
// message for the client. It stamps the batch in place: the bytes belong
// to the request, which is ours until the handler returns, and Submit
// copies them.
func produceBatch(records []byte, version int16, tt produceTopic, partition int32, nowMs int64) (produce.Batch, *kerr.Error, string) {
	if version < 3 {
		return produce.Batch{}, kerr.UnsupportedForMessageFormat, "Strand stores only message format v2 (magic 2), which needs Produce v3 or later"
	}
	batch, h, err := recordbatch.ValidateProduce(records, version, int(tt.cfg.MaxMessageBytes))
	if err != nil {
		return produce.Batch{}, codeOf(recordbatch.ErrorCode(err)), err.Error()
	}
	if h.IsControl() {
		return produce.Batch{}, kerr.InvalidRecord, "clients may not write control batches"
	}
	if h.IsTransactional() && h.ProducerID < 0 {
		return produce.Batch{}, kerr.InvalidRecord, "a transactional batch needs a producer id"
	}
	switch tt.cfg.MessageTimestampType {
	case topicconfig.LogAppendTime:
		recordbatch.SetLogAppendTime(batch, nowMs)
	default:
		if msg := checkTimestamps(h, tt.cfg, nowMs); msg != "" {
			return produce.Batch{}, kerr.InvalidTimestamp, msg
		}
	}
	recordbatch.SetPartitionLeaderEpoch(batch, partitionLeaderEpoch)
	b, err := produce.BatchFrom(tt.t.ID, partition, batch)
	if err != nil {
		return produce.Batch{}, kerr.CorruptMessage, err.Error()
	}
	return b, nil, ""
}

// checkTimestamps bounds a CreateTime batch's timestamps by
// message.timestamp.before.max.ms and message.timestamp.after.max.ms, as
// far as the header tells them (see the file comment). -1 is no
// timestamp, which Kafka does not check.
func checkTimestamps(h recordbatch.Header, cfg topicconfig.Config, nowMs int64) string {
	if ts := h.FirstTimestamp; ts != -1 && behindBy(nowMs, ts) > cfg.MessageTimestampBeforeMaxMs {
		return fmt.Sprintf("timestamp %d is more than %d ms before the broker's time %d", ts, cfg.MessageTimestampBeforeMaxMs, nowMs)
	}
	if ts := h.MaxTimestamp; ts != -1 && behindBy(ts, nowMs) > cfg.MessageTimestampAfterMaxMs {
		return fmt.Sprintf("timestamp %d is more than %d ms after the broker's time %d", ts, cfg.MessageTimestampAfterMaxMs, nowMs)
	}
	return ""
}

// behindBy is a - b when positive, else 0, saturating at MaxInt64 rather
// than overflowing for a hostile timestamp.
func behindBy(a, b int64) int64 {
	if a <= b {
		return 0
	}
	if d := a - b; d > 0 {
		return d
	}
	return math.MaxInt64
}

// codeOf returns the kerr.Error of a code, UNKNOWN_SERVER_ERROR for one
// kerr does not know.
func codeOf(code int16) *kerr.Error {
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e
	}
	return kerr.UnknownServerError
}

// submitted is one Submit of consecutive batches, or why it failed.
type submitted struct {
	n   int // batches
	ack *produce.Ack
	err error
}

// submitAll submits batches in one call, or, if the pipeline refuses that
// many for one flush (produce.ErrTooLarge), in halves, one after the
// other so their order holds. After a failed call the rest are not
// submitted, so a later batch never commits ahead of an earlier one that
// failed; they fail with the same error.
func submitAll(ctx context.Context, p Appender, batches []produce.Batch) []submitted {
	var out []submitted
	var submit func(bs []produce.Batch) error
	submit = func(bs []produce.Batch) error {
		ack, err := p.Submit(ctx, bs)
		if errors.Is(err, produce.ErrTooLarge) && len(bs) > 1 {
			half := len(bs) / 2
			if err := submit(bs[:half]); err != nil {
				out = append(out, submitted{n: len(bs) - half, err: err})
				return err
			}
			return submit(bs[half:])
		}
		out = append(out, submitted{n: len(bs), ack: ack, err: err})
		return err
	}
	submit(batches)
	return out
}

// produceTopicNames fills in the names of a v13 request's topics from
// their ids, leaving the empty name for an id no topic has.
func produceTopicNames(db MetaDB, req *kmsg.ProduceRequest) error {
	view := db.View()
	defer view.Close()
	for i := range req.Topics {
		rt := &req.Topics[i]
		name, _, err := view.TopicNameByID(meta.TopicID(rt.TopicID))
		if err != nil {
			return fmt.Errorf("kafka: produce: reading topic %v: %w", meta.TopicID(rt.TopicID), err)
		}
		rt.Topic = name
	}
	return nil
}
