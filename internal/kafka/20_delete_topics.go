// DeleteTopics: v0-6
//   - v0-5 name topics; v6 names each by name or by id (both or neither is
//     INVALID_REQUEST).
//   - Unknown name: UNKNOWN_TOPIC_OR_PARTITION; unknown id:
//     UNKNOWN_TOPIC_ID (name null). A topic named twice, by name or id, is
//     INVALID_REQUEST, answered once.
//   - The topic is deleted by the id this agent resolved, so a topic
//     deleted and created again meanwhile under the same name is left
//     alone (the answer is then the unknown-topic error). Its partitions
//     and offset index go in the same command; the data objects are
//     reclaimed by object garbage collection.
//   - v5+ ErrorMessage; v6 TopicID in the answer.
//   - TimeoutMillis > 0 bounds the wait for the proposal; past it the
//     answer is REQUEST_TIMED_OUT and the deletion may still happen.
//   - Left out: delete.topic.enable (deletion is always allowed).
//   - ACLs (authz.go): Delete on the topic, else TOPIC_AUTHORIZATION_FAILED
//     (checked before existence for a name; an id's name is answered only
//     to those who may Describe the topic).

package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(20, 0, 6, handleDeleteTopics) }

func handleDeleteTopics(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)

	entries := req.Topics
	if req.Version < 6 {
		entries = make([]kmsg.DeleteTopicsRequestTopic, len(req.TopicNames))
		for i := range req.TopicNames {
			entries[i].Topic = &req.TopicNames[i]
		}
	}

	// Resolve every entry first, so duplicates by name and by id are
	// found alike.
	type target struct {
		byID bool
		name string
		id   meta.TopicID
		err  *kerr.Error
		msg  string
	}
	targets := make([]target, len(entries))
	counts := make(map[string]int, len(entries))
	view := db.View()
	z := r.authz()
	for i, e := range entries {
		t := &targets[i]
		id := meta.TopicID(e.TopicID)
		switch {
		case e.Topic != nil && !id.IsZero():
			t.name, t.id, t.err, t.msg = *e.Topic, id, kerr.InvalidRequest, "name a topic by name or by id, not both"
			continue
		case e.Topic == nil && id.IsZero():
			t.err, t.msg = kerr.InvalidRequest, "no topic name or id"
			continue
		}
		var tp meta.Topic
		var ok bool
		if e.Topic != nil {
			t.name = *e.Topic
			if !z.topic(kmsg.ACLOperationDelete, t.name) {
				t.err = kerr.TopicAuthorizationFailed
				continue
			}
			tp, ok, err = view.Topic(t.name)
		} else {
			t.byID, t.id = true, id
			tp, ok, err = view.TopicByID(id)
		}
		switch {
		case err != nil:
			t.err, t.msg = kerr.UnknownServerError, err.Error()
		case !ok && t.byID:
			t.err, t.msg = kerr.UnknownTopicID, fmt.Sprintf("no topic with id %v", id)
		case !ok:
			t.err, t.msg = kerr.UnknownTopicOrPartition, fmt.Sprintf("no topic %q", t.name)
		case t.byID && !z.topic(kmsg.ACLOperationDelete, tp.Name):
			// The name only to those who may describe the topic.
			if z.quiet().topic(kmsg.ACLOperationDescribe, tp.Name) {
				t.name = tp.Name
			}
			t.err = kerr.TopicAuthorizationFailed
		case isInternalTopic(tp.Name):
			t.name, t.id = tp.Name, tp.ID
			t.err, t.msg = kerr.InvalidTopicException, "internal topics cannot be deleted"
		default:
			t.name, t.id = tp.Name, tp.ID
			counts[t.name]++
		}
	}
	view.Close()

	var cmds []meta.Command
	// Per command: its index in resp.Topics and in targets.
	var cmdIdx, cmdTarget []int
	dupAnswered := make(map[string]bool)
	for i := range targets {
		t := &targets[i]
		st := kmsg.NewDeleteTopicsResponseTopic()
		if t.name != "" || req.Version < 6 {
			st.Topic = kmsg.StringPtr(t.name)
		}
		st.TopicID = t.id
		switch {
		case t.err != nil:
			st.ErrorCode, st.ErrorMessage = t.err.Code, strPtr(t.msg)
		case counts[t.name] > 1:
			if dupAnswered[t.name] {
				continue
			}
			dupAnswered[t.name] = true
			st.ErrorCode, st.ErrorMessage = kerr.InvalidRequest.Code, strPtr("topic named more than once")
		default:
			cmds = append(cmds, meta.DeleteTopic{ID: t.id})
			cmdIdx = append(cmdIdx, len(resp.Topics))
			cmdTarget = append(cmdTarget, i)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(cmds) == 0 {
		return resp, nil
	}

	pctx, cancel := withTimeoutMillis(ctx, req.TimeoutMillis)
	outs := proposeAll(pctx, db, cmds)
	cancel()
	for i, idx := range cmdIdx {
		st := &resp.Topics[idx]
		e, msg := outs[i].code()
		if e == nil {
			continue
		}
		if e == kerr.UnknownTopicID && !targets[cmdTarget[i]].byID {
			// Deleted by someone else since we looked: the client
			// asked by name.
			e = kerr.UnknownTopicOrPartition
		}
		st.ErrorCode, st.ErrorMessage = e.Code, strPtr(msg)
	}
	return resp, nil
}
