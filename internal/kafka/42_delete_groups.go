// DeleteGroups: v0-2
//   - An empty group's state and committed offsets are deleted through the
//     log; a group with members is NON_EMPTY_GROUP, an unknown one
//     GROUP_ID_NOT_FOUND.
//   - Left out: v3 (ErrorMessage).

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(42, 0, 2, handleDeleteGroups) }

func handleDeleteGroups(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	// ACLs: Delete on each group; the others are not deleted.
	z := r.authz()
	var allowed []string
	for _, name := range req.Groups {
		if z.group(kmsg.ACLOperationDelete, name) {
			allowed = append(allowed, name)
		}
	}
	var codes []int16
	if len(allowed) > 0 {
		codes = g.DeleteGroups(ctx, allowed)
	}
	k := 0
	for _, name := range req.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = name
		if dg.ErrorCode = z.groupCode(kmsg.ACLOperationDelete, name); dg.ErrorCode == 0 {
			dg.ErrorCode = codes[k]
			k++
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp, nil
}
