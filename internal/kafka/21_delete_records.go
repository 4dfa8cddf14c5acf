// DeleteRecords: v0-2 (v2 flexible)
//   - Raises each partition's log start offset to Offset; -1 means the
//     high watermark. Records below it are no longer readable: Fetch below
//     it is OFFSET_OUT_OF_RANGE and ListOffsets earliest answers it. The
//     index entries wholly below it go; the data objects stay until
//     object garbage collection.
//   - The log start never moves back: an offset at or below it succeeds
//     and answers the current one. Above the high watermark, or below -1:
//     OFFSET_OUT_OF_RANGE.
//   - LowWatermark is the log start offset after the deletion, -1 with an
//     error. Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION. A
//     topic whose cleanup.policy lacks delete: POLICY_VIOLATION, as Kafka.
//   - Every partition of a request goes into one DeleteRecords command,
//     one log entry; apply checks the offsets against the state at its
//     position, so a produce racing the request is ordered by the log.
//     A partition named twice is applied twice, in order, and answered
//     twice.
//   - TimeoutMillis > 0 bounds the wait for the proposal; past it the
//     partitions get REQUEST_TIMED_OUT and the deletion may still apply.
//   - ACLs (authz.go): Delete on each topic, else TOPIC_AUTHORIZATION_FAILED.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/topicconfig"
)

func init() { regKey(21, 0, 2, handleDeleteRecords) }

func handleDeleteRecords(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)

	var cmd meta.DeleteRecords
	// proposed[i] is the response partition cmd.Partitions[i] answers.
	var proposed []*kmsg.DeleteRecordsResponseTopicPartition
	view := db.View()
	topics := topicCache{view: view}
	z := r.authz()
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition, sp.LowWatermark = rp.Partition, -1
			if !z.topic(kmsg.ACLOperationDelete, rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			t, _, e := topics.partition(rt.Topic, rp.Partition)
			if e == nil && !topicconfig.Effective(t.Configs).CleanupPolicy.Delete {
				e = kerr.PolicyViolation
			}
			if e != nil {
				sp.ErrorCode = e.Code
				continue
			}
			cmd.Partitions = append(cmd.Partitions, meta.DeleteRecordsPartition{TopicID: t.ID, Partition: rp.Partition, Offset: rp.Offset})
			proposed = append(proposed, sp)
		}
	}
	view.Close()
	if len(proposed) == 0 {
		return resp, nil
	}

	pctx, cancel := withTimeoutMillis(ctx, req.TimeoutMillis)
	res, err := db.ProposeBatch(pctx, []meta.Command{cmd})
	cancel()
	// code, when set, answers every proposed partition: no per-partition
	// result is known.
	var code int16
	switch {
	case err != nil:
		code = proposeErrCode(err).Code
	case len(res) != 1 || len(res[0].Batches) != len(proposed):
		code = kerr.UnknownServerError.Code
	case res[0].Code != 0:
		code = res[0].Code
	}
	for i, sp := range proposed {
		if code != 0 {
			sp.ErrorCode = code
			continue
		}
		br := res[0].Batches[i]
		sp.ErrorCode = br.Code
		if br.Code == 0 {
			sp.LowWatermark = br.LogStartOffset
		}
	}
	return resp, nil
}
