// DescribeTopicPartitions: v0 (KIP-966)
//   - What the Java admin client's describeTopics asks since Kafka 3.8
//     (Metadata only for older brokers): the topics and partitions
//     Metadata would answer, with the same leaders (placed by the
//     client's zone, zones.go), replica lists, ISR and offline replicas,
//     and the topic's authorized operations, always (the request has no
//     flag for them).
//   - Paged, as Kafka: an empty Topics means every topic, sorted by name;
//     named topics are answered sorted by name too, each once. Cursor
//     (topic, first partition) starts the answer there: topics before it
//     are skipped, and a cursor topic the request does not name, or a
//     negative partition, is INVALID_REQUEST for every named topic.
//     ResponsePartitionLimit caps the partitions of the answer, at most
//     maxDescribePartitionsLimit (Kafka's
//     max.request.partition.size.limit default), at least 1; NextCursor
//     names where the next page starts, null on the last page.
//   - An unknown named topic is UNKNOWN_TOPIC_OR_PARTITION; nothing is
//     auto-created. EligibleLeaderReplicas and LastKnownELR (KIP-966's
//     eligible leader replicas) are empty: storage is shared, so any
//     agent may lead and there is no replica to elect among.
//   - ACLs (authz.go): Describe on each topic; a named topic the client
//     may not describe is TOPIC_AUTHORIZATION_FAILED, and one of every
//     topic is left out.

package kafka

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(75, 0, 0, handleDescribeTopicPartitions) }

// maxDescribePartitionsLimit is Kafka's max.request.partition.size.limit
// default: the most partitions one answer holds.
const maxDescribePartitionsLimit = 2000

func handleDescribeTopicPartitions(_ context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	all := len(req.Topics) == 0
	var names []string
	for _, rt := range req.Topics {
		names = append(names, rt.Topic)
	}
	slices.Sort(names)
	names = slices.Compact(names)

	errTopic := func(name string, e *kerr.Error) {
		st := kmsg.NewDescribeTopicPartitionsResponseTopic()
		st.Topic, st.ErrorCode = kmsg.StringPtr(name), e.Code
		resp.Topics = append(resp.Topics, st)
	}
	var cursorTopic string
	var cursorPartition int32
	if c := req.Cursor; c != nil {
		cursorTopic, cursorPartition = c.Topic, c.Partition
		if cursorPartition < 0 || (!all && !slices.Contains(names, cursorTopic)) {
			for _, name := range names {
				errTopic(name, kerr.InvalidRequest)
			}
			return resp, nil
		}
	}

	view := db.View()
	defer view.Close()
	var topics []meta.Topic // nil Partitions: unknown
	if all {
		ts, err := view.Topics()
		if err != nil {
			return nil, fmt.Errorf("kafka: describe topic partitions: listing topics: %w", err)
		}
		for _, t := range ts {
			if t.Name >= cursorTopic {
				topics = append(topics, t)
			}
		}
		slices.SortFunc(topics, func(a, b meta.Topic) int { return cmp.Compare(a.Name, b.Name) })
	}

	z := r.authz()
	brokers := r.Deps.brokers(r.Conn)
	m := metadataAnswer{d: r.Deps, z: z, brokers: brokers, includeOps: true}
	m.placeOn, m.zone = placeLeaders(brokers, r.Conn.Zone())
	m.lists.view = view

	limit := min(max(req.ResponsePartitionLimit, 1), maxDescribePartitionsLimit)
	emitted := int32(0)
	describe := func(t *meta.Topic) bool {
		if emitted >= limit {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: t.Name, Partition: 0}
			return false
		}
		mt := m.topic(t)
		st := kmsg.NewDescribeTopicPartitionsResponseTopic()
		st.ErrorCode, st.Topic, st.TopicID = mt.ErrorCode, mt.Topic, mt.TopicID
		st.IsInternal, st.AuthorizedOperations = mt.IsInternal, mt.AuthorizedOperations
		first := int32(0)
		if t.Name == cursorTopic {
			first = cursorPartition
		}
		for _, mp := range mt.Partitions {
			if mp.Partition < first {
				continue
			}
			if emitted >= limit {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: t.Name, Partition: mp.Partition}
				break
			}
			sp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			sp.ErrorCode, sp.Partition, sp.LeaderID, sp.LeaderEpoch = mp.ErrorCode, mp.Partition, mp.Leader, mp.LeaderEpoch
			sp.Replicas, sp.ISR, sp.OfflineReplicas = mp.Replicas, mp.ISR, mp.OfflineReplicas
			sp.EligibleLeaderReplicas, sp.LastKnownELR = []int32{}, []int32{}
			st.Partitions = append(st.Partitions, sp)
			emitted++
		}
		resp.Topics = append(resp.Topics, st)
		return resp.NextCursor == nil
	}

	if all {
		for i := range topics {
			if !z.topic(kmsg.ACLOperationDescribe, topics[i].Name) {
				continue
			}
			if !describe(&topics[i]) {
				break
			}
		}
		return resp, nil
	}
	for _, name := range names {
		if name < cursorTopic {
			continue
		}
		if !z.topic(kmsg.ACLOperationDescribe, name) {
			errTopic(name, kerr.TopicAuthorizationFailed)
			continue
		}
		t, ok, err := view.Topic(name)
		switch {
		case err != nil:
			errTopic(name, kerr.UnknownServerError)
			continue
		case !ok:
			errTopic(name, kerr.UnknownTopicOrPartition)
			continue
		}
		if !describe(&t) {
			break
		}
	}
	return resp, nil
}
