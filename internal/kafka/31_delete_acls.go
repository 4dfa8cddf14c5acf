// DeleteAcls: v0-3 (v2+ flexible)
//   - Needs Alter on the cluster: CLUSTER_AUTHORIZATION_FAILED for every
//     filter otherwise.
//   - Each filter is Kafka's AclBindingFilter (v0 matches LITERAL
//     patterns only); one with an UNKNOWN resource type, pattern type,
//     operation or permission is INVALID_REQUEST, alone.
//   - The filters go into one DeleteACLs command and select at apply, so
//     every agent deletes the same ACLs; each filter answers the ACLs it
//     deleted, one two filters select under the first.
//   - More than meta.MaxACLsPerCommand filters: INVALID_REQUEST. Below
//     strand.metadata.version 4: UNSUPPORTED_VERSION.
//   - A SUBJECT filter (Strand's type) below strand.metadata.version 6, a
//     RELATION filter below 7:
//     INVALID_REQUEST, alone.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(31, 0, 3, handleDeleteACLs) }

func handleDeleteACLs(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	fail := func(code int16, msg string) (kmsg.Response, error) {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, strPtr(msg)
		}
		return resp, nil
	}
	if code := r.authz().clusterCode(kmsg.ACLOperationAlter); code != 0 {
		return fail(code, "")
	}
	if len(req.Filters) > meta.MaxACLsPerCommand {
		return fail(kerr.InvalidRequest.Code, "too many ACL filters in one request")
	}
	level, err := metadataLevel(db)
	if err != nil {
		return nil, err
	}
	var cmd meta.DeleteACLs
	var slots []int
	for i, rf := range req.Filters {
		f := aclFilter(req.Version, acl.Filter{ResourceType: rf.ResourceType, ResourceName: rf.ResourceName, PatternType: rf.ResourcePatternType,
			Principal: rf.Principal, Host: rf.Host, Operation: rf.Operation, Permission: rf.PermissionType})
		if err := f.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			continue
		}
		if why := aclTypeRefusal(level, f.ResourceType); why != "" {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(why)
			continue
		}
		cmd.Filters = append(cmd.Filters, f)
		slots = append(slots, i)
	}
	if len(slots) == 0 {
		return resp, nil
	}
	res, e, msg := proposeACLs(ctx, db, cmd)
	for j, i := range slots {
		rr := &resp.Results[i]
		if e != nil {
			rr.ErrorCode, rr.ErrorMessage = e.Code, strPtr(msg)
			continue
		}
		if j < len(res.Codes) {
			rr.ErrorCode = res.Codes[j]
		}
		if j >= len(res.DeletedACLs) {
			continue
		}
		for _, b := range res.DeletedACLs[j] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
			rr.MatchingACLs = append(rr.MatchingACLs, m)
		}
	}
	return resp, nil
}
