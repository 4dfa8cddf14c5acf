package meta

// Apply of the share partitions' commands (share_state.go has the
// commands, the state's encoding and the reads): grants decided by the
// log clock, acknowledgements, releases, the start offset's advance.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

func (a *Applier) shareState(group string, id TopicID, partition int32) (ShareState, bool, error) {
	a.keyBuf = appendShareStateKey(a.keyBuf[:0], group, id, partition)
	v, ok, err := a.get(a.keyBuf)
	if err != nil || !ok {
		return ShareState{}, false, err
	}
	s, err := decodeShareState(a.keyBuf, v)
	return s, err == nil, err
}

func (a *Applier) putShareState(s *ShareState) error {
	s.Runs = mergeShareRuns(s.Runs)
	a.keyBuf = appendShareStateKey(a.keyBuf[:0], s.Group, s.TopicID, s.Partition)
	return a.b.Set(a.keyBuf, encodeShareState(s))
}

// mergeShareRuns joins neighbours that differ in nothing but offsets,
// and drops the leading acknowledged and archived runs' offsets into the
// SPSO (done by advanceShareStart, which runs before).
func mergeShareRuns(runs []ShareRun) []ShareRun {
	out := runs[:0]
	for _, r := range runs {
		if n := len(out); n > 0 {
			p := &out[n-1]
			if p.State == r.State && p.DeliveryCount == r.DeliveryCount && p.Member == r.Member && p.Deadline == r.Deadline && p.Last+1 == r.First {
				p.Last = r.Last
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// advanceShareStart moves the SPSO past the leading acknowledged and
// archived runs.
func advanceShareStart(s *ShareState) {
	i := 0
	for i < len(s.Runs) && (s.Runs[i].State == ShareAcknowledged || s.Runs[i].State == ShareArchived) {
		i++
	}
	s.Runs = slices.Delete(s.Runs, 0, i)
	if len(s.Runs) == 0 {
		s.StartOffset = s.EndOffset
	} else {
		s.StartOffset = s.Runs[0].First
	}
}

// expireShareLocks makes available (or archives, at the delivery limit)
// every acquired run whose lock expired by the log clock, and returns
// how many records it archived and how many locks timed out.
func expireShareLocks(s *ShareState, clock int64, limit int32) (archived, timedOut int64) {
	for i := range s.Runs {
		r := &s.Runs[i]
		if r.State != ShareAcquired || r.Deadline > clock {
			continue
		}
		n := r.Last - r.First + 1
		timedOut += n
		r.Member, r.Deadline = "", 0
		if int32(r.DeliveryCount) >= limit {
			r.State = ShareArchived
			archived += n
		} else {
			r.State = ShareAvailable
		}
	}
	return archived, timedOut
}

// splitShareRuns splits runs so that first and last+1 are run
// boundaries, and returns the index range [i, j) of runs within
// [first, last] (both clamped to the window).
func splitShareRuns(s *ShareState, first, last int64) (int, int) {
	first, last = max(first, s.StartOffset), min(last, s.EndOffset-1)
	if first > last {
		return 0, 0
	}
	split := func(at int64) {
		for i, r := range s.Runs {
			if r.First < at && at <= r.Last {
				tail := r
				tail.First = at
				s.Runs[i].Last = at - 1
				s.Runs = slices.Insert(s.Runs, i+1, tail)
				return
			}
		}
	}
	split(first)
	split(last + 1)
	i := 0
	for i < len(s.Runs) && s.Runs[i].First < first {
		i++
	}
	j := i
	for j < len(s.Runs) && s.Runs[j].Last <= last {
		j++
	}
	return i, j
}

func checkShareIDs(group, member string) string {
	switch {
	case group == "" || len(group) > MaxShareGroupBytes:
		return "a group id has 1 to 255 bytes"
	case len(member) > MaxShareMemberBytes:
		return "a member id has at most 255 bytes"
	}
	return ""
}

func checkShareLimits(lockMs int64, limit int32) string {
	switch {
	case lockMs < 0 || lockMs > MaxShareLockMs:
		return "a record lock is 0 to 3600000 ms"
	case limit < 1 || limit > MaxShareDeliveryLimit:
		return "a delivery count limit is 1 to 10"
	}
	return ""
}

func (a *Applier) shareInit(c ShareInit) (Result, error) {
	if msg := checkShareIDs(c.Group, ""); msg != "" {
		return failed(kerr.InvalidRequest, "%s", msg), nil
	}
	cp, err := a.part(partRef{c.TopicID, c.Partition})
	if err != nil {
		return Result{}, err
	}
	if !cp.exists {
		return failed(kerr.UnknownTopicOrPartition, "no partition %d of topic %v", c.Partition, c.TopicID), nil
	}
	s, ok, err := a.shareState(c.Group, c.TopicID, c.Partition)
	if err != nil || ok {
		return Result{ShareStartOffset: s.StartOffset}, err
	}
	start := min(max(c.StartOffset, cp.st.LogStartOffset), cp.st.NextOffset)
	s = ShareState{Group: c.Group, TopicID: c.TopicID, Partition: c.Partition, StartOffset: start, EndOffset: start}
	return Result{ShareStartOffset: start}, a.putShareState(&s)
}

func (a *Applier) shareAcquire(c ShareAcquire) (Result, error) {
	if msg := checkShareIDs(c.Group, c.Member); msg != "" || c.Member == "" {
		return failed(kerr.InvalidRequest, "%s", orElse(msg, "no member id")), nil
	}
	if msg := checkShareLimits(c.LockMs, c.DeliveryLimit); msg != "" {
		return failed(kerr.InvalidRequest, "%s", msg), nil
	}
	switch {
	case c.MaxLocks < 1 || c.MaxLocks > MaxShareRecordLocks:
		return failed(kerr.InvalidRequest, "a record-lock cap is 1 to %d", MaxShareRecordLocks), nil
	case len(c.Ranges) > MaxShareRanges:
		return failed(kerr.InvalidRequest, "more than %d ranges", MaxShareRanges), nil
	}
	for i, rg := range c.Ranges {
		if rg.First > rg.Last || rg.First < 0 || (i > 0 && rg.First <= c.Ranges[i-1].Last) {
			return failed(kerr.InvalidRequest, "ranges are not sorted, disjoint and non-empty"), nil
		}
	}
	s, ok, err := a.shareState(c.Group, c.TopicID, c.Partition)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return failed(kerr.UnknownTopicOrPartition, "share partition not initialized"), nil
	}
	var res Result
	if err := a.shareFollowLogStart(&s); err != nil {
		return Result{}, err
	}
	res.ShareArchived, res.ShareLockTimeouts = expireShareLocks(&s, a.clock, c.DeliveryLimit)
	deadline := satAdd(a.clock, c.LockMs)
	grant := func(first, last int64, count int16) {
		if n := len(res.ShareGrants); n > 0 && res.ShareGrants[n-1].Last+1 == first && res.ShareGrants[n-1].DeliveryCount == count {
			res.ShareGrants[n-1].Last = last
			return
		}
		res.ShareGrants = append(res.ShareGrants, ShareGrant{First: first, Last: last, DeliveryCount: count})
	}
	for _, rg := range c.Ranges {
		// In the window: what is available.
		if rg.First < s.EndOffset {
			i, j := splitShareRuns(&s, rg.First, rg.Last)
			for k := i; k < j; k++ {
				r := &s.Runs[k]
				if r.State != ShareAvailable {
					continue
				}
				if rg.Gap {
					r.State = ShareArchived
					continue
				}
				if int32(r.DeliveryCount) >= c.DeliveryLimit {
					r.State = ShareArchived
					res.ShareArchived += r.Last - r.First + 1
					continue
				}
				r.State, r.Member, r.Deadline = ShareAcquired, c.Member, deadline
				r.DeliveryCount++
				grant(r.First, r.Last, r.DeliveryCount)
			}
		}
		// Past the window: new offsets from the SPEO, contiguous, up to
		// the cap.
		first := max(rg.First, s.EndOffset)
		if first > rg.Last || first != s.EndOffset {
			continue
		}
		last := min(rg.Last, s.StartOffset+int64(c.MaxLocks)-1)
		if last < first {
			continue
		}
		run := ShareRun{First: first, Last: last, State: ShareArchived}
		if !rg.Gap {
			run = ShareRun{First: first, Last: last, State: ShareAcquired, DeliveryCount: 1, Member: c.Member, Deadline: deadline}
			grant(first, last, 1)
		}
		s.Runs = append(s.Runs, run)
		s.EndOffset = last + 1
	}
	advanceShareStart(&s)
	res.ShareStartOffset = s.StartOffset
	return res, a.putShareState(&s)
}

// shareFollowLogStart moves the SPSO up to the partition's log start
// offset: retention or DeleteRecords took what is below it.
func (a *Applier) shareFollowLogStart(s *ShareState) error {
	cp, err := a.part(partRef{s.TopicID, s.Partition})
	if err != nil || !cp.exists || cp.st.LogStartOffset <= s.StartOffset {
		return err
	}
	ls := cp.st.LogStartOffset
	if ls >= s.EndOffset {
		s.StartOffset, s.EndOffset, s.Runs = ls, ls, nil
		return nil
	}
	i, _ := splitShareRuns(s, ls, s.EndOffset-1)
	s.Runs = slices.Delete(s.Runs, 0, i)
	s.StartOffset = ls
	return nil
}

func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (a *Applier) shareAck(c ShareAck) (Result, error) {
	if msg := checkShareIDs(c.Group, c.Member); msg != "" {
		return failed(kerr.InvalidRequest, "%s", msg), nil
	}
	if msg := checkShareLimits(c.LockMs, c.DeliveryLimit); msg != "" {
		return failed(kerr.InvalidRequest, "%s", msg), nil
	}
	if len(c.Batches) > MaxShareRanges {
		return failed(kerr.InvalidRequest, "more than %d batches", MaxShareRanges), nil
	}
	for i, bt := range c.Batches {
		n := bt.Last - bt.First + 1
		switch {
		case bt.First > bt.Last || bt.First < 0 || (i > 0 && bt.First <= c.Batches[i-1].Last):
			return failed(kerr.InvalidRequest, "batches are not sorted, disjoint and non-empty"), nil
		case len(bt.Types) != 1 && int64(len(bt.Types)) != n:
			return failed(kerr.InvalidRequest, "a batch has one acknowledge type or one per offset"), nil
		}
		for _, t := range bt.Types {
			if t > ShareAckRenew {
				return failed(kerr.InvalidRequest, "unknown acknowledge type %d", t), nil
			}
		}
	}
	s, ok, err := a.shareState(c.Group, c.TopicID, c.Partition)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return failed(kerr.InvalidRecordState, "share partition not initialized"), nil
	}
	if err := a.shareFollowLogStart(&s); err != nil {
		return Result{}, err
	}
	// Check all first: a partition's acknowledgements apply whole or not
	// at all.
	for _, bt := range c.Batches {
		if bt.First < s.StartOffset || bt.Last >= s.EndOffset {
			return failed(kerr.InvalidRecordState, "offsets %d-%d are not in flight", bt.First, bt.Last), nil
		}
		for _, r := range s.Runs {
			if r.Last < bt.First || r.First > bt.Last {
				continue
			}
			if r.State != ShareAcquired || r.Member != c.Member || r.Deadline <= a.clock {
				return failed(kerr.InvalidRecordState, "offsets %d-%d are not acquired by this member", max(r.First, bt.First), min(r.Last, bt.Last)), nil
			}
		}
	}
	var res Result
	set := func(first, last int64, t byte) {
		i, j := splitShareRuns(&s, first, last)
		for k := i; k < j; k++ {
			r := &s.Runs[k]
			switch t {
			case ShareAckGap, ShareAckAccept:
				r.State, r.Member, r.Deadline = ShareAcknowledged, "", 0
			case ShareAckReject:
				r.State, r.Member, r.Deadline = ShareArchived, "", 0
				res.ShareArchived += r.Last - r.First + 1
			case ShareAckRelease:
				r.State, r.Member, r.Deadline = ShareAvailable, "", 0
				if int32(r.DeliveryCount) >= c.DeliveryLimit {
					r.State = ShareArchived
					res.ShareArchived += r.Last - r.First + 1
				}
			case ShareAckRenew:
				r.Deadline = satAdd(a.clock, c.LockMs)
			}
		}
	}
	for _, bt := range c.Batches {
		if len(bt.Types) == 1 {
			set(bt.First, bt.Last, bt.Types[0])
			continue
		}
		// One type per offset: runs of equal types at once.
		start := 0
		for i := 1; i <= len(bt.Types); i++ {
			if i == len(bt.Types) || bt.Types[i] != bt.Types[start] {
				set(bt.First+int64(start), bt.First+int64(i-1), bt.Types[start])
				start = i
			}
		}
	}
	expArchived, timedOut := expireShareLocks(&s, a.clock, c.DeliveryLimit)
	res.ShareArchived += expArchived
	res.ShareLockTimeouts = timedOut
	advanceShareStart(&s)
	res.ShareStartOffset = s.StartOffset
	return res, a.putShareState(&s)
}

func (a *Applier) shareRelease(c ShareRelease) (Result, error) {
	if msg := checkShareIDs(c.Group, c.Member); msg != "" || c.Member == "" {
		return failed(kerr.InvalidRequest, "%s", orElse(msg, "no member id")), nil
	}
	if msg := checkShareLimits(0, c.DeliveryLimit); msg != "" {
		return failed(kerr.InvalidRequest, "%s", msg), nil
	}
	if len(c.Partitions) > MaxShareReleasePartitions {
		return failed(kerr.InvalidRequest, "more than %d partitions", MaxShareReleasePartitions), nil
	}
	refs := c.Partitions
	if len(refs) == 0 {
		states, err := readShareStates(a.b, c.Group, nil)
		if err != nil {
			return Result{}, err
		}
		for _, s := range states {
			refs = append(refs, SharePartitionRef{s.TopicID, s.Partition})
		}
	}
	var res Result
	for _, ref := range refs {
		s, ok, err := a.shareState(c.Group, ref.TopicID, ref.Partition)
		if err != nil {
			return Result{}, err
		}
		if !ok {
			continue
		}
		changed := false
		for i := range s.Runs {
			r := &s.Runs[i]
			if r.State != ShareAcquired || r.Member != c.Member {
				continue
			}
			changed = true
			n := r.Last - r.First + 1
			r.State, r.Member, r.Deadline = ShareAvailable, "", 0
			if int32(r.DeliveryCount) >= c.DeliveryLimit {
				r.State = ShareArchived
				res.ShareArchived += n
			} else {
				res.ShareReleased += n
			}
		}
		if !changed {
			continue
		}
		advanceShareStart(&s)
		if err := a.putShareState(&s); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

func (a *Applier) shareStateAlter(c ShareStateAlter) (Result, error) {
	if msg := checkShareIDs(c.Group, ""); msg != "" {
		return failed(kerr.InvalidRequest, "%s", msg), nil
	}
	cp, err := a.part(partRef{c.TopicID, c.Partition})
	if err != nil {
		return Result{}, err
	}
	if !cp.exists {
		return failed(kerr.UnknownTopicOrPartition, "no partition %d of topic %v", c.Partition, c.TopicID), nil
	}
	if c.StartOffset < 0 {
		return failed(kerr.InvalidRequest, "start offset %d", c.StartOffset), nil
	}
	s, _, err := a.shareState(c.Group, c.TopicID, c.Partition)
	if err != nil {
		return Result{}, err
	}
	start := min(max(c.StartOffset, cp.st.LogStartOffset), cp.st.NextOffset)
	s = ShareState{Group: c.Group, TopicID: c.TopicID, Partition: c.Partition, StartOffset: start, EndOffset: start, StateEpoch: s.StateEpoch + 1}
	return Result{ShareStartOffset: start}, a.putShareState(&s)
}

func (a *Applier) shareStateDelete(c ShareStateDelete) (Result, error) {
	if msg := checkShareIDs(c.Group, ""); msg != "" {
		return failed(kerr.InvalidRequest, "%s", msg), nil
	}
	if len(c.Topics) > MaxShareReleasePartitions {
		return failed(kerr.InvalidRequest, "more than %d topics", MaxShareReleasePartitions), nil
	}
	n, err := DeleteShareState(a.b, c.Group, c.Topics)
	return Result{ShareDeleted: n}, err
}
