// FindCoordinator: v0-4
//   - Key type 0 (group; v0's only kind) is answered by the group
//     coordinator, 1 (transaction) by the transaction coordinator; both
//     place keys with package placement's one mapping over the live
//     agents. Transaction state lives in the replicated database, so any
//     agent can serve a transactional id; spreading them like groups
//     keeps a producer's coordinator stable and names the agent that
//     aborts the id's timed-out transactions (txn.Coordinator.Sweep).
//     Other key types are INVALID_REQUEST.
//   - The answer is the coordinator's advertised address among
//     Deps.Cluster's brokers; a node missing from that list is
//     COORDINATOR_NOT_AVAILABLE, which clients retry.
//   - v1-3 ErrorMessage; v4: batched CoordinatorKeys, one answer each.
//   - Left out: v5-6 (KIP-890 transactions v2, KIP-932 share groups).
//   - ACLs (authz.go): Describe on the group (GROUP_AUTHORIZATION_FAILED)
//     or the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(10, 0, 4, handleFindCoordinator) }

// Coordinator key types.
const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1
)

func handleFindCoordinator(_ context.Context, r *Request) (kmsg.Response, error) {
	req := r.Body.(*kmsg.FindCoordinatorRequest)
	// coordinator places the request's keys; nil for an unknown key type.
	var coordinator func(key string) int32
	switch req.CoordinatorType {
	case coordinatorGroup:
		g, err := r.Deps.groups()
		if err != nil {
			return nil, err
		}
		coordinator = g.Coordinator
	case coordinatorTransaction:
		txns, err := r.Deps.txns()
		if err != nil {
			return nil, err
		}
		coordinator = txns.Coordinator
	}
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	brokers := r.Deps.brokers(r.Conn)
	z := r.authz()
	find := func(key string) (Broker, *kerr.Error, string) {
		switch {
		case coordinator == nil:
			return Broker{NodeID: -1}, kerr.InvalidRequest, "unknown coordinator key type"
		case req.CoordinatorType == coordinatorGroup && !z.group(kmsg.ACLOperationDescribe, key):
			return Broker{NodeID: -1}, kerr.GroupAuthorizationFailed, ""
		case req.CoordinatorType == coordinatorTransaction && !z.txnID(kmsg.ACLOperationDescribe, key):
			return Broker{NodeID: -1}, kerr.TransactionalIDAuthorizationFailed, ""
		}
		node := coordinator(key)
		for _, b := range brokers {
			if b.NodeID == node {
				return b, nil, ""
			}
		}
		return Broker{NodeID: -1}, kerr.CoordinatorNotAvailable, "the coordinating agent is not live"
	}
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			b, e, msg := find(key)
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Host, c.Port = key, b.NodeID, b.Host, b.Port
			if e != nil {
				c.ErrorCode, c.ErrorMessage = e.Code, strPtr(msg)
			}
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp, nil
	}
	b, e, msg := find(req.CoordinatorKey)
	resp.NodeID, resp.Host, resp.Port = b.NodeID, b.Host, b.Port
	if e != nil {
		resp.ErrorCode, resp.ErrorMessage = e.Code, strPtr(msg)
	}
	return resp, nil
}
