// CreateAcls: v0-3 (v2+ flexible)
//   - Needs Alter on the cluster: CLUSTER_AUTHORIZATION_FAILED for every
//     creation otherwise.
//   - Each creation is checked as Kafka's AclControlManager checks it:
//     a resource type, a LITERAL or PREFIXED pattern (v0 is always
//     LITERAL), an operation and a permission that are not ANY or
//     UNKNOWN, a non-empty name, kafka-cluster for CLUSTER, a
//     "Type:Name" principal: INVALID_REQUEST otherwise, alone.
//   - A host that is an IP address is stored as Go formats it
//     ("::1"), the form the authorizer compares client addresses in.
//   - The valid ones go into one CreateACLs command; creating one that
//     exists succeeds. More than meta.MaxACLsPerCommand creations, or
//     more ACLs than meta.MaxACLs in all: INVALID_REQUEST.
//   - Below strand.metadata.version 4: UNSUPPORTED_VERSION.
//   - SUBJECT (acl.ResourceTypeSubject, Strand's type for the schema
//     registry) is accepted from strand.metadata.version 6, RELATION
//     (acl.ResourceTypeRelation, the SQL catalog's) from 7, CONNECTOR
//     (acl.ResourceTypeConnector, the Connect API's) from 8; below it
//     the creation is INVALID_REQUEST, alone.

package kafka

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(30, 0, 3, handleCreateACLs) }

func handleCreateACLs(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
	}
	if code := r.authz().clusterCode(kmsg.ACLOperationAlter); code != 0 {
		for i := range resp.Results {
			resp.Results[i].ErrorCode = code
		}
		return resp, nil
	}
	if len(req.Creations) > meta.MaxACLsPerCommand {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("too many ACLs in one request")
		}
		return resp, nil
	}
	level, err := metadataLevel(db)
	if err != nil {
		return nil, err
	}
	var cmd meta.CreateACLs
	var slots []int
	for i, c := range req.Creations {
		b := acl.Binding{ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: c.ResourcePatternType,
			Principal: c.Principal, Host: canonicalHost(c.Host), Operation: c.Operation, Permission: c.PermissionType}
		if req.Version == 0 {
			b.PatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		if err := b.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			continue
		}
		if why := aclTypeRefusal(level, b.ResourceType); why != "" {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(why)
			continue
		}
		cmd.ACLs = append(cmd.ACLs, b)
		slots = append(slots, i)
	}
	if len(slots) == 0 {
		return resp, nil
	}
	res, e, msg := proposeACLs(ctx, db, cmd)
	for j, i := range slots {
		rr := &resp.Results[i]
		switch {
		case e != nil:
			rr.ErrorCode, rr.ErrorMessage = e.Code, strPtr(msg)
		case j < len(res.Codes) && res.Codes[j] != 0:
			rr.ErrorCode, rr.ErrorMessage = res.Codes[j], kmsg.StringPtr("the cluster holds as many ACLs as it may")
		}
	}
	return resp, nil
}

// proposeACLs proposes an ACL command and returns its result, or the
// error of the command as a whole: a metadata level below 4 is
// UNSUPPORTED_VERSION, as a Kafka whose metadata version lacks a
// feature answers.
func proposeACLs(ctx context.Context, db MetaDB, cmd meta.Command) (meta.Result, *kerr.Error, string) {
	o := proposeAll(ctx, db, []meta.Command{cmd})[0]
	if errors.Is(o.err, meta.ErrNotAtLevel) {
		return o.res, kerr.UnsupportedVersion, "ACLs need strand.metadata.version 4 or higher (strand features upgrade)"
	}
	e, msg := o.code()
	return o.res, e, msg
}

// aclTypeRefusal says why a binding or filter of Strand's resource
// type t (SUBJECT below metadata level 6, RELATION below 7, CONNECTOR below
// 8) is refused
// at level, where apply would refuse it without saying why; "" when
// it is not.
func aclTypeRefusal(level int16, t acl.ResourceType) string {
	need := meta.ACLTypeLevel(t)
	if level >= need {
		return ""
	}
	return fmt.Sprintf("%s ACLs need strand.metadata.version %d or higher (strand features upgrade)", acl.ResourceTypeName(t), need)
}

// metadataLevel is the local copy's metadata level. Apply decides what
// it takes; this only names the reason first.
func metadataLevel(db MetaDB) (int16, error) {
	v := db.View()
	defer v.Close()
	f, err := v.Features()
	return f.MetadataLevel(), err
}

// canonicalHost is an ACL's host as the authorizer compares it: an IP
// address in netip's form, anything else as given.
func canonicalHost(h string) string {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return h
}
