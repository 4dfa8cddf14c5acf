package kafka

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/share"
)

// ShareServer serves the share partitions' requests (*share.Server):
// ShareFetch and ShareAcknowledge, with ACLs checked here, and the
// release of a closed connection's share sessions.
type ShareServer interface {
	Fetch(ctx context.Context, conn uint64, req *kmsg.ShareFetchRequest, check share.TopicCheck) *kmsg.ShareFetchResponse
	Acknowledge(ctx context.Context, conn uint64, req *kmsg.ShareAcknowledgeRequest, check share.TopicCheck) *kmsg.ShareAcknowledgeResponse
	ConnClosed(conn uint64)
}

var _ ShareServer = (*share.Server)(nil)

// ShareGroupInfo is what the share-offset admin requests (90-92) need of
// the group coordinator: whether group exists, is a share group, and how
// many members it has. err is kerr.NotCoordinator when this agent does
// not coordinate the group. Package group implements it for share groups;
// nil Deps.ShareGroups answers from the metadata alone (see
// metaShareGroups).
type ShareGroupInfo interface {
	ShareGroupState(ctx context.Context, group string) (exists, isShare bool, members int, err error)
}

// shareGroupCreator is a ShareGroupInfo that can also create an empty
// share group (package group's coordinator), as AlterShareGroupOffsets
// does in Kafka.
type shareGroupCreator interface {
	CreateShareGroup(ctx context.Context, group string) error
}

// shares returns Deps.Shares, or ErrMissingDeps.
func (d *Deps) shares() (ShareServer, error) {
	if d == nil || d.Shares == nil {
		return nil, ErrMissingDeps
	}
	return d.Shares, nil
}

// shareGroups returns Deps.ShareGroups, else the metadata's answer.
func (d *Deps) shareGroups() ShareGroupInfo {
	if d.ShareGroups != nil {
		return d.ShareGroups
	}
	return metaShareGroups{d.Meta}
}

// metaShareGroups answers ShareGroupState from the metadata alone, for
// an agent wired without share group membership: a group exists if it
// holds share-partition state (a share group) or is a classic or
// consumer group (not a share group), and has no members this can see.
type metaShareGroups struct{ m MetaDB }

func (g metaShareGroups) ShareGroupState(_ context.Context, group string) (bool, bool, int, error) {
	view := g.m.View()
	defer view.Close()
	if gr, ok, err := view.Group(group); err != nil || ok && (gr.Kind == meta.GroupClassic || gr.Kind == meta.GroupConsumer) {
		return ok, false, 0, err
	}
	states, err := view.ShareStates(group)
	return len(states) > 0, true, 0, err
}

// shareTopicCheck answers share.TopicCheck for a request: an unknown id
// is UNKNOWN_TOPIC_ID, a topic the client may not op
// TOPIC_AUTHORIZATION_FAILED. Names are looked up once per request.
func (r *Request) shareTopicCheck(op int8) share.TopicCheck {
	z := r.authz()
	var mu sync.Mutex
	seen := map[meta.TopicID]int16{}
	return func(id meta.TopicID) int16 {
		mu.Lock()
		defer mu.Unlock()
		if code, ok := seen[id]; ok {
			return code
		}
		view := r.Deps.Meta.View()
		t, ok, err := view.TopicByID(id)
		view.Close()
		code := int16(0)
		switch {
		case err != nil:
			code = kerr.UnknownServerError.Code
		case !ok:
			code = kerr.UnknownTopicID.Code
		default:
			code = z.topicCode(kmsg.ACLOperation(op), t.Name)
		}
		seen[id] = code
		return code
	}
}

// connID is the request's connection id, 0 without one (handler tests).
func (r *Request) connID() uint64 {
	if r.Conn == nil {
		return 0
	}
	return r.Conn.ID()
}
