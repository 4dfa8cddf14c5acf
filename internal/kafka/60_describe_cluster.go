// DescribeCluster: v0-2
//   - Brokers are the live agents, as in Metadata; ControllerID is this
//     agent (any agent takes admin requests), as a KRaft broker names a
//     broker rather than a controller.
//   - Cluster authorized operations when asked: what the client may do
//     (everything the cluster resource supports with ACLs off).
//   - v1: EndpointType must be 1 (brokers); 2 (controllers) is
//     MISMATCHED_ENDPOINT_TYPE, as a Kafka broker answers.
//   - v2 (KIP-1073): IncludeFencedBrokers changes nothing and IsFenced
//     is always false: an agent is listed while its lease is live and
//     gone when it lapses, with no fenced state in between.
//   - ACLs (authz.go): no check, as Kafka; the authorized operations are
//     the client's.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(60, 0, 2, handleDescribeCluster) }

// endpointTypeBroker is DescribeCluster's EndpointType for brokers.
const endpointTypeBroker = 1

func handleDescribeCluster(_ context.Context, r *Request) (kmsg.Response, error) {
	req := r.Body.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = endpointTypeBroker
	if req.Version >= 1 && req.EndpointType != endpointTypeBroker {
		resp.ErrorCode = kerr.MismatchedEndpointType.Code
		resp.ErrorMessage = strPtr("this is a broker endpoint; Strand has no separate controllers")
		return resp, nil
	}
	d := r.Deps
	for _, b := range d.brokers(r.Conn) {
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = b.NodeID, b.Host, b.Port, rackPtr(b.Rack)
		resp.Brokers = append(resp.Brokers, rb)
	}
	resp.ClusterID = d.Cluster.ClusterID
	resp.ControllerID = d.Cluster.NodeID
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = r.authz().clusterOps()
	}
	return resp, nil
}
