package share

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/clock"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/recordbatch"
)

// TopicCheck answers for a topic id a request names: 0 when the client
// may read it, else the partition's error code (UNKNOWN_TOPIC_ID,
// TOPIC_AUTHORIZATION_FAILED). The kafka handler passes it: ACLs are
// its business.
type TopicCheck func(id meta.TopicID) int16

// Limits of one ShareFetch.
const (
	// defaultMaxRecords is what a request asking for no limit (v0, or
	// MaxRecords 0) acquires at most, kgo's default.
	defaultMaxRecords = 500
	// maxRecordsCap bounds MaxRecords whatever the client asks.
	maxRecordsCap = 10000
	// defaultPartitionMaxBytes bounds the bytes read for one partition
	// when the request does not say (v1 dropped PartitionMaxBytes).
	defaultPartitionMaxBytes = 1 << 20
	// defaultMaxBytes bounds a response whose request says 0.
	defaultMaxBytes = 50 << 20
	// recheckInterval is how often a waiting ShareFetch looks again
	// when nothing woke it: a lock that expires changes no key, only
	// the log clock, so no partition watch fires for it.
	recheckInterval = 500 * time.Millisecond
	// maxWait bounds MaxWaitMillis.
	maxWait = 30 * time.Second
)

// Acquire modes of ShareFetch v2 (KIP-1206).
const (
	acquireBatchOptimized = 0
	acquireRecordLimit    = 1
)

// ackPart is one partition's acknowledgements.
type ackPart struct {
	ref     meta.PartitionRef
	batches []meta.ShareAckBatch
}

// partOut is what a response says of one partition.
type partOut struct {
	code, ackCode int16
	records       []byte
	acquired      []meta.ShareGrant
}

// Fetch serves a ShareFetch on connection conn, the group's READ
// already checked.
func (s *Server) Fetch(ctx context.Context, conn uint64, req *kmsg.ShareFetchRequest, check TopicCheck) *kmsg.ShareFetchResponse {
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	group, member := deref(req.GroupID), deref(req.MemberID)
	cfg, err := s.config(group)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidConfig.Code, kmsg.StringPtr(err.Error())
		return resp
	}
	resp.AcquisitionLockTimeoutMillis = int32(cfg.RecordLock.Milliseconds())
	fail := func(e *kerr.Error, msg string) *kmsg.ShareFetchResponse {
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	}
	if member == "" || len(member) > 36 {
		return fail(kerr.InvalidRequest, "a member id has 1 to 36 characters")
	}
	if group == "" {
		return fail(kerr.InvalidGroupID, "")
	}
	renew := req.Version >= 2 && req.IsRenewAck
	if renew && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0) {
		return fail(kerr.InvalidRequest, "a renew-only ShareFetch fetches nothing")
	}
	if code := s.groupTypeCode(group); code != 0 {
		return fail(kerr.ErrorForCode(code).(*kerr.Error), "the group id is taken by a group of another type")
	}
	var add []meta.PartitionRef
	var acks []ackPart
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			ref := meta.PartitionRef{TopicID: t.TopicID, Partition: p.Partition}
			add = append(add, ref)
			if len(p.AcknowledgementBatches) > 0 {
				ap := ackPart{ref: ref}
				for _, b := range p.AcknowledgementBatches {
					ap.batches = append(ap.batches, meta.ShareAckBatch{First: b.FirstOffset, Last: b.LastOffset, Types: int8Types(b.AcknowledgeTypes)})
				}
				acks = append(acks, ap)
			} else if renew {
				return fail(kerr.InvalidRequest, "a renew-only ShareFetch names only partitions it acknowledges")
			}
		}
	}
	var forget []meta.PartitionRef
	for _, t := range req.ForgottenTopicsData {
		for _, p := range t.Partitions {
			forget = append(forget, meta.PartitionRef{TopicID: t.TopicID, Partition: p})
		}
	}
	k := sessionKey{group, member}
	out := make(map[meta.PartitionRef]*partOut)
	get := func(ref meta.PartitionRef) *partOut {
		if o := out[ref]; o != nil {
			return o
		}
		o := &partOut{}
		out[ref] = o
		return o
	}
	var ss session
	var kerrv *kerr.Error
	switch req.ShareSessionEpoch {
	case -1:
		ss, kerrv = s.sessions.close(k)
		if kerrv != nil {
			return fail(kerrv, "")
		}
		s.ackInto(ctx, group, member, cfg, acks, renew, check, func(ref meta.PartitionRef, code int16) { get(ref).ackCode = code })
		s.release(ctx, group, member, cfg, ss.parts)
		return s.respond(resp, out, acks, nil)
	case 0:
		if len(acks) > 0 {
			return fail(kerr.InvalidRequest, "a new share session carries no acknowledgements")
		}
		ss, kerrv = s.sessions.open(k, conn, add)
	default:
		ss, kerrv = s.sessions.update(k, req.ShareSessionEpoch, add, forget)
	}
	if kerrv != nil {
		return fail(kerrv, "")
	}
	s.ackInto(ctx, group, member, cfg, acks, renew, check, func(ref meta.PartitionRef, code int16) { get(ref).ackCode = code })
	if renew {
		return s.respond(resp, out, acks, nil)
	}

	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = defaultMaxRecords
	}
	maxRecords = min(maxRecords, maxRecordsCap)
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = defaultMaxBytes
	}
	partMax := map[meta.PartitionRef]int32{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if p.PartitionMaxBytes > 0 {
				partMax[meta.PartitionRef{TopicID: t.TopicID, Partition: p.Partition}] = p.PartitionMaxBytes
			}
		}
	}
	// The session's partitions the client may read; the others answer
	// their error.
	var targets []meta.PartitionRef
	for _, ref := range ss.parts {
		if code := check(ref.TopicID); code != 0 {
			get(ref).code = code
			continue
		}
		targets = append(targets, ref)
	}
	// Fairness: start at another partition every epoch, as Kafka
	// rotates a session's partitions.
	if n := len(targets); n > 1 {
		r := int(ss.epoch) % n
		targets = append(targets[r:], targets[:r]...)
	}

	wait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, maxWait)
	deadline := s.clock.Now().Add(wait)
	var watch interface {
		Ready() <-chan struct{}
		Close()
	}
	if wait > 0 && s.changes != nil && len(targets) > 0 {
		w := s.changes.Watch(targets)
		defer w.Close()
		watch = w
	}
	for {
		got, err := s.acquire(ctx, group, member, cfg, targets, maxRecords, maxBytes, partMax, acquireMode(req), get)
		if err != nil {
			return fail(kerr.ErrorForCode(errCode(err)).(*kerr.Error), err.Error())
		}
		left := deadline.Sub(s.clock.Now())
		if got > 0 || watch == nil || left <= 0 || ctx.Err() != nil {
			break
		}
		fired, t := clock.After(s.clock, min(left, recheckInterval))
		select {
		case <-watch.Ready():
		case <-fired:
		case <-ctx.Done():
		}
		clock.Stop(t)
	}
	if s.metrics != nil {
		s.metrics.fetches.Inc()
	}
	var fresh []meta.PartitionRef
	for _, ref := range ss.parts {
		if ss.fresh[ref] {
			get(ref)
			fresh = append(fresh, ref)
		}
	}
	resp = s.respond(resp, out, acks, req)
	s.sessions.answered(k, fresh)
	return resp
}

func acquireMode(req *kmsg.ShareFetchRequest) int8 {
	if req.Version >= 2 {
		return req.ShareAcquireMode
	}
	return acquireBatchOptimized
}

// respond writes out into resp, partitions sorted by topic id and
// partition; BatchSize splits the acquired ranges (KIP-1206).
func (s *Server) respond(resp *kmsg.ShareFetchResponse, out map[meta.PartitionRef]*partOut, acks []ackPart, req *kmsg.ShareFetchRequest) *kmsg.ShareFetchResponse {
	// Every acknowledged partition appears: the client learns from its
	// presence that the acknowledgements were processed.
	for _, a := range acks {
		if out[a.ref] == nil {
			out[a.ref] = &partOut{}
		}
	}
	refs := make([]meta.PartitionRef, 0, len(out))
	for ref := range out {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, comparePartitionRefs)
	batchSize := int64(0)
	if req != nil && req.Version >= 1 && req.BatchSize > 0 && acquireMode(req) == acquireBatchOptimized {
		batchSize = int64(req.BatchSize)
	}
	for _, ref := range refs {
		o := out[ref]
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].TopicID != ref.TopicID {
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = ref.TopicID
			resp.Topics = append(resp.Topics, t)
		}
		t := &resp.Topics[len(resp.Topics)-1]
		p := kmsg.NewShareFetchResponseTopicPartition()
		p.Partition = ref.Partition
		p.ErrorCode, p.AcknowledgeErrorCode = o.code, o.ackCode
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
		p.Records = o.records
		for _, g := range o.acquired {
			for first := g.First; first <= g.Last; {
				last := g.Last
				if batchSize > 0 {
					last = min(last, first+batchSize-1)
				}
				ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
				ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = first, last, g.DeliveryCount
				p.AcquiredRecords = append(p.AcquiredRecords, ar)
				first = last + 1
			}
		}
		t.Partitions = append(t.Partitions, p)
	}
	return resp
}

func comparePartitionRefs(a, b meta.PartitionRef) int {
	for i := range a.TopicID {
		if a.TopicID[i] != b.TopicID[i] {
			return int(a.TopicID[i]) - int(b.TopicID[i])
		}
	}
	return int(a.Partition - b.Partition)
}

// groupTypeCode is GROUP_ID_NOT_FOUND when a classic or consumer group
// holds the id in the metadata, as Kafka answers a share request for a
// group of another type.
func (s *Server) groupTypeCode(group string) int16 {
	view := s.meta.View()
	defer view.Close()
	g, ok, err := view.Group(group)
	switch {
	case err != nil:
		return kerr.UnknownServerError.Code
	case ok && (g.Kind == meta.GroupClassic || g.Kind == meta.GroupConsumer):
		return kerr.GroupIDNotFound.Code
	}
	return 0
}

// release proposes the release of member's records in parts.
func (s *Server) release(ctx context.Context, group, member string, cfg Config, parts []meta.PartitionRef) {
	if len(parts) == 0 {
		return
	}
	_, err := s.propose(ctx, []meta.Command{meta.ShareRelease{Group: group, Member: member, DeliveryLimit: int32(cfg.DeliveryLimit), Partitions: refsOf(parts)}})
	if err != nil {
		s.log.Warn("share: releasing a closed session's records failed; their locks end by themselves", "group", group, "member", member, "err", err)
	}
}

// ackInto validates and proposes acks, one ShareAck per partition in one
// log entry, and reports each partition's code.
func (s *Server) ackInto(ctx context.Context, group, member string, cfg Config, acks []ackPart, renew bool, check TopicCheck, report func(meta.PartitionRef, int16)) {
	maxType := int8(meta.ShareAckReject)
	if renew {
		maxType = meta.ShareAckRenew
	}
	var cmds []meta.Command
	var refs []meta.PartitionRef
	for _, a := range acks {
		if code := check(a.ref.TopicID); code != 0 {
			report(a.ref, code)
			continue
		}
		if !validAcks(a.batches, maxType) {
			report(a.ref, kerr.InvalidRequest.Code)
			continue
		}
		cmds = append(cmds, meta.ShareAck{Group: group, TopicID: a.ref.TopicID, Partition: a.ref.Partition, Member: member,
			LockMs: cfg.RecordLock.Milliseconds(), DeliveryLimit: int32(cfg.DeliveryLimit), Batches: a.batches})
		refs = append(refs, a.ref)
	}
	res, err := s.propose(ctx, cmds)
	for i, ref := range refs {
		switch {
		case err != nil:
			report(ref, errCode(err))
		default:
			report(ref, res[i].Code)
			if res[i].Code == 0 {
				s.countAcks(cmds[i].(meta.ShareAck).Batches)
			}
		}
	}
}

// validAcks checks a partition's acknowledgement batches as Kafka does:
// sorted, disjoint, one type or one per offset, types up to maxType.
func validAcks(batches []meta.ShareAckBatch, maxType int8) bool {
	if len(batches) > meta.MaxShareRanges {
		return false
	}
	prev := int64(-1)
	for _, b := range batches {
		n := b.Last - b.First + 1
		if b.First < 0 || b.First > b.Last || b.First <= prev || (len(b.Types) != 1 && int64(len(b.Types)) != n) {
			return false
		}
		for _, t := range b.Types {
			if int8(t) < 0 || int8(t) > maxType {
				return false
			}
		}
		prev = b.Last
	}
	return true
}

func (s *Server) countAcks(batches []meta.ShareAckBatch) {
	if s.metrics == nil {
		return
	}
	for _, b := range batches {
		if len(b.Types) == 1 {
			s.metrics.ack(b.Types[0], float64(b.Last-b.First+1))
			continue
		}
		for _, t := range b.Types {
			s.metrics.ack(t, 1)
		}
	}
}

func int8Types(ts []int8) meta.ShareAckTypes {
	out := make(meta.ShareAckTypes, len(ts))
	for i, t := range ts {
		out[i] = byte(t)
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// candidate is one partition's acquisition: the ranges proposed and the
// batches read for them.
type candidate struct {
	ref     meta.PartitionRef
	ranges  []meta.ShareRange
	batches [][]byte
}

// acquire acquires for member from targets: initializes the share
// partitions met for the first time, picks candidates, proposes one
// ShareAcquire per partition in one entry, and fills the records and
// acquired ranges of the partitions that got some. It returns how many
// records were acquired.
func (s *Server) acquire(ctx context.Context, group, member string, cfg Config, targets []meta.PartitionRef, maxRecords, maxBytes int, partMax map[meta.PartitionRef]int32, mode int8, get func(meta.PartitionRef) *partOut) (int, error) {
	if len(targets) == 0 {
		return 0, nil
	}
	if err := s.initStates(ctx, group, cfg, targets, get); err != nil {
		return 0, err
	}
	view := s.meta.View()
	defer view.Close()
	var cands []candidate
	remaining, bytesLeft := maxRecords, maxBytes
	for _, ref := range targets {
		if remaining <= 0 || bytesLeft <= 0 {
			break
		}
		pm := int32(min(bytesLeft, defaultPartitionMaxBytes))
		if v, ok := partMax[ref]; ok {
			pm = min(pm, v)
		}
		c, n, size, code, err := s.candidates(ctx, view, group, cfg, ref, remaining, pm, mode)
		if err != nil {
			return 0, err
		}
		if code != 0 {
			get(ref).code = code
			continue
		}
		if len(c.ranges) == 0 {
			continue
		}
		remaining -= n
		bytesLeft -= size
		cands = append(cands, c)
	}
	if len(cands) == 0 {
		return 0, nil
	}
	cmds := make([]meta.Command, len(cands))
	for i, c := range cands {
		cmds[i] = meta.ShareAcquire{Group: group, TopicID: c.ref.TopicID, Partition: c.ref.Partition, Member: member,
			LockMs: cfg.RecordLock.Milliseconds(), DeliveryLimit: int32(cfg.DeliveryLimit), MaxLocks: int32(cfg.MaxRecordLocks), Ranges: c.ranges}
	}
	res, err := s.propose(ctx, cmds)
	if err != nil {
		return 0, err
	}
	got := 0
	for i, c := range cands {
		r := res[i]
		if r.Code != 0 {
			get(c.ref).code = r.Code
			continue
		}
		if len(r.ShareGrants) == 0 {
			continue
		}
		o := get(c.ref)
		o.acquired = r.ShareGrants
		for _, g := range r.ShareGrants {
			got += int(g.Last - g.First + 1)
		}
		o.records = batchesFor(c.batches, r.ShareGrants)
	}
	return got, nil
}

// initStates proposes a ShareInit for each target without state, at the
// offset share.auto.offset.reset chooses. The first applied wins, so
// two agents initializing at once agree.
func (s *Server) initStates(ctx context.Context, group string, cfg Config, targets []meta.PartitionRef, get func(meta.PartitionRef) *partOut) error {
	view := s.meta.View()
	defer view.Close()
	kind, d, err := cfg.reset()
	if err != nil {
		return err
	}
	var cmds []meta.Command
	for _, ref := range targets {
		_, ok, err := view.ShareState(group, ref.TopicID, ref.Partition)
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		ps, exists, err := view.Partition(ref.TopicID, ref.Partition)
		if err != nil {
			return err
		}
		if !exists {
			get(ref).code = kerr.UnknownTopicOrPartition.Code
			continue
		}
		start := ps.HighWatermark()
		switch kind {
		case resetEarliest:
			start = ps.LogStartOffset
		case resetByDuration:
			e, found, err := view.OffsetForTimestamp(ref.TopicID, ref.Partition, s.clock.Now().Add(-d).UnixMilli())
			if err != nil {
				return err
			}
			if found {
				start = e.BaseOffset
			}
		}
		cmds = append(cmds, meta.ShareInit{Group: group, TopicID: ref.TopicID, Partition: ref.Partition, StartOffset: start})
	}
	_, err = s.propose(ctx, cmds)
	return err
}

// candidates picks what to propose for one partition: the offsets the
// local copy sees available in the window, then new ones from the SPEO,
// read as whole batches from the first of them; at most about
// remaining records (whole batches, or exactly with RECORD_LIMIT), and
// within the record-lock cap. Offsets past the SPEO without a record,
// control batches and, under read_committed, aborted batches are gap
// ranges: apply archives them. It returns the number of records
// proposed and the bytes read.
func (s *Server) candidates(ctx context.Context, view *meta.View, group string, cfg Config, ref meta.PartitionRef, remaining int, maxBytes int32, mode int8) (candidate, int, int, int16, error) {
	c := candidate{ref: ref}
	st, ok, err := view.ShareState(group, ref.TopicID, ref.Partition)
	if err != nil || !ok {
		return c, 0, 0, 0, err
	}
	ps, exists, err := view.Partition(ref.TopicID, ref.Partition)
	if err != nil {
		return c, 0, 0, 0, err
	}
	if !exists {
		return c, 0, 0, kerr.UnknownTopicOrPartition.Code, nil
	}
	now, err := view.LogClock()
	if err != nil {
		return c, 0, 0, 0, err
	}
	// The entry this proposes will be stamped by this agent's clock,
	// ahead of the last entry's: locks it will find expired count as
	// available here. Apply decides; this only picks what to ask for.
	now = max(now, s.clock.Now().UnixMilli())
	upTo := ps.HighWatermark()
	readCommitted := cfg.IsolationLevel == "read_committed"
	if readCommitted {
		if upTo, err = view.LastStableOffset(ref.TopicID, ref.Partition, upTo); err != nil {
			return c, 0, 0, 0, err
		}
	}
	// Where to read from: the first available offset in the window,
	// else the SPEO if the cap leaves room.
	from := int64(-1)
	for _, r := range st.Runs {
		if r.State == meta.ShareAvailable || (r.State == meta.ShareAcquired && r.Deadline <= now) {
			from = r.First
			break
		}
	}
	capEnd := st.StartOffset + int64(cfg.MaxRecordLocks) // first offset past the cap
	if from < 0 {
		if st.EndOffset >= capEnd {
			return c, 0, 0, 0, nil
		}
		from = st.EndOffset
	}
	from = max(from, ps.LogStartOffset)
	if from >= upTo {
		return c, 0, 0, 0, nil
	}
	res, err := s.fetch.ReadUpTo(ctx, view, ref.TopicID, ref.Partition, from, maxBytes, upTo)
	if err != nil {
		return c, 0, 0, kerr.UnknownServerError.Code, nil
	}
	if res.Err != 0 {
		return c, 0, 0, res.Err, nil
	}
	var aborted []meta.AbortedTxn
	if readCommitted {
		if aborted, err = view.AbortedTxns(ref.TopicID, ref.Partition, from, upTo, 1<<16); err != nil {
			return c, 0, 0, 0, err
		}
	}
	n, size := 0, 0
	add := func(first, last int64, gap bool) {
		if k := len(c.ranges); k > 0 && c.ranges[k-1].Last+1 == first && c.ranges[k-1].Gap == gap {
			c.ranges[k-1].Last = last
			return
		}
		c.ranges = append(c.ranges, meta.ShareRange{First: first, Last: last, Gap: gap})
	}
	cursor := from
	rest := res.Records
	for len(rest) > 0 && n < remaining {
		raw, next, err := recordbatch.Next(rest)
		if err != nil {
			break
		}
		rest = next
		h, err := recordbatch.ParseHeader(raw)
		if err != nil {
			break
		}
		first, last := max(h.BaseOffset, from), h.LastOffset()
		if last < from {
			continue
		}
		// New offsets between batches hold no record.
		if gapFirst := max(cursor, st.EndOffset); gapFirst < first && gapFirst < capEnd {
			add(gapFirst, min(first-1, capEnd-1), true)
		}
		gap := h.IsControl() || (readCommitted && h.IsTransactional() && isAborted(aborted, h))
		took := 0
		// In the window: the available runs only.
		for _, r := range st.Runs {
			lo, hi := max(r.First, first), min(r.Last, last)
			if lo > hi || !(r.State == meta.ShareAvailable || (r.State == meta.ShareAcquired && r.Deadline <= now)) {
				continue
			}
			if mode == acquireRecordLimit && !gap {
				hi = min(hi, lo+int64(remaining-n-took)-1)
				if hi < lo {
					break
				}
			}
			add(lo, hi, false)
			took += int(hi - lo + 1)
		}
		// Past the SPEO, within the cap.
		if lo, hi := max(first, st.EndOffset), min(last, capEnd-1); lo <= hi {
			if mode == acquireRecordLimit && !gap {
				hi = min(hi, lo+int64(remaining-n-took)-1)
			}
			if hi >= lo {
				add(lo, hi, gap)
				if !gap {
					took += int(hi - lo + 1)
				}
			}
		}
		if took > 0 || gap {
			c.batches = append(c.batches, raw)
			size += len(raw)
		}
		n += took
		cursor = last + 1
	}
	return c, n, size, 0, nil
}

// isAborted reports whether a transactional batch belongs to an aborted
// transaction: one of its producer whose range holds the batch.
func isAborted(aborted []meta.AbortedTxn, h recordbatch.Header) bool {
	for _, a := range aborted {
		if a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && h.BaseOffset <= a.LastOffset {
			return true
		}
	}
	return false
}

// batchesFor returns the batches (in order) that hold a granted offset.
func batchesFor(batches [][]byte, grants []meta.ShareGrant) []byte {
	var out []byte
	for _, raw := range batches {
		h, err := recordbatch.ParseHeader(raw)
		if err != nil || h.IsControl() {
			continue
		}
		for _, g := range grants {
			if g.First <= h.LastOffset() && h.BaseOffset <= g.Last {
				out = append(out, raw...)
				break
			}
		}
	}
	return out
}
