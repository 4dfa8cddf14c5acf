package cli

// SUBJECT and RELATION ACLs (`strand acl ... --subject NAME`,
// `--relation NAME`): schema registry subjects and SQL relations,
// Strand's resource types (acl.ResourceTypeSubject,
// acl.ResourceTypeRelation), which kadm's builder cannot name. They go
// over the same CreateAcls, DescribeAcls and DeleteAcls as raw kmsg
// requests, built from the same flags as kadm builds the others from.

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
)

// aclClients is admin with the client under it, for the raw requests.
func (o *ClientOptions) aclClients(ctx context.Context) (*kadm.Client, *kgo.Client, context.Context, func(), error) {
	cl, err := o.NewClient()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	adm := kadm.NewClient(cl)
	ctx, cancel := o.requestContext(ctx)
	return adm, cl, ctx, func() { cancel(); adm.Close() }, nil
}

// strandResource is the names given for one of Strand's types.
type strandResource struct {
	typ   acl.ResourceType
	names []string
}

// strandResources are the SUBJECT, RELATION and CONNECTOR resources
// named.
func (f *aclFlags) strandResources() []strandResource {
	return []strandResource{{acl.ResourceTypeSubject, f.subjects}, {acl.ResourceTypeRelation, f.relations}, {acl.ResourceTypeConnector, f.connectors}}
}

// strandNamed counts the SUBJECT, RELATION and CONNECTOR resources
// named.
func (f *aclFlags) strandNamed() int { return len(f.subjects) + len(f.relations) + len(f.connectors) }

// createSubjectACLs creates an ACL for every subject or relation,
// operation and principal with its hosts, as kadm does for the other
// types.
func (f *aclFlags) createSubjectACLs(ctx context.Context, cl *kgo.Client, ops []kadm.ACLOperation, pattern kadm.ACLPattern) (kadm.CreateACLsResults, error) {
	req := kmsg.NewPtrCreateACLsRequest()
	for _, side := range []struct {
		principals, hosts []string
		perm              kmsg.ACLPermissionType
	}{{f.allow, f.allowHosts, kmsg.ACLPermissionTypeAllow}, {f.deny, f.denyHosts, kmsg.ACLPermissionTypeDeny}} {
		for _, r := range f.strandResources() {
			for _, name := range r.names {
				for _, op := range ops {
					for _, p := range side.principals {
						for _, h := range side.hosts {
							c := kmsg.NewCreateACLsRequestCreation()
							c.ResourceType, c.ResourceName, c.ResourcePatternType = r.typ, name, pattern
							c.Principal, c.Host, c.Operation, c.PermissionType = p, h, op, side.perm
							req.Creations = append(req.Creations, c)
						}
					}
				}
			}
		}
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := make(kadm.CreateACLsResults, len(req.Creations))
	for i, c := range req.Creations {
		out[i] = kadm.CreateACLsResult{Principal: c.Principal, Host: c.Host, Type: c.ResourceType, Name: c.ResourceName,
			Pattern: c.ResourcePatternType, Operation: c.Operation, Permission: c.PermissionType}
		if i < len(resp.Results) {
			r := resp.Results[i]
			out[i].Err = kerr.ErrorForCode(r.ErrorCode)
			if r.ErrorMessage != nil {
				out[i].ErrMessage = *r.ErrorMessage
			}
		}
	}
	return out, nil
}

// subjectFilters are the filters of `acl list` and `acl delete` for the
// named subjects and relations: unset flags match anything.
func (f *aclFlags) subjectFilters(ops []kadm.ACLOperation, pattern kadm.ACLPattern, allow, deny bool) []acl.Filter {
	perm := kmsg.ACLPermissionTypeAny
	switch {
	case allow && !deny:
		perm = kmsg.ACLPermissionTypeAllow
	case deny && !allow:
		perm = kmsg.ACLPermissionTypeDeny
	}
	principals, hosts := optionals(f.allow), optionals(f.allowHosts)
	var out []acl.Filter
	for _, r := range f.strandResources() {
		for _, name := range r.names {
			for _, op := range ops {
				for _, p := range principals {
					for _, h := range hosts {
						out = append(out, acl.Filter{ResourceType: r.typ, ResourceName: kmsg.StringPtr(name),
							PatternType: pattern, Principal: p, Host: h, Operation: op, Permission: perm})
					}
				}
			}
		}
	}
	return out
}

// optionals is each of ss as a filter value, or one nil (any) for none.
func optionals(ss []string) []*string {
	if len(ss) == 0 {
		return []*string{nil}
	}
	out := make([]*string, len(ss))
	for i := range ss {
		out[i] = &ss[i]
	}
	return out
}

// describeSubjectACLs sends one DescribeAcls per filter.
func describeSubjectACLs(ctx context.Context, cl *kgo.Client, filters []acl.Filter) ([]aclResult, error) {
	var out []aclResult
	for _, f := range filters {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourceName, req.ResourcePatternType = f.ResourceType, f.ResourceName, f.PatternType
		req.Principal, req.Host, req.Operation, req.PermissionType = f.Principal, f.Host, f.Operation, f.Permission
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, err
		}
		r := aclResult{err: kerr.ErrorForCode(resp.ErrorCode), msg: strOr(resp.ErrorMessage)}
		for _, res := range resp.Resources {
			for _, a := range res.ACLs {
				r.acls = append(r.acls, kadm.DescribedACL{Principal: a.Principal, Host: a.Host, Type: res.ResourceType,
					Name: res.ResourceName, Pattern: res.ResourcePatternType, Operation: a.Operation, Permission: a.PermissionType})
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// deleteSubjectACLs sends the filters in one DeleteAcls.
func deleteSubjectACLs(ctx context.Context, cl *kgo.Client, filters []acl.Filter) ([]aclResult, error) {
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, f := range filters {
		rf := kmsg.NewDeleteACLsRequestFilter()
		rf.ResourceType, rf.ResourceName, rf.ResourcePatternType = f.ResourceType, f.ResourceName, f.PatternType
		rf.Principal, rf.Host, rf.Operation, rf.PermissionType = f.Principal, f.Host, f.Operation, f.Permission
		req.Filters = append(req.Filters, rf)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := make([]aclResult, len(resp.Results))
	for i, res := range resp.Results {
		out[i] = aclResult{err: kerr.ErrorForCode(res.ErrorCode), msg: strOr(res.ErrorMessage)}
		for _, m := range res.MatchingACLs {
			out[i].acls = append(out[i].acls, kadm.DescribedACL{Principal: m.Principal, Host: m.Host, Type: m.ResourceType,
				Name: m.ResourceName, Pattern: m.ResourcePatternType, Operation: m.Operation, Permission: m.PermissionType})
		}
	}
	return out, nil
}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return strings.TrimSpace(*s)
}
