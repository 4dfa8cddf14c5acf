// DescribeAcls: v0-3 (v2+ flexible)
//   - Needs Describe on the cluster: CLUSTER_AUTHORIZATION_FAILED
//     otherwise.
//   - The filter is Kafka's AclBindingFilter (v0 matches LITERAL
//     patterns only); an UNKNOWN resource type, pattern type, operation
//     or permission is INVALID_REQUEST.
//   - Answers the ACLs this agent has applied, grouped by resource
//     pattern in the order the database keeps them.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
)

func init() { regKey(29, 0, 3, handleDescribeACLs) }

func handleDescribeACLs(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if code := r.authz().clusterCode(kmsg.ACLOperationDescribe); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	f := aclFilter(req.Version, acl.Filter{ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType})
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
		return resp, nil
	}
	view := db.View()
	all, err := view.ACLs()
	view.Close()
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
		return resp, nil
	}
	type pattern struct {
		typ  acl.ResourceType
		name string
		pt   acl.PatternType
	}
	at := make(map[pattern]int)
	for _, b := range all {
		if !f.Matches(b) {
			continue
		}
		k := pattern{b.ResourceType, b.ResourceName, b.PatternType}
		i, ok := at[k]
		if !ok {
			i = len(resp.Resources)
			at[k] = i
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			resp.Resources = append(resp.Resources, res)
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	return resp, nil
}

// aclFilter is a DescribeAcls or DeleteAcls filter as the request at
// version gave it: v0 knows only literal patterns, and a host that is
// an IP address is compared in the form ACLs store it in.
func aclFilter(version int16, f acl.Filter) acl.Filter {
	if version == 0 {
		f.PatternType = kmsg.ACLResourcePatternTypeLiteral
	}
	if f.Host != nil {
		f.Host = kmsg.StringPtr(canonicalHost(*f.Host))
	}
	return f
}
