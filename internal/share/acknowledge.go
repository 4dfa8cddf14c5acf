package share

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// Acknowledge serves a ShareAcknowledge on connection conn, the group's
// READ already checked. It shares the member's share session with
// ShareFetch: epoch 0 opens none here (INVALID_SHARE_SESSION_EPOCH),
// -1 closes it after the acknowledgements and releases what the member
// still holds in it.
func (s *Server) Acknowledge(ctx context.Context, conn uint64, req *kmsg.ShareAcknowledgeRequest, check TopicCheck) *kmsg.ShareAcknowledgeResponse {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	group, member := deref(req.GroupID), deref(req.MemberID)
	cfg, err := s.config(group)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidConfig.Code, kmsg.StringPtr(err.Error())
		return resp
	}
	resp.AcquisitionLockTimeoutMillis = int32(cfg.RecordLock.Milliseconds())
	if member == "" || len(member) > 36 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	if code := s.groupTypeCode(group); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	var acks []ackPart
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			ap := ackPart{ref: meta.PartitionRef{TopicID: t.TopicID, Partition: p.Partition}}
			for _, b := range p.AcknowledgementBatches {
				ap.batches = append(ap.batches, meta.ShareAckBatch{First: b.FirstOffset, Last: b.LastOffset, Types: int8Types(b.AcknowledgeTypes)})
			}
			acks = append(acks, ap)
		}
	}
	k := sessionKey{group, member}
	var ss session
	var kerrv *kerr.Error
	switch req.ShareSessionEpoch {
	case 0:
		kerrv = kerr.InvalidShareSessionEpoch
	case -1:
		ss, kerrv = s.sessions.close(k)
	default:
		_, kerrv = s.sessions.check(k, req.ShareSessionEpoch)
	}
	if kerrv != nil {
		resp.ErrorCode = kerrv.Code
		return resp
	}
	codes := make(map[meta.PartitionRef]int16)
	renew := req.Version >= 2 && req.IsRenewAck
	s.ackInto(ctx, group, member, cfg, acks, renew, check, func(ref meta.PartitionRef, code int16) { codes[ref] = code })
	if req.ShareSessionEpoch == -1 {
		s.release(ctx, group, member, cfg, ss.parts)
	}
	refs := make([]meta.PartitionRef, 0, len(codes))
	for ref := range codes {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, comparePartitionRefs)
	for _, ref := range refs {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].TopicID != ref.TopicID {
			t := kmsg.NewShareAcknowledgeResponseTopic()
			t.TopicID = ref.TopicID
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewShareAcknowledgeResponseTopicPartition()
		p.Partition, p.ErrorCode = ref.Partition, codes[ref]
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
		t := &resp.Topics[len(resp.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	return resp
}
