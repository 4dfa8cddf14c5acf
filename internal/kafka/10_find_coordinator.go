// FindCoordinator: v0-6
//   - Key type 0 (group; v0's only kind) is answered by the group
//     coordinator, 1 (transaction) by the transaction coordinator; both
//     place keys with package placement's one mapping over the live
//     agents. Transaction state lives in the replicated database, so any
//     agent can serve a transactional id; spreading them like groups
//     keeps a producer's coordinator stable and names the agent that
//     aborts the id's timed-out transactions (txn.Coordinator.Sweep).
//     Key type 2 (share, v6+, KIP-932): the key is Kafka's
//     SharePartitionKey, groupId:topicId:partition (topic id in Kafka's
//     base64 form), else INVALID_REQUEST, as Kafka validates it. Kafka
//     answers the leader of the __share_group_state partition the key
//     hashes to; Strand keeps share-partition state in the replicated
//     metadata, which every agent applies, so every agent is a share
//     coordinator and the answer is the agent asked. Other key types,
//     and type 2 below v6, are INVALID_REQUEST.
//   - The answer is the coordinator's advertised address among
//     Deps.Cluster's brokers; a node missing from that list is
//     COORDINATOR_NOT_AVAILABLE, which clients retry.
//   - v1-3 ErrorMessage; v4: batched CoordinatorKeys, one answer each.
//   - v5 (KIP-890) only tells that the client understands
//     TRANSACTION_ABORTABLE, which FindCoordinator never answers.
//   - ACLs (authz.go): Describe on the group (GROUP_AUTHORIZATION_FAILED)
//     or the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
//     for share keys ClusterAction on the cluster, as Kafka (share
//     coordinators are asked by brokers), else CLUSTER_AUTHORIZATION_FAILED.

package kafka

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(10, 0, 6, handleFindCoordinator) }

// Coordinator key types.
const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1
	coordinatorShare       = 2
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
	case coordinatorShare:
		if req.Version >= 6 {
			self := r.Deps.Cluster.NodeID
			coordinator = func(string) int32 { return self }
		}
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
		case req.CoordinatorType == coordinatorShare && !z.cluster(kmsg.ACLOperationClusterAction):
			return Broker{NodeID: -1}, kerr.ClusterAuthorizationFailed, ""
		case req.CoordinatorType == coordinatorShare && !validSharePartitionKey(key):
			return Broker{NodeID: -1}, kerr.InvalidRequest, "a share coordinator key is groupId:topicId:partition"
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

// validSharePartitionKey reports whether key parses as Kafka's
// SharePartitionKey.getInstance does: split at ':', the last token a
// partition number, the one before it a topic id (22 characters of
// URL-safe base64, 16 bytes, as Uuid.fromString takes), the rest a
// non-blank group id (which may hold ':').
func validSharePartitionKey(key string) bool {
	tokens := strings.Split(key, ":")
	if len(tokens) < 3 {
		return false
	}
	n := len(tokens)
	if strings.TrimSpace(strings.Join(tokens[:n-2], ":")) == "" {
		return false
	}
	id, err := base64.RawURLEncoding.DecodeString(tokens[n-2])
	if err != nil || len(id) != 16 {
		return false
	}
	_, err = strconv.ParseInt(tokens[n-1], 10, 32)
	return err == nil
}
