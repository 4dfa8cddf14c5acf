package kafka

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/recordbatch/batchtest"
)

// anyOtherCode, as a case's after, accepts any answer but the denial:
// the request got past authorization to an error of its own (a group
// member that does not exist, say).
const anyOtherCode int16 = -32768

// TestACLMatrix checks, API by API, that User:alice without the ACL
// Kafka requires gets Kafka's error code, and with it gets past
// authorization. Each case has resources of its own.
func TestACLMatrix(t *testing.T) {
	a := newACLAgent(t)
	const (
		read     = kmsg.ACLOperationRead
		write    = kmsg.ACLOperationWrite
		describe = kmsg.ACLOperationDescribe
		create   = kmsg.ACLOperationCreate
		del      = kmsg.ACLOperationDelete
		alter    = kmsg.ACLOperationAlter
	)
	topicDenied, groupDenied := kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code
	clusterDenied, txnDenied := kerr.ClusterAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Code

	partitions := func(topic string) []kmsg.OffsetCommitRequestTopic {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 1
		rt.Partitions = append(rt.Partitions, rp)
		return []kmsg.OffsetCommitRequestTopic{rt}
	}
	cases := []struct {
		name string
		// topic, when set, is created first by the super user.
		topic string
		// pre is granted before the request is denied, grant after.
		pre, grant []acl.Binding
		req        func() kmsg.Request
		// want is the denial's code, after the code once granted (0
		// unless set; anyOtherCode for anything but want).
		want, after int16
	}{
		{name: "Produce", topic: "m-produce", grant: []acl.Binding{topicACL("m-produce", write)}, want: topicDenied,
			req: func() kmsg.Request {
				return batchtest.ProduceRequest("m-produce", 0, batchtest.Build(t, batchtest.Options{Records: 1}), 10_000)
			}},
		{name: "Fetch", topic: "m-fetch", grant: []acl.Binding{topicACL("m-fetch", read)}, want: topicDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrFetchRequest()
				req.MaxWaitMillis, req.MaxBytes = 0, 1<<20
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic, rt.TopicID = "m-fetch", a.topicID(t, "m-fetch")
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return req
			}},
		{name: "Metadata", topic: "m-meta", grant: []acl.Binding{topicACL("m-meta", describe)}, want: topicDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrMetadataRequest()
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr("m-meta")
				req.Topics = append(req.Topics, rt)
				return req
			}},
		{name: "ListOffsets", topic: "m-lo", grant: []acl.Binding{topicACL("m-lo", describe)}, want: topicDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrListOffsetsRequest()
				req.ReplicaID = -1
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = "m-lo"
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Timestamp, rp.CurrentLeaderEpoch = -1, -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return req
			}},
		{name: "OffsetCommit/group", topic: "m-oc", pre: []acl.Binding{topicACL("m-oc", read)}, grant: []acl.Binding{groupACL("m-oc", read)},
			want: groupDenied, req: func() kmsg.Request {
				req := kmsg.NewPtrOffsetCommitRequest()
				req.Group, req.Generation, req.Topics = "m-oc", -1, partitions("m-oc")
				return req
			}},
		{name: "OffsetCommit/topic", topic: "m-oc2", pre: []acl.Binding{groupACL("m-oc2", read)}, grant: []acl.Binding{topicACL("m-oc2", read)},
			want: topicDenied, req: func() kmsg.Request {
				req := kmsg.NewPtrOffsetCommitRequest()
				req.Group, req.Generation, req.Topics = "m-oc2", -1, partitions("m-oc2")
				return req
			}},
		{name: "OffsetFetch", grant: []acl.Binding{groupACL("m-of", describe)}, want: groupDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrOffsetFetchRequest()
				req.Group = "m-of"
				rg := kmsg.NewOffsetFetchRequestGroup()
				rg.Group = "m-of"
				req.Groups = append(req.Groups, rg)
				return req
			}},
		{name: "FindCoordinator/group", grant: []acl.Binding{groupACL("m-fc", describe)}, want: groupDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrFindCoordinatorRequest()
				req.CoordinatorKey, req.CoordinatorKeys = "m-fc", []string{"m-fc"}
				return req
			}},
		{name: "FindCoordinator/txn", grant: []acl.Binding{txnACL("m-fct", describe)}, want: txnDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrFindCoordinatorRequest()
				req.CoordinatorType = 1
				req.CoordinatorKey, req.CoordinatorKeys = "m-fct", []string{"m-fct"}
				return req
			}},
		{name: "JoinGroup", grant: []acl.Binding{groupACL("m-jg", read)}, want: groupDenied, after: kerr.MemberIDRequired.Code,
			req: func() kmsg.Request {
				req := kmsg.NewPtrJoinGroupRequest()
				req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = "m-jg", 10_000, 10_000, "consumer"
				p := kmsg.NewJoinGroupRequestProtocol()
				p.Name = "range"
				req.Protocols = append(req.Protocols, p)
				return req
			}},
		{name: "Heartbeat", grant: []acl.Binding{groupACL("m-hb", read)}, want: groupDenied, after: anyOtherCode,
			req: func() kmsg.Request {
				req := kmsg.NewPtrHeartbeatRequest()
				req.Group, req.MemberID = "m-hb", "nobody"
				return req
			}},
		{name: "SyncGroup", grant: []acl.Binding{groupACL("m-sg", read)}, want: groupDenied, after: anyOtherCode,
			req: func() kmsg.Request {
				req := kmsg.NewPtrSyncGroupRequest()
				req.Group, req.MemberID = "m-sg", "nobody"
				return req
			}},
		{name: "LeaveGroup", grant: []acl.Binding{groupACL("m-lg", read)}, want: groupDenied, after: anyOtherCode,
			req: func() kmsg.Request {
				req := kmsg.NewPtrLeaveGroupRequest()
				req.Group = "m-lg"
				m := kmsg.NewLeaveGroupRequestMember()
				m.MemberID = "nobody"
				req.Members = append(req.Members, m)
				return req
			}},
		{name: "DescribeGroups", grant: []acl.Binding{groupACL("m-dg", describe)}, want: groupDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrDescribeGroupsRequest()
				req.Groups = []string{"m-dg"}
				return req
			}},
		{name: "DeleteGroups", grant: []acl.Binding{groupACL("m-delg", del)}, want: groupDenied, after: anyOtherCode,
			req: func() kmsg.Request {
				req := kmsg.NewPtrDeleteGroupsRequest()
				req.Groups = []string{"m-delg"}
				return req
			}},
		{name: "OffsetDelete", topic: "m-od", grant: []acl.Binding{groupACL("m-od", del)}, want: groupDenied, after: anyOtherCode,
			req: func() kmsg.Request {
				req := kmsg.NewPtrOffsetDeleteRequest()
				req.Group = "m-od"
				return req
			}},
		{name: "CreateTopics", grant: []acl.Binding{topicACL("m-ct", create)}, want: topicDenied,
			req: func() kmsg.Request { return createTopicsReq("m-ct", 1, false) }},
		{name: "DeleteTopics", topic: "m-dt", grant: []acl.Binding{topicACL("m-dt", del)}, want: topicDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrDeleteTopicsRequest()
				rt := kmsg.NewDeleteTopicsRequestTopic()
				rt.Topic = kmsg.StringPtr("m-dt")
				req.Topics, req.TopicNames = append(req.Topics, rt), []string{"m-dt"}
				return req
			}},
		{name: "DeleteRecords", topic: "m-dr", grant: []acl.Binding{topicACL("m-dr", del)}, want: topicDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrDeleteRecordsRequest()
				rt := kmsg.NewDeleteRecordsRequestTopic()
				rt.Topic = "m-dr"
				rp := kmsg.NewDeleteRecordsRequestTopicPartition()
				rp.Offset = -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return req
			}},
		{name: "CreatePartitions", topic: "m-cp", grant: []acl.Binding{topicACL("m-cp", alter)}, want: topicDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrCreatePartitionsRequest()
				rt := kmsg.NewCreatePartitionsRequestTopic()
				rt.Topic, rt.Count = "m-cp", 2
				req.Topics = append(req.Topics, rt)
				return req
			}},
		{name: "InitProducerID/txn", grant: []acl.Binding{txnACL("m-txn", write)}, want: txnDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrInitProducerIDRequest()
				req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr("m-txn"), 10_000
				return req
			}},
		{name: "InitProducerID/idempotent", grant: []acl.Binding{clusterACL(kmsg.ACLOperationIdempotentWrite)}, want: clusterDenied,
			req: func() kmsg.Request { return kmsg.NewPtrInitProducerIDRequest() }},
		{name: "EndTxn", grant: []acl.Binding{txnACL("m-end", write)}, want: txnDenied, after: anyOtherCode,
			req: func() kmsg.Request {
				req := kmsg.NewPtrEndTxnRequest()
				req.TransactionalID, req.ProducerID = "m-end", 1
				return req
			}},
		{name: "AddOffsetsToTxn", grant: []acl.Binding{txnACL("m-aot", write), groupACL("m-aot", read)}, want: txnDenied, after: anyOtherCode,
			req: func() kmsg.Request {
				req := kmsg.NewPtrAddOffsetsToTxnRequest()
				req.TransactionalID, req.ProducerID, req.Group = "m-aot", 1, "m-aot"
				return req
			}},
		{name: "DescribeConfigs/topic", topic: "m-dc", grant: []acl.Binding{topicACL("m-dc", kmsg.ACLOperationDescribeConfigs)}, want: topicDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrDescribeConfigsRequest()
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "m-dc"
				req.Resources = append(req.Resources, rr)
				return req
			}},
		{name: "ShareGroupHeartbeat/group", topic: "m-shb", pre: []acl.Binding{topicACL("m-shb", describe)}, grant: []acl.Binding{groupACL("m-shb", read)},
			want: groupDenied, after: anyOtherCode,
			req: func() kmsg.Request {
				req := kmsg.NewPtrShareGroupHeartbeatRequest()
				req.GroupID, req.MemberID, req.SubscribedTopicNames = "m-shb", "m1", []string{"m-shb"}
				return req
			}},
		{name: "ShareGroupHeartbeat/topic", topic: "m-shb2", pre: []acl.Binding{groupACL("m-shb2", read)}, grant: []acl.Binding{topicACL("m-shb2", describe)},
			want: topicDenied, after: anyOtherCode,
			req: func() kmsg.Request {
				req := kmsg.NewPtrShareGroupHeartbeatRequest()
				req.GroupID, req.MemberID, req.SubscribedTopicNames = "m-shb2", "m1", []string{"m-shb2"}
				return req
			}},
		{name: "ShareGroupDescribe", grant: []acl.Binding{groupACL("m-sgd", describe)}, want: groupDenied, after: kerr.GroupIDNotFound.Code,
			req: func() kmsg.Request {
				req := kmsg.NewPtrShareGroupDescribeRequest()
				req.GroupIDs = []string{"m-sgd"}
				return req
			}},
		{name: "DescribeConfigs/group", grant: []acl.Binding{groupACL("m-dcg", kmsg.ACLOperationDescribeConfigs)}, want: groupDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrDescribeConfigsRequest()
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "m-dcg"
				req.Resources = append(req.Resources, rr)
				return req
			}},
		{name: "IncrementalAlterConfigs/group", grant: []acl.Binding{groupACL("m-iacg", kmsg.ACLOperationAlterConfigs)}, want: groupDenied, after: anyOtherCode,
			req: func() kmsg.Request {
				req := kmsg.NewPtrIncrementalAlterConfigsRequest()
				rr := kmsg.NewIncrementalAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "m-iacg"
				c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
				rr.Configs = append(rr.Configs, c)
				req.Resources = append(req.Resources, rr)
				return req
			}},
		{name: "DescribeConfigs/broker", grant: []acl.Binding{clusterACL(kmsg.ACLOperationAlterConfigs)}, want: clusterDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrDescribeConfigsRequest()
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, ""
				req.Resources = append(req.Resources, rr)
				return req
			}},
		{name: "IncrementalAlterConfigs", topic: "m-iac", grant: []acl.Binding{topicACL("m-iac", kmsg.ACLOperationAlterConfigs)}, want: topicDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrIncrementalAlterConfigsRequest()
				rr := kmsg.NewIncrementalAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "m-iac"
				c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				c.Name, c.Value = "retention.ms", kmsg.StringPtr("60000")
				rr.Configs = append(rr.Configs, c)
				req.Resources = append(req.Resources, rr)
				return req
			}},
		{name: "AlterConfigs", topic: "m-ac", grant: []acl.Binding{topicACL("m-ac", kmsg.ACLOperationAlterConfigs)}, want: topicDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrAlterConfigsRequest()
				rr := kmsg.NewAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "m-ac"
				req.Resources = append(req.Resources, rr)
				return req
			}},
		{name: "OffsetForLeaderEpoch", topic: "m-ofle", grant: []acl.Binding{topicACL("m-ofle", describe)}, want: topicDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrOffsetForLeaderEpochRequest()
				req.ReplicaID = -1
				rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
				rt.Topic = "m-ofle"
				rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 0
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				return req
			}},
		{name: "DescribeProducers", topic: "m-dp", grant: []acl.Binding{topicACL("m-dp", read)}, want: topicDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrDescribeProducersRequest()
				rt := kmsg.NewDescribeProducersRequestTopic()
				rt.Topic, rt.Partitions = "m-dp", []int32{0}
				req.Topics = append(req.Topics, rt)
				return req
			}},
		{name: "DescribeTransactions", grant: []acl.Binding{txnACL("m-dtx", describe)}, want: txnDenied, after: anyOtherCode,
			req: func() kmsg.Request {
				req := kmsg.NewPtrDescribeTransactionsRequest()
				req.TransactionalIDs = []string{"m-dtx"}
				return req
			}},
		{name: "DescribeLogDirs", grant: []acl.Binding{clusterACL(describe)}, want: clusterDenied,
			req: func() kmsg.Request { return kmsg.NewPtrDescribeLogDirsRequest() }},
		{name: "ElectLeaders", grant: []acl.Binding{clusterACL(alter)}, want: clusterDenied,
			req: func() kmsg.Request { return kmsg.NewPtrElectLeadersRequest() }},
		{name: "ListPartitionReassignments", grant: []acl.Binding{clusterACL(describe)}, want: clusterDenied,
			req: func() kmsg.Request { return kmsg.NewPtrListPartitionReassignmentsRequest() }},
		{name: "AlterPartitionReassignments", grant: []acl.Binding{clusterACL(alter)}, want: clusterDenied,
			req: func() kmsg.Request { return kmsg.NewPtrAlterPartitionAssignmentsRequest() }},
		{name: "UpdateFeatures", grant: []acl.Binding{clusterACL(alter)}, want: clusterDenied,
			req: func() kmsg.Request { return kmsg.NewPtrUpdateFeaturesRequest() }},
		{name: "DescribeClientQuotas", grant: []acl.Binding{clusterACL(kmsg.ACLOperationDescribeConfigs)}, want: clusterDenied,
			req: func() kmsg.Request { return kmsg.NewPtrDescribeClientQuotasRequest() }},
		{name: "AlterClientQuotas", grant: []acl.Binding{clusterACL(kmsg.ACLOperationAlterConfigs)}, want: clusterDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrAlterClientQuotasRequest()
				e := kmsg.NewAlterClientQuotasRequestEntry()
				e.Entity = []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "client-id", Name: kmsg.StringPtr("m-acq")}}
				e.Ops = []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1 << 20}}
				req.Entries = append(req.Entries, e)
				return req
			}},
		{name: "DescribeUserScramCredentials", grant: []acl.Binding{clusterACL(describe)}, want: clusterDenied,
			req: func() kmsg.Request { return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest() }},
		{name: "AlterUserScramCredentials", grant: []acl.Binding{clusterACL(alter)}, want: clusterDenied, after: kerr.ResourceNotFound.Code,
			req: func() kmsg.Request {
				req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
				d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
				d.Name, d.Mechanism = "m-nobody", 1
				req.Deletions = append(req.Deletions, d)
				return req
			}},
		{name: "DescribeAcls", grant: []acl.Binding{clusterACL(describe)}, want: clusterDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrDescribeACLsRequest()
				req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
				req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				return req
			}},
		{name: "CreateAcls+DeleteAcls", grant: []acl.Binding{clusterACL(alter)}, want: clusterDenied,
			req: func() kmsg.Request {
				req := kmsg.NewPtrCreateACLsRequest()
				c := kmsg.NewCreateACLsRequestCreation()
				b := topicACL("m-acl", read)
				c.ResourceType, c.ResourceName, c.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
				c.Principal, c.Host, c.Operation, c.PermissionType = "User:bob", b.Host, b.Operation, b.Permission
				req.Creations = append(req.Creations, c)
				return req
			}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A principal of the case's own: grants of one case, on the
			// cluster above all, must not let another's request through.
			user := fmt.Sprintf("case%d", i)
			as := a.kgoClient(t, kgo.ClientID("principal:"+user))
			own := func(bs []acl.Binding) []acl.Binding {
				out := slices.Clone(bs)
				for j := range out {
					out[j].Principal = "User:" + user
				}
				return out
			}
			if c.topic != "" {
				resp := a.as(t, a.admin, createTopicsReq(c.topic, 1, false)).(*kmsg.CreateTopicsResponse)
				if code := resp.Topics[0].ErrorCode; code != 0 {
					t.Fatalf("creating %s as the super user: %v", c.topic, kerr.ErrorForCode(code))
				}
			}
			if len(c.pre) > 0 {
				a.grant(t, own(c.pre)...)
			}
			if got := firstErrorCode(a.as(t, as, c.req())); got != c.want {
				t.Fatalf("without the ACL: %v, want %v", kerr.ErrorForCode(got), kerr.ErrorForCode(c.want))
			}
			a.grant(t, own(c.grant)...)
			got := firstErrorCode(a.as(t, as, c.req()))
			switch {
			case c.after == anyOtherCode && got == c.want:
				t.Fatalf("with the ACL: still %v", kerr.ErrorForCode(got))
			case c.after != anyOtherCode && got != c.after:
				t.Fatalf("with the ACL: %v, want %v", kerr.ErrorForCode(got), kerr.ErrorForCode(c.after))
			}
		})
	}
}
