// DescribeGroups: v0-5
//   - State, protocol type, and members with client id and host; the
//     protocol, subscriptions and assignments only for a Stable group, as
//     Kafka shows them.
//   - An unknown group is state "Dead" with no error (v6 would answer
//     GROUP_ID_NOT_FOUND).
//   - v3+ authorized operations when asked: what the client may do
//     (READ, DELETE and DESCRIBE with ACLs off). v4+ InstanceID.
//   - Left out: v6 (KIP-1043).
//   - ACLs (authz.go): Describe on each group, else
//     GROUP_AUTHORIZATION_FAILED; authorized operations are the client's.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(15, 0, 5, handleDescribeGroups) }

func handleDescribeGroups(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	z := r.authz()
	for _, d := range g.DescribeGroups(ctx, req.Groups) {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group, dg.ErrorCode = d.Group, d.Code
		if code := z.groupCode(kmsg.ACLOperationDescribe, d.Group); code != 0 {
			dg.ErrorCode = code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		dg.State, dg.ProtocolType, dg.Protocol = d.State, d.ProtocolType, d.Protocol
		if req.Version >= 3 && req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = z.groupOps(d.Group)
		}
		for _, m := range d.Members {
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID, dm.InstanceID = m.MemberID, strPtr(m.InstanceID)
			dm.ClientID, dm.ClientHost = m.ClientID, m.ClientHost
			dm.ProtocolMetadata, dm.MemberAssignment = m.Metadata, m.Assignment
			dg.Members = append(dg.Members, dm)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp, nil
}
