package kafka

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/group"
)

// GroupCoordinator serves the group APIs. *group.Coordinator implements
// it: the handler files (FindCoordinator, JoinGroup, ...) document the
// versions and pass requests through, so the group semantics live in one
// package.
type GroupCoordinator interface {
	// Coordinator is the node id of the agent coordinating key (a group
	// id or a transactional id).
	Coordinator(key string) int32
	JoinGroup(ctx context.Context, cl group.Client, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse
	SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse
	Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse
	LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse
	// OffsetCommit queues the commit and returns the wait for its
	// outcome; commits queued in sequence apply in sequence.
	OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) func(context.Context) *kmsg.OffsetCommitResponse
	OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse
	OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse
	ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse
	DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse
	DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse
	// KIP-848 consumer groups.
	ConsumerGroupHeartbeat(ctx context.Context, cl group.Client, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse
	ConsumerGroupDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse
}

var _ GroupCoordinator = (*group.Coordinator)(nil)

// groups returns Deps.Groups, or ErrMissingDeps.
func (d *Deps) groups() (GroupCoordinator, error) {
	if d == nil || d.Groups == nil {
		return nil, ErrMissingDeps
	}
	return d.Groups, nil
}

// groupClient is who sent r, as JoinGroup records it: the header's client
// id and the peer's address the way Kafka prints it ("/127.0.0.1").
func (r *Request) groupClient() group.Client {
	var cl group.Client
	if r.ClientID != nil {
		cl.ID = *r.ClientID
	}
	if r.Conn != nil {
		if a := r.Conn.RemoteAddr(); a != nil {
			host := a.String()
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			cl.Host = "/" + host
		}
	}
	return cl
}
