// ListGroups: v0-5
//   - The groups this agent coordinates: those in memory and those only
//     stored (offsets only, or empty), sorted by id. A group of only
//     committed offsets has an empty protocol type, as in Kafka; a share
//     group's protocol type is "share".
//   - v4: StatesFilter, case-insensitive; GroupState in the answer.
//   - v5: TypesFilter (classic, consumer, share; case-insensitive) and
//     GroupType in the answer (KIP-848, KIP-932).
//   - ACLs (authz.go): Describe on the cluster lists every group, else only
//     the groups the client may Describe.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(16, 0, 5, handleListGroups) }

func handleListGroups(ctx context.Context, r *Request) (kmsg.Response, error) {
	g, err := r.Deps.groups()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	var states, types []string
	if req.Version >= 4 {
		states = req.StatesFilter
	}
	if req.Version >= 5 {
		types = req.TypesFilter
	}
	listed, code := g.ListGroups(ctx, states, types)
	resp.ErrorCode = code
	// ACLs: Describe on the cluster lists every group; else the groups
	// the client may Describe.
	z := r.authz()
	all := z.cluster(kmsg.ACLOperationDescribe)
	for _, l := range listed {
		if !all && !z.group(kmsg.ACLOperationDescribe, l.Group) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = l.Group, l.ProtocolType, l.State, l.Type
		resp.Groups = append(resp.Groups, lg)
	}
	return resp, nil
}
