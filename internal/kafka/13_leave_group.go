// LeaveGroup: v0-5
//   - v0-2: one member id, answered in the top-level error code.
//   - v3+: several members, by member id or by instance id (a static
//     member leaves for good only this way), each with its own error;
//     FENCED_INSTANCE_ID when the member id does not own the instance.
//   - v5 Reason is logged.
//   - ACLs (authz.go): Read on the group, else GROUP_AUTHORIZATION_FAILED.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/group"
)

func init() { regKey(13, 0, 5, handleLeaveGroup) }

func handleLeaveGroup(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if resp.ErrorCode = r.authz().groupCode(kmsg.ACLOperationRead, req.Group); resp.ErrorCode != 0 {
		return resp, nil
	}
	// In the connection's order (groups.go): a leave must not overtake
	// the member's last commit, which it would make UNKNOWN_MEMBER_ID.
	leave := func(leaving []group.LeaveMember) (res group.LeaveResult, err error) {
		err = r.InOrder(ctx, func() { res = g.LeaveGroup(ctx, req.Group, leaving) })
		return res, err
	}
	if req.Version < 3 {
		res, err := leave([]group.LeaveMember{{MemberID: req.MemberID}})
		if err != nil {
			return nil, err
		}
		resp.ErrorCode = res.Code
		if res.Code == 0 && len(res.Codes) > 0 {
			resp.ErrorCode = res.Codes[0]
		}
		return resp, nil
	}
	leaving := make([]group.LeaveMember, len(req.Members))
	for i, m := range req.Members {
		leaving[i] = group.LeaveMember{MemberID: m.MemberID, InstanceID: m.InstanceID, Reason: strOr(m.Reason)}
	}
	res, err := leave(leaving)
	if err != nil {
		return nil, err
	}
	resp.ErrorCode = res.Code
	if res.Code != 0 {
		return resp, nil
	}
	for i, l := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = l.MemberID, l.InstanceID, res.Codes[i]
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}
