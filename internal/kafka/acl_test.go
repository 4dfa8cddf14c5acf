package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/authzlog"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
	"github.com/strandkafka/strand/internal/sharedlog/memlog"
)

// Until SASL or client certificates name a principal, these tests name
// it through testPrincipal: a connection whose first request carries
// client id "principal:NAME" is User:NAME. Other client ids stay
// ANONYMOUS, so no other test changes.
func init() {
	testPrincipal = func(clientID string) (auth.Principal, bool) {
		name, ok := strings.CutPrefix(clientID, "principal:")
		return auth.User(name), ok
	}
}

// aclAgent is an agent with ACLs on, User:admin its super user, the data
// path and a group coordinator, and clients for admin and alice.
type aclAgent struct {
	*testAgent
	admin, alice *kgo.Client
}

func newACLAgent(t testing.TB, opts ...agentOption) *aclAgent {
	t.Helper()
	log := memlog.New()
	t.Cleanup(func() { log.Close() })
	a := startACLAgent(t, log, openReplica(t, log, t.TempDir()), opts...)
	res, err := a.Replica.Propose(a.ctx(t), meta.FinalizeFeatures{Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel4}}})
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		t.Fatalf("raising the metadata level to 4: %v", err)
	}
	return a
}

// openReplica opens a copy of log's database in dir.
func openReplica(t testing.TB, log *memlog.Loglet, dir string) *replica.Replica {
	t.Helper()
	rep, err := replica.Open(context.Background(), replica.Config{Dir: dir, Log: log, WriterID: "agent-" + filepath.Base(dir), Logger: discardLogger})
	if err != nil {
		t.Fatalf("replica.Open: %v", err)
	}
	t.Cleanup(func() { rep.Close() })
	return rep
}

// startACLAgent starts an aclAgent over rep, a copy of log.
func startACLAgent(t testing.TB, log *memlog.Loglet, rep *replica.Replica, opts ...agentOption) *aclAgent {
	t.Helper()
	opts = append([]agentOption{withDataPath(t, &dataPath{}), withGroups(t, nil, nil), withDeps(func(d *Deps) {
		d.ACL = ACLConfig{Enabled: true, SuperUsers: []auth.Principal{auth.User("admin")}}
	})}, opts...)
	a := startTestAgent(t, agentConfig{Log: log, Replica: rep}, rep, opts)
	return &aclAgent{
		testAgent: a,
		admin:     a.kgoClient(t, kgo.ClientID("principal:admin")),
		alice:     a.kgoClient(t, kgo.ClientID("principal:alice")),
	}
}

// as sends req on cl's connection to the agent, with no routing or
// retries, and returns the response.
func (a *aclAgent) as(t *testing.T, cl *kgo.Client, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := cl.SeedBrokers()[0].Request(a.ctx(t), req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp
}

// grant creates bindings as the super user.
func (a *aclAgent) grant(t *testing.T, bs ...acl.Binding) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bs {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
		c.Principal, c.Host, c.Operation, c.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		req.Creations = append(req.Creations, c)
	}
	resp := a.as(t, a.admin, req).(*kmsg.CreateACLsResponse)
	for i, r := range resp.Results {
		if r.ErrorCode != 0 {
			t.Fatalf("CreateAcls %v: %v (%s)", bs[i], kerr.ErrorForCode(r.ErrorCode), strOr(r.ErrorMessage))
		}
	}
}

// aliceMay allows User:alice op on the resource. TestACLMatrix gives
// each case a principal of its own instead.
func aliceMay(typ acl.ResourceType, name string, op acl.Operation) acl.Binding {
	return acl.Binding{ResourceType: typ, ResourceName: name, PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:alice", Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

func topicACL(name string, op acl.Operation) acl.Binding {
	return aliceMay(kmsg.ACLResourceTypeTopic, name, op)
}

func groupACL(name string, op acl.Operation) acl.Binding {
	return aliceMay(kmsg.ACLResourceTypeGroup, name, op)
}

func clusterACL(op acl.Operation) acl.Binding {
	return aliceMay(kmsg.ACLResourceTypeCluster, acl.ClusterName, op)
}

func txnACL(id string, op acl.Operation) acl.Binding {
	return aliceMay(kmsg.ACLResourceTypeTransactionalId, id, op)
}

// visibleTopics lists the topics a Metadata request for every topic
// answers cl, sorted.
func (a *aclAgent) visibleTopics(t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	resp := a.as(t, cl, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	var names []string
	for _, rt := range resp.Topics {
		names = append(names, *rt.Topic)
	}
	slices.Sort(names)
	return names
}

// TestACLSemantics drives StandardAuthorizer's rules through the wire
// with kadm: prefixed patterns, deny before allow, the User:* principal,
// host filters, super users, authorized operations, and deletes by
// filter.
func TestACLSemantics(t *testing.T) {
	a := newACLAgent(t)
	adm := kadm.NewClient(a.admin)
	ctx := a.ctx(t)
	for _, name := range []string{"pay-1", "pay-2", "other", "hosty"} {
		if resp := a.as(t, a.admin, createTopicsReq(name, 1, false)).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create %s: %v", name, kerr.ErrorForCode(resp.Topics[0].ErrorCode))
		}
	}
	create := func(b *kadm.ACLBuilder) {
		t.Helper()
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("CreateACLs: %v %s", r.Err, r.ErrMessage)
			}
		}
	}
	check := func(who *kgo.Client, want ...string) {
		t.Helper()
		if got := a.visibleTopics(t, who); !slices.Equal(got, want) {
			t.Fatalf("visible topics %v, want %v", got, want)
		}
	}

	// Nothing granted: alice sees nothing; the super user sees all.
	check(a.alice)
	check(a.admin, "hosty", "other", "pay-1", "pay-2")

	// A prefixed allow of Read (which implies Describe) shows both pay-
	// topics; a literal deny of Describe on pay-2 wins over it.
	create(kadm.NewACLs().Allow("User:alice").Topics("pay-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead))
	check(a.alice, "pay-1", "pay-2")
	create(kadm.NewACLs().Deny("User:alice").Topics("pay-2").Operations(kadm.OpDescribe))
	check(a.alice, "pay-1")

	// Every principal may describe "other".
	create(kadm.NewACLs().Allow("User:*").Topics("other").Operations(kadm.OpDescribe))
	check(a.alice, "other", "pay-1")

	// A host filter: an ACL for another address does not apply to a
	// client on 127.0.0.1, one for that address does.
	create(kadm.NewACLs().Allow("User:alice").AllowHosts("10.9.9.9").Topics("hosty").Operations(kadm.OpDescribe))
	check(a.alice, "other", "pay-1")
	create(kadm.NewACLs().Allow("User:alice").AllowHosts("127.0.0.1").Topics("hosty").Operations(kadm.OpDescribe))
	check(a.alice, "hosty", "other", "pay-1")

	// Authorized operations are alice's: Read and the Describe it
	// implies on pay-1.
	req := kmsg.NewPtrMetadataRequest()
	req.IncludeTopicAuthorizedOperations = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("pay-1")
	req.Topics = append(req.Topics, rt)
	mresp := a.as(t, a.alice, req).(*kmsg.MetadataResponse)
	if got, want := mresp.Topics[0].AuthorizedOperations, int32(1<<kmsg.ACLOperationRead|1<<kmsg.ACLOperationDescribe); got != want {
		t.Errorf("pay-1 authorized operations %b, want %b", got, want)
	}

	// Cluster operations likewise: AlterConfigs implies DescribeConfigs.
	a.grant(t, clusterACL(kmsg.ACLOperationAlterConfigs))
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	dresp := a.as(t, a.alice, dc).(*kmsg.DescribeClusterResponse)
	if got, want := dresp.ClusterAuthorizedOperations, int32(1<<kmsg.ACLOperationAlterConfigs|1<<kmsg.ACLOperationDescribeConfigs); got != want {
		t.Errorf("cluster authorized operations %b, want %b", got, want)
	}

	// DescribeAcls with a match filter finds the prefixed allow and the
	// literal deny that apply to pay-2.
	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().Topics("pay-2").ResourcePatternType(kadm.ACLPatternMatch).
		Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range described {
		if r.Err != nil {
			t.Fatalf("DescribeACLs: %v", r.Err)
		}
		for _, d := range r.Described {
			got = append(got, fmt.Sprintf("%s %v %s %v", d.Name, d.Pattern, d.Operation, d.Permission))
		}
	}
	slices.Sort(got)
	if want := []string{"pay- PREFIXED READ ALLOW", "pay-2 LITERAL DESCRIBE DENY"}; !slices.Equal(got, want) {
		t.Errorf("described %q, want %q", got, want)
	}

	// Deleting the deny by filter shows pay-2 again, and reports what
	// it deleted.
	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Deny("User:alice").Topics("pay-2").Operations(kadm.OpAny).DenyHosts())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range deleted {
		if r.Err != nil {
			t.Fatalf("DeleteACLs: %v", r.Err)
		}
		n += len(r.Deleted)
	}
	if n != 1 {
		t.Fatalf("DeleteACLs deleted %d ACLs, want 1: %+v", n, deleted)
	}
	check(a.alice, "hosty", "other", "pay-1", "pay-2")

	// Alice may not manage ACLs.
	res, err := kadm.NewClient(a.alice).DescribeACLs(ctx, kadm.NewACLs().AnyResource().Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts())
	if err != nil || len(res) == 0 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("alice's DescribeAcls: %+v, %v; want CLUSTER_AUTHORIZATION_FAILED", res, err)
	}
}

// TestACLAllowIfNoACL: with allow.everyone.if.no.acl.found, a resource
// no ACL speaks of is open, and the first ACL on it closes it to others.
func TestACLAllowIfNoACL(t *testing.T) {
	a := newACLAgent(t, withDeps(func(d *Deps) { d.ACL.AllowIfNoACL = true }))
	for _, name := range []string{"open", "closed"} {
		a.as(t, a.admin, createTopicsReq(name, 1, false))
	}
	if got := a.visibleTopics(t, a.alice); !slices.Equal(got, []string{"closed", "open"}) {
		t.Fatalf("visible topics %v, want both", got)
	}
	bob := topicACL("closed", kmsg.ACLOperationDescribe)
	bob.Principal = "User:bob"
	a.grant(t, bob)
	if got := a.visibleTopics(t, a.alice); !slices.Equal(got, []string{"open"}) {
		t.Fatalf("visible topics %v, want only open", got)
	}
}

// TestACLClients: franz-go's producer and group consumer work for a
// principal with the ACLs Kafka's documentation lists for them (Write
// and Read on the topic, Read on the group), and the producer fails
// with TOPIC_AUTHORIZATION_FAILED without them.
func TestACLClients(t *testing.T) {
	a := newACLAgent(t)
	a.as(t, a.admin, createTopicsReq("events", 1, false))
	producer := a.kgoClient(t, kgo.ClientID("principal:alice"), kgo.DefaultProduceTopic("events"), kgo.RecordRetries(1))
	ctx := a.ctx(t)
	if err := producer.ProduceSync(ctx, kgo.StringRecord("denied")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce without Write: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	a.grant(t, topicACL("events", kmsg.ACLOperationWrite), topicACL("events", kmsg.ACLOperationRead), groupACL("readers", kmsg.ACLOperationRead))
	producer = a.kgoClient(t, kgo.ClientID("principal:alice"), kgo.DefaultProduceTopic("events"))
	for _, v := range []string{"a", "b", "c"} {
		if err := producer.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatalf("produce with Write: %v", err)
		}
	}
	consumer := a.kgoClient(t, kgo.ClientID("principal:alice"), kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < 3 {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %v before the guard", got)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch %s[%d]: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("consumed %v", got)
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit with Read on group and topic: %v", err)
	}
}

// TestACLsEveryAgentAndRestart: ACLs go through the log, so an ACL
// created on one agent of three holds on the others once they have
// applied it, and an agent restarted on its data dir still enforces
// the ones it applied before and catches up on those made while it was
// down.
func TestACLsEveryAgentAndRestart(t *testing.T) {
	log := memlog.New()
	t.Cleanup(func() { log.Close() })
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	reps := make([]*replica.Replica, 3)
	agents := make([]*aclAgent, 3)
	for i, dir := range dirs {
		reps[i] = openReplica(t, log, dir)
		agents[i] = startACLAgent(t, log, reps[i])
	}
	finalize(t, agents[0].testAgent, meta.FeatureLevel{Name: meta.FeatureMetadata, Level: meta.MetadataLevel4})
	agents[0].as(t, agents[0].admin, createTopicsReq("shared", 1, false))
	agents[0].as(t, agents[0].admin, createTopicsReq("later", 1, false))
	sees := func(a *aclAgent, rep *replica.Replica, want ...string) {
		t.Helper()
		// A linearizable read: the copy has applied everything in
		// the log, as it will have shortly after any change.
		if err := rep.Sync(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if got := a.visibleTopics(t, a.alice); !slices.Equal(got, want) {
			t.Fatalf("alice sees %v, want %v", got, want)
		}
	}
	for i := range agents {
		sees(agents[i], reps[i])
	}

	// Granted through agent 1, enforced by all three.
	agents[1].grant(t, topicACL("shared", kmsg.ACLOperationDescribe))
	for i := range agents {
		sees(agents[i], reps[i], "shared")
	}

	// Agent 2 stops; an ACL is granted meanwhile; it restarts on its
	// data dir and enforces both.
	if err := reps[2].Close(); err != nil {
		t.Fatal(err)
	}
	agents[0].grant(t, topicACL("later", kmsg.ACLOperationRead))
	reps[2] = openReplica(t, log, dirs[2])
	agents[2] = startACLAgent(t, log, reps[2])
	sees(agents[2], reps[2], "later", "shared")

	// A delete through the restarted agent holds on the others.
	adm := kadm.NewClient(agents[2].admin)
	if _, err := adm.DeleteACLs(agents[2].ctx(t), kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("shared").Operations()); err != nil {
		t.Fatal(err)
	}
	for i := range agents {
		sees(agents[i], reps[i], "later")
	}
}

// TestACLsNeedLevel4: a cluster below strand.metadata.version 4 cannot
// hold ACLs: CreateAcls and DeleteAcls answer UNSUPPORTED_VERSION, and
// DescribeAcls answers the empty set.
func TestACLsNeedLevel4(t *testing.T) {
	log := memlog.New()
	t.Cleanup(func() { log.Close() })
	a := startACLAgent(t, log, openReplica(t, log, t.TempDir()))
	create := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	b := topicACL("t", kmsg.ACLOperationRead)
	c.ResourceType, c.ResourceName, c.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
	c.Principal, c.Host, c.Operation, c.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
	create.Creations = append(create.Creations, c)
	if got := firstErrorCode(a.as(t, a.admin, create)); got != kerr.UnsupportedVersion.Code {
		t.Errorf("CreateAcls below level 4: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(got))
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	if got := firstErrorCode(a.as(t, a.admin, del)); got != kerr.UnsupportedVersion.Code {
		t.Errorf("DeleteAcls below level 4: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(got))
	}
	desc := kmsg.NewPtrDescribeACLsRequest()
	desc.ResourceType, desc.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	desc.Operation, desc.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if resp := a.as(t, a.admin, desc).(*kmsg.DescribeACLsResponse); resp.ErrorCode != 0 || len(resp.Resources) != 0 {
		t.Errorf("DescribeAcls below level 4: %v, %d resources", kerr.ErrorForCode(resp.ErrorCode), len(resp.Resources))
	}
}

// TestACLDescribeTransactionsHidesTopics: DescribeTransactions lists
// only the partitions of topics the client may describe.
func TestACLDescribeTransactionsHidesTopics(t *testing.T) {
	a := newACLAgent(t)
	for _, name := range []string{"open", "secret"} {
		a.as(t, a.admin, createTopicsReq(name, 1, false))
	}
	ctx := a.ctx(t)
	tx := a.kgoClient(t, kgo.ClientID("principal:admin"), kgo.TransactionalID("tx-hide"))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"open", "secret"} {
		if err := tx.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("transactional produce to %s: %v", topic, err)
		}
	}
	a.grant(t, txnACL("tx-hide", kmsg.ACLOperationDescribe), topicACL("open", kmsg.ACLOperationDescribe))
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{"tx-hide"}
	resp := a.as(t, a.alice, req).(*kmsg.DescribeTransactionsResponse)
	if len(resp.TransactionStates) != 1 || resp.TransactionStates[0].ErrorCode != 0 {
		t.Fatalf("DescribeTransactions: %+v", resp.TransactionStates)
	}
	var topics []string
	for _, tt := range resp.TransactionStates[0].Topics {
		topics = append(topics, tt.Topic)
	}
	if !slices.Equal(topics, []string{"open"}) {
		t.Fatalf("topics of the transaction alice sees: %v, want [open]", topics)
	}
}

// BenchmarkAuthz is what authorization adds to a request with ACLs on:
// reading the ACL generation from a view of the copy, and one check.
func BenchmarkAuthz(b *testing.B) {
	benchmarkAuthz(b, newACLAgent(b))
}

// BenchmarkAuthzLogOn is BenchmarkAuthz as an agent runs it, with the
// authorization log at INFO: an allowed check adds one level check.
func BenchmarkAuthzLogOn(b *testing.B) {
	log := authzlog.New(authzlog.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))), nil, nil)
	benchmarkAuthz(b, newACLAgent(b, withDeps(func(d *Deps) { d.ACL.Denials = log })))
}

func benchmarkAuthz(b *testing.B, a *aclAgent) {
	var bs []acl.Binding
	for i := range 1000 {
		bs = append(bs, topicACL(fmt.Sprintf("t%d", i), kmsg.ACLOperationWrite))
	}
	if _, err := a.Replica.Propose(a.ctx(b), meta.CreateACLs{ACLs: bs}); err != nil {
		b.Fatal(err)
	}
	r := &Request{Deps: a.Deps, Conn: &Conn{}}
	r.Conn.mu.principal = auth.User("alice")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if !r.authz().topic(kmsg.ACLOperationWrite, fmt.Sprintf("t%d", i%1000)) {
			b.Fatal("denied")
		}
	}
}
