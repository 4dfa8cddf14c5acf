package kafka

// Authorization: every handler asks one authz value what the client may
// do (Request.authz), with the checks Kafka's KafkaApis makes, and
// answers Kafka's codes when it may not. With Deps.ACL.Enabled off (the
// default) every check passes, as before ACLs existed.
//
// The authorizer is built from this agent's copy of the ACLs (package
// meta keeps them in the log) and rebuilt when their generation moves,
// so every agent enforces the set it has applied.

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/auth"
)

// ACLConfig turns authorization on and configures it.
type ACLConfig struct {
	// Enabled checks every request against the ACLs (Kafka's
	// authorizer.class.name set to StandardAuthorizer). Off, every
	// client may do everything.
	Enabled bool
	// SuperUsers may do anything (super.users).
	SuperUsers []auth.Principal
	// AllowIfNoACL allows what no ACL speaks of
	// (allow.everyone.if.no.acl.found).
	AllowIfNoACL bool
}

// aclCache holds the authorizer built from the ACLs at one generation.
type aclCache struct {
	mu struct {
		sync.Mutex
		loaded bool
		gen    uint64
		az     *acl.Authorizer
		// changed, when the database tells of applies (applyNotifier),
		// was taken before the view the cached generation was last
		// read from: until it closes nothing was applied since, so the
		// authorizer is current without reading a view per request.
		changed <-chan struct{}
	}
}

// applyNotifier is a MetaDB that tells when it applied something
// (*replica.Replica): Changed returns a channel closed after the next
// apply batch commits.
type applyNotifier interface {
	Changed() <-chan struct{}
}

// authorizer returns the authorizer for the ACLs db holds now. A copy
// that cannot be read denies everyone but the super users: failing
// closed.
func (c *aclCache) authorizer(cfg ACLConfig, db MetaDB) *acl.Authorizer {
	if az := c.current(); az != nil {
		return az
	}
	closed := acl.New(acl.Config{SuperUsers: cfg.SuperUsers}, nil)
	if db == nil {
		return closed
	}
	var changed <-chan struct{}
	if n, ok := db.(applyNotifier); ok {
		changed = n.Changed() // before the view: see aclCache.mu.changed
	}
	view := db.View()
	defer view.Close()
	gen, err := view.ACLGeneration()
	if err != nil {
		return closed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Generations only grow: a request whose view is older than the
	// cached set uses the newer one rather than flapping back.
	if c.mu.loaded && gen <= c.mu.gen {
		if gen == c.mu.gen {
			c.mu.changed = changed
		}
		return c.mu.az
	}
	bindings, err := view.ACLs()
	if err != nil {
		return closed
	}
	acfg := acl.Config{SuperUsers: cfg.SuperUsers, AllowIfNoACL: cfg.AllowIfNoACL}
	c.mu.loaded, c.mu.gen, c.mu.az, c.mu.changed = true, gen, acl.New(acfg, bindings), changed
	return c.mu.az
}

// Authorizer returns the authorizer requests are checked with now, or
// nil when authorization is off and every client may do everything.
// The agent's HTTP port asks it what a caller's principal may do, so an
// HTTP caller gets what the same principal gets over Kafka.
func (s *Server) Authorizer() *acl.Authorizer {
	d := &s.cfg.Deps
	if !d.ACL.Enabled {
		return nil
	}
	return d.shared.acls.authorizer(d.ACL, d.Meta)
}

// current returns the cached authorizer if nothing was applied since it
// was known current, else nil.
func (c *aclCache) current() *acl.Authorizer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.loaded || c.mu.changed == nil {
		return nil
	}
	select {
	case <-c.mu.changed:
		return nil
	default:
		return c.mu.az
	}
}

// testPrincipal, set only by tests (export_test.go), names the principal
// of a connection by the client id of its first request: until SASL
// exists it is the one way a test can be someone other than ANONYMOUS.
var testPrincipal func(clientID string) (auth.Principal, bool)

// authz answers what one request's client may do.
type authz struct {
	// az is nil when authorization is off: everything is allowed.
	az  *acl.Authorizer
	who acl.Request
}

// authz returns the request's authorizer.
func (r *Request) authz() authz {
	d := r.Deps
	if d == nil || !d.ACL.Enabled {
		return authz{}
	}
	var who acl.Request
	if r.Conn != nil {
		if testPrincipal != nil && r.ClientID != nil && r.Conn.Principal() == auth.Anonymous {
			if p, ok := testPrincipal(*r.ClientID); ok {
				r.Conn.SetPrincipal(p)
			}
		}
		who.Principal = r.Conn.Principal()
		if r.Conn.ip.IsValid() {
			who.Host = r.Conn.ip.Unmap().String()
		}
	} else {
		who.Principal = auth.Anonymous
	}
	cache := &aclCache{}
	if d.shared != nil {
		cache = &d.shared.acls
	}
	return authz{az: cache.authorizer(d.ACL, d.Meta), who: who}
}

// allowed reports whether the client may do op on the resource.
func (z authz) allowed(op acl.Operation, typ acl.ResourceType, name string) bool {
	return z.az == nil || z.az.Authorize(z.who, op, typ, name)
}

func (z authz) topic(op acl.Operation, name string) bool {
	return z.allowed(op, kmsg.ACLResourceTypeTopic, name)
}

func (z authz) group(op acl.Operation, name string) bool {
	return z.allowed(op, kmsg.ACLResourceTypeGroup, name)
}

func (z authz) cluster(op acl.Operation) bool {
	return z.allowed(op, kmsg.ACLResourceTypeCluster, acl.ClusterName)
}

func (z authz) txnID(op acl.Operation, id string) bool {
	return z.allowed(op, kmsg.ACLResourceTypeTransactionalId, id)
}

// topicCode is TOPIC_AUTHORIZATION_FAILED's code if the client may not
// do op on the topic, else 0.
func (z authz) topicCode(op acl.Operation, name string) int16 {
	if z.topic(op, name) {
		return 0
	}
	return kerr.TopicAuthorizationFailed.Code
}

// groupCode is GROUP_AUTHORIZATION_FAILED's code if the client may not
// do op on the group, else 0.
func (z authz) groupCode(op acl.Operation, name string) int16 {
	if z.group(op, name) {
		return 0
	}
	return kerr.GroupAuthorizationFailed.Code
}

// clusterCode is CLUSTER_AUTHORIZATION_FAILED's code if the client may
// not do op on the cluster, else 0.
func (z authz) clusterCode(op acl.Operation) int16 {
	if z.cluster(op) {
		return 0
	}
	return kerr.ClusterAuthorizationFailed.Code
}

// txnCode is TRANSACTIONAL_ID_AUTHORIZATION_FAILED's code if the client
// may not do op on the transactional id, else 0.
func (z authz) txnCode(op acl.Operation, id string) int16 {
	if z.txnID(op, id) {
		return 0
	}
	return kerr.TransactionalIDAuthorizationFailed.Code
}

// topicOps, groupOps and clusterOps are the authorized operations a
// describe answers carry when asked: with authorization off, everything
// the resource supports.
func (z authz) topicOps(name string) int32 {
	if z.az == nil {
		return topicAuthorizedOps
	}
	return z.az.AuthorizedOperations(z.who, kmsg.ACLResourceTypeTopic, name, acl.TopicOperations)
}

func (z authz) groupOps(name string) int32 {
	if z.az == nil {
		return groupAuthorizedOps
	}
	return z.az.AuthorizedOperations(z.who, kmsg.ACLResourceTypeGroup, name, acl.GroupOperations)
}

func (z authz) clusterOps() int32 {
	if z.az == nil {
		return clusterAuthorizedOps
	}
	return z.az.AuthorizedOperations(z.who, kmsg.ACLResourceTypeCluster, acl.ClusterName, acl.ClusterOperations)
}

// idempotentWrite reports whether the client may produce idempotently
// without a transactional id: IdempotentWrite on the cluster, or, as
// Kafka allows since 3.0, Write on some topic.
func (z authz) idempotentWrite() bool {
	return z.az == nil || z.cluster(kmsg.ACLOperationIdempotentWrite) ||
		z.az.AuthorizeAny(z.who, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic)
}

// mayCreateTopic reports whether the client may create the topic:
// Create on the cluster or on the topic, as CreateTopics and
// auto-creation check.
func (z authz) mayCreateTopic(name string) bool {
	return z.cluster(kmsg.ACLOperationCreate) || z.topic(kmsg.ACLOperationCreate, name)
}

// deniedTopics returns the names among names the client may not do op
// on; nil when it may do it on all of them.
func (z authz) deniedTopics(op acl.Operation, names func(yield func(string) bool)) map[string]bool {
	if z.az == nil {
		return nil
	}
	var denied map[string]bool
	for name := range names {
		if !z.topic(op, name) {
			if denied == nil {
				denied = make(map[string]bool)
			}
			denied[name] = true
		}
	}
	return denied
}

// configErr is the error for op (DescribeConfigs or AlterConfigs) on a
// config resource: on the topic for a topic, on the cluster for a
// broker, on the group for a group; nil when allowed or the type is not one Strand serves (its
// handler answers that).
func (z authz) configErr(op acl.Operation, typ kmsg.ConfigResourceType, name string) *kerr.Error {
	switch {
	case typ == kmsg.ConfigResourceTypeTopic && !z.topic(op, name):
		return kerr.TopicAuthorizationFailed
	case (typ == kmsg.ConfigResourceTypeBroker || typ == kmsg.ConfigResourceTypeBrokerLogger) && !z.cluster(op):
		return kerr.ClusterAuthorizationFailed
	case typ == kmsg.ConfigResourceTypeGroupConfig && !z.group(op, name):
		return kerr.GroupAuthorizationFailed
	}
	return nil
}
