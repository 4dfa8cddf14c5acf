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
	for i, code := range g.DeleteGroups(ctx, req.Groups) {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group, dg.ErrorCode = req.Groups[i], code
		resp.Groups = append(resp.Groups, dg)
	}
	return resp, nil
}
