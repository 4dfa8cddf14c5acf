package kafka

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

// adminFuzzSeeds are valid requests for the metadata, admin and offset
// handlers, at old and new versions.
func adminFuzzSeeds() []kmsg.Request {
	var reqs []kmsg.Request
	for _, v := range []int16{0, 1, 4, 12} {
		r := metadataReq(v, []string{"fuzz", "new-topic", "bad name"})
		r.AllowAutoTopicCreation = true
		reqs = append(reqs, r)
	}
	for _, v := range []int16{0, 5, 7} {
		r := kmsg.NewPtrCreateTopicsRequest()
		r.Version = v
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = "created", 2, -1
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = "retention.ms", kmsg.StringPtr("1000")
		t.Configs = append(t.Configs, c)
		r.Topics = append(r.Topics, t)
		reqs = append(reqs, r)
	}
	for _, v := range []int16{0, 6} {
		r := kmsg.NewPtrDeleteTopicsRequest()
		r.Version = v
		r.TopicNames = []string{"created"}
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = kmsg.StringPtr("created")
		r.Topics = append(r.Topics, t)
		reqs = append(reqs, r)
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "fuzz", 3
	cp.Topics = append(cp.Topics, cpt)
	reqs = append(reqs, cp)
	for _, v := range []int16{0, 4} {
		r := kmsg.NewPtrDescribeConfigsRequest()
		r.Version = v
		r.IncludeSynonyms, r.IncludeDocumentation = true, true
		for _, rt := range []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker} {
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = rt, "fuzz"
			r.Resources = append(r.Resources, rr)
		}
		reqs = append(reqs, r)
	}
	ac := kmsg.NewPtrAlterConfigsRequest()
	acr := kmsg.NewAlterConfigsRequestResource()
	acr.ResourceType, acr.ResourceName = kmsg.ConfigResourceTypeTopic, "fuzz"
	acc := kmsg.NewAlterConfigsRequestResourceConfig()
	acc.Name, acc.Value = "cleanup.policy", kmsg.StringPtr("compact")
	acr.Configs = append(acr.Configs, acc)
	ac.Resources = append(ac.Resources, acr)
	reqs = append(reqs, ac)
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iacr := kmsg.NewIncrementalAlterConfigsRequestResource()
	iacr.ResourceType, iacr.ResourceName = kmsg.ConfigResourceTypeTopic, "fuzz"
	for _, op := range []kmsg.IncrementalAlterConfigOp{kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpDelete} {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = "cleanup.policy", op, kmsg.StringPtr("compact")
		iacr.Configs = append(iacr.Configs, c)
	}
	iac.Resources = append(iac.Resources, iacr)
	reqs = append(reqs, iac)
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.Version = 1
	reqs = append(reqs, dc)
	for _, v := range []int16{0, 1, 2} {
		r := kmsg.NewPtrUpdateFeaturesRequest()
		r.Version, r.ValidateOnly = v, v == 1
		for _, u := range []struct {
			name  string
			level int16
			typ   int8
		}{{"strand.metadata.version", 2, 1}, {"transaction.version", 1, 2}, {"group.version", 0, 3}} {
			fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
			fu.Feature, fu.MaxVersionLevel, fu.UpgradeType, fu.AllowDowngrade = u.name, u.level, u.typ, u.typ != 1
			r.FeatureUpdates = append(r.FeatureUpdates, fu)
		}
		reqs = append(reqs, r)
	}
	for _, v := range []int16{0, 1, 2} {
		r := kmsg.NewPtrElectLeadersRequest()
		r.Version, r.ElectionType = v, int8(v%2)
		r.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "fuzz", Partitions: []int32{0, 1, 9}}, {Topic: "nope", Partitions: []int32{0}}}
		reqs = append(reqs, r)
	}
	for _, v := range []int16{0, 1} {
		r := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		r.Version = v
		r.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: "fuzz", Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{
			{Partition: 0, Replicas: []int32{testNodeID}}, {Partition: 1}, {Partition: 1, Replicas: []int32{1, 1}},
		}}}
		reqs = append(reqs, r)
	}
	lpr := kmsg.NewPtrListPartitionReassignmentsRequest()
	lpr.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{{Topic: "fuzz", Partitions: []int32{0}}}
	reqs = append(reqs, lpr)
	for _, v := range []int16{0, 1, 8} {
		reqs = append(reqs, listOffsetsReq(v, "fuzz", listPart(0, -1, 5, -1), listPart(0, 1000, 5, 0), listPart(1, -3, 5, 0)))
	}
	for _, v := range []int16{0, 4} {
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		r.Version = v
		t := kmsg.NewOffsetForLeaderEpochRequestTopic()
		t.Topic = "fuzz"
		p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		reqs = append(reqs, r)
	}
	for _, v := range []int16{0, 3} {
		c := kmsg.NewPtrCreateACLsRequest()
		c.Version = v
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeTopic, "fuzz", kmsg.ACLResourcePatternTypePrefixed
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:alice", "::ffff:127.0.0.1", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		c.Creations = append(c.Creations, cr)
		d := kmsg.NewPtrDescribeACLsRequest()
		d.Version = v
		d.ResourceType, d.ResourceName, d.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("fuzz-1"), kmsg.ACLResourcePatternTypeMatch
		d.Operation, d.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		del := kmsg.NewPtrDeleteACLsRequest()
		del.Version = v
		df := kmsg.NewDeleteACLsRequestFilter()
		df.ResourceType, df.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		df.Principal, df.Operation, df.PermissionType = kmsg.StringPtr("User:alice"), kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		del.Filters = append(del.Filters, df)
		reqs = append(reqs, c, d, del)
	}
	for _, v := range []int16{0, 1} {
		d := kmsg.NewPtrDescribeClientQuotasRequest()
		d.Version = v
		name := "fuzz"
		d.Components = []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: kmsg.QuotasMatchTypeExact, Match: &name}, {EntityType: "client-id", MatchType: kmsg.QuotasMatchTypeAny}}
		reqs = append(reqs, d)
		r := kmsg.NewPtrAlterClientQuotasRequest()
		r.Version = v
		r.Entries = []kmsg.AlterClientQuotasRequestEntry{
			{Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: &name}, {Type: "client-id"}},
				Ops: []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1024}, {Key: "request_percentage", Remove: true}}},
			{Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "client-id", Name: &name}},
				Ops: []kmsg.AlterClientQuotasRequestEntryOp{{Key: "consumer_byte_rate", Value: 1.5}}},
		}
		reqs = append(reqs, r)
	}
	return reqs
}

// adminKeys are the keys whose handlers the fuzzer drives.
var adminKeys = map[int16]bool{2: true, 3: true, 19: true, 20: true, 23: true, 29: true, 30: true, 31: true, 32: true, 33: true, 37: true, 43: true, 44: true, 45: true, 46: true, 48: true, 49: true, 57: true, 60: true}

// FuzzAdminHandlers runs the metadata, admin and offset handlers on
// arbitrary request bodies against a live agent: no panic, no error (these
// handlers answer bad input with error codes), and a response that
// encodes at the request's version.
func FuzzAdminHandlers(f *testing.F) {
	for _, req := range adminFuzzSeeds() {
		f.Add(req.Key(), req.GetVersion(), req.AppendTo(nil))
	}
	a := newTestAgent(f)
	// Level 4 stores ACLs and client quotas.
	raiseMetadataLevel(f, a, meta.MetadataLevel4)
	a.createTopic(f, "fuzz", 2, nil)
	a.commit(f, "fuzz", 0, testBatch{records: 3, firstTs: 1000, maxTsMs: 1002})
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		e := builtin.lookup(key)
		if !adminKeys[key] || !e.serves(version) {
			return
		}
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if req.ReadFrom(body) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		resp, err := e.handler(ctx, &Request{Header: Header{Key: key, Version: version}, Body: req, Deps: a.Deps})
		if err != nil {
			t.Fatalf("key %d v%d: %v", key, version, err)
		}
		// What the connection's writer does once it wrote the answer:
		// without it, every Metadata answer keeps its share of the
		// response budget and the next ones wait for it forever.
		defer releaseResponse(resp)
		resp.SetVersion(version)
		resp.AppendTo(nil)
	})
}
