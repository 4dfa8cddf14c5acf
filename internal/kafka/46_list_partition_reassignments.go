// ListPartitionReassignments: v0 (KIP-455)
//   - A reassignment completes when it applies (storage is shared, no
//     data moves: 45_alter_partition_reassignments.go), so none is ever
//     in progress: every request, for all topics (null) or named ones,
//     known or not, is answered with no topics, as Kafka's controller
//     answers when nothing is reassigning. The lists reassignments
//     recorded are the partitions' replicas in Metadata.
//   - ACLs (authz.go): Describe on the cluster, else
//     CLUSTER_AUTHORIZATION_FAILED.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(46, 0, 0, handleListPartitionReassignments) }

func handleListPartitionReassignments(_ context.Context, r *Request) (kmsg.Response, error) {
	resp := r.Body.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.ErrorCode = r.authz().clusterCode(kmsg.ACLOperationDescribe)
	return resp, nil
}
